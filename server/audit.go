package server

import (
	"context"
	"log/slog"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of the ledger: how often refusals are summed up in the log, and
// how many audit lines one token may write in that time.
const (
	defaultLogInterval = 10 * time.Second
	defaultAuditBudget = 100
)

// ledger keeps what an operator reads of the callers: refused requests,
// counted in metrics and summed up in the log once per interval (one line
// per token and code, however many there were), and the audit lines of
// what tokens did, at most a budget of lines per token and interval, so
// that no caller can fill the log or the disk under it. The lines over the
// budget are counted and summed up likewise.
type ledger struct {
	log      *slog.Logger
	interval time.Duration
	budget   int

	refusedTotal *prometheus.CounterVec // idforge_requests_refused_total{token,code}
	droppedTotal *prometheus.CounterVec // idforge_audit_lines_dropped_total{token}

	mu      sync.Mutex
	refused map[refusalKey]*refusalCount // this interval's
	written map[string]int               // audit lines per token this interval
	dropped map[string]int               // audit lines over the budget per token this interval
	timer   *time.Timer                  // the pending flush, nil when nothing waits
}

type refusalKey struct{ token, code string }

// refusalCount is one token's refusals of one code in an interval, with
// the last one's request and message, which is all an operator needs to
// tell a misconfigured client from an attack.
type refusalCount struct {
	n       int
	status  int
	request string
	message string
}

func (l *ledger) init(log *slog.Logger, interval time.Duration, budget int) {
	l.log, l.interval, l.budget = log, interval, budget
	l.refused = map[refusalKey]*refusalCount{}
	l.written = map[string]int{}
	l.dropped = map[string]int{}
	l.refusedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idforge_requests_refused_total",
		Help: "Requests answered with an error, by token (empty: no valid token) and error code.",
	}, []string{"token", "code"})
	l.droppedTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "idforge_audit_lines_dropped_total",
		Help: "Audit lines not written because the token had used its budget of lines for the interval.",
	}, []string{"token"})
}

// refuse counts one refused request of token (code, status), r its request.
func (l *ledger) refuse(token, code string, status int, r *http.Request, message string) {
	l.refusedTotal.WithLabelValues(token, code).Inc()
	req := ""
	if r != nil {
		req = r.Method + " " + boundedAttr(r.URL.Path)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	k := refusalKey{token, code}
	c := l.refused[k]
	if c == nil {
		c = &refusalCount{}
		l.refused[k] = c
	}
	c.n++
	c.status, c.request, c.message = status, req, boundedAttr(message)
	l.schedule()
}

// audit writes one audit line of token's, at level, within the token's
// budget for the interval; attrs name the token where the line wants it.
// Lines below Info (a guard that succeeded, a heartbeat) are written only
// when the logger takes them and cost no budget: an operator turns them on
// knowing how many there are.
func (l *ledger) audit(token string, level slog.Level, msg string, attrs ...any) {
	if level < slog.LevelInfo {
		l.log.Log(context.Background(), level, msg, attrs...)
		return
	}
	l.mu.Lock()
	over := l.written[token] >= l.budget
	if over {
		l.dropped[token]++
	} else {
		l.written[token]++
	}
	l.schedule()
	l.mu.Unlock()
	if over {
		l.droppedTotal.WithLabelValues(token).Inc()
		return
	}
	l.log.Log(context.Background(), level, msg, attrs...)
}

// schedule starts the interval's flush if none is pending; under mu.
func (l *ledger) schedule() {
	if l.timer == nil {
		l.timer = time.AfterFunc(l.interval, l.flush)
	}
}

// flush writes the interval's summaries and starts a new interval.
func (l *ledger) flush() {
	l.mu.Lock()
	refused, dropped := l.refused, l.dropped
	l.refused, l.dropped, l.written = map[refusalKey]*refusalCount{}, map[string]int{}, map[string]int{}
	if l.timer != nil {
		l.timer.Stop()
		l.timer = nil
	}
	l.mu.Unlock()
	keys := make([]refusalKey, 0, len(refused))
	for k := range refused {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].token != keys[j].token {
			return keys[i].token < keys[j].token
		}
		return keys[i].code < keys[j].code
	})
	for _, k := range keys {
		c := refused[k]
		l.log.Warn("idforge serve: requests refused", "token", k.token, "code", k.code, "count", c.n, "interval", l.interval,
			"status", c.status, "last_request", c.request, "last_error", c.message)
	}
	tokens := make([]string, 0, len(dropped))
	for t := range dropped {
		tokens = append(tokens, t)
	}
	sort.Strings(tokens)
	for _, t := range tokens {
		l.log.Warn("idforge serve: audit lines dropped over the token's budget", "token", t, "count", dropped[t], "interval", l.interval,
			"budget", l.budget)
	}
}

// Describe implements prometheus.Collector.
func (l *ledger) Describe(ch chan<- *prometheus.Desc) {
	l.refusedTotal.Describe(ch)
	l.droppedTotal.Describe(ch)
}

// Collect implements prometheus.Collector.
func (l *ledger) Collect(ch chan<- prometheus.Metric) {
	l.refusedTotal.Collect(ch)
	l.droppedTotal.Collect(ch)
}
