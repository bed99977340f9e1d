package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/internal/wire"
)

// maxProxyBody bounds a proxy request's body.
const maxProxyBody = 4 << 10

func (s *Server) proxyRoutes() {
	s.mux.HandleFunc("POST /v1/proxy/machines/distribute", s.handleDistribute)
	s.mux.HandleFunc("POST /v1/proxy/machines/guard", s.handleGuard)
	s.mux.HandleFunc("POST /v1/proxy/machines/revert", s.handleRevert)
	s.mux.HandleFunc("POST /v1/proxy/segments/next", s.handleSegment)
}

// readBody decodes a JSON body of at most maxProxyBody bytes, refusing
// unknown fields and trailing data.
func readBody(w http.ResponseWriter, r *http.Request, v any) *httpError {
	if rp, ok := w.(*reply); ok {
		w = rp.ResponseWriter // whose Connection: close a body too large sets
	}
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxProxyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return refusal(http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body may hold %d bytes", maxProxyBody))
		}
		// The decoder's message may quote a field name: only a short one.
		if msg := err.Error(); len(msg) <= 2*maxEcho {
			return badRequest("bad_body", "body: %s", msg)
		}
		return badRequest("bad_body", "body: not the request object expected")
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("bad_body", "body: one JSON object expected")
	}
	return nil
}

// instanceOf is the instance a machine request names.
func instanceOf(m *wire.MachineRequest) machine.Instance {
	return machine.Instance{Namespace: m.Namespace, ID: m.Instance, Stable: m.Stable}
}

// stateOf is the machine state a machine request names.
func stateOf(m *wire.MachineRequest) machine.State {
	return machine.State{MachineID: m.MachineID, LastTimestamp: m.LastTimestamp}
}

func keyOf(m *wire.MachineRequest) leaseKey { return leaseKey{m.Namespace, m.Instance} }

// proxyError maps a store error to a status and a code proxystore reads
// back: the error's reason (internal/reason), timeout for a canceled or
// expired call, store_unavailable for what proxystore has no sentinel of.
// The message is the server's, naming what the request named: the store's
// own words may name its address and key prefix, and go to the log.
func proxyError(err error, req *wire.MachineRequest, segment string) *httpError {
	e := &httpError{status: http.StatusServiceUnavailable, code: reason.Of(err), detail: err.Error()}
	switch e.code {
	case reason.InvalidConfig:
		e.status, e.message = http.StatusBadRequest, "the store refused the request as invalid; the server's log has the details"
	case reason.InstanceInUse:
		e.status, e.message = http.StatusConflict, inUse(keyOf(req))
	case reason.MachineIDLost:
		e.status, e.message = http.StatusConflict, fmt.Sprintf("machine ID %d of instance %q in namespace %q is no longer held by this lease "+
			"(lost, given back or taken over): acquire a new one", req.MachineID, req.Instance, req.Namespace)
	case reason.MachineIDOverflow:
		e.status, e.message = http.StatusConflict, fmt.Sprintf("namespace %q: every machine ID of %d bits is taken", req.Namespace, req.MachineBits)
	case reason.NoFloor:
		e.status, e.message = http.StatusConflict, publicMessage(e.code, segment)
	case reason.StoreReset:
		e.message = publicMessage(e.code, "")
	case reason.Canceled, reason.Deadline:
		e.code, e.message = wire.CodeTimeout, publicMessage(e.code, "")
	default:
		e.code, e.message = wire.CodeStoreUnavailable, publicMessage(reason.StoreUnavailable, "")
	}
	return e
}

// inUse is the refusal of a claim of instance k while another process
// holds it live.
func inUse(k leaseKey) string {
	return fmt.Sprintf("instance %q of namespace %q is held by a live lease of another process; "+
		"two processes with one instance ID would issue the same IDs: give each its own", k.instance, k.namespace)
}

// proxyContext bounds a store call: the caller's request, at most 10 s.
func proxyContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

// machineRequest reads a MachineRequest and checks what every machine call
// must: names in the grammar, a namespace the caller may use, not the
// server's own instance.
func (s *Server) machineRequest(w http.ResponseWriter, r *http.Request, c *caller, req *wire.MachineRequest) *httpError {
	if herr := readBody(w, r, req); herr != nil {
		return herr
	}
	switch {
	case !validName(req.Namespace):
		return badRequest(wire.CodeInvalidConfig, "namespace %s: %s", quoteBounded(req.Namespace), nameRule)
	case !validName(req.Instance):
		return badRequest(wire.CodeInvalidConfig, "instance %s: %s", quoteBounded(req.Instance), nameRule)
	case !c.namespaces.allows(req.Namespace):
		return refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this token may not use namespace %q (see namespaces= in the tokens file)", req.Namespace))
	case req.Namespace == s.cfg.Instance.Namespace && req.Instance == s.cfg.Instance.ID:
		return refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("instance %q of namespace %q is this server's own", req.Instance, req.Namespace))
	}
	return nil
}

// checkTimestamp refuses a last timestamp that the next holder of the
// machine ID could not wait out: negative, or further ahead of this
// server's clock than MaxTimestampAhead.
func (s *Server) checkTimestamp(ts int64, now time.Time) *httpError {
	if limit := now.Add(s.cfg.maxTimestampAhead).UnixMilli(); ts < 0 || ts > limit {
		return badRequest(wire.CodeInvalidConfig, "last_timestamp %d: want a Unix millisecond time from 0 to %d, this server's clock plus %v",
			ts, limit, s.cfg.maxTimestampAhead)
	}
	return nil
}

func (s *Server) handleDistribute(w http.ResponseWriter, r *http.Request) {
	c := callerOf(w)
	var req wire.MachineRequest
	id, herr := s.distribute(w, r, c, &req)
	if herr != nil {
		herr.write(w)
		return
	}
	s.auditLease("distribute", c, &req, id)
}

func (s *Server) distribute(w http.ResponseWriter, r *http.Request, c *caller, req *wire.MachineRequest) (int64, *httpError) {
	if herr := s.machineRequest(w, r, c, req); herr != nil {
		return -1, herr
	}
	if req.SafeGuardMillis <= 0 || req.SafeGuardMillis > math.MaxInt64/int64(time.Millisecond) {
		return -1, badRequest(wire.CodeInvalidConfig, "safe_guard_ms %d: want a positive duration in milliseconds", req.SafeGuardMillis)
	}
	safeGuard := time.Duration(req.SafeGuardMillis) * time.Millisecond
	// The reclaim cut-off is the server's, not the claimant's: every
	// Distribute goes to the store with the server's safe-guard, so no
	// claimant can take an ID whose holder was silent for less. A holder
	// that would trust itself longer than that could issue beside the
	// next holder of its ID: refused.
	if safeGuard > s.cfg.safeGuard {
		return -1, badRequest(wire.CodeInvalidConfig, "safe_guard_ms %d: this server lets another process reclaim a silent machine ID after %v; "+
			"a lease that trusts itself longer could issue beside the next holder: set its SafeGuard to at most %v", req.SafeGuardMillis, s.cfg.safeGuard, s.cfg.safeGuard)
	}
	// leased.Acquire refuses a lease that may issue alone for as long as
	// the store's reset grace: past it, the holder has stopped.
	alone := s.cfg.Proxy.Terms().ResetGrace
	if alone <= 0 {
		alone = safeGuard
	}
	quota := s.cfg.maxMachinesPerToken
	if c.machines > 0 {
		quota = c.machines
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	s.leases.refresh(ctx, s.cfg.Admin, s.countedNamespaces(c, req.Namespace), time.Now())
	cl, herr := s.leases.claim(c, quota, keyOf(req), req.Lease, req.Stable, alone, s.cfg.safeGuard, s.ownKey(), time.Now())
	if herr != nil {
		return -1, herr
	}
	// Settled before the answer goes out (the holder's first guard may
	// follow at once), and on a panic too: a claim left at the store
	// would refuse the instance for good.
	settled := false
	defer func() {
		if !settled {
			s.leases.settle(cl, machine.State{}, errors.New("the store call did not return"), time.Now())
		}
	}()
	st, err := s.cfg.Proxy.Distribute(ctx, instanceOf(req), req.MachineBits, s.cfg.safeGuard)
	s.leases.settle(cl, st, err, time.Now())
	settled = true
	if err != nil {
		return -1, proxyError(err, req, "")
	}
	terms := s.cfg.Proxy.Terms()
	writeJSON(w, http.StatusOK, wire.MachineState{MachineID: st.MachineID, LastTimestamp: st.LastTimestamp,
		ResetGraceMillis: terms.ResetGrace.Milliseconds(), RideThroughMillis: terms.RideThrough.Milliseconds(),
		Lease: cl.secret})
	return st.MachineID, nil
}

// ownKey is the server's own instance, which is nobody's quota.
func (s *Server) ownKey() leaseKey { return leaseKey{s.cfg.Instance.Namespace, s.cfg.Instance.ID} }

// countedNamespaces are the namespaces whose stable machine IDs count
// against caller c's quota: those its line names, and ns, where it claims
// one now (a caller of any namespace names none).
func (s *Server) countedNamespaces(c *caller, ns string) []string {
	list := []string{ns}
	for n := range c.namespaces.names {
		if n != ns {
			list = append(list, n)
		}
	}
	return list
}

func (s *Server) handleGuard(w http.ResponseWriter, r *http.Request) {
	s.leaseCall(w, r, "guard", s.cfg.Proxy.Guard)
}

func (s *Server) handleRevert(w http.ResponseWriter, r *http.Request) {
	s.leaseCall(w, r, "revert", s.cfg.Proxy.Revert)
}

// leaseCall runs a guard or revert of a lease the caller holds on the
// store, within the proxy's time bound.
func (s *Server) leaseCall(w http.ResponseWriter, r *http.Request, action string, call func(context.Context, machine.Instance, machine.State) error) {
	c := callerOf(w)
	var req wire.MachineRequest
	herr := s.machineRequest(w, r, c, &req)
	if herr == nil {
		herr = s.checkTimestamp(req.LastTimestamp, time.Now())
	}
	var (
		e      *lease
		holder machine.Holder
	)
	if herr == nil {
		e, holder, herr = s.leases.hold(c, keyOf(&req), req.MachineID, req.Lease)
	}
	if herr == nil {
		ctx, cancel := proxyContext(r)
		st := stateOf(&req)
		st.Holder = holder // the store's proof of the holding, kept here
		err := call(ctx, instanceOf(&req), st)
		cancel()
		s.leases.done(keyOf(&req), e, action == "revert", err, time.Now())
		if err != nil {
			herr = proxyError(err, &req, "")
		}
	}
	if herr != nil {
		herr.write(w)
		return
	}
	s.auditLease(action, c, &req, req.MachineID)
	writeJSON(w, http.StatusOK, struct{}{})
}

// auditLease writes the audit line of a lease action that succeeded: who
// (the token's name; empty on a server without tokens), which instance,
// which machine ID. A guard is a heartbeat, several a second per holder:
// it is logged at debug level only. Refused actions are counted and summed
// up in the log once per interval (see ledger).
func (s *Server) auditLease(action string, c *caller, req *wire.MachineRequest, id int64) {
	level := slog.LevelInfo
	if action == "guard" {
		level = slog.LevelDebug
	}
	s.ledger.audit(c.name, level, "idforge serve: proxy lease", "action", action, "token", c.name, "namespace", boundedAttr(req.Namespace),
		"instance", boundedAttr(req.Instance), "stable", req.Stable, "machine_id", id, "result", "ok")
}

// boundedAttr keeps a refused, overlong name from filling a log line.
func boundedAttr(v string) string {
	if len(v) > 2*maxEcho {
		return v[:2*maxEcho] + "..."
	}
	return v
}

func (s *Server) handleSegment(w http.ResponseWriter, r *http.Request) {
	c := callerOf(w)
	var req wire.SegmentRequest
	max, herr := s.segment(w, r, c, &req)
	if herr != nil {
		herr.write(w)
		return
	}
	level, msg := slog.LevelInfo, "idforge serve: proxy segment"
	if near(max, math.MaxInt64) {
		level, msg = slog.LevelWarn, "idforge serve: sequence near its capacity"
	}
	s.ledger.audit(c.name, level, msg, "token", c.name, "name", req.Name, "step", req.Step, "max_id", max, "result", "ok")
	writeJSON(w, http.StatusOK, wire.SegmentRange{MaxID: max})
}

// segment fetches a range of a sequence for caller c. The step is bounded
// by maxStep (10^8): every sequence a caller may fetch holds the int64
// range, since the sequences with a smaller capacity, the periods of dated
// chains, are nobody's to fetch (see derived).
func (s *Server) segment(w http.ResponseWriter, r *http.Request, c *caller, req *wire.SegmentRequest) (int64, *httpError) {
	if herr := readBody(w, r, req); herr != nil {
		return 0, herr
	}
	switch {
	case !validName(req.Name):
		return 0, badRequest(wire.CodeInvalidConfig, "segment name %s: %s", quoteBounded(req.Name), nameRule)
	case derived(req.Name):
		return 0, refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("segment %q: %s", req.Name, reservedRule))
	case !c.segments.allows(req.Name):
		return 0, refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this token may not use segment %q (see segments= in the tokens file)", req.Name))
	case req.Step <= 0 || req.Step > s.cfg.maxStep:
		return 0, badRequest(wire.CodeInvalidConfig, "step %d: want 1 to %d", req.Step, s.cfg.maxStep)
	}
	if herr := s.admit(c, req.Name); herr != nil {
		return 0, herr
	}
	d, err := s.cfg.Proxy.Segment(req.Name)
	if err != nil {
		return 0, proxyError(err, &wire.MachineRequest{}, req.Name)
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	max, err := d.NextMaxID(ctx, req.Step)
	if err != nil {
		return 0, proxyError(err, &wire.MachineRequest{}, req.Name)
	}
	return max, nil
}
