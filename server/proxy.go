package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// ProxyStore is the store the /v1/proxy endpoints serve: the root store
// contract, machine IDs and named segment sequences.
type ProxyStore interface {
	machine.Distributor
	Segment(name string, floors ...engine.Floor) (segment.Distributor, error)
}

// maxProxyBody bounds a proxy request's body.
const maxProxyBody = 4 << 10

// MachineRequest is the body of the /v1/proxy/machines/* calls. Distribute
// reads MachineBits and SafeGuardMillis; Guard and Revert read MachineID,
// LastTimestamp and Holder, the secret Distribute answered, which the store
// checks as the proof that the caller holds the machine ID.
type MachineRequest struct {
	Namespace       string `json:"namespace"`
	Instance        string `json:"instance"`
	Stable          bool   `json:"stable,omitempty"`
	MachineBits     int    `json:"machine_bits,omitempty"`
	SafeGuardMillis int64  `json:"safe_guard_ms,omitempty"`
	MachineID       int64  `json:"machine_id,omitempty"`
	LastTimestamp   int64  `json:"last_timestamp,omitempty"`
	Holder          string `json:"holder,omitempty"`
}

// MachineState is the answer of /v1/proxy/machines/distribute.
// Holder is the holding's secret (machine.State.Holder).
// ResetGraceMillis is the store's reset grace (machine.ResetGraceOf), so a
// client's machine.Acquire can check its lease against it.
type MachineState struct {
	MachineID        int64  `json:"machine_id"`
	LastTimestamp    int64  `json:"last_timestamp"`
	Holder           string `json:"holder"`
	ResetGraceMillis int64  `json:"reset_grace_ms,omitempty"`
}

// SegmentRequest is the body of /v1/proxy/segments/next.
type SegmentRequest struct {
	Name string `json:"name"`
	Step int64  `json:"step"`
}

// SegmentRange is the answer of /v1/proxy/segments/next: the caller owns
// (MaxID-step, MaxID].
type SegmentRange struct {
	MaxID int64 `json:"max_id"`
}

// Error codes of the proxy endpoints, which package proxystore maps back to
// the engine's sentinel errors.
const (
	CodeInvalidConfig     = "invalid_config"
	CodeMachineIDLost     = "machine_id_lost"
	CodeMachineIDOverflow = "machine_id_overflow"
	CodeInstanceInUse     = "instance_in_use"
	CodeStoreUnavailable  = "store_unavailable"
	CodeStoreReset        = "store_reset"
	CodeTimeout           = "timeout"
)

func (s *Server) proxyRoutes() {
	s.mux.HandleFunc("POST /v1/proxy/machines/distribute", s.handleDistribute)
	s.mux.HandleFunc("POST /v1/proxy/machines/guard", s.handleGuard)
	s.mux.HandleFunc("POST /v1/proxy/machines/revert", s.handleRevert)
	s.mux.HandleFunc("POST /v1/proxy/segments/next", s.handleSegment)
}

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
		return badRequest("bad_body", "body: %v", truncate(err.Error(), 200))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("bad_body", "body: one JSON object expected")
	}
	return nil
}

func (m MachineRequest) instance() machine.Instance {
	return machine.Instance{Namespace: m.Namespace, ID: m.Instance, Stable: m.Stable}
}

// state is the machine state the request names.
func (m MachineRequest) state() machine.State {
	return machine.State{MachineID: m.MachineID, LastTimestamp: m.LastTimestamp, Holder: machine.Holder(m.Holder)}
}

// proxyError maps a store error to a status and a code proxystore reads back.
func proxyError(err error) *httpError {
	switch {
	case errors.Is(err, engine.ErrInvalidConfig):
		return &httpError{http.StatusBadRequest, CodeInvalidConfig, err.Error()}
	case errors.Is(err, engine.ErrMachineIDLost):
		return &httpError{http.StatusConflict, CodeMachineIDLost, err.Error()}
	case errors.Is(err, engine.ErrMachineIDOverflow):
		return &httpError{http.StatusConflict, CodeMachineIDOverflow, err.Error()}
	case errors.Is(err, engine.ErrInstanceInUse):
		return &httpError{http.StatusConflict, CodeInstanceInUse, err.Error()}
	case errors.Is(err, engine.ErrStoreReset):
		return &httpError{http.StatusServiceUnavailable, CodeStoreReset, err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{http.StatusServiceUnavailable, CodeTimeout, err.Error()}
	default:
		return &httpError{http.StatusServiceUnavailable, CodeStoreUnavailable, err.Error()}
	}
}

// proxyContext bounds a store call: the caller's request, at most 10 s.
func proxyContext(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), 10*time.Second)
}

func (s *Server) handleDistribute(w http.ResponseWriter, r *http.Request) {
	s.machineCall(w, r, func(ctx context.Context, req MachineRequest) (any, error) {
		st, err := s.cfg.Proxy.Distribute(ctx, req.instance(), req.MachineBits, time.Duration(req.SafeGuardMillis)*time.Millisecond)
		return MachineState{MachineID: st.MachineID, LastTimestamp: st.LastTimestamp, Holder: string(st.Holder),
			ResetGraceMillis: machine.ResetGraceOf(s.cfg.Proxy).Milliseconds()}, err
	})
}

func (s *Server) handleGuard(w http.ResponseWriter, r *http.Request) {
	s.machineCall(w, r, func(ctx context.Context, req MachineRequest) (any, error) {
		return struct{}{}, s.cfg.Proxy.Guard(ctx, req.instance(), req.state())
	})
}

func (s *Server) handleRevert(w http.ResponseWriter, r *http.Request) {
	s.machineCall(w, r, func(ctx context.Context, req MachineRequest) (any, error) {
		return struct{}{}, s.cfg.Proxy.Revert(ctx, req.instance(), req.state())
	})
}

// machineCall reads a MachineRequest, runs call on the store within the
// proxy's time bound, and answers with call's result, or with the status
// and code of its error.
func (s *Server) machineCall(w http.ResponseWriter, r *http.Request, call func(context.Context, MachineRequest) (any, error)) {
	var req MachineRequest
	if herr := readBody(w, r, &req); herr != nil {
		herr.write(w)
		return
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	resp, err := call(ctx, req)
	if err != nil {
		proxyError(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

func (s *Server) handleSegment(w http.ResponseWriter, r *http.Request) {
	var req SegmentRequest
	if herr := readBody(w, r, &req); herr != nil {
		herr.write(w)
		return
	}
	if !chainName.MatchString(req.Name) {
		badRequest(CodeInvalidConfig, "segment name %.80q: %s", req.Name, chainNameRule).write(w)
		return
	}
	if !s.serves(req.Name) {
		(&httpError{http.StatusNotFound, "unknown_chain", fmt.Sprintf("segment %q is not served here", req.Name)}).write(w)
		return
	}
	if req.Step <= 0 {
		badRequest(CodeInvalidConfig, "step %d: want at least 1", req.Step).write(w)
		return
	}
	d, err := s.cfg.Proxy.Segment(req.Name)
	if err != nil {
		proxyError(err).write(w)
		return
	}
	ctx, cancel := proxyContext(r)
	defer cancel()
	max, err := d.NextMaxID(ctx, req.Step)
	if err != nil {
		proxyError(err).write(w)
		return
	}
	writeJSON(w, http.StatusOK, SegmentRange{MaxID: max})
}
