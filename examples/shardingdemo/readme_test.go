package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The README shows an excerpt of what the demo prints, to the byte: a
// newcomer compares their first run with it.
func TestREADMEShowsTheDemoOutput(t *testing.T) {
	md, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	const head = "```text\nplain-snowflake\n"
	i := strings.Index(string(md), head)
	if i < 0 {
		t.Fatal("README.md has no block of the demo's output (starting with plain-snowflake)")
	}
	block := string(md[i+len("```text\n"):])
	block = strings.TrimRight(block[:strings.Index(block, "```")], "\n")

	var out, errOut bytes.Buffer
	if code := run(context.Background(), nil, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if !strings.Contains(out.String(), block+"\n") {
		t.Fatalf("README.md shows\n%s\nwhich is not part of what the demo printed:\n%s", block, out.String())
	}
}
