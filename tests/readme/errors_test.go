package readme

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// publicDir reports whether a folder of the module holds a public package:
// not internal, not test support, not a command or an example.
func publicDir(rel string) bool {
	for _, part := range strings.Split(filepath.ToSlash(rel), "/") {
		switch {
		case part == "internal", part == "tests", part == "cmd", part == "examples",
			part == "bench", part == "docs", part == "testdata",
			strings.HasSuffix(part, "test"), strings.HasPrefix(part, "."):
			return false
		}
	}
	return true
}

// sentinels returns every exported package-level variable named Err… of the
// public packages, as "pkg.ErrName" with the package's import name.
func sentinels(t *testing.T) []string {
	t.Helper()
	root := ModuleRoot()
	var out []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		if rel != "." && !publicDir(rel) {
			return filepath.SkipDir
		}
		if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil && rel != "." {
			return filepath.SkipDir // another module
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, 0)
		if err != nil {
			return err
		}
		for name, pkg := range pkgs {
			if name == "main" {
				continue
			}
			for _, f := range pkg.Files {
				for _, decl := range f.Decls {
					g, ok := decl.(*ast.GenDecl)
					if !ok || g.Tok != token.VAR {
						continue
					}
					for _, spec := range g.Specs {
						for _, id := range spec.(*ast.ValueSpec).Names {
							if id.IsExported() && strings.HasPrefix(id.Name, "Err") {
								out = append(out, name+"."+id.Name)
							}
						}
					}
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(out)
	return out
}

// TestErrorsDoc: docs/errors.md describes every sentinel error of the public
// packages, under its qualified name.
func TestErrorsDoc(t *testing.T) {
	doc, err := os.ReadFile(filepath.Join(ModuleRoot(), "docs", "errors.md"))
	if err != nil {
		t.Fatal(err)
	}
	errs := sentinels(t)
	if len(errs) < 10 {
		t.Fatalf("found only %d sentinel errors: %v", len(errs), errs)
	}
	for _, e := range errs {
		if !strings.Contains(string(doc), "`"+e+"`") {
			t.Errorf("docs/errors.md does not describe `%s`", e)
		}
	}
}
