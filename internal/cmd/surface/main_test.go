package main

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestReachedTypesCounted: a module whose public package returns an
// internal type and an unexported one has their exported members counted
// and listed as not nameable; test-support packages count, tests/ does not.
func TestReachedTypesCounted(t *testing.T) {
	root := t.TempDir()
	write := func(path, src string) {
		t.Helper()
		p := filepath.Join(root, filepath.FromSlash(path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("go.mod", "module example.com/m\n")
	write("internal/ops/ops.go", `package ops

type Ops interface{ Do() Result }

type Result struct{ N int; hidden int }
`)
	write("pub/pub.go", `package pub

import "example.com/m/internal/ops"

type Store struct{}

func (Store) Admin() ops.Ops { return nil }

func Open() *handle { return nil }

type handle struct{ Size int }

func (*handle) Close() error { return nil }
`)
	write("pub/pubtest/pubtest.go", "package pubtest\n\nfunc Run() {}\n")
	write("tests/harness/h.go", "package harness\n\nfunc Help() {}\n")
	write("cmd/tool/main.go", "package main\n\nfunc Exported() {}\nfunc main() {}\n")

	c, err := newCounter(root)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.walk(); err != nil {
		t.Fatal(err)
	}
	pub := c.counted["pub"]
	if pub == nil {
		t.Fatalf("pub not counted: %v", c.counted)
	}
	if want := []string{"Store", "Store.Admin", "Open"}; !slices.Equal(pub.names, want) {
		t.Errorf("names = %v, want %v", pub.names, want)
	}
	slices.Sort(pub.hidden)
	if want := []string{"handle.Close", "handle.Size", "internal/ops.Ops.Do", "internal/ops.Result.N"}; !slices.Equal(pub.hidden, want) {
		t.Errorf("hidden = %v, want %v", pub.hidden, want)
	}
	if c.counted["pub/pubtest"] == nil {
		t.Error("the test-support package pub/pubtest was not counted")
	}
	if len(c.harness) != 1 {
		t.Errorf("harness = %v, want tests/harness apart", c.harness)
	}
	for p := range c.counted {
		if filepath.Base(p) == "tool" {
			t.Error("a main package was counted")
		}
	}
}
