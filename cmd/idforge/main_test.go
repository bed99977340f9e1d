package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/snowlayout"
	"github.com/idforge/idforge/internal/wire"
)

func runArgs(t *testing.T, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(context.Background(), args, &out, &errOut)
	return out.String(), errOut.String(), code
}

func lines(s string) []string { return strings.Split(strings.TrimSuffix(s, "\n"), "\n") }

var presets = map[string]snowflake.Layout{
	"default":       snowflake.Default,
	"second":        snowflake.Seconds,
	"jssafe":        snowflake.JSSafe,
	"jssafe-second": snowflake.JSSafeSeconds,
}

func TestGenDecimal(t *testing.T) {
	for name, l := range presets {
		out, errOut, code := runArgs(t, "gen", "-n", "5000", "-machine", "5", "-layout", name)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errOut)
		}
		ids := lines(out)
		if len(ids) != 5000 {
			t.Fatalf("%s: %d lines, want 5000", name, len(ids))
		}
		prev := int64(-1)
		for _, s := range ids {
			id, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				t.Fatalf("%s: line %q: %v", name, s, err)
			}
			if id <= prev {
				t.Fatalf("%s: %d after %d: not strictly increasing", name, id, prev)
			}
			prev = id
			at, machine, _, err := l.Decode(id)
			if err != nil || machine != 5 {
				t.Fatalf("%s: %d decodes to machine %d, %v; want machine 5", name, id, machine, err)
			}
			if age := time.Since(at); age < -time.Second || age > time.Minute {
				t.Fatalf("%s: %d carries time %v, not about now", name, id, at)
			}
		}
	}
}

func TestGenFormats(t *testing.T) {
	r62, _ := convert.New("radix62", convert.Settings{Padded: true})
	r36, _ := convert.New("radix36", convert.Settings{Padded: true})
	for lname, l := range presets {
		for format, parse := range map[string]func(string) (int64, error){
			"decimal":  (&convert.Formatter{}).Parse,
			"radix62":  r62.Parse,
			"radix36":  r36.Parse,
			"friendly": func(s string) (int64, error) { return snowlayout.ParseFriendly(l, s) },
		} {
			out, errOut, code := runArgs(t, "gen", "-n", "300", "-machine", "3", "-layout", lname, "-format", format)
			if code != 0 {
				t.Fatalf("%s %s: exit %d: %s", lname, format, code, errOut)
			}
			strs := lines(out)
			if len(strs) != 300 {
				t.Fatalf("%s %s: %d lines, want 300", lname, format, len(strs))
			}
			prev := int64(-1)
			for _, s := range strs {
				id, err := parse(s)
				if err != nil {
					t.Fatalf("%s %s: line %q does not parse: %v", lname, format, s, err)
				}
				if _, machine, _, err := l.Decode(id); id <= prev || err != nil || machine != 3 {
					t.Fatalf("%s %s: %q is %d (after %d), decodes to machine %d, %v", lname, format, s, id, prev, machine, err)
				}
				prev = id
			}
			if format != "friendly" && !slices.IsSorted(strs) {
				t.Errorf("%s %s: the strings do not sort like the IDs", lname, format)
			}
		}
	}
}

func TestDecodeKnownIDs(t *testing.T) {
	at := time.Date(2026, 11, 21, 23, 27, 14, 123_000_000, time.UTC)
	for _, tt := range []struct {
		layout    string
		machine   int64
		seq       int64
		timestamp string
	}{
		{"default", 5, 7, "2026-11-21T23:27:14.123Z"},
		{"default", 1023, 4095, "2026-11-21T23:27:14.123Z"},
		{"second", 1, 4194303, "2026-11-21T23:27:14.000Z"},
		{"jssafe", 7, 511, "2026-11-21T23:27:14.123Z"},
		{"jssafe-second", 0, 0, "2026-11-21T23:27:14.000Z"},
	} {
		l := presets[tt.layout]
		id, err := snowlayout.Compose(l, at, tt.machine, tt.seq)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"id":"` + strconv.FormatInt(id, 10) + `","timestamp":"` + tt.timestamp + `","machine":` +
			strconv.FormatInt(tt.machine, 10) + `,"sequence":` + strconv.FormatInt(tt.seq, 10) + `,"friendly":"` + snowlayout.Friendly(l, id) + `"}` + "\n"
		r36, _ := convert.New("radix36", convert.Settings{Padded: true})
		for _, args := range [][]string{
			{"decode", "-layout", tt.layout, strconv.FormatInt(id, 10)},
			{"decode", "-layout", tt.layout, snowlayout.Friendly(l, id)},
			{"decode", "-layout", tt.layout, "-format", "friendly", snowlayout.Friendly(l, id)},
			{"decode", "-layout", tt.layout, "-format", "radix36", r36.Format(id)},
		} {
			out, errOut, code := runArgs(t, args...)
			if code != 0 || out != want {
				t.Errorf("%q: exit %d, stdout %q, stderr %q; want %q", args, code, out, errOut, want)
			}
		}
	}
}

func TestDecodeOutputIsOneJSONObject(t *testing.T) {
	out, _, code := runArgs(t, "decode", "914783062259167232")
	if code != 0 {
		t.Fatal(code)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatal(err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", out)
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"friendly", "id", "machine", "sequence", "timestamp"}; !slices.Equal(keys, want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	if _, err := time.Parse(time.RFC3339, m["timestamp"].(string)); err != nil {
		t.Fatalf("timestamp %q is not RFC 3339: %v", m["timestamp"], err)
	}
}

func TestBadCommandLines(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want string // in stderr
	}{
		{nil, "usage: idforge"},
		{[]string{"nope"}, `unknown command "nope"`},
		{[]string{"gen", "-bogus"}, "flag provided but not defined: -bogus"},
		{[]string{"gen", "-n", "x"}, `invalid value "x" for flag -n: want a whole number`},
		{[]string{"gen", "-machine", "1.5"}, `invalid value "1.5" for flag -machine: want a whole number`},
		{[]string{"serve", "-shutdown-timeout", "abc"}, `invalid value "abc" for flag -shutdown-timeout: want a positive duration such as 10s`},
		{[]string{"serve", "-shutdown-timeout", "-5s"}, `invalid value "-5s" for flag -shutdown-timeout: want a positive duration such as 10s`},
		{[]string{"serve", "-proxy=yes"}, `invalid boolean value "yes" for -proxy: want true or false`},
		{[]string{"gen", "-n", "0"}, "-n 0: want at least 1"},
		{[]string{"gen", "-n", "-3"}, "-n -3"},
		{[]string{"gen", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"gen", "-layout", "jsafe"}, `invalid value "jsafe" for flag -layout: want one of default, second, jssafe, jssafe-second`},
		{[]string{"gen", "-format", "base64"}, `invalid value "base64" for flag -format`},
		{[]string{"gen", "-machine", "1024"}, "machine ID 1024 is outside [0, 1023]"},
		{[]string{"gen", "-machine", "8", "-layout", "jssafe"}, "machine ID 8 is outside [0, 7]"},
		{[]string{"gen", "-machine", "-1"}, "machine ID -1"},
		{[]string{"decode"}, "want one ID, got 0"},
		{[]string{"decode", "1", "2"}, "got 2 arguments"},
		{[]string{"decode", "abc"}, `invalid id: "abc"`},
		{[]string{"decode", "-1"}, "flag provided but not defined: -1"},
		{[]string{"decode", "--", "-1"}, "invalid id: -1 is outside"},
		{[]string{"decode", "99999999999999999999"}, `"99999999999999999999"`},
		{[]string{"decode", "-layout", "jssafe", "9007199254740992"}, "9007199254740992 is outside [0, 9007199254740991]"},
		{[]string{"decode", "20261131232714123-1-0"}, "no such date"},
		{[]string{"decode", "20261121232714123-1024-0"}, "machine 1024"},
		{[]string{"decode", "20261121232714123-1"}, `"20261121232714123-1"`},
		{[]string{"decode", "-format", "radix62", "zz"}, `radix62 "zz": 2 digits, want 11`},
		{[]string{"layout", "x"}, `unexpected arguments ["x"]`},
		{[]string{"layout", "-layout", "huge"}, `invalid value "huge"`},
		{[]string{"help", "nope"}, `unknown command "nope"`},
	} {
		out, errOut, code := runArgs(t, tt.args...)
		if code != 2 || out != "" || !strings.Contains(errOut, tt.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want exit 2, no output and %q on stderr", tt.args, code, out, errOut, tt.want)
		}
	}
}

func TestHelp(t *testing.T) {
	out, _, code := runArgs(t, "help")
	if code != 0 {
		t.Fatalf("help: exit %d", code)
	}
	for _, c := range commands {
		if !strings.Contains(out, "  "+c.name+" ") {
			t.Errorf("help does not list %q:\n%s", c.name, out)
		}
	}
	out, _, code = runArgs(t, "help", "gen")
	if code != 0 || !strings.Contains(out, "-machine") || !strings.Contains(out, "usage: idforge gen") {
		t.Errorf("help gen: exit %d\n%s", code, out)
	}
	// serve's help lists the ID formats and how decode takes radix IDs.
	out, _, code = runArgs(t, "help", "serve")
	for _, want := range append([]string{"IDFORGE_TOKENS_FILE", "?format=radix62"}, wire.Formats...) {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("help serve: exit %d, %q missing from\n%s", code, want, out)
		}
	}
	_, errOut, code := runArgs(t, "gen", "-h")
	if code != 0 || !strings.Contains(errOut, "-format") {
		t.Errorf("gen -h: exit %d\n%s", code, errOut)
	}
}

func TestLayout(t *testing.T) {
	for _, tt := range []struct {
		layout string
		want   []string
	}{
		{"default", []string{
			"41 timestamp (ms) + 10 machine + 12 sequence = 63",
			"4096 (one tick = 1 ms)", "IDs per second  4096000", "1024 (IDs 0 to 1023)",
			"9223372036854775807", "runs out        2089-08-30T07:47:35.552Z",
		}},
		{"second", []string{"31 timestamp (s) + 10 machine + 22 sequence = 63", "IDs per second  4194304", "2088-01-11T19:14:08.000Z"}},
		{"jssafe", []string{"= 53", "IDs per second  512000", "8 (IDs 0 to 7)", "9007199254740991", "2089-08-30T07:47:35.552Z"}},
		{"jssafe-second", []string{"31 timestamp (s) + 3 machine + 19 sequence = 53", "IDs per second  524288", "2088-01-11T19:14:08.000Z"}},
	} {
		out, errOut, code := runArgs(t, "layout", "-layout", tt.layout)
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tt.layout, code, errOut)
		}
		for _, w := range tt.want {
			if !strings.Contains(out, w) {
				t.Errorf("layout %s: %q missing from\n%s", tt.layout, w, out)
			}
		}
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestGenWriteError(t *testing.T) {
	var errOut bytes.Buffer
	code := run(context.Background(), []string{"gen", "-n", "100000"}, failingWriter{}, &errOut)
	if code != 1 || !strings.Contains(errOut.String(), "disk full") {
		t.Fatalf("exit %d, stderr %q; want 1 and the write error", code, errOut.String())
	}
}

// The real binary, as a user runs it: a million IDs, all distinct and
// strictly increasing, and decode finds the machine ID in them.
func TestBinaryGenMillion(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		t.Skip("no go tool in PATH")
	}
	bin := filepath.Join(t.TempDir(), "idforge")
	if out, err := exec.Command(goTool, "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, "gen", "-n", "1000000", "-machine", "42")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var n int
	var prev int64 = -1
	sc := bufio.NewScanner(stdout)
	for sc.Scan() {
		id, err := strconv.ParseInt(sc.Text(), 10, 64)
		if err != nil {
			t.Fatalf("line %d: %v", n+1, err)
		}
		if id <= prev {
			t.Fatalf("line %d: %d after %d: not strictly increasing", n+1, id, prev)
		}
		prev = id
		n++
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("gen: %v: %s", err, stderr.String())
	}
	if n != 1_000_000 {
		t.Fatalf("%d IDs, want 1000000", n)
	}
	out, err := exec.Command(bin, "decode", strconv.FormatInt(prev, 10)).Output()
	if err != nil {
		t.Fatalf("decode: %v", err)
	}
	var d struct {
		ID      string `json:"id"`
		Machine int64  `json:"machine"`
	}
	if err := json.Unmarshal(out, &d); err != nil || d.Machine != 42 || d.ID != strconv.FormatInt(prev, 10) {
		t.Fatalf("decode %d = %s (%v); want machine 42", prev, out, err)
	}

	// Exit status 2 reaches the shell.
	bad := exec.Command(bin, "decode", "not-an-id")
	bad.Stderr = io.Discard
	var exit *exec.ExitError
	if err := bad.Run(); !errors.As(err, &exit) || exit.ExitCode() != 2 {
		t.Fatalf("decode not-an-id: %v; want exit status 2", err)
	}
}

func Example() {
	run(context.Background(), []string{"decode", "914783062259167232"}, os.Stdout, os.Stdout)
	run(context.Background(), []string{"decode", "-layout", "jssafe", "20261121232714123-7-3"}, os.Stdout, os.Stdout)
	run(context.Background(), []string{"decode", "12x"}, os.Stdout, os.Stdout)
	// Output:
	// {"id":"914783062259167232","timestamp":"2026-11-21T23:41:17.890Z","machine":7,"sequence":0,"friendly":"20261121234117890-7-0"}
	// {"id":"893339378171395","timestamp":"2026-11-21T23:27:14.123Z","machine":7,"sequence":3,"friendly":"20261121232714123-7-3"}
	// idforge decode: invalid id: "12x": not a decimal number (a radix-62 or radix-36 ID needs -format radix62 or -format radix36)
}

// TestSchema: `idforge schema` prints the golden DDL file of the SQL store
// for each dialect (schema/ddl), byte for byte, with the tables
// renamed by -prefix.
func TestSchema(t *testing.T) {
	for _, tc := range []struct{ dialect, file, prefix string }{
		{"mysql", "mysql", ""},
		{"MariaDB", "mysql", ""},
		{"postgres", "postgres", "billing_"},
		{"sqlite", "sqlite", ""},
	} {
		golden, err := os.ReadFile(filepath.Join("..", "..", "schema", "ddl", tc.file+".sql"))
		if err != nil {
			t.Fatal(err)
		}
		want := string(golden)
		args := []string{"schema", "-dialect", tc.dialect}
		if tc.prefix != "" {
			args = append(args, "-prefix", tc.prefix)
			want = strings.ReplaceAll(want, "idforge_", tc.prefix)
		}
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errOut.String())
		}
		if out.String() != want {
			t.Errorf("%v does not print ddl/%s.sql:\n%s", args, tc.file, out.String())
		}
	}
	for _, args := range [][]string{{"schema", "-dialect", "oracle"}, {"schema", "-prefix", "bad-prefix"}, {"schema", "extra"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 || errOut.Len() == 0 {
			t.Errorf("%v: exit %d, stderr %q; want 2 and a message", args, code, errOut.String())
		}
	}
}

// TestStoreInit: init declares a new store brand-new, and refuses one that
// already has an epoch: one of a store found without one (it may have been
// wiped after handing out IDs), and one it declared brand-new itself and
// that handed out IDs since (-exists-ok accepts both, changing nothing). A
// bad action is a usage error.
func TestStoreInit(t *testing.T) {
	dir := t.TempDir()
	fresh := "sqlite:" + filepath.Join(dir, "new.db")
	// The flags after the action, as the runbook writes them.
	if out, errOut, code := runArgs(t, "store", "init", "-store", fresh); code != 0 || !strings.Contains(out, "brand-new") {
		t.Fatalf("store init on a new file: %d %q %q", code, out, errOut)
	}
	if out, errOut, code := runArgs(t, "gen", "-store", fresh, "-kind", "chain", "-name", "order", "-n", "3000"); code != 0 || !strings.HasPrefix(out, "1\n") {
		t.Fatalf("gen on the new store: %d %q", code, errOut)
	}
	out, errOut, code := runArgs(t, "store", "init", "-store", fresh)
	if code != 1 || out != "" || !strings.Contains(errOut, "already initialised") || !strings.Contains(errOut, "-exists-ok") {
		t.Fatalf("store init again, after 3000 IDs: exit %d, stdout %q, stderr %q; want exit 1 saying it is initialised already", code, out, errOut)
	}
	// A store that records another window than the default is initialised
	// all the same: init says so, not that the window differs.
	if out, errOut, code := runArgs(t, "store", "ride-through", "30s", "-store", fresh); code != 0 {
		t.Fatalf("store ride-through 30s: exit %d %q %q", code, out, errOut)
	}
	if _, errOut, code := runArgs(t, "store", "init", "-store", fresh); code != 1 || !strings.Contains(errOut, "already initialised") {
		t.Fatalf("store init on a store recording a window of 30s: exit %d %q; want 1 saying it is initialised already", code, errOut)
	}
	if out, errOut, code := runArgs(t, "store", "-exists-ok", "init", "-store", fresh); code != 0 || !strings.Contains(out, "already initialised") || strings.Contains(out, "brand-new:") {
		t.Fatalf("store init -exists-ok again: exit %d, stdout %q, stderr %q; want 0 saying it is initialised already", code, out, errOut)
	}
	if out, errOut, code := runArgs(t, "store", "chain", "order", "-store", fresh); code != 0 || !strings.Contains(out, "counter ") || strings.Contains(out, "counter 0\n") {
		t.Fatalf("the chain after the second init: exit %d %q %q; want its counter kept", code, out, errOut)
	}
	// A store some process opened without init: an epoch that is not
	// brand-new.
	path := filepath.Join(dir, "used.db")
	db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	st, err := sqlstore.Open(t.Context(), db, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, errOut, code := runArgs(t, "store", "-store", "sqlite:"+path, "init"); code != 1 || !strings.Contains(errOut, "not brand-new") {
		t.Fatalf("store init on a used store: %d %q; want status 1 saying it is not brand-new", code, errOut)
	}
	if out, errOut, code := runArgs(t, "store", "init", "-exists-ok", "-store", "sqlite:"+path); code != 0 || !strings.Contains(out, "not brand-new") {
		t.Fatalf("store init -exists-ok on a used store: %d %q %q; want 0 saying it is not brand-new", code, out, errOut)
	}
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"wipe"}, `unknown action "wipe": want one of init, machines`},
		{[]string{}, "want an action: init"},
		{[]string{"init", "now"}, `init takes no argument, got ["now"]`},
		{[]string{"release"}, "release needs MACHINE_ID"},
		{[]string{"chain", "a", "b"}, `chain takes one NAME, got ["a" "b"]`},
		{[]string{"init", "-bogus"}, "flag provided but not defined: -bogus"},
	} {
		if _, errOut, code := runArgs(t, append([]string{"store", "-store", fresh}, c.args...)...); code != 2 || !strings.Contains(errOut, c.says) {
			t.Errorf("store %q: exit %d %q; want 2 saying %q", c.args, code, errOut, c.says)
		}
	}
}

// TestFlagsAfterArguments: every command takes its flags before, between
// or after its arguments, and "--" ends them.
func TestFlagsAfterArguments(t *testing.T) {
	before, _, code := runArgs(t, "decode", "-layout", "jssafe", "9007199254740991")
	after, errOut, code2 := runArgs(t, "decode", "9007199254740991", "-layout", "jssafe")
	if code != 0 || code2 != 0 || before != after {
		t.Fatalf("decode with -layout before (%d) and after (%d) the ID: %q vs %q %s", code, code2, before, after, errOut)
	}
	spec := "sqlite:" + filepath.Join(t.TempDir(), "s.db")
	for _, args := range [][]string{
		{"store", "-store", spec, "init"},
		{"store", "chain", "-raise", "10", "order", "-store", spec},
		{"store", "chain", "order", "-store", spec, "-raise", "20"},
	} {
		if out, errOut, code := runArgs(t, args...); code != 0 {
			t.Fatalf("%q: exit %d %s%s", args, code, out, errOut)
		}
	}
	if out, _, _ := runArgs(t, "store", "chain", "order", "-store", spec); out != "chain \"order\": counter 20\n" {
		t.Fatalf("after raises with the flags around the name: %q", out)
	}
	if _, errOut, code := runArgs(t, "store", "chain", "--", "order", "-store", spec); code != 2 || !strings.Contains(errOut, `chain takes one NAME, got ["order" "-store"`) {
		t.Fatalf("after --, flags are arguments: exit %d %q", code, errOut)
	}
}
