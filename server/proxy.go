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

// callerKey carries the proxy request's *caller in its context.
type callerKey struct{}

func callerOf(r *http.Request) *caller { return r.Context().Value(callerKey{}).(*caller) }

// readBody decodes a JSON body of at most maxProxyBody bytes, refusing
// unknown fields and trailing data.
func readBody(w http.ResponseWriter, r *http.Request, v any) *httpError {
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxProxyBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return &httpError{http.StatusRequestEntityTooLarge, "too_large", fmt.Sprintf("the body may hold %d bytes", maxProxyBody)}
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
func proxyError(err error) *httpError {
	switch r := reason.Of(err); r {
	case reason.InvalidConfig:
		return &httpError{http.StatusBadRequest, r, err.Error()}
	case reason.InstanceInUse, reason.NoFloor, reason.MachineIDLost, reason.MachineIDOverflow:
		return &httpError{http.StatusConflict, r, err.Error()}
	case reason.StoreReset:
		return &httpError{http.StatusServiceUnavailable, r, err.Error()}
	case reason.Canceled, reason.Deadline:
		return &httpError{http.StatusServiceUnavailable, wire.CodeTimeout, err.Error()}
	default:
		return &httpError{http.StatusServiceUnavailable, wire.CodeStoreUnavailable, err.Error()}
	}
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
		return &httpError{http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this token may not use namespace %q (see namespaces= in the tokens file)", req.Namespace)}
	case req.Namespace == s.cfg.Instance.Namespace && req.Instance == s.cfg.Instance.ID:
		return &httpError{http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("instance %q of namespace %q is this server's own", req.Instance, req.Namespace)}
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
	c := callerOf(r)
	var req wire.MachineRequest
	id, herr := s.distribute(w, r, c, &req)
	s.audit("distribute", c, &req, id, herr)
	if herr != nil {
		herr.write(w)
	}
}

func (s *Server) distribute(w http.ResponseWriter, r *http.Request, c *caller, req *wire.MachineRequest) (int64, *httpError) {
	if herr := s.machineRequest(w, r, c, req); herr != nil {
		return -1, herr
	}
	if req.SafeGuardMillis <= 0 || req.SafeGuardMillis > math.MaxInt64/int64(time.Millisecond) {
		return -1, badRequest(wire.CodeInvalidConfig, "safe_guard_ms %d: want a positive duration in milliseconds", req.SafeGuardMillis)
	}
	safeGuard := time.Duration(req.SafeGuardMillis) * time.Millisecond
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
	cl, herr := s.leases.claim(c, quota, keyOf(req), req.Lease, req.Stable, alone, safeGuard, time.Now())
	if herr != nil {
		return -1, herr
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	st, err := s.cfg.Proxy.Distribute(ctx, instanceOf(req), req.MachineBits, safeGuard)
	s.leases.settle(cl, st, err, time.Now())
	if err != nil {
		return -1, proxyError(err)
	}
	terms := s.cfg.Proxy.Terms()
	writeJSON(w, http.StatusOK, wire.MachineState{MachineID: st.MachineID, LastTimestamp: st.LastTimestamp,
		ResetGraceMillis: terms.ResetGrace.Milliseconds(), RideThroughMillis: terms.RideThrough.Milliseconds(),
		Lease: cl.secret})
	return st.MachineID, nil
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
	c := callerOf(r)
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
			herr = proxyError(err)
		}
	}
	s.audit(action, c, &req, req.MachineID, herr)
	if herr != nil {
		herr.write(w)
		return
	}
	writeJSON(w, http.StatusOK, struct{}{})
}

// audit logs one line per lease action: who (the token's name; empty on a
// server without tokens), which instance, which machine ID, and the
// outcome. A guard that succeeds is a heartbeat, several a second per
// holder: it is logged at debug level only.
func (s *Server) audit(action string, c *caller, req *wire.MachineRequest, id int64, herr *httpError) {
	level, result := slog.LevelInfo, "ok"
	switch {
	case herr != nil:
		level, result = slog.LevelWarn, herr.code
	case action == "guard":
		level = slog.LevelDebug
	}
	s.log.Log(context.Background(), level, "idforge serve: proxy lease", "action", action, "token", c.name,
		"namespace", boundedAttr(req.Namespace), "instance", boundedAttr(req.Instance), "stable", req.Stable, "machine_id", id, "result", result)
}

// boundedAttr keeps a refused, overlong name from filling a log line.
func boundedAttr(v string) string {
	if len(v) > 2*maxEcho {
		return v[:2*maxEcho] + "..."
	}
	return v
}

func (s *Server) handleSegment(w http.ResponseWriter, r *http.Request) {
	c := callerOf(r)
	var req wire.SegmentRequest
	max, herr := s.segment(w, r, c, &req)
	level, result := slog.LevelInfo, "ok"
	if herr != nil {
		level, result = slog.LevelWarn, herr.code
	}
	s.log.Log(context.Background(), level, "idforge serve: proxy segment", "token", c.name, "name", boundedAttr(req.Name),
		"step", req.Step, "max_id", max, "result", result)
	if herr != nil {
		herr.write(w)
		return
	}
	writeJSON(w, http.StatusOK, wire.SegmentRange{MaxID: max})
}

func (s *Server) segment(w http.ResponseWriter, r *http.Request, c *caller, req *wire.SegmentRequest) (int64, *httpError) {
	if herr := readBody(w, r, req); herr != nil {
		return 0, herr
	}
	switch {
	case !validName(req.Name):
		return 0, badRequest(wire.CodeInvalidConfig, "segment name %s: %s", quoteBounded(req.Name), nameRule)
	case !c.segments.allows(req.Name):
		return 0, &httpError{http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("this token may not use segment %q (see segments= in the tokens file)", req.Name)}
	case req.Step <= 0 || req.Step > s.cfg.maxStep:
		return 0, badRequest(wire.CodeInvalidConfig, "step %d: want 1 to %d", req.Step, s.cfg.maxStep)
	}
	if herr := s.admit(req.Name); herr != nil {
		return 0, herr
	}
	d, err := s.cfg.Proxy.Segment(req.Name)
	if err != nil {
		return 0, proxyError(err)
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	max, err := d.NextMaxID(ctx, req.Step)
	if err != nil {
		return 0, proxyError(err)
	}
	return max, nil
}
