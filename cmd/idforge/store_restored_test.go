package main

import (
	"context"
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
)

// store restored gives the store a new epoch and marks every sequence
// untrusted: a process that held a sequence sees a reset and goes on above
// what it held; a new process is refused a sequence no Floor knows until
// chain -raise says where its data ends. On every kind of store.
func TestStoreRestored(t *testing.T) {
	for _, s := range proxyStores {
		t.Run(s.name, func(t *testing.T) {
			spec := s.spec(t)
			if spec == "" {
				spec = "sqlite:" + filepath.Join(t.TempDir(), "restored.db")
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "init"); code != 0 {
				t.Fatalf("store init: exit %d: %s", code, errOut)
			}
			ctx := context.Background()
			open := func() *openedStore {
				st, err := openStore(ctx, spec, "-store", t.TempDir(), slog.Default(), false, 0)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { st.close() })
				return st
			}
			old := open()
			held, err := old.store.Segment("order")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := held.NextMaxID(ctx, 100); err != nil {
				t.Fatal(err)
			}
			gone, err := open().store.Segment("invoice") // a process that stops before the restore
			if err != nil {
				t.Fatal(err)
			}
			if _, err := gone.NextMaxID(ctx, 100); err != nil {
				t.Fatal(err)
			}

			out, errOut, code := runArgs(t, "store", "-store", spec, "restored")
			if code != 0 || !strings.Contains(out, "declared restored") {
				t.Fatalf("store restored: exit %d: %s%s", code, out, errOut)
			}

			// The process that held order: a reset, then above what it held.
			if _, err := held.NextMaxID(ctx, 100); !errors.Is(err, engine.ErrStoreReset) {
				t.Fatalf("a running process's fetch after store restored: %v; want engine.ErrStoreReset", err)
			}
			if got, err := held.NextMaxID(ctx, 100); err != nil || got != 200 {
				t.Fatalf("the running process's next fetch: %d, %v; want 200, above the 100 it held", got, err)
			}
			// A new process, no Floor: invoice is refused, then raised.
			invoice, err := open().store.Segment("invoice")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := invoice.NextMaxID(ctx, 100); !errors.Is(err, engine.ErrNoFloor) {
				t.Fatalf("a new process's first fetch of an untrusted sequence without a Floor: %v; want engine.ErrNoFloor", err)
			}
			out, errOut, code = runArgs(t, "store", "-store", spec, "-raise", "7000", "chain", "invoice")
			if code != 0 || !strings.Contains(out, "counter 7000") {
				t.Fatalf("chain invoice -raise 7000: exit %d: %s%s", code, out, errOut)
			}
			if got, err := invoice.NextMaxID(ctx, 100); err != nil || got != 7100 {
				t.Fatalf("after the raise: %d, %v; want 7100", got, err)
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "restored", "now"); code != 2 || !strings.Contains(errOut, "restored") {
				t.Fatalf("store restored with an argument: exit %d: %s; want a usage error", code, errOut)
			}
		})
	}
}
