// Command surface counts the exported identifiers of the module's public
// packages and fails when they pass the budget, so that every change sees
// what it adds to the API.
//
//	go run ./internal/cmd/surface [-budget N] [-v]
//
// Counted: exported top-level functions, exported methods of exported
// types, exported types with their exported struct fields and interface
// methods, exported constants and variables. Not counted: internal
// packages, _test.go files, test-support packages (a name ending in
// "test"), main packages, examples/, tests/ and the bench module.
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	budget := flag.Int("budget", 300, "the most exported identifiers allowed")
	verbose := flag.Bool("v", false, "list every identifier counted")
	flag.Parse()
	counts, names, err := count(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(2)
	}
	total := 0
	pkgs := make([]string, 0, len(counts))
	for p, n := range counts {
		pkgs = append(pkgs, p)
		total += n
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		fmt.Printf("%5d  %s\n", counts[p], p)
		if *verbose {
			for _, n := range names[p] {
				fmt.Printf("         %s\n", n)
			}
		}
	}
	fmt.Printf("%5d  exported identifiers in %d public packages (budget %d)\n", total, len(pkgs), *budget)
	if total > *budget {
		fmt.Fprintf(os.Stderr, "surface: %d exported identifiers, over the budget of %d\n", total, *budget)
		os.Exit(1)
	}
}

// skipDir reports whether a folder holds no public package of the module.
func skipDir(path string, d fs.DirEntry) bool {
	name := d.Name()
	if path == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "internal" {
		return true
	}
	switch path {
	case "examples", "tests", "bench", "docs":
		return true
	}
	// A nested module (bench, the browser test) is not this one's.
	_, err := os.Stat(filepath.Join(path, "go.mod"))
	return err == nil
}

func count(root string) (map[string]int, map[string][]string, error) {
	counts, names := map[string]int{}, map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		if skipDir(path, d) {
			return filepath.SkipDir
		}
		pkgs, err := parser.ParseDir(token.NewFileSet(), path, func(fi fs.FileInfo) bool {
			return !strings.HasSuffix(fi.Name(), "_test.go")
		}, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for name, pkg := range pkgs {
			if name == "main" || strings.HasSuffix(name, "test") {
				continue
			}
			for _, f := range pkg.Files {
				for _, n := range exported(f) {
					counts[path]++
					names[path] = append(names[path], n)
				}
			}
		}
		return nil
	})
	return counts, names, err
}

// exported lists the exported identifiers f declares.
func exported(f *ast.File) []string {
	var out []string
	for _, decl := range f.Decls {
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if !d.Name.IsExported() {
				continue
			}
			if d.Recv == nil {
				out = append(out, d.Name.Name)
			} else if recv := recvName(d.Recv.List[0].Type); ast.IsExported(recv) {
				out = append(out, recv+"."+d.Name.Name)
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch s := spec.(type) {
				case *ast.ValueSpec:
					for _, n := range s.Names {
						if n.IsExported() {
							out = append(out, n.Name)
						}
					}
				case *ast.TypeSpec:
					if !s.Name.IsExported() {
						continue
					}
					out = append(out, s.Name.Name)
					out = append(out, members(s.Name.Name, s.Type)...)
				}
			}
		}
	}
	return out
}

// members lists the exported fields of a struct type and the exported
// methods of an interface type.
func members(typ string, t ast.Expr) []string {
	var list *ast.FieldList
	switch t := t.(type) {
	case *ast.StructType:
		list = t.Fields
	case *ast.InterfaceType:
		list = t.Methods
	default:
		return nil
	}
	var out []string
	for _, field := range list.List {
		for _, n := range field.Names {
			if n.IsExported() {
				out = append(out, typ+"."+n.Name)
			}
		}
	}
	return out
}

func recvName(t ast.Expr) string {
	switch t := t.(type) {
	case *ast.StarExpr:
		return recvName(t.X)
	case *ast.IndexExpr:
		return recvName(t.X)
	case *ast.IndexListExpr:
		return recvName(t.X)
	case *ast.Ident:
		return t.Name
	}
	return ""
}
