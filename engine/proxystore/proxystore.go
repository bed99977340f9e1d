package proxystore

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/internal/storeepoch"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/segment"
)

// Settings configure [New]. URL is required.
type Settings struct {
	// URL is the base URL of the serve process, e.g. "http://127.0.0.1:8080".
	URL string
	// Token is the bearer token sent with every call, when the server wants one.
	Token string
}

// client makes every Store's calls: keep-alive connections shared by the
// stores of a process, as http.DefaultClient's are, closed after 90 s
// idle, and a 10 s timeout per call.
var client = &http.Client{
	Timeout: 10 * time.Second,
	Transport: &http.Transport{
		Proxy:               http.ProxyFromEnvironment,
		DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:        64,
		MaxIdleConnsPerHost: 64,
		IdleConnTimeout:     90 * time.Second,
	},
}

// Store is a proxy store. It is safe for concurrent use.
type Store struct {
	base  string
	auth  string
	grace atomic.Int64 // the server store's reset grace, in ms, from its last Distribute answer
	ride  atomic.Int64 // the server store's ride-through window, in ms, likewise

	mu sync.Mutex
	// leases are the secrets of the leases this Store was handed, by
	// instance: Distribute presents the instance's when it asks again, so
	// the server tells the holder from a second process with its instance ID.
	leases map[machine.Instance]string
}

// New returns a Store for the server at s.URL. It does not call the server;
// a bad URL wraps engine.ErrInvalidConfig.
func New(s Settings) (*Store, error) {
	u, err := url.Parse(s.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: proxystore: URL %q: want http(s)://host:port", engine.ErrInvalidConfig, s.URL)
	}
	st := &Store{base: strings.TrimSuffix(u.String(), "/"), leases: map[machine.Instance]string{}}
	if s.Token != "" {
		st.auth = "Bearer " + s.Token
	}
	return st, nil
}

// call posts body to path and decodes the answer into out.
func (s *Store) call(ctx context.Context, path string, body, out any) error {
	if ctx == nil {
		ctx = context.Background()
	}
	b, err := json.Marshal(body)
	if err != nil {
		return fmt.Errorf("%w: proxystore: %v", engine.ErrInvalidConfig, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.base+path, bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%w: proxystore: %v", engine.ErrInvalidConfig, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	if s.auth != "" {
		req.Header.Set("Authorization", s.auth)
	}
	res, err := client.Do(req)
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("proxystore: %s: %w", path, cerr)
		}
		return fmt.Errorf("proxystore: %s: %w: %v", path, engine.ErrStoreUnavailable, err)
	}
	defer res.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(res.Body, 64<<10))
	if err != nil {
		if cerr := ctx.Err(); cerr != nil {
			return fmt.Errorf("proxystore: %s: %w", path, cerr)
		}
		return fmt.Errorf("proxystore: %s: %w: reading the answer: %v", path, engine.ErrStoreUnavailable, err)
	}
	if res.StatusCode != http.StatusOK {
		var e struct{ Error, Code string }
		if json.Unmarshal(raw, &e) != nil || e.Code == "" {
			return fmt.Errorf("proxystore: %s: %w: status %d", path, engine.ErrStoreUnavailable, res.StatusCode)
		}
		return fmt.Errorf("proxystore: %s: %w: %s", path, sentinel(ctx, res.StatusCode, e.Code), e.Error)
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return fmt.Errorf("proxystore: %s: %w: bad answer: %v", path, engine.ErrStoreUnavailable, err)
	}
	return nil
}

// sentinel maps a proxy error code back to the engine's sentinel: a code
// named like a reason is that reason's sentinel (see reasons), the
// proxy's own codes are mapped here, anything else is an outage.
func sentinel(ctx context.Context, status int, code string) error {
	switch code {
	case codeTimeout:
		if err := ctx.Err(); err != nil {
			return err
		}
		return engine.ErrStoreUnavailable
	case codeQuota:
		return engine.ErrMachineIDOverflow
	case codeForbidden:
		return engine.ErrInvalidConfig
	case codeUnknownChain, codeTooManyChains:
		// The server does not serve the sequence: a refusal, not an
		// outage, so a chain fails at once instead of retrying.
		return engine.ErrUnknownGenerator
	case "unauthorized":
		return errors.Join(engine.ErrInvalidConfig, fmt.Errorf("the server refused the token (status %d)", status))
	}
	if err := reasons[code]; err != nil {
		return err
	}
	return engine.ErrStoreUnavailable
}

// Distribute asks the server's store for a machine ID for inst. When this
// Store holds a lease of inst already, it presents that lease's secret: the
// server refuses a second process claiming an instance whose lease is live,
// and lets its holder ask again. The answer's secret replaces it.
func (s *Store) Distribute(ctx context.Context, inst machine.Instance, machineBits int, safeGuard time.Duration) (machine.State, error) {
	if err := distcheck.Distribute(inst.Namespace, inst.ID, machineBits, safeGuard); err != nil {
		return machine.State{}, err
	}
	key := machine.Instance{Namespace: inst.Namespace, ID: inst.ID}
	s.mu.Lock()
	secret := s.leases[key]
	s.mu.Unlock()
	var out machineState
	err := s.call(ctx, "/v1/proxy/machines/distribute", machineRequest{
		Namespace: inst.Namespace, Instance: inst.ID, Stable: inst.Stable,
		MachineBits: machineBits, SafeGuardMillis: safeGuard.Milliseconds(), Lease: secret,
	}, &out)
	if err != nil {
		return machine.State{}, err
	}
	if out.ResetGraceMillis > storeepoch.MaxResetGrace.Milliseconds() || out.RideThroughMillis > storeepoch.MaxRideThrough.Milliseconds() {
		// Past what any store accepts, and past what converts to a
		// Duration without wrapping.
		return machine.State{}, fmt.Errorf("%w: proxystore: the server reports a reset grace of %d ms and a ride-through window of %d ms, past the bounds %v and %v",
			engine.ErrInvalidConfig, out.ResetGraceMillis, out.RideThroughMillis, storeepoch.MaxResetGrace, storeepoch.MaxRideThrough)
	}
	s.grace.Store(max(out.ResetGraceMillis, -1)) // any negative is none
	s.ride.Store(max(out.RideThroughMillis, -1))
	if out.Lease != "" {
		s.mu.Lock()
		s.leases[key] = out.Lease
		s.mu.Unlock()
	}
	return machine.State{MachineID: out.MachineID, LastTimestamp: out.LastTimestamp, Holder: machine.Holder(out.Lease)}, nil
}

// Terms are the server's store's as its last Distribute answer gave them:
// its reset grace and ride-through window (negative: none), both 0 before
// the first answer or from a server that does not send them; the server's
// store keeps the last timestamps.
func (s *Store) Terms() machine.Terms {
	return machine.Terms{
		RideThrough: time.Duration(s.ride.Load()) * time.Millisecond,
		ResetGrace:  time.Duration(s.grace.Load()) * time.Millisecond,
		Remembers:   true,
	}
}

// ServerTime is the zero time: the server compares its store's clock with
// its own, and the client's lease checks nothing across the proxy.
func (s *Store) ServerTime(context.Context) (time.Time, error) { return time.Time{}, nil }

// Guard confirms inst still holds st.MachineID under st.Holder.
func (s *Store) Guard(ctx context.Context, inst machine.Instance, st machine.State) error {
	return s.machineCall(ctx, "/v1/proxy/machines/guard", inst, st)
}

// Revert gives st.MachineID back.
func (s *Store) Revert(ctx context.Context, inst machine.Instance, st machine.State) error {
	if err := s.machineCall(ctx, "/v1/proxy/machines/revert", inst, st); err != nil {
		return err
	}
	key := machine.Instance{Namespace: inst.Namespace, ID: inst.ID}
	s.mu.Lock()
	if s.leases[key] == string(st.Holder) {
		delete(s.leases, key)
	}
	s.mu.Unlock()
	return nil
}

func (s *Store) machineCall(ctx context.Context, path string, inst machine.Instance, st machine.State) error {
	return s.call(ctx, path, machineRequest{
		Namespace: inst.Namespace, Instance: inst.ID, Stable: inst.Stable,
		MachineID: st.MachineID, LastTimestamp: st.LastTimestamp, Lease: string(st.Holder),
	}, &struct{}{})
}

// Segment returns the distributor of the named sequence on the server's
// store. floors are not sent: where a sequence starts is the server's
// store's business (its Floor, or `idforge store init`), so a sequence the
// server's store does not know is refused with an error wrapping
// engine.ErrNoFloor unless that store is brand-new.
func (s *Store) Segment(name string, floors ...engine.Floor) (segment.Distributor, error) {
	if name == "" {
		return nil, fmt.Errorf("%w: proxystore: empty segment name", engine.ErrInvalidConfig)
	}
	return &sequence{s: s, name: name}, nil
}

// sequence is one named sequence on the server's store.
type sequence struct {
	s    *Store
	name string
}

// Confirmed is the zero time: across the proxy only the answers of
// NextMaxID confirm, and the chain counts those itself.
func (d *sequence) Confirmed() time.Time { return time.Time{} }

// NextMaxID advances the sequence by step on the server's store.
func (d *sequence) NextMaxID(ctx context.Context, step int64) (int64, error) {
	if step <= 0 {
		return 0, fmt.Errorf("%w: proxystore: step %d: want at least 1", engine.ErrInvalidConfig, step)
	}
	var out segmentRange
	if err := d.s.call(ctx, "/v1/proxy/segments/next", segmentRequest{Name: d.name, Step: step}, &out); err != nil {
		return 0, err
	}
	return out.MaxID, nil
}
