package main

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
)

// store machines lists what instances hold, release gives back only an ID
// whose holder is silent (or with -force), and chain shows a counter and
// raises it, never lowering it: on every kind of store.
func TestStoreAdmin(t *testing.T) {
	for _, s := range proxyStores {
		t.Run(s.name, func(t *testing.T) {
			spec := s.spec(t)
			if spec == "" {
				spec = "sqlite:" + filepath.Join(t.TempDir(), "admin.db")
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "init"); code != 0 {
				t.Fatalf("store init: exit %d: %s", code, errOut)
			}
			ctx := context.Background()
			st, err := openStore(ctx, spec, "-store", t.TempDir(), slog.Default(), false, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer st.close()
			d := st.store.(machine.Distributor)
			live := machine.Instance{Namespace: "adm", ID: "web-0", Stable: true}
			if _, err := d.Distribute(ctx, live, 10, time.Minute); err != nil {
				t.Fatal(err)
			}
			gone := machine.Instance{Namespace: "adm", ID: "web-1"}
			old, err := d.Distribute(ctx, gone, 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			// A holder silent for an hour: its stored timestamp is old.
			if err := d.Revert(ctx, gone, machine.State{MachineID: old.MachineID, Holder: old.Holder, LastTimestamp: 1}); err != nil {
				t.Fatal(err)
			}

			out, errOut, code := runArgs(t, "store", "-store", spec, "-namespace", "adm", "machines")
			if code != 0 || !strings.Contains(out, "web-0") || strings.Contains(out, "web-1") || len(strings.Split(strings.TrimSpace(out), "\n")) != 3 {
				t.Fatalf("machines: exit %d:\n%s%s", code, out, errOut)
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "-namespace", "adm", "release", "0"); code != 1 || !strings.Contains(errOut, "-force") {
				t.Fatalf("release of a live holding: exit %d: %s", code, errOut)
			}
			if out, errOut, code := runArgs(t, "store", "-store", spec, "-namespace", "adm", "-force", "release", "0"); code != 0 || !strings.Contains(out, "released") {
				t.Fatalf("release -force: exit %d: %s%s", code, out, errOut)
			}
			if out, _, _ := runArgs(t, "store", "-store", spec, "-namespace", "adm", "machines"); strings.Contains(out, "web-0") {
				t.Fatalf("machines after release still lists web-0:\n%s", out)
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "-namespace", "adm", "release", "7"); code != 2 || !strings.Contains(errOut, "never handed out") {
				t.Fatalf("release of an unknown ID: exit %d: %s", code, errOut)
			}

			seg, err := st.store.Segment("order")
			if err != nil {
				t.Fatal(err)
			}
			first, err := seg.NextMaxID(ctx, 10)
			if err != nil {
				t.Fatal(err)
			}
			chain := func(want int64, args ...string) {
				t.Helper()
				out, errOut, code := runArgs(t, append([]string{"store", "-store", spec}, append(args, "chain", "order")...)...)
				if code != 0 || !strings.Contains(out, fmt.Sprintf("counter %d\n", want)) {
					t.Fatalf("chain %v: exit %d: %s%s; want counter %d", args, code, out, errOut, want)
				}
			}
			chain(first)
			chain(first+1000, "-raise", fmt.Sprint(first+1000))
			chain(first+1000, "-raise", "1") // never lowered
			if next, err := seg.NextMaxID(ctx, 10); err != nil || next != first+1010 {
				t.Fatalf("after the raise the next range ends at %d (%v), want %d", next, err, first+1010)
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "chain", "nope"); code != 1 || !strings.Contains(errOut, "no such sequence") {
				t.Fatalf("chain of a missing sequence: exit %d: %s", code, errOut)
			}
		})
	}
}

// The store commands refuse the HTTP address of an idforge serve -proxy
// with one clear error: they need the store itself.
func TestStoreAdminNeedsTheStoreNotTheProxy(t *testing.T) {
	for _, action := range [][]string{{"init"}, {"machines"}, {"release", "0"}, {"chain", "order"}} {
		_, errOut, code := runArgs(t, append([]string{"store", "-store", "https://ids:s3cret@ids.example:8080"}, action...)...)
		if code != 2 || !strings.Contains(errOut, "not through idforge serve -proxy") || strings.Contains(errOut, "s3cret") {
			t.Errorf("store %v on a proxy address: exit %d: %s; want exit 2 saying it needs the store itself, no password", action, code, errOut)
		}
	}
}
