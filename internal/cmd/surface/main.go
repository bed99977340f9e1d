// Command surface counts the exported identifiers of the module's public
// packages and fails when they pass the budget, so that every change sees
// what it adds to the API.
//
//	go run ./internal/cmd/surface [-budget N] [-v]
//
// Counted, in every package a user can import (every package of the module
// outside internal/ and tests/ that is not a main package), test-support
// packages (clocktest, machinetest, segmenttest) included: exported
// top-level functions, exported methods of exported types, exported types
// with their exported struct fields and interface methods, exported
// constants and variables; and, because a user can call them too, the
// exported methods and fields of every type an exported declaration reaches
// that the user cannot name: an unexported type of the package, or a type
// of an internal package (followed through their own fields and methods).
// Each such type is listed apart ("reached through") and makes the run
// fail: an exported signature must name only exported types of public
// packages.
//
// Not counted: _test.go files, main packages, examples/, the bench module,
// and tests/, the project's own test harness (printed apart for the
// record: its packages say they are not an API).
package main

import (
	"bufio"
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
	budget := flag.Int("budget", 360, "the most exported identifiers allowed")
	verbose := flag.Bool("v", false, "list every identifier counted")
	flag.Parse()
	c, err := newCounter(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(2)
	}
	if err := c.walk(); err != nil {
		fmt.Fprintln(os.Stderr, "surface:", err)
		os.Exit(2)
	}
	total := 0
	pkgs := make([]string, 0, len(c.counted))
	for p := range c.counted {
		pkgs = append(pkgs, p)
	}
	sort.Strings(pkgs)
	for _, p := range pkgs {
		r := c.counted[p]
		total += len(r.names) + len(r.hidden)
		fmt.Printf("%5d  %s\n", len(r.names)+len(r.hidden), p)
		if *verbose {
			for _, n := range r.names {
				fmt.Printf("         %s\n", n)
			}
		}
		for _, n := range r.hidden {
			fmt.Printf("         reached through an exported declaration, not nameable: %s\n", n)
		}
	}
	fmt.Printf("%5d  exported identifiers in %d public packages (budget %d)\n", total, len(pkgs), *budget)
	harness := make([]string, 0, len(c.harness))
	for p := range c.harness {
		harness = append(harness, p)
	}
	sort.Strings(harness)
	for _, p := range harness {
		if c.harness[p] == 0 {
			continue
		}
		fmt.Printf("       not counted, test harness: %d in %s\n", c.harness[p], p)
	}
	failed := false
	for _, p := range pkgs {
		if len(c.counted[p].hidden) > 0 {
			fmt.Fprintf(os.Stderr, "surface: %s: an exported declaration reaches a type users cannot name (%s); export it from a public package or keep it unexported\n",
				p, strings.Join(c.counted[p].hiddenTypes, ", "))
			failed = true
		}
	}
	if total > *budget {
		fmt.Fprintf(os.Stderr, "surface: %d exported identifiers, over the budget of %d\n", total, *budget)
		failed = true
	}
	if failed {
		os.Exit(1)
	}
}

// report is what one public package shows: the identifiers it exports,
// and the members of types it reaches that users cannot name.
type report struct {
	names       []string
	hidden      []string
	hiddenTypes []string
}

type counter struct {
	root    string
	module  string
	counted map[string]*report
	harness map[string]int
	parsed  map[string]*pkgInfo // by directory
}

// pkgInfo is one parsed package: its declarations by type name, and each
// file's imports.
type pkgInfo struct {
	dir         string
	types       map[string]*ast.TypeSpec
	imports     map[*ast.TypeSpec]map[string]string // the imports of the file declaring each type
	funcImports map[*ast.FuncDecl]map[string]string // and each method
	methods     map[string][]*ast.FuncDecl          // by receiver type name
}

func newCounter(root string) (*counter, error) {
	f, err := os.Open(filepath.Join(root, "go.mod"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var module string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if m, ok := strings.CutPrefix(sc.Text(), "module "); ok {
			module = strings.TrimSpace(m)
			break
		}
	}
	if module == "" {
		return nil, fmt.Errorf("no module line in %s", f.Name())
	}
	return &counter{root: root, module: module, counted: map[string]*report{}, harness: map[string]int{}, parsed: map[string]*pkgInfo{}}, nil
}

// skipDir reports whether a folder, at path from the module's root, holds
// no public package of the module.
func skipDir(path, full string, d fs.DirEntry) bool {
	name := d.Name()
	if path == "." {
		return false
	}
	if strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "internal" {
		return true
	}
	switch path {
	case "examples", "bench", "docs":
		return true
	}
	// A nested module (bench, the browser test) is not this one's.
	_, err := os.Stat(filepath.Join(full, "go.mod"))
	return err == nil
}

func (c *counter) walk() error {
	return filepath.WalkDir(c.root, func(full string, d fs.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		path, err := filepath.Rel(c.root, full)
		if err != nil {
			return err
		}
		if skipDir(path, full, d) {
			return filepath.SkipDir
		}
		files, name, err := parseDir(full)
		if err != nil || len(files) == 0 || name == "main" {
			return err
		}
		harness := path == "tests" || strings.HasPrefix(path, "tests"+string(filepath.Separator))
		r := &report{}
		for _, f := range files {
			r.names = append(r.names, exported(f)...)
		}
		if harness {
			c.harness[filepath.ToSlash(path)] = len(r.names)
			return nil
		}
		if err := c.reach(full, files, r); err != nil {
			return err
		}
		c.counted[filepath.ToSlash(path)] = r
		return nil
	})
}

// parseDir parses the non-test Go files of dir, returning them with their
// package name.
func parseDir(dir string) ([]*ast.File, string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, "", err
	}
	var files []*ast.File
	var name string
	fset := token.NewFileSet()
	for _, e := range entries {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, "", err
		}
		files = append(files, f)
		name = f.Name.Name
	}
	return files, name, nil
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

// typeRef is a type an exported declaration names: in the package in dir,
// called name.
type typeRef struct{ dir, name string }

// reach adds to r the members of every type that the exported declarations
// of the package in dir reach and that users cannot name.
func (c *counter) reach(dir string, files []*ast.File, r *report) error {
	dir = filepath.Clean(dir)
	if _, err := c.info(dir); err != nil {
		return err
	}
	var queue []typeRef
	seen := map[typeRef]bool{}
	// refs queues the types expr names that users cannot name, resolving
	// selectors through imports and bare names in the package at from.
	refs := func(from string, imports map[string]string, expr ast.Expr) {
		ast.Inspect(expr, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if x, ok := n.X.(*ast.Ident); ok {
					if path, ok := imports[x.Name]; ok {
						if d, ok := c.dirOf(path); ok && isInternal(path) {
							queue = append(queue, typeRef{d, n.Sel.Name})
						}
					}
				}
				return false
			case *ast.Ident:
				// A type of the public package itself is counted when
				// exported; any type of an internal package is hidden.
				if _, ok := c.parsed[from].types[n.Name]; ok && (from != dir || !n.IsExported()) {
					queue = append(queue, typeRef{from, n.Name})
				}
			}
			return true
		})
	}
	for _, f := range files {
		imports := importsOf(f)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if !d.Name.IsExported() || d.Recv != nil && !ast.IsExported(recvName(d.Recv.List[0].Type)) {
					continue
				}
				refs(dir, imports, d.Type)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.ValueSpec:
						if s.Type != nil && anyExported(s.Names) {
							refs(dir, imports, s.Type)
						}
					case *ast.TypeSpec:
						if s.Name.IsExported() {
							refs(dir, imports, exposed(s))
						}
					}
				}
			}
		}
	}
	for len(queue) > 0 {
		ref := queue[0]
		queue = queue[1:]
		if seen[ref] {
			continue
		}
		seen[ref] = true
		info, err := c.info(ref.dir)
		if err != nil {
			return err
		}
		spec := info.types[ref.name]
		if spec == nil {
			continue
		}
		label := ref.name
		if ref.dir != dir {
			rel, err := filepath.Rel(c.root, ref.dir)
			if err != nil {
				return err
			}
			label = filepath.ToSlash(rel) + "." + ref.name
		}
		r.hiddenTypes = append(r.hiddenTypes, label)
		for _, m := range members(label, spec.Type) {
			r.hidden = append(r.hidden, m)
		}
		refs(ref.dir, info.imports[spec], exposed(spec))
		for _, m := range info.methods[ref.name] {
			if m.Name.IsExported() {
				r.hidden = append(r.hidden, label+"."+m.Name.Name)
				refs(ref.dir, info.funcImports[m], m.Type)
			}
		}
	}
	return nil
}

// exposed is the part of a type declaration users see: the exported
// fields of a struct, every method of an interface, the whole of any other
// type (an alias, a func or a slice type, say).
func exposed(s *ast.TypeSpec) ast.Expr {
	st, ok := s.Type.(*ast.StructType)
	if !ok {
		return s.Type
	}
	out := &ast.StructType{Fields: &ast.FieldList{}}
	for _, f := range st.Fields.List {
		if len(f.Names) == 0 || anyExported(f.Names) {
			out.Fields.List = append(out.Fields.List, f)
		}
	}
	return out
}

func anyExported(names []*ast.Ident) bool {
	for _, n := range names {
		if n.IsExported() {
			return true
		}
	}
	return false
}

func isInternal(path string) bool {
	for _, el := range strings.Split(path, "/") {
		if el == "internal" {
			return true
		}
	}
	return false
}

// dirOf returns the directory of an import path of this module.
func (c *counter) dirOf(path string) (string, bool) {
	if path == c.module {
		return c.root, true
	}
	rest, ok := strings.CutPrefix(path, c.module+"/")
	if !ok {
		return "", false
	}
	return filepath.Join(c.root, filepath.FromSlash(rest)), true
}

func importsOf(f *ast.File) map[string]string {
	m := map[string]string{}
	for _, im := range f.Imports {
		path := strings.Trim(im.Path.Value, `"`)
		name := path[strings.LastIndex(path, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		m[name] = path
	}
	return m
}

// info parses the package in dir once.
func (c *counter) info(dir string) (*pkgInfo, error) {
	dir = filepath.Clean(dir)
	if p, ok := c.parsed[dir]; ok {
		return p, nil
	}
	files, _, err := parseDir(dir)
	if err != nil {
		return nil, err
	}
	p := &pkgInfo{dir: dir, types: map[string]*ast.TypeSpec{}, imports: map[*ast.TypeSpec]map[string]string{}, funcImports: map[*ast.FuncDecl]map[string]string{}, methods: map[string][]*ast.FuncDecl{}}
	for _, f := range files {
		imports := importsOf(f)
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv != nil {
					r := recvName(d.Recv.List[0].Type)
					p.methods[r] = append(p.methods[r], d)
					p.funcImports[d] = imports
				}
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					if s, ok := spec.(*ast.TypeSpec); ok {
						p.types[s.Name.Name] = s
						p.imports[s] = imports
					}
				}
			}
		}
	}
	c.parsed[dir] = p
	return p, nil
}
