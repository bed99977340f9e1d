package server

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
)

// limits count the requests in flight per caller and the connections open,
// overall and per caller, so that one caller's flood stays its own.
type limits struct {
	callers sync.Map // caller name → *callerLimits; names outlive a token reload

	mu    sync.Mutex
	conns map[net.Conn]*connInfo // under mu
	open  atomic.Int64
}

// callerLimits are one caller's counts.
type callerLimits struct {
	inFlight atomic.Int64
	conns    int // connections its requests arrived on last; under limits.mu
}

// connInfo is one connection: the caller its last request came from.
type connInfo struct {
	caller atomic.Pointer[callerLimits] // stored under limits.mu
}

type connKey struct{}

func (l *limits) init() { l.conns = map[net.Conn]*connInfo{} }

func (l *limits) of(name string) *callerLimits {
	if cl, ok := l.callers.Load(name); ok {
		return cl.(*callerLimits)
	}
	cl, _ := l.callers.LoadOrStore(name, &callerLimits{})
	return cl.(*callerLimits)
}

// enter counts a request of caller name in flight, and its connection
// against the caller's connections if it was not yet. Over either limit it
// refuses; a connection over the limit is closed after the answer, so that
// a caller cannot keep more open by sending nothing more on them. The
// caller decrements the returned counts' inFlight when the request ends.
func (l *limits) enter(w http.ResponseWriter, r *http.Request, name string, maxInFlight, maxConns int) (*callerLimits, *httpError) {
	cl := l.of(name)
	if ci, _ := r.Context().Value(connKey{}).(*connInfo); ci != nil && ci.caller.Load() != cl {
		l.mu.Lock()
		if cl.conns >= maxConns {
			l.mu.Unlock()
			w.Header().Set("Connection", "close")
			w.Header().Set("Retry-After", "1")
			return nil, &httpError{http.StatusTooManyRequests, "busy", fmt.Sprintf("this token has %d connections open, its limit; reuse them", maxConns)}
		}
		if old := ci.caller.Load(); old != nil {
			old.conns--
		}
		ci.caller.Store(cl)
		cl.conns++
		l.mu.Unlock()
	}
	if cl.inFlight.Add(1) > int64(maxInFlight) {
		cl.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		return nil, &httpError{http.StatusTooManyRequests, "busy", fmt.Sprintf("this token has %d requests in flight, its limit; retry", maxInFlight)}
	}
	return cl, nil
}

// connContext is the http.Server's ConnContext: it records the connection.
func (l *limits) connContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{}
	l.mu.Lock()
	l.conns[c] = ci
	l.mu.Unlock()
	return context.WithValue(ctx, connKey{}, ci)
}

// connState is the http.Server's ConnState: it closes a connection past
// max at once (net/http then reports it closed), and forgets closed ones.
func (l *limits) connState(c net.Conn, st http.ConnState, max int) {
	switch st {
	case http.StateNew:
		if l.open.Add(1) > int64(max) {
			c.Close()
		}
	case http.StateClosed, http.StateHijacked:
		l.open.Add(-1)
		l.mu.Lock()
		if ci := l.conns[c]; ci != nil {
			if cl := ci.caller.Load(); cl != nil {
				cl.conns--
			}
			delete(l.conns, c)
		}
		l.mu.Unlock()
	}
}
