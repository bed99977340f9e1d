// Package outage logs a run of failures the way an operator wants to read
// it: one line when it starts, a summary at most every [SummaryEvery] while
// it lasts, and one line with its length when it ends. A background loop
// retrying a store every few milliseconds would otherwise log a line per
// retry: a 6 s outage of a lease's heartbeat made about 90.
package outage

import (
	"context"
	"log/slog"
	"time"
)

// SummaryEvery is the least time between two lines about one outage.
const SummaryEvery = 10 * time.Second

// Log tracks the outage of one background loop. The zero value is not
// usable: give it a Logger and the messages. It is not safe for concurrent
// use; a loop calls it from its own goroutine.
type Log struct {
	// Logger receives the lines.
	Logger *slog.Logger
	// Still is the message of the summaries (level Warn), End that of the
	// line when the outage ends (level Info). The message of the first line
	// is given to [Log.Failed].
	Still, End string

	start    time.Time // when the outage began; zero when none is on
	reported time.Time // when its last line was logged
	failures int64     // failures since it began
	unsaid   int64     // failures since its last line
}

// Failed records a failure at now. The first of an outage logs msg at
// level with err and attrs; later ones log a summary (Still, level Warn)
// once SummaryEvery has passed since the outage's last line, with the
// failures since then, the outage's start and the last error.
func (o *Log) Failed(now time.Time, level slog.Level, msg string, err error, attrs ...any) {
	o.failures++
	if o.start.IsZero() {
		o.start, o.reported, o.unsaid = now, now, 0
		o.Logger.Log(context.Background(), level, msg, append([]any{"err", err}, attrs...)...)
		return
	}
	o.unsaid++
	if now.Sub(o.reported) < SummaryEvery {
		return
	}
	o.Logger.Warn(o.Still, append([]any{"err", err, "failures", o.unsaid,
		"since", o.start.UTC().Format(time.RFC3339Nano), "for", now.Sub(o.start).Round(time.Millisecond)}, attrs...)...)
	o.reported, o.unsaid = now, 0
}

// Recovered ends the outage at now, if one is on: it logs End with the
// outage's length and its number of failures, and reports true.
func (o *Log) Recovered(now time.Time, attrs ...any) bool {
	if o.start.IsZero() {
		return false
	}
	o.Logger.Info(o.End, append([]any{"outage", now.Sub(o.start).Round(time.Millisecond), "failures", o.failures}, attrs...)...)
	o.start, o.failures, o.unsaid = time.Time{}, 0, 0
	return true
}
