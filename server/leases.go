package server

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/wire"
)

// leases are the machine-ID leases handed out through the proxy, by
// instance: who holds each (the token's caller and a secret only the
// holder was told), so that no other caller can guard or revert it or
// claim its instance while it lives, and how many each caller holds.
//
// They live in the server's memory: after a restart the server knows no
// lease, refuses the holders' guards as lost, and their leases end (package
// leased then takes a new one); a holder that never comes back frees its
// instance once its lease could no longer issue.
type leases struct {
	mu    sync.Mutex
	m     map[leaseKey]*lease
	count map[string]int // entries of m per caller name
	swept time.Time
}

type leaseKey struct{ namespace, instance string }

type lease struct {
	caller string
	secret [sha256.Size]byte // of the secret: the plain one is the holder's only
	stable bool
	// machineID is the ID the store handed out, seen when it last did so
	// or confirmed a guard, holder the store's secret of the holding
	// (which never leaves the server); unset while pending.
	machineID int64
	seen      time.Time
	holder    machine.Holder
	// alone is how long the holder may go on issuing without a word from
	// the server, safeGuard how long the store keeps an unstable
	// instance's silent ID from others.
	alone, safeGuard time.Duration
	pending          bool // a Distribute for it is at the store
	busy             int  // guards and reverts at the store
	released         bool // reverted: a stable instance's ID stays its own in the store
}

// live reports whether the holder may still be issuing under its ID, or a
// call of its is at the store: no one else may claim the instance then.
func (e *lease) live(now time.Time) bool {
	return e.pending || e.busy > 0 || (!e.released && now.Before(e.seen.Add(e.alone)))
}

func (e *lease) matches(secret string) bool {
	h := sha256.Sum256([]byte(secret))
	return secret != "" && subtle.ConstantTimeCompare(h[:], e.secret[:]) == 1
}

func (l *leases) init() {
	l.m = map[leaseKey]*lease{}
	l.count = map[string]int{}
}

// put makes e the entry of k (nil: none), keeping the counts.
func (l *leases) put(k leaseKey, e *lease) {
	if old := l.m[k]; old != nil {
		l.count[old.caller]--
		delete(l.m, k)
	}
	if e != nil {
		l.m[k] = e
		l.count[e.caller]++
	}
}

// sweep forgets, at most once a second, unstable leases silent for their
// safe-guard: the store may give their IDs to others, and they no longer
// count against their caller's quota. Stable ones stay: the store keeps
// their IDs for them.
func (l *leases) sweep(now time.Time) {
	if now.Sub(l.swept) < time.Second {
		return
	}
	l.swept = now
	for k, e := range l.m {
		if !e.stable && !e.live(now) && now.After(e.seen.Add(e.safeGuard)) {
			l.put(k, nil)
		}
	}
}

// claim is a Distribute in progress.
type claim struct {
	key        leaseKey
	next, prev *lease
	secret     string // to hand to the holder
}

// claim registers caller c's Distribute of the instance k before it goes
// to the store. A live lease of k held through another token is refused,
// and so is a caller at its quota of machine IDs. The holder asking again
// with its secret keeps it.
func (l *leases) claim(c *caller, quota int, k leaseKey, secret string, stable bool, alone, safeGuard time.Duration, now time.Time) (*claim, *httpError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	cur := l.m[k]
	holder := cur != nil && cur.caller == c.name && cur.matches(secret)
	// Within one token the store judges a second claimant (it refuses one
	// of a stable instance held live, and lets an unstable one take its ID
	// over); a live lease of another token's is refused here.
	if cur != nil && cur.live(now) && (cur.pending || cur.caller != c.name) {
		return nil, &httpError{http.StatusConflict, wire.CodeInstanceInUse, fmt.Sprintf(
			"instance %q of namespace %q is held by a live lease of another process (machine ID %d); "+
				"two processes with one instance ID would issue the same IDs: give each its own", k.instance, k.namespace, cur.machineID)}
	}
	if (cur == nil || cur.caller != c.name) && l.count[c.name] >= quota {
		return nil, &httpError{http.StatusTooManyRequests, wire.CodeQuota, fmt.Sprintf(
			"this token holds %d machine IDs through the proxy, its quota", quota)}
	}
	cl := &claim{key: k, prev: cur, secret: secret}
	cl.next = &lease{caller: c.name, stable: stable, alone: alone, safeGuard: safeGuard, pending: true, machineID: -1}
	if holder {
		cl.next.secret = cur.secret
	} else {
		var b [32]byte
		rand.Read(b[:])
		cl.secret = base64.RawURLEncoding.EncodeToString(b[:])
		cl.next.secret = sha256.Sum256([]byte(cl.secret))
	}
	l.put(k, cl.next)
	return cl, nil
}

// settle ends a claim with the store's answer: the lease holds the machine
// ID, or, if the store refused, the instance's entry is as it was.
func (l *leases) settle(cl *claim, st machine.State, err error, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err != nil {
		l.put(cl.key, cl.prev)
		return
	}
	cl.next.machineID, cl.next.holder, cl.next.seen, cl.next.pending = st.MachineID, st.Holder, now, false
}

// hold returns the lease of instance k if caller c holds machine ID id
// under it with secret, with the store's holder secret, and marks a call
// of it at the store; done must follow. Anything else is refused as a lost
// machine ID, which is what it is to the caller: it does not hold that
// lease.
func (l *leases) hold(c *caller, k leaseKey, id int64, secret string) (*lease, machine.Holder, *httpError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[k]
	if e == nil || e.pending || e.released || e.caller != c.name || e.machineID != id || !e.matches(secret) {
		found := "none"
		if e != nil {
			found = hex.EncodeToString(e.secret[:4]) // machine.Holder's fingerprint
		}
		return nil, "", &httpError{http.StatusConflict, wire.CodeMachineIDLost, fmt.Sprintf(
			"machine ID %d of instance %q in namespace %q is not held by this caller's lease but by holder %s (lost, given back, taken over, "+
				"or handed out by a server that has restarted since): acquire a new one", id, k.instance, k.namespace, found)}
	}
	e.busy++
	return e, e.holder, nil
}

// done ends a guard (revert false) or revert of e held with hold, which the
// store answered with err. A guard that succeeds confirms the lease; a
// revert that succeeds ends it (a stable instance's entry stays, to count
// against the quota); a lost machine ID ends it.
func (l *leases) done(k leaseKey, e *lease, revert bool, err error, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e.busy--
	if l.m[k] != e {
		return
	}
	switch {
	case errors.Is(err, engine.ErrMachineIDLost), err == nil && revert && !e.stable:
		l.put(k, nil)
	case err == nil && revert:
		e.released = true
	case err == nil:
		e.seen = now
	}
}
