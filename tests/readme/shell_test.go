package readme

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/idforge/idforge/tests/testdb"
)

// docFiles are README.md and the guides under docs/, relative to the
// module root.
func docFiles(t *testing.T) []string {
	t.Helper()
	files := []string{"README.md"}
	guides, err := filepath.Glob(filepath.Join(ModuleRoot(), "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range guides {
		rel, err := filepath.Rel(ModuleRoot(), g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, filepath.ToSlash(rel))
	}
	return files
}

var (
	binOnce sync.Once
	binDir  string
	binPath string
	binErr  error
)

// TestMain removes the idforge binary the shell tests built.
func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// idforgeBinary builds cmd/idforge of the working tree, once per test
// binary, and returns its path.
func idforgeBinary(t *testing.T) string {
	t.Helper()
	binOnce.Do(func() {
		if binDir, binErr = os.MkdirTemp("", "idforge-readme-"); binErr != nil {
			return
		}
		binPath = filepath.Join(binDir, "idforge")
		cmd := exec.Command(goTool(), "build", "-o", binPath, "./cmd/idforge")
		cmd.Dir = ModuleRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = fmt.Errorf("go build ./cmd/idforge: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// TestShellBlocks runs every line that calls idforge in the ```sh, ```shell
// and ```console blocks of README.md and docs/*.md, in order, each block
// in a fresh working folder and on fresh stores: the placeholder addresses
// of [Placeholders] become test databases, `idforge serve` listens on a
// free port (IDFORGE_ADDR=127.0.0.1:0, and -addr rewritten to it), serves
// one request and stops on SIGTERM. A line must exit 0, or the status its
// "# exits N" comment names. Lines that do not call idforge (go install,
// redis-server) are not run.
func TestShellBlocks(t *testing.T) {
	bin := idforgeBinary(t)
	var mu sync.Mutex
	found, ran := map[string]int{}, map[string]int{} // blocks that call idforge, lines run
	t.Run("files", func(t *testing.T) {
		for _, f := range docFiles(t) {
			t.Run(strings.TrimSuffix(filepath.Base(f), ".md"), func(t *testing.T) {
				t.Parallel()
				md, err := os.ReadFile(filepath.Join(ModuleRoot(), f))
				if err != nil {
					t.Fatal(err)
				}
				blocks, err := ShellBlocks(string(md))
				if err != nil {
					t.Fatalf("%s: %v", f, err)
				}
				for _, b := range blocks {
					if !callsIdforge(b) {
						continue
					}
					mu.Lock()
					found[f]++
					mu.Unlock()
					t.Run(b.Name(), func(t *testing.T) {
						r := newShellRun(t, bin)
						for _, raw := range RawLines(b) {
							if err := r.line(raw); err != nil {
								t.Fatalf("%s %v", f, err)
							}
						}
						mu.Lock()
						ran[f] += r.ran
						mu.Unlock()
					})
				}
			})
		}
	})
	// The guides whose blocks run idforge: a parser that found no block
	// would pass with nothing run.
	for _, f := range []string{"README.md", "docs/operations.md", "docs/serve.md"} {
		if found[f] == 0 {
			t.Errorf("%s: no shell block calling idforge found", f)
		}
	}
	t.Logf("shell blocks calling idforge: %v; idforge lines run: %v", found, ran)
}

// callsIdforge reports whether a line of b starts with idforge (after
// NAME=value words).
func callsIdforge(b Block) bool {
	for _, raw := range RawLines(b) {
		for _, w := range strings.Fields(raw.Text) {
			if !isAssignment(w) {
				if w == "idforge" {
					return true
				}
				break
			}
		}
	}
	return false
}

// shellRun runs the lines of one block.
type shellRun struct {
	t      *testing.T
	bin    string
	dir    string            // the working folder of every line
	state  string            // IDFORGE_STATE_DIR
	vars   map[string]string // the block's variables
	export map[string]bool   // those exported
	stores map[string]string // placeholder kind → test address
	ran    int
}

func newShellRun(t *testing.T, bin string) *shellRun {
	return &shellRun{t: t, bin: bin, dir: t.TempDir(), state: t.TempDir(),
		vars: map[string]string{}, export: map[string]bool{}, stores: map[string]string{}}
}

// store returns the test address that stands for placeholders of kind,
// making the store on first use.
func (r *shellRun) store(kind string) string {
	if a, ok := r.stores[kind]; ok {
		return a
	}
	var a string
	switch kind {
	case "postgres":
		a = testdb.Postgres(r.t).DSN
	case "mariadb":
		a = testdb.MariaDB(r.t).DSN
	case "redis":
		a = "redis://" + testdb.StartRedisServer(r.t, testdb.RedisDurable()...).Addr() + "/0"
	}
	r.stores[kind] = a
	return a
}

// substitute replaces the placeholders in w.
func (r *shellRun) substitute(w string) (string, error) {
	for _, p := range Placeholders {
		if strings.Contains(w, p.Doc) {
			w = strings.ReplaceAll(w, p.Doc, r.store(p.Kind))
		}
	}
	if unknownHost.MatchString(w) {
		return "", fmt.Errorf("%q names an example host that is not one of the placeholders the test replaces (tests/readme/shell.go)", w)
	}
	return w, nil
}

// env is the environment of a line: the test's without IDFORGE_*
// variables, the state folder, the block's exported variables and the
// line's own assignments.
func (r *shellRun) env(assign []string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "IDFORGE_") {
			env = append(env, kv)
		}
	}
	env = append(env, "IDFORGE_STATE_DIR="+r.state)
	for k := range r.export {
		env = append(env, k+"="+r.vars[k])
	}
	return append(env, assign...)
}

// line runs one line and says how it did not end as the doc says.
func (r *shellRun) line(raw RawLine) error {
	l, err := ParseLine(raw, func(k string) (string, bool) { v, ok := r.vars[k]; return v, ok })
	if err != nil {
		return err
	}
	for i, w := range l.Assign {
		if l.Assign[i], err = r.substitute(w); err != nil {
			return fmt.Errorf("line %d: %w", l.Line, err)
		}
	}
	if len(l.Args) == 0 { // NAME=value or export NAME=value
		for _, kv := range l.Assign {
			k, v, _ := strings.Cut(kv, "=")
			r.vars[k] = v
			r.export[k] = r.export[k] || l.Export
		}
		return nil
	}
	if !l.Idforge() {
		r.t.Logf("line %d: not run (it does not call idforge): %s", l.Line, l.Text)
		return nil
	}
	args := make([]string, 0, len(l.Args)-1)
	for _, w := range l.Args[1:] {
		if w, err = r.substitute(w); err != nil {
			return fmt.Errorf("line %d: %w", l.Line, err)
		}
		args = append(args, w)
	}
	r.ran++
	if len(args) > 0 && args[0] == "serve" {
		return r.serve(l, args)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.bin, args...)
	cmd.Dir, cmd.Env = r.dir, r.env(l.Assign)
	out, err := cmd.CombinedOutput()
	if err := exitStatus(l, err); err != nil {
		return fmt.Errorf("%w\n%s", err, out)
	}
	r.t.Logf("line %d: %s\n%s", l.Line, l.Text, out)
	return nil
}

// exitStatus compares how a command ended (err from Wait) with the status
// the line expects.
func exitStatus(l ShellLine, err error) error {
	code := 0
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		return fmt.Errorf("line %d: %w: %s", l.Line, err, l.Text)
	}
	if code != l.Exit {
		return fmt.Errorf("line %d exited %d, want %d: %s", l.Line, code, l.Exit, l.Text)
	}
	return nil
}

// serve runs an `idforge serve` line on a free port: it waits for the
// listening line, draws one snowflake ID over HTTP and stops the server
// with SIGTERM, as a deployment does.
func (r *shellRun) serve(l ShellLine, args []string) error {
	for i := 0; i < len(args); i++ {
		switch {
		case (args[i] == "-addr" || args[i] == "--addr") && i+1 < len(args):
			args[i+1] = "127.0.0.1:0"
		case strings.HasPrefix(args[i], "-addr="), strings.HasPrefix(args[i], "--addr="):
			args[i] = "-addr=127.0.0.1:0"
		}
	}
	cmd := exec.Command(r.bin, args...)
	cmd.Dir, cmd.Env = r.dir, r.env(append([]string{"IDFORGE_ADDR=127.0.0.1:0"}, l.Assign...))
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	done := make(chan error, 1)
	addr := make(chan string, 1)
	var printed bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			printed.WriteString(sc.Text() + "\n")
			if _, rest, ok := strings.Cut(sc.Text(), "listening on http://"); ok {
				addr <- strings.Fields(rest)[0]
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
		done <- cmd.Wait()
	}()
	var base string
	select {
	case base = <-addr:
	case err := <-done:
		if err := exitStatus(l, err); err != nil || l.Exit == 0 {
			return fmt.Errorf("line %d: serve ended before listening (%v)\n%s%s", l.Line, err, printed.String(), stderr.String())
		}
		return nil // meant to fail, and did
	case <-time.After(2 * time.Minute):
		_ = cmd.Process.Kill()
		<-done
		return fmt.Errorf("line %d: serve printed no listening line in 2 minutes\n%s", l.Line, stderr.String())
	}
	resp, err := http.Get("http://" + base + "/v1/ids")
	var body []byte
	if err == nil {
		body, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET /v1/ids: %s: %s", resp.Status, body)
		}
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	werr := <-done
	if err != nil {
		return fmt.Errorf("line %d: %w\n%s", l.Line, err, stderr.String())
	}
	if err := exitStatus(l, werr); err != nil {
		return fmt.Errorf("%w (after SIGTERM)\n%s", err, stderr.String())
	}
	r.t.Logf("line %d: %s\nGET /v1/ids: %s\n%s%s", l.Line, l.Text, body, printed.String(), stderr.String())
	return nil
}

func TestParseLine(t *testing.T) {
	vars := map[string]string{"S": "sqlite:a b.db"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for _, c := range []struct {
		text   string
		args   []string
		assign []string
		export bool
		exit   int
	}{
		{`idforge store init -store "$S"   # a comment`, []string{"idforge", "store", "init", "-store", "sqlite:a b.db"}, nil, false, 0},
		{`idforge store init -store ${S}x # exits 1: already set up`, []string{"idforge", "store", "init", "-store", "sqlite:a", "b.dbx"}, nil, false, 1},
		{`X='a "b"' Y=c\ d idforge serve`, []string{"idforge", "serve"}, []string{`X=a "b"`, "Y=c d"}, false, 0},
		{`export IDFORGE_STORE='postgres://app@db:5432/ids'`, nil, []string{"IDFORGE_STORE=postgres://app@db:5432/ids"}, true, 0},
		{`go install x/cmd/idforge@latest`, []string{"go", "install", "x/cmd/idforge@latest"}, nil, false, 0},
		{`idforge decode a#b "\$S"`, []string{"idforge", "decode", "a#b", "$S"}, nil, false, 0},
	} {
		l, err := ParseLine(RawLine{Line: 1, Text: c.text}, lookup)
		if err != nil || strings.Join(l.Args, "|") != strings.Join(c.args, "|") || strings.Join(l.Assign, "|") != strings.Join(c.assign, "|") ||
			l.Export != c.export || l.Exit != c.exit {
			t.Errorf("ParseLine(%q) = %+v, %v", c.text, l, err)
		}
	}
	for _, bad := range []string{`idforge gen | head`, `idforge gen > ids`, `idforge gen; idforge gen`, `idforge gen -store "$NOPE"`,
		`idforge gen -n $(echo 1)`, "idforge gen -n `echo 1`", `idforge gen 'open`, `export A=1 idforge`} {
		if l, err := ParseLine(RawLine{Line: 1, Text: bad}, lookup); err == nil {
			t.Errorf("ParseLine(%q) = %+v, want an error", bad, l)
		}
	}
	b := Block{Lang: "console", Line: 10, Code: "$ idforge layout \\\n  -layout jssafe\nlayout jssafe\n\n# note\n$ idforge version\n"}
	raws := RawLines(b)
	if len(raws) != 2 || raws[0] != (RawLine{11, "idforge layout  -layout jssafe"}) || raws[1] != (RawLine{16, "idforge version"}) {
		t.Errorf("RawLines = %+v", raws)
	}
}

// TestShellRunChecksStatus: a line ends as its comment says or the block
// fails; a placeholder host the test does not know is refused.
func TestShellRunChecksStatus(t *testing.T) {
	bin := idforgeBinary(t)
	r := newShellRun(t, bin)
	for _, c := range []struct {
		text string
		ok   bool
	}{
		{"idforge layout -layout jssafe", true},
		{"idforge store wipe    # exits 2: no such action", true},
		{"idforge layout        # exits 1", false},
		{"idforge store wipe", false},
		{"idforge store init -store 'postgres://app@db:5433/ids'", false},
		{"S=sqlite:s.db", true},
		{"idforge store init -store \"$S\"", true},
		{"idforge store init -store \"$S\"  # exits 1: set up already", true},
	} {
		err := r.line(RawLine{Line: 1, Text: c.text})
		if (err == nil) != c.ok {
			t.Errorf("%q: err = %v, want ok %t", c.text, err, c.ok)
		}
	}
}
