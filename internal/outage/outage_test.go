package outage

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"
)

// records is a slog.Handler keeping every record.
type records struct {
	mu   sync.Mutex
	recs []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) WithAttrs([]slog.Attr) slog.Handler       { return r }
func (r *records) WithGroup(string) slog.Handler            { return r }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	r.recs = append(r.recs, rec)
	r.mu.Unlock()
	return nil
}

func attr(rec slog.Record, key string) slog.Value {
	var v slog.Value
	rec.Attrs(func(a slog.Attr) bool {
		if a.Key == key {
			v = a.Value
			return false
		}
		return true
	})
	return v
}

// A 6 s outage retried every 62.5 ms logs its start and its end; a 35 s one
// adds a summary per 10 s; the next outage starts afresh.
func TestLog(t *testing.T) {
	h := &records{}
	o := &Log{Logger: slog.New(h), Still: "still failing", End: "answered again"}
	now := time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)
	down := errors.New("connection refused")
	run := func(d time.Duration) {
		for end := now.Add(d); now.Before(end); now = now.Add(62500 * time.Microsecond) {
			o.Failed(now, slog.LevelWarn, "failed", down, "k", "v")
		}
	}
	if o.Recovered(now) {
		t.Fatal("an outage before any failure")
	}
	run(6 * time.Second)
	if !o.Recovered(now) {
		t.Fatal("no outage after failures")
	}
	if len(h.recs) != 2 || h.recs[0].Message != "failed" || h.recs[0].Level != slog.LevelWarn ||
		h.recs[1].Message != "answered again" || h.recs[1].Level != slog.LevelInfo {
		t.Fatalf("a 6 s outage logged %d lines: %v", len(h.recs), h.recs)
	}
	if got := attr(h.recs[1], "outage").Duration(); got != 6*time.Second {
		t.Errorf("the end line says outage %v, want 6s", got)
	}
	if got := attr(h.recs[1], "failures").Int64(); got != 96 {
		t.Errorf("the end line says %d failures, want 96", got)
	}
	if got := attr(h.recs[0], "err").Any(); got != down {
		t.Errorf("the first line's err = %v", got)
	}

	h.recs = nil
	run(35 * time.Second)
	o.Recovered(now)
	var msgs []string
	for _, r := range h.recs {
		msgs = append(msgs, r.Message)
	}
	want := []string{"failed", "still failing", "still failing", "still failing", "answered again"}
	if len(msgs) != len(want) {
		t.Fatalf("a 35 s outage logged %q, want %q", msgs, want)
	}
	for i := range want {
		if msgs[i] != want[i] {
			t.Fatalf("a 35 s outage logged %q, want %q", msgs, want)
		}
	}
	// 10 s of failures every 62.5 ms, the first of them the start's.
	if got := attr(h.recs[1], "failures").Int64(); got != 160 {
		t.Errorf("the first summary counts %d failures, want 160", got)
	}
	if got := attr(h.recs[4], "outage").Duration(); got != 35*time.Second {
		t.Errorf("the end line says outage %v, want 35s", got)
	}
}
