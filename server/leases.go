package server

import (
	"context"
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
// The leases live in the server's memory: after a restart the server knows
// no lease, refuses the holders' guards as lost, and their leases end
// (package leased then takes a new one); a holder that never comes back
// frees its instance once its lease could no longer issue. The quotas do
// not start afresh with them: stable instances keep their machine IDs in
// the store for good, so a caller's count includes the stable IDs the
// store holds in the namespaces it uses (see refresh).
type leases struct {
	mu       sync.Mutex
	m        map[leaseKey]*lease
	count    map[string]int      // entries of m per caller name
	claiming map[leaseKey]string // Distributes at the store, by instance: the caller's name
	pending  map[string]int      // claiming per caller name
	// stable are the stable instances that hold a machine ID in the store,
	// by namespace, as the store listed them (at most every rowsMaxAge)
	// and as the server has handed them out since; used are the namespaces
	// each caller has taken a machine ID in since the start, by its name.
	stable map[string]*stableRows
	used   map[string]map[string]bool
	swept  time.Time
}

// stableRows are the stable instances of a namespace in the store.
type stableRows struct {
	listed time.Time // zero until the store listed them
	ids    map[string]bool
}

// rowsMaxAge is how long a listing of a namespace's stable instances is
// reused: claims are few (one per process start), but a caller refused
// for its quota may retry at once.
const rowsMaxAge = 10 * time.Second

type leaseKey struct{ namespace, instance string }

type lease struct {
	caller string
	secret [sha256.Size]byte // of the secret: the plain one is the holder's only
	stable bool
	// machineID is the ID the store handed out, seen when it last did so
	// or confirmed a guard, holder the store's secret of the holding
	// (which never leaves the server).
	machineID int64
	seen      time.Time
	holder    machine.Holder
	// alone is how long the holder may go on issuing without a word from
	// the server, safeGuard how long the store keeps an unstable
	// instance's silent ID from others (the server's cut-off).
	alone, safeGuard time.Duration
	busy             int  // guards and reverts at the store
	released         bool // reverted: a stable instance's ID stays its own in the store
}

// live reports whether the holder may still be issuing under its ID, or a
// call of its is at the store: no one else may claim the instance then.
func (e *lease) live(now time.Time) bool {
	return e.busy > 0 || (!e.released && now.Before(e.seen.Add(e.alone)))
}

func (e *lease) matches(secret string) bool {
	h := sha256.Sum256([]byte(secret))
	return secret != "" && subtle.ConstantTimeCompare(h[:], e.secret[:]) == 1
}

func (l *leases) init() {
	l.m = map[leaseKey]*lease{}
	l.count = map[string]int{}
	l.claiming = map[leaseKey]string{}
	l.pending = map[string]int{}
	l.stable = map[string]*stableRows{}
	l.used = map[string]map[string]bool{}
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

// refresh reads from ad, when there is one, the stable instances holding
// a machine ID in each of namespaces whose last listing is older than
// rowsMaxAge. A store that fails to answer leaves the last listing as it
// was.
func (l *leases) refresh(ctx context.Context, ad machine.Admin, namespaces []string, now time.Time) {
	if ad == nil {
		return
	}
	for _, ns := range namespaces {
		l.mu.Lock()
		r := l.stable[ns]
		fresh := r != nil && now.Sub(r.listed) < rowsMaxAge
		l.mu.Unlock()
		if fresh {
			continue
		}
		rows, err := ad.Machines(ctx, ns)
		if err != nil {
			continue
		}
		ids := map[string]bool{}
		for _, a := range rows {
			if a.Instance.Stable && a.Instance.ID != "" {
				ids[a.Instance.ID] = true
			}
		}
		l.mu.Lock()
		l.stable[ns] = &stableRows{listed: now, ids: ids}
		l.mu.Unlock()
	}
}

// usage is how many machine IDs caller c holds for its quota: its leases,
// its claims at the store, and the stable instances the store holds in the
// namespaces it names or claimed in (whoever took them: the store does not
// know the token), but for own, the server's own instance. Under mu.
func (l *leases) usage(c *caller, own leaseKey) int {
	n := l.count[c.name] + l.pending[c.name]
	counted := func(ns string) {
		r := l.stable[ns]
		if r == nil {
			return
		}
		for id := range r.ids {
			k := leaseKey{ns, id}
			if e := l.m[k]; k == own || e != nil && e.caller == c.name || l.claiming[k] == c.name {
				continue // counted above, or nobody's
			}
			n++
		}
	}
	for ns := range c.namespaces.names {
		counted(ns)
	}
	for ns := range l.used[c.name] {
		if !c.namespaces.names[ns] {
			counted(ns)
		}
	}
	return n
}

// claim is a Distribute in progress.
type claim struct {
	key    leaseKey
	caller string
	next   *lease
	secret string // to hand to the holder
}

// claim registers caller c's Distribute of the instance k before it goes
// to the store. It changes nothing a holder's guards depend on: the
// instance's lease stays as it is until the store has answered (settle). A
// live lease of k is refused unless the claimant presents its secret (the
// holder asking again), and so is a claim while another is at the store:
// two processes given one instance ID (two pod-0s) would issue the same
// IDs. A caller at its quota of machine IDs is refused too, unless k is an
// instance already counted against it.
func (l *leases) claim(c *caller, quota int, k leaseKey, secret string, stable bool, alone, safeGuard time.Duration, own leaseKey, now time.Time) (*claim, *httpError) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.sweep(now)
	cur := l.m[k]
	holder := cur != nil && cur.caller == c.name && cur.matches(secret)
	if _, ok := l.claiming[k]; ok || cur != nil && cur.live(now) && !holder {
		return nil, refusal(http.StatusConflict, wire.CodeInstanceInUse, inUse(k))
	}
	counted := cur != nil && cur.caller == c.name
	if r := l.stable[k.namespace]; r != nil && r.ids[k.instance] {
		counted = true // a stable instance of the store: counted already
	}
	if !counted && l.usage(c, own) >= quota {
		return nil, refusal(http.StatusTooManyRequests, wire.CodeQuota, fmt.Sprintf(
			"this token holds %d machine IDs through the proxy, its quota (stable instances count for good: the store keeps their IDs)", quota))
	}
	// Every holding gets a new secret, even the holder's asking again: the
	// store's answer ends the previous holding, and its secret with it.
	var b [32]byte
	rand.Read(b[:])
	cl := &claim{key: k, caller: c.name, secret: base64.RawURLEncoding.EncodeToString(b[:])}
	cl.next = &lease{caller: c.name, stable: stable, alone: alone, safeGuard: safeGuard, machineID: -1, secret: sha256.Sum256([]byte(cl.secret))}
	l.claiming[k] = c.name
	l.pending[c.name]++
	return cl, nil
}

// settle ends a claim with the store's answer: the lease holds the machine
// ID; if the store refused, nothing changed.
func (l *leases) settle(cl *claim, st machine.State, err error, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.claiming, cl.key)
	l.pending[cl.caller]--
	if err != nil {
		return
	}
	cl.next.machineID, cl.next.holder, cl.next.seen = st.MachineID, st.Holder, now
	l.put(cl.key, cl.next)
	if l.used[cl.caller] == nil {
		l.used[cl.caller] = map[string]bool{}
	}
	l.used[cl.caller][cl.key.namespace] = true
	if cl.next.stable {
		r := l.stable[cl.key.namespace]
		if r == nil {
			r = &stableRows{ids: map[string]bool{}}
			l.stable[cl.key.namespace] = r
		}
		r.ids[cl.key.instance] = true
	}
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
	if e == nil || e.released || e.caller != c.name || e.machineID != id || !e.matches(secret) {
		found := "none"
		if e != nil {
			found = hex.EncodeToString(e.secret[:4]) // machine.Holder's fingerprint
		}
		return nil, "", refusal(http.StatusConflict, wire.CodeMachineIDLost, fmt.Sprintf(
			"machine ID %d of instance %q in namespace %q is not held by this caller's lease but by holder %s (lost, given back, taken over, "+
				"or handed out by a server that has restarted since): acquire a new one", id, k.instance, k.namespace, found))
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
