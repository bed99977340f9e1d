package idforge_test

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/sqlstore"
)

// logRecords is a slog.Handler keeping every record with the attributes
// of the logger it came through.
type logRecords struct {
	mu    *sync.Mutex
	recs  *[]slog.Record
	attrs []slog.Attr
}

func newLogRecords() logRecords { return logRecords{mu: &sync.Mutex{}, recs: &[]slog.Record{}} }

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) WithGroup(string) slog.Handler            { return l }
func (l logRecords) WithAttrs(as []slog.Attr) slog.Handler {
	l.attrs = append(slices.Clone(l.attrs), as...)
	return l
}

func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	r = r.Clone()
	r.AddAttrs(l.attrs...)
	l.mu.Lock()
	*l.recs = append(*l.recs, r)
	l.mu.Unlock()
	return nil
}

// with returns the records whose message holds msg, as "message attr=value…".
func (l logRecords) with(msg string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for _, r := range *l.recs {
		if strings.Contains(r.Message, msg) {
			line := r.Message
			r.Attrs(func(a slog.Attr) bool { line += " " + a.String(); return true })
			out = append(out, line)
		}
	}
	return out
}

// TestNoFloorIsShortAndLoggedOnce: a chain missing from a store that was
// not declared brand-new, with no Floor that knows it, fails with one short
// line naming the sequence and both remedies, and the registry logs the
// refusal once per sequence, however many draws and retries meet it.
func TestNoFloorIsShortAndLoggedOnce(t *testing.T) {
	logs := newLogRecords()
	st := newSQLiteStoreWith(t, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
	reg := newReg(t, idforge.Settings{Store: st, Namespace: "orders", Logger: slog.New(logs)})
	names := []string{"invoice", "refund"}
	// Floors that know nothing of their sequence, counting how often the
	// store asks: once per fetch the chain's worker retries.
	asked := make([]atomic.Int64, len(names))
	for i, name := range names {
		reg.AddFloor(name, func(context.Context, string) (int64, error) {
			asked[i].Add(1)
			return 0, engine.ErrNoFloor
		})
	}
	ctx := t.Context()
	for i, name := range names {
		deadline := time.Now().Add(time.Minute) // a hang guard, not a measure
		for draws := 0; draws < 20 || asked[i].Load() < 4; draws++ {
			_, err := reg.NextID(ctx, "chain", name)
			if !errors.Is(err, engine.ErrNoFloor) {
				t.Fatalf("draw %d of %s: %v; want engine.ErrNoFloor", draws, name, err)
			}
			msg := err.Error()
			if len(msg) > 320 || strings.Contains(msg, "\n") || !strings.Contains(msg, `sequence "`+name+`"`) ||
				!strings.Contains(msg, "Registry.AddFloor") || !strings.Contains(msg, "idforge store init") ||
				strings.Count(msg, "has no floor") != 1 {
				t.Fatalf("the refusal of %s (%d characters): %s\nwant one short line naming the sequence, a Floor and idforge store init", name, len(msg), msg)
			}
			if draws == 0 {
				t.Logf("%d characters: %s", len(msg), msg)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the store asked the Floor of %s %d times in a minute; want 4", name, asked[i].Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	lines := logs.with("refuses the sequence")
	for _, name := range names {
		n := 0
		for _, l := range lines {
			if strings.Contains(l, "name="+name+" ") || strings.HasSuffix(l, "name="+name) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("%d draws of %s, refused %d times by the store, logged %d lines; want 1:\n%s",
				20, name, asked[slices.Index(names, name)].Load(), n, strings.Join(lines, "\n"))
		}
	}
	if len(lines) != len(names) {
		t.Errorf("logged %d refusals for %d sequences:\n%s", len(lines), len(names), strings.Join(lines, "\n"))
	}
}

// TestStartWaitLoggedOnce: a store found without an epoch (neither
// declared brand-new nor older than the reset grace) waits the grace before
// handing anything out, and says so once, with the store and the wait.
func TestStartWaitLoggedOnce(t *testing.T) {
	logs := newLogRecords()
	newSQLiteStoreWith(t, sqlstore.Settings{CreateTables: true, Logger: slog.New(logs)})
	lines := logs.with("reset grace")
	if len(lines) != 1 || !strings.Contains(lines[0], "new store epoch") || !strings.Contains(lines[0], "wait=") ||
		!strings.Contains(lines[0], "store=sqlstore") {
		t.Fatalf("opening a store without an epoch logged %q; want one line with the reason, the store and the wait", lines)
	}
	brandNew := newLogRecords()
	newSQLiteStoreWith(t, sqlstore.Settings{CreateTables: true, Init: true, Logger: slog.New(brandNew)})
	if lines := brandNew.with(""); len(lines) != 0 {
		t.Fatalf("a brand-new store logged %q; want no wait and no line", lines)
	}
}
