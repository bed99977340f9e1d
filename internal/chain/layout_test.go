package chain

import (
	"testing"
	"unsafe"
)

// seg must fill exactly two cache lines, with the contended counter starting
// the second, or callers reading lo and size share a line with the add.
func TestSegLayout(t *testing.T) {
	var s seg
	if size, off := unsafe.Sizeof(s), unsafe.Offsetof(s.taken); size != 128 || off != 64 {
		t.Fatalf("seg is %d bytes with taken at %d, want 128 and 64", size, off)
	}
}
