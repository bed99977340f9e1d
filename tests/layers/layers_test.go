// Package layers holds the module's imports to the layer table of
// docs/design.md.
package layers

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// root is the module's root, from this package's folder.
const root = "../.."

// row is one row of the layer table: the folders it is for and what
// packages in them may import.
type row struct {
	folders []string
	allowed []string
}

var backticked = regexp.MustCompile("`([^`]+)`")

// table reads the layer table under "## Layout" in docs/design.md.
func table(t *testing.T) []row {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join(root, "docs", "design.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(doc), "\n## Layout\n")
	if !ok {
		t.Fatal(`docs/design.md has no "## Layout" section`)
	}
	var rows []row
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "## ") {
			break
		}
		cells := strings.Split(strings.Trim(line, "| "), " | ")
		if !strings.HasPrefix(line, "|") || len(cells) != 3 || strings.HasPrefix(cells[0], "---") || cells[0] == "folder" {
			continue
		}
		var r row
		for _, m := range backticked.FindAllStringSubmatch(cells[0], -1) {
			r.folders = append(r.folders, m[1])
		}
		for _, item := range strings.Split(cells[2], ", ") {
			item = strings.TrimSpace(item)
			if m := backticked.FindStringSubmatch(item); m != nil {
				r.allowed = append(r.allowed, m[1])
			} else {
				r.allowed = append(r.allowed, item) // std, go.mod, anything
			}
		}
		rows = append(rows, r)
	}
	if len(rows) == 0 {
		t.Fatal("docs/design.md: no rows in the layer table")
	}
	return rows
}

// matches reports whether the module-relative package path p matches the
// pattern: "." is the root package, "x/..." x and every package below it.
func matches(pattern, p string) bool {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return p == prefix || strings.HasPrefix(p, prefix+"/")
	}
	return p == pattern
}

// specificity ranks a pattern that matches: a package's own path beats any
// folder, a deeper folder beats a shallower one.
func specificity(pattern string) int {
	if prefix, ok := strings.CutSuffix(pattern, "/..."); ok {
		return 2 * strings.Count(prefix, "/")
	}
	return 1000
}

// rowOf returns the most specific row for the package p.
func rowOf(rows []row, p string) (row, bool) {
	best, found, rank := row{}, false, -1
	for _, r := range rows {
		for _, f := range r.folders {
			if matches(f, p) && specificity(f) > rank {
				best, found, rank = r, true, specificity(f)
			}
		}
	}
	return best, found
}

// modules returns the module path and the modules go.mod requires.
func modules(t *testing.T) (string, []string) {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var module string
	var required []string
	inRequire := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "module "):
			module = strings.TrimSpace(strings.TrimPrefix(line, "module "))
		case line == "require (":
			inRequire = true
		case line == ")":
			inRequire = false
		case inRequire && line != "":
			required = append(required, strings.Fields(line)[0])
		case strings.HasPrefix(line, "require "):
			required = append(required, strings.Fields(line)[1])
		}
	}
	return module, required
}

// allowed reports whether a package of row r may import imp, where rel is
// imp relative to the module ("" for a path outside it).
func allowed(r row, imp, rel string, required []string) bool {
	for _, a := range r.allowed {
		switch {
		case a == "anything":
			return true
		case a == "std":
			if rel == "" && !strings.Contains(strings.Split(imp, "/")[0], ".") {
				return true
			}
		case a == "go.mod":
			for _, m := range required {
				if rel == "" && (imp == m || strings.HasPrefix(imp, m+"/")) {
					return true
				}
			}
		case rel != "":
			if matches(a, rel) {
				return true
			}
		case matches(a, imp):
			return true
		}
	}
	return false
}

// TestImportsFollowTheLayerTable: every import of every package of the
// module (its tests aside) is one its row of the layer table allows.
func TestImportsFollowTheLayerTable(t *testing.T) {
	rows := table(t)
	module, required := modules(t)
	cmd := exec.Command("go", "list", "-f", "{{.ImportPath}}\t{{join .Imports \" \"}}", "./...")
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	relative := func(p string) string {
		switch {
		case p == module:
			return "."
		case strings.HasPrefix(p, module+"/"):
			return strings.TrimPrefix(p, module+"/")
		}
		return ""
	}
	checked := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		pkg, imports, _ := strings.Cut(line, "\t")
		rel := relative(pkg)
		r, ok := rowOf(rows, rel)
		if !ok {
			t.Errorf("%s: no row of the layer table in docs/design.md is for it", rel)
			continue
		}
		checked++
		for _, imp := range strings.Fields(imports) {
			if !allowed(r, imp, relative(imp), required) {
				t.Errorf("%s imports %s, which its row of the layer table (%s) does not allow",
					rel, imp, strings.Join(r.folders, ", "))
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d packages; go list found too few", checked)
	}
}

// TestTableRules holds the matching the table's reader does.
func TestTableRules(t *testing.T) {
	rows := []row{
		{folders: []string{"engine/..."}, allowed: []string{"std", "engine/..."}},
		{folders: []string{"engine/sqlstore"}, allowed: []string{"std", "engine/...", "schema"}},
		{folders: []string{"."}, allowed: []string{"std", "engine/...", "internal/..."}},
	}
	for _, c := range []struct {
		pkg, imp, rel string
		want          bool
	}{
		{"engine/segment", "context", "", true},
		{"engine/segment", "github.com/x/internal/outage", "internal/outage", false},
		{"engine/sqlstore", "github.com/x/schema", "schema", true},
		{"engine/redisstore", "github.com/x/schema", "schema", false},
		{"engine/redisstore", "github.com/redis/go-redis/v9", "", false},
		{".", "github.com/x/internal/chain", "internal/chain", true},
		{".", "github.com/x/server", "server", false},
	} {
		r, ok := rowOf(rows, c.pkg)
		if !ok {
			t.Fatalf("no row for %s", c.pkg)
		}
		if got := allowed(r, c.imp, c.rel, nil); got != c.want {
			t.Errorf("%s importing %s: allowed %v, want %v", c.pkg, c.imp, got, c.want)
		}
	}
}
