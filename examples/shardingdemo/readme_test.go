package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README shows what the demo prints, to the byte: a newcomer compares
// their first run with it.
func TestREADMEShowsTheDemoOutput(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "```\n1000 rows per generator"
	i := strings.Index(string(md), head)
	if i < 0 {
		t.Fatal("README.md has no block starting with the demo's first line")
	}
	block := string(md[i+len("```\n"):])
	block = block[:strings.Index(block, "```")]

	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if got := strings.TrimRight(out.String(), "\n"); got != strings.TrimRight(block, "\n") {
		t.Fatalf("the demo printed\n%s\nbut README.md shows\n%s", got, block)
	}
}
