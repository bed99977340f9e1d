package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idforge/idforge/internal/outage"
	"github.com/idforge/idforge/internal/reason"
)

// readyTimeout bounds one readiness check.
const readyTimeout = 2 * time.Second

// readiness caches the answer of Settings.Ready, so that probes, however
// many, check the lease and the store at most once per ReadyInterval.
type readiness struct {
	mu      sync.Mutex
	at      time.Time     // when err was found; zero before the first check
	err     error         // the last answer
	running chan struct{} // closed when the check in progress ends; nil when none runs
	// outage logs a run of failed checks once when it starts, at most
	// every 10 s while it lasts and once when it ends, however often
	// probes ask and however the error's text changes.
	outage outage.Log
}

// check returns Settings.Ready's answer, at most readyInterval old. While a
// check runs, callers get the previous answer rather than wait, except
// before the first one.
func (s *Server) check() error {
	if s.cfg.Ready == nil {
		return nil
	}
	rd := &s.ready
	rd.mu.Lock()
	if !rd.at.IsZero() && (time.Since(rd.at) < s.cfg.readyInterval || rd.running != nil) {
		err := rd.err
		rd.mu.Unlock()
		return err
	}
	if ch := rd.running; ch != nil { // the first check runs: wait for it
		rd.mu.Unlock()
		<-ch
		rd.mu.Lock()
		defer rd.mu.Unlock()
		return rd.err
	}
	ch := make(chan struct{})
	rd.running = ch
	rd.mu.Unlock()

	err := s.runReady()
	rd.mu.Lock()
	now := time.Now()
	rd.at, rd.err, rd.running = now, err, nil
	if err != nil {
		rd.outage.Failed(now, slog.LevelWarn, "idforge serve: not ready", err)
	} else {
		rd.outage.Recovered(now)
	}
	rd.mu.Unlock()
	close(ch)
	return err
}

// runReady calls Settings.Ready on a context of its own, so that a probe that
// hangs up does not make the cached answer a failure; a panic is a failure.
func (s *Server) runReady() (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("readiness check panicked: %v", v)
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	return s.cfg.Ready(ctx)
}

// detailed reports whether r may see details: a server with tokens shows
// them to token holders; one without shows them to nobody, since anyone
// who can connect is anonymous there.
func (s *Server) detailed(r *http.Request) bool {
	t := s.tokens.Load()
	return t != nil && t.lookup(r) != nil
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	body := map[string]any{"status": "ok"}
	if s.detailed(r) {
		body["uptime_seconds"] = int64(time.Since(s.started).Seconds())
	}
	writeJSON(w, http.StatusOK, body)
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	err, detailed := s.check(), s.detailed(r)
	switch {
	case err != nil && detailed:
		writeError(w, http.StatusServiceUnavailable, "not_ready", notReady(err))
	case err != nil:
		writeError(w, http.StatusServiceUnavailable, "not_ready", "not ready")
	case detailed:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "machine_id": s.machineID()})
	default:
		writeJSON(w, http.StatusOK, map[string]any{"status": "ready"})
	}
}

// notReady says why the server is not ready, to a token holder: the part
// that failed (the text before the error's first colon, as "lease" or
// "store", when it is one word) and the engine's reason. The error's own
// words may name the store's address, and go to the log.
func notReady(err error) string {
	what := "not ready"
	if part, _, ok := strings.Cut(err.Error(), ":"); ok && part != "" && len(part) <= 16 && strings.Trim(part, "abcdefghijklmnopqrstuvwxyz") == "" {
		what += ": " + part
	}
	return what + ": " + reason.Of(err) + " (the server's log has the details)"
}
