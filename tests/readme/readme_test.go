package readme

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// TestREADME compiles and runs every ```go block of README.md and of the
// guides under docs/ as a program.
func TestREADME(t *testing.T) {
	for _, f := range docFiles(t) {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".md"), func(t *testing.T) {
			t.Parallel()
			runBlocks(t, f)
		})
	}
}

func runBlocks(t *testing.T, file string) {
	md, err := os.ReadFile(filepath.Join(ModuleRoot(), file))
	if err != nil {
		t.Fatal(err)
	}
	blocks, err := Blocks(string(md))
	if err != nil {
		t.Fatalf("%s: %v", file, err)
	}
	if file == "README.md" && len(blocks) == 0 {
		t.Fatal("no go blocks found in README.md")
	}
	for _, b := range blocks {
		t.Run(b.Name(), func(t *testing.T) {
			if !strings.Contains(b.Code, "package main") || !strings.Contains(b.Code, "func main()") {
				t.Fatalf("%s line %d: a go block must be a complete program (package main, imports, func main) that runs as pasted", file, b.Line)
			}
			for _, s := range b.Needs {
				switch s {
				case "mariadb":
					testdb.MariaDB(t)
				case "postgres":
					testdb.Postgres(t)
				case "redis":
					testdb.Redis(t)
				default:
					t.Fatalf("%s line %d: unknown server %q", file, b.Line-1, s)
				}
			}
			out := Run(t, b.Code, 2*time.Minute)
			t.Logf("%s line %d printed:\n%s", file, b.Line, out)
		})
	}
}

// TestNoRawOutputsInDocs: docs/ holds guides and the charts and data they
// cite, not raw run outputs.
func TestNoRawOutputsInDocs(t *testing.T) {
	err := filepath.WalkDir(filepath.Join(ModuleRoot(), "docs"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if ext := filepath.Ext(path); !d.IsDir() && (ext == ".txt" || ext == ".log") {
			t.Errorf("%s: raw output under docs/", path)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestBlocks(t *testing.T) {
	md := "# A\n```go\npackage main\n```\n\n## B c\n```sh\n```go\n```\n<!-- readme: needs postgres redis -->\n```go\nx\n\n```\n````md\n```go\n````\n"
	blocks, err := Blocks(md)
	if err != nil {
		t.Fatal(err)
	}
	if len(blocks) != 2 || blocks[0].Section != "A" || blocks[0].Line != 2 || blocks[0].Code != "package main\n" ||
		blocks[1].Section != "B c" || blocks[1].Code != "x\n\n" || strings.Join(blocks[1].Needs, ",") != "postgres,redis" || blocks[1].Name() != "B_c_line_11" {
		t.Fatalf("%+v", blocks)
	}
	for _, bad := range []string{"```go\nx\n", "<!-- readme: skip -->\n```go\n```\n"} {
		if _, err := Blocks(bad); err == nil {
			t.Errorf("Blocks(%q) succeeded", bad)
		}
	}
}

func TestBuildRunAndMustNotCompile(t *testing.T) {
	out := Run(t, `package main

import (
	"fmt"

	"github.com/idforge/idforge/engine"
)

func main() { fmt.Println(engine.ID(42)) }
`, time.Minute)
	if out != "42\n" {
		t.Fatalf("printed %q", out)
	}
	MustNotCompile(t, `package main

import "github.com/idforge/idforge/engine"

func main() { engine.NoSuchThing() }
`, "undefined: engine.NoSuchThing", "main.go:5")
}
