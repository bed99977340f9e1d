package main

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestServeRideThrough: `idforge store ride-through` records a window,
// serve refuses to run on the store under another one, and -ride-through
// (or IDFORGE_RIDE_THROUGH) starts it with the recorded one, whose lease
// then reserves that far ahead. Rewriting the window while a holder may
// still issue under the old one takes -force. On every kind of store.
func TestServeRideThrough(t *testing.T) {
	for _, s := range proxyStores {
		t.Run(s.name, func(t *testing.T) {
			dir := t.TempDir()
			spec := s.spec(t)
			if spec == "" {
				spec = "sqlite:" + filepath.Join(dir, "window.db")
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "init"); code != 0 {
				t.Fatalf("store init: exit %d: %s", code, errOut)
			}
			if out, errOut, code := runArgs(t, "store", "-store", spec, "ride-through", "60s"); code != 0 || !strings.Contains(out, "ride-through window 1m0s (was 1s)") {
				t.Fatalf("store ride-through 60s: exit %d: %s%s", code, out, errOut)
			}
			if _, errOut, code := runArgs(t, "store", "-store", spec, "ride-through", "soon"); code != 2 || !strings.Contains(errOut, "not a positive duration") {
				t.Fatalf("store ride-through soon: exit %d: %s", code, errOut)
			}

			// The default window is not the one recorded: refused, naming both.
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			var out, errOut strings.Builder
			if code := run(ctx, []string{"serve", "-addr", "127.0.0.1:0", "-store", spec}, &out, &errOut); code == 0 ||
				!strings.Contains(errOut.String(), "1m0s") || !strings.Contains(errOut.String(), "1s") {
				t.Fatalf("serve under the default window on a store recording 60s: exit %d: %s", code, errOut.String())
			}

			args := []string{"-store", spec, "-namespace", "rt", "-instance", "rt-0"}
			if s.name == "sqlite" {
				t.Setenv("IDFORGE_RIDE_THROUGH", "60s")
			} else {
				args = append(args, "-ride-through", "60s")
			}
			started := time.Now()
			base, stop := startServe(t, dir, args...)
			var ids struct{ IDs []string }
			if code := getJSON(t, base+"/v1/ids/snowflake", &ids); code != 200 || len(ids.IDs) == 0 {
				t.Fatalf("snowflake under a 60 s window: %d %v", code, ids)
			}
			// Each heartbeat reserves the window ahead of the clock.
			last := regexp.MustCompile(`rt-0\s+true\s+true\s+(\S+)`)
			deadline := time.Now().Add(30 * time.Second)
			for {
				out, errOut, code := runArgs(t, "store", "-store", spec, "-namespace", "rt", "machines")
				if code != 0 {
					t.Fatalf("store machines: exit %d: %s", code, errOut)
				}
				if m := last.FindStringSubmatch(out); m != nil {
					ts, err := time.Parse("2006-01-02T15:04:05.000Z", m[1])
					if err != nil {
						t.Fatal(err)
					}
					if ts.After(started.Add(50 * time.Second)) {
						break
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("no reservation 60 s ahead in:\n%s", out)
				}
				time.Sleep(100 * time.Millisecond)
			}

			// rt-0 heartbeated within the window: a rewrite could let it
			// overlap a process started under the new one.
			if _, errOut, code := runArgs(t, "store", "-store", spec, "ride-through", "2s"); code == 0 || !strings.Contains(errOut, "-force") && !strings.Contains(errOut, "force") {
				t.Fatalf("store ride-through 2s with a live holder: exit %d: %s", code, errOut)
			}
			if code := stop(); code != 0 {
				t.Fatalf("serve exit %d", code)
			}
			if out, errOut, code := runArgs(t, "store", "-store", spec, "-force", "ride-through", "2s"); code != 0 || !strings.Contains(out, "ride-through window 2s (was 1m0s)") {
				t.Fatalf("store -force ride-through 2s: exit %d: %s%s", code, out, errOut)
			}
		})
	}
}

// TestInitAndGenRideThrough: store init records the window it is given, and
// gen leases under it only when told the same one.
func TestInitAndGenRideThrough(t *testing.T) {
	spec := "sqlite:" + filepath.Join(t.TempDir(), "window.db")
	if out, errOut, code := runArgs(t, "store", "-store", spec, "-ride-through", "30s", "init"); code != 0 || !strings.Contains(out, "brand-new") {
		t.Fatalf("store init -ride-through 30s: exit %d: %s%s", code, out, errOut)
	}
	if _, errOut, code := runArgs(t, "gen", "-store", spec, "-n", "1"); code == 0 || !strings.Contains(errOut, "30s") {
		t.Fatalf("gen under the default window on a store recording 30s: exit %d: %s", code, errOut)
	}
	if out, errOut, code := runArgs(t, "gen", "-store", spec, "-ride-through", "30s", "-n", "2"); code != 0 || len(strings.Fields(out)) != 2 {
		t.Fatalf("gen -ride-through 30s: exit %d: %q %s", code, out, errOut)
	}
}
