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
	conns map[net.Conn]*connInfo
	// anon are the connections in the order they were accepted, to find
	// the oldest that has not presented a valid token yet; it holds some
	// that have, or that closed, until they reach its front or it is
	// compacted.
	anon []*connInfo
	open int
}

// callerLimits are one caller's counts.
type callerLimits struct {
	inFlight atomic.Int64
	conns    int // connections its requests arrived on last; under limits.mu
}

// connInfo is one connection: the caller its last request came from.
type connInfo struct {
	conn   net.Conn
	caller atomic.Pointer[callerLimits] // stored under limits.mu
	closed bool                         // under limits.mu
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
			return nil, refusal(http.StatusTooManyRequests, "busy", fmt.Sprintf("this token has %d connections open, its limit; reuse them", maxConns))
		}
		if !ci.closed { // else connState forgot it already: count it no more
			if old := ci.caller.Load(); old != nil {
				old.conns--
			}
			ci.caller.Store(cl)
			cl.conns++
		}
		l.mu.Unlock()
	}
	if cl.inFlight.Add(1) > int64(maxInFlight) {
		cl.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		return nil, refusal(http.StatusTooManyRequests, "busy", fmt.Sprintf("this token has %d requests in flight, its limit; retry", maxInFlight))
	}
	return cl, nil
}

// connContext is the http.Server's ConnContext: it records the connection.
func (l *limits) connContext(ctx context.Context, c net.Conn) context.Context {
	ci := &connInfo{conn: c}
	l.mu.Lock()
	l.conns[c] = ci
	l.mu.Unlock()
	return context.WithValue(ctx, connKey{}, ci)
}

// connState is the http.Server's ConnState. Past max open connections, a
// new one closes the oldest that has presented no valid token (a slow or
// idle anonymous one), or itself if there is none: connections that hold
// out sending their headers cannot keep a probe or a token holder out.
func (l *limits) connState(c net.Conn, st http.ConnState, max int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	ci := l.conns[c]
	if ci == nil {
		return
	}
	switch st {
	case http.StateNew:
		l.open++
		l.anon = append(l.anon, ci)
		if l.open > max {
			victim := l.oldestAnonymous()
			if victim == nil {
				victim = ci
			}
			l.forget(victim)
			victim.conn.Close() // net/http reports it closed: forgotten already
		}
		if len(l.anon) > 2*l.open+64 {
			l.compact()
		}
	case http.StateClosed, http.StateHijacked:
		l.forget(ci)
	}
}

// oldestAnonymous takes the oldest open connection without a caller off
// anon, nil if none.
func (l *limits) oldestAnonymous() *connInfo {
	for len(l.anon) > 0 {
		ci := l.anon[0]
		l.anon[0] = nil
		l.anon = l.anon[1:]
		if !ci.closed && ci.caller.Load() == nil {
			return ci
		}
	}
	return nil
}

// compact drops closed and attributed connections from anon.
func (l *limits) compact() {
	kept := l.anon[:0]
	for _, ci := range l.anon {
		if !ci.closed && ci.caller.Load() == nil {
			kept = append(kept, ci)
		}
	}
	clear(l.anon[len(kept):])
	l.anon = kept
}

// forget stops counting a connection, once.
func (l *limits) forget(ci *connInfo) {
	if ci.closed {
		return
	}
	ci.closed = true
	l.open--
	if cl := ci.caller.Load(); cl != nil {
		cl.conns--
	}
	delete(l.conns, ci.conn)
}
