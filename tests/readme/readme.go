// Package readme compiles and runs Go programs from tests: the ```go code
// blocks of README.md and of the guides under docs/ (each must be a
// complete program that a user can paste into a file and run), and snippets that must not compile, such as
// an option combination the API refuses at compile time.
//
// Programs are built inside this module, so they import the working tree's
// packages and the module's requirements with no network: the source is
// written to the test's temp folder and mapped into a package folder of the
// module that does not exist on disk with `go build -overlay`.
//
// A code block can carry a directive in an HTML comment on the line before
// its fence, which Markdown renderers do not show:
//
//	<!-- readme: needs mariadb -->    run only when the server is reachable (see tests/testdb)
//	<!-- readme: needs postgres -->
//	<!-- readme: needs redis -->
//
// The ```sh, ```shell and ```console blocks run too, line by line (see
// TestShellBlocks): every line that calls idforge, with the working tree's
// idforge built once, in a fresh folder per block. Write them so:
//
//   - A store is one of the placeholder addresses (see [Placeholders]):
//     'postgres://app@db:5432/ids', 'app:secret@tcp(db:3306)/ids' or
//     'redis://cache:6379/0' (with ?prefix=... as needed). The test puts a
//     fresh database, or a redis-server of its own, in its place; within a
//     block one placeholder is one store. sqlite:PATH and the default
//     idforge.db need nothing: they land in the block's folder.
//   - NAME=value on a line of its own sets a variable for the lines after
//     it ("$NAME"); export NAME=value puts it in their environment too.
//     NAME=value before idforge is for that command, as in sh.
//   - A line meant to fail ends with a comment "# exits N" (N its status).
//   - idforge serve runs on a free port, serves one GET /v1/ids and stops
//     on SIGTERM; it must exit 0.
//   - One command a line: no pipes, redirections, ; or &, no $(...).
//     Lines that do not call idforge (go install, redis-server) are not
//     run.
package readme

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Block is one fenced code block of a Markdown file.
type Block struct {
	// Lang is the fence's language: go, sh, shell or console.
	Lang string
	// Section is the text of the last heading above the block.
	Section string
	// Line is the line of the opening fence, from 1.
	Line int
	// Code is the block's content.
	Code string
	// Needs lists the servers a "readme: needs" directive names.
	Needs []string
}

// Name is a name for the block in test output: its section and line.
func (b Block) Name() string {
	return fmt.Sprintf("%s_line_%d", strings.ReplaceAll(b.Section, " ", "_"), b.Line)
}

var directive = regexp.MustCompile(`^<!--\s*readme:\s*(.*?)\s*-->$`)

// Blocks returns the ```go fenced code blocks of markdown, in order.
func Blocks(markdown string) ([]Block, error) { return blocks(markdown, "go") }

// ShellBlocks returns the ```sh, ```shell and ```console fenced code blocks
// of markdown, in order.
func ShellBlocks(markdown string) ([]Block, error) { return blocks(markdown, "sh", "shell", "console") }

// blocks returns the fenced code blocks of markdown in the languages langs;
// a directive is allowed before ```go blocks only.
func blocks(markdown string, langs ...string) ([]Block, error) {
	var (
		out     []Block
		cur     *Block
		fence   string
		section string
		prev    string
		code    strings.Builder
	)
	sc := bufio.NewScanner(strings.NewReader(markdown))
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		switch {
		case cur != nil && trimmed == fence:
			cur.Code = code.String()
			out = append(out, *cur)
			cur, fence = nil, ""
		case cur != nil:
			code.WriteString(line)
			code.WriteByte('\n')
		case fence != "": // inside a block of another language
			if trimmed == fence {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```"):
			fence = trimmed[:len(trimmed)-len(strings.TrimLeft(trimmed, "`"))]
			if lang := strings.TrimSpace(strings.TrimPrefix(trimmed, fence)); slices.Contains(langs, lang) {
				cur = &Block{Lang: lang, Section: section, Line: n}
				code.Reset()
				if m := directive.FindStringSubmatch(strings.TrimSpace(prev)); m != nil && lang == "go" {
					words := strings.Fields(m[1])
					if len(words) < 2 || words[0] != "needs" {
						return nil, fmt.Errorf("line %d: unknown directive %q (want \"readme: needs <server>\")", n-1, m[1])
					}
					cur.Needs = words[1:]
				}
			}
		case strings.HasPrefix(trimmed, "#"):
			section = strings.TrimSpace(strings.TrimLeft(trimmed, "#"))
		}
		prev = line
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil || fence != "" {
		return nil, fmt.Errorf("a code block is not closed")
	}
	return out, nil
}

// ModuleRoot is the folder of this module's go.mod.
func ModuleRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	return filepath.Join(runtime.GOROOT(), "bin", "go")
}

var builds atomic.Int64

// Build compiles src, the source of a package main, inside this module, and
// returns the path of the binary, or an error holding the compiler's output.
func Build(t testing.TB, src string) (string, error) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "main.go")
	if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	// A package folder of the module that exists only in the overlay.
	pkg := filepath.Join(ModuleRoot(), "tests", "readme", "snippets", fmt.Sprintf("p%d_%d", os.Getpid(), builds.Add(1)))
	overlay := filepath.Join(dir, "overlay.json")
	js := fmt.Sprintf(`{"Replace":{%q:%q}}`, filepath.Join(pkg, "main.go"), file)
	if err := os.WriteFile(overlay, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "program")
	cmd := exec.Command(goTool(), "build", "-overlay", overlay, "-o", bin, pkg)
	cmd.Dir = ModuleRoot()
	cmd.Env = os.Environ()
	// The overlay path is what the compiler names in its errors: show the snippet's.
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, strings.ReplaceAll(string(out), pkg+string(filepath.Separator), ""))
	}
	return bin, nil
}

// Run builds src and runs it in a fresh working folder, with env added to
// the test's environment, failing t if it does not compile, fails, or runs
// longer than timeout. It returns what the program printed.
func Run(t testing.TB, src string, timeout time.Duration, env ...string) string {
	t.Helper()
	bin, err := Build(t, src)
	if err != nil {
		t.Fatalf("does not compile: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin)
	cmd.Dir = t.TempDir()
	cmd.Env = append(os.Environ(), env...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("program failed (%v):\n%s", err, out.String())
	}
	return out.String()
}

// MustNotCompile fails t unless src, the source of a package main, fails to
// compile with an error that contains every one of want: for proving that
// the API refuses a combination at compile time.
func MustNotCompile(t testing.TB, src string, want ...string) {
	t.Helper()
	_, err := Build(t, src)
	if err == nil {
		t.Fatalf("the program compiles; it must not:\n%s", src)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("the compiler's error does not say %q:\n%v", w, err)
		}
	}
}
