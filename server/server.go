// Package server is the HTTP side of `idforge serve`: snowflake and chain IDs
// for callers in any language, decoding, the layout, health and readiness,
// Prometheus metrics, a state page, and the endpoints the proxy store
// (package proxystore) uses to take machine IDs and segment ranges from the
// store behind the server.
//
// Routes (Go's method+path patterns, no framework):
//
//	GET  /v1/ids                 snowflake IDs        ?count=1..10000 &format=decimal|number|radix62|radix36|friendly
//	GET  /v1/ids/{chain}         segment-chain IDs    same parameters (friendly is snowflake-only)
//	GET  /v1/decode/{id}         an ID's time, machine and sequence   ?format=
//	GET  /v1/layout              the bit layout, its capacity and expiry, the machine ID
//	GET  /healthz                the process answers
//	GET  /readyz                 the lease is held and the store answers
//	GET  /metrics                Prometheus text format (when a metrics handler is configured)
//	GET  /                       the state page
//	POST /v1/proxy/...           proxy-store endpoints (only when Config.Proxy is set)
//
// Responses are JSON unless the client accepts text/plain more than
// application/json, in which case ID lists are one ID a line. Every request
// the server refuses gets a 4xx status and a JSON body {"error": "...",
// "code": "..."}, and an unclean path a JSON 307 to the clean one; a store or
// clock that cannot serve gives 503. Handlers never answer 500: a panic is
// recovered into a 503 and logged. What net/http refuses before the handler
// runs (a malformed request, no Host, headers over the server's limit, an
// unknown Transfer-Encoding or HTTP version, an unmet Expect) gets
// net/http's plain-text answer.
package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// MaxCount is the largest ?count= one request may ask for.
const MaxCount = 10000

// MaxChains bounds the distinct chain names a server without an allow-list
// creates, so that callers cannot make it open an unbounded number of
// sequences (each one a store row and a prefetch worker).
const MaxChains = 256

// Kinds of the registry the server draws from.
const (
	KindSnowflake = "snowflake"
	KindChain     = "chain"
)

// chainNameRule says in words what chainName accepts.
const chainNameRule = "want 1 to 64 of A-Z a-z 0-9 _ . : -, not starting with a dot"

// chainName is what a chain name may look like: the store keeps it as a key.
var chainName = regexp.MustCompile(`^[A-Za-z0-9_:-][A-Za-z0-9_.:-]{0,63}$`)

// Config configures [New]. Provider and Layout are required.
type Config struct {
	// Provider hands out the generators: kind "snowflake" (name "") and
	// kind "chain" (one per name). An *idforge.Registry is one.
	Provider engine.Provider
	// Layout is the snowflake layout of the Provider's snowflake generator,
	// used by /v1/decode, /v1/layout and the friendly format.
	Layout snowflake.Layout
	// LayoutName names the layout on /v1/layout ("default", "jssafe"...).
	LayoutName string
	// MachineID reports the machine ID in use, -1 when none; optional.
	MachineID func() int64
	// Chains, when not empty, is the list of chain names callers may draw
	// from; any other name is 404. Empty admits any valid name, up to MaxChains.
	Chains []string
	// Tokens, when not nil, requires "Authorization: Bearer <token>" on every
	// route but /healthz and /readyz.
	Tokens *Tokens
	// Ready reports whether the server can issue IDs (lease held, store
	// answers); nil means always ready.
	Ready func(ctx context.Context) error
	// Metrics serves /metrics when not nil (for example
	// promhttp.HandlerFor(registry, promhttp.HandlerOpts{})).
	Metrics http.Handler
	// Page renders the state page at / when not nil.
	Page http.Handler
	// Proxy enables the /v1/proxy endpoints on this store when not nil.
	Proxy ProxyStore
	// MaxInFlight bounds the requests served at once; more get 429 at
	// once rather than queue. 0 is DefaultMaxInFlight.
	MaxInFlight int
	// Logger receives recovered panics; nil is slog.Default().
	Logger *slog.Logger
}

// DefaultMaxInFlight is the default bound on concurrent requests: with
// MaxCount IDs an answer, it bounds the memory answers take to a few hundred MiB.
const DefaultMaxInFlight = 1024

// Server is the HTTP handler of `idforge serve`. It is safe for concurrent use.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	allowed map[string]bool
	log     *slog.Logger
	started time.Time
	fmts    formatters

	sfOnce sync.Once
	sf     engine.Generator
	sfErr  error

	mu     sync.RWMutex
	chains map[string]engine.Generator

	inFlight atomic.Int64
}

// New returns the server for cfg. A missing Provider or an invalid layout or
// chain name wraps engine.ErrInvalidConfig.
func New(cfg Config) (*Server, error) {
	if cfg.Provider == nil {
		return nil, fmt.Errorf("%w: server: no Provider", engine.ErrInvalidConfig)
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: server: %w", engine.ErrInvalidConfig, err)
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger, started: time.Now(), chains: map[string]engine.Generator{}, fmts: newFormatters(cfg.Layout)}
	if s.log == nil {
		s.log = slog.Default()
	}
	if s.cfg.MaxInFlight <= 0 {
		s.cfg.MaxInFlight = DefaultMaxInFlight
	}
	if len(cfg.Chains) > 0 {
		s.allowed = map[string]bool{}
		for _, c := range cfg.Chains {
			if !chainName.MatchString(c) {
				return nil, fmt.Errorf("%w: server: chain name %q: %s", engine.ErrInvalidConfig, c, chainNameRule)
			}
			s.allowed[c] = true
		}
	}
	s.routes()
	return s, nil
}

func (s *Server) routes() {
	m := s.mux
	// Drawing IDs is a side effect: the ID routes take GET alone, where a
	// "GET" pattern would take HEAD too.
	m.HandleFunc("/v1/ids", getOnly(s.handleSnowflake))
	m.HandleFunc("/v1/ids/{chain}", getOnly(s.handleChain))
	m.HandleFunc("GET /v1/decode/{id}", s.handleDecode)
	m.HandleFunc("GET /v1/layout", s.handleLayout)
	m.HandleFunc("GET /healthz", s.handleHealth)
	m.HandleFunc("GET /readyz", s.handleReady)
	if s.cfg.Metrics != nil {
		m.Handle("GET /metrics", s.cfg.Metrics)
	}
	if s.cfg.Page != nil {
		m.Handle("GET /{$}", s.cfg.Page)
	}
	if s.cfg.Proxy != nil {
		s.proxyRoutes()
	}
}

// ServeHTTP routes the request. Requests no route takes get a JSON 404, or
// 405 with an Allow header, unclean paths a JSON 307 to the clean one; a
// panic in a handler becomes a JSON 503.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.Error("idforge serve: handler panicked", "method", r.Method, "path", r.URL.Path, "panic", v)
			writeError(w, http.StatusServiceUnavailable, "internal", "the server failed to answer this request")
		}
	}()
	if n := s.inFlight.Add(1); n > int64(s.cfg.MaxInFlight) {
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("more than %d requests in flight; retry", s.cfg.MaxInFlight))
		return
	}
	defer s.inFlight.Add(-1)
	if r.URL.Path != "/healthz" && r.URL.Path != "/readyz" && !s.cfg.Tokens.allow(r) {
		w.Header().Set("WWW-Authenticate", `Bearer realm="idforge"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a valid \"Authorization: Bearer <token>\" header is required")
		return
	}
	// The two hot routes skip the mux's second look-up.
	if r.Method == http.MethodGet {
		if p := r.URL.Path; p == "/v1/ids" {
			s.handleSnowflake(w, r)
			return
		} else if name, ok := strings.CutPrefix(p, "/v1/ids/"); ok && name != "" && !strings.Contains(name, "/") && r.URL.RawPath == "" {
			r.SetPathValue("chain", name)
			s.handleChain(w, r)
			return
		}
	}
	// The mux redirects unclean paths (//v1/ids, /v1/../v1/ids) to the
	// clean one, in HTML: redirect in JSON instead. It leaves CONNECT's alone.
	if p := r.URL.EscapedPath(); r.Method != http.MethodConnect {
		if loc := cleanPath(p); loc != p {
			if r.URL.RawQuery != "" {
				loc += "?" + r.URL.RawQuery
			}
			w.Header().Set("Location", loc)
			writeError(w, http.StatusTemporaryRedirect, "redirect", "see "+loc)
			return
		}
	}
	h, pattern := s.mux.Handler(r)
	if pattern == "" {
		// No route: let the mux decide between 404 and 405, and answer in
		// JSON instead of its plain text.
		rec := &statusOnly{header: http.Header{}}
		h.ServeHTTP(rec, r)
		if rec.code == http.StatusMethodNotAllowed {
			methodNotAllowed(w, r, rec.header.Get("Allow"))
		} else {
			writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no route for %s %s", r.Method, r.URL.Path))
		}
		return
	}
	s.mux.ServeHTTP(w, r)
}

// cleanPath is the canonical form of the escaped path p, which the mux
// redirects to: no empty, "." or ".." elements, the trailing slash kept.
func cleanPath(p string) string {
	if p == "" || p[0] != '/' {
		p = "/" + p
	}
	np := path.Clean(p)
	if strings.HasSuffix(p, "/") && np != "/" {
		np += "/"
	}
	return np
}

// methodNotAllowed answers 405 naming the methods allowed.
func methodNotAllowed(w http.ResponseWriter, r *http.Request, allow string) {
	w.Header().Set("Allow", allow)
	writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", fmt.Sprintf("%s is not allowed on %s (allowed: %s)", r.Method, r.URL.Path, allow))
}

// getOnly answers every method but GET with 405.
func getOnly(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			methodNotAllowed(w, r, http.MethodGet)
			return
		}
		h(w, r)
	}
}

// statusOnly records the status and headers of the mux's own error replies.
type statusOnly struct {
	header http.Header
	code   int
}

func (s *statusOnly) Header() http.Header { return s.header }
func (s *statusOnly) Write(b []byte) (int, error) {
	if s.code == 0 {
		s.code = http.StatusOK
	}
	return len(b), nil
}
func (s *statusOnly) WriteHeader(code int) {
	if s.code == 0 {
		s.code = code
	}
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "uptime_seconds": int64(time.Since(s.started).Seconds())})
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			writeError(w, http.StatusServiceUnavailable, "not_ready", err.Error())
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ready", "machine_id": s.machineID()})
}

func (s *Server) machineID() int64 {
	if s.cfg.MachineID == nil {
		return -1
	}
	return s.cfg.MachineID()
}

// snowflake returns the shared snowflake generator, looked up once.
func (s *Server) snowflake(ctx context.Context) (engine.Generator, error) {
	s.sfOnce.Do(func() { s.sf, s.sfErr = s.cfg.Provider.Generator(ctx, KindSnowflake, "") })
	return s.sf, s.sfErr
}

// serves reports whether the allow-list, if any, admits chain name.
func (s *Server) serves(name string) bool { return s.allowed == nil || s.allowed[name] }

// chain returns the chain generator for name, creating it through the
// Provider on first use, within the allow-list and MaxChains. A new name
// takes its slot (a nil entry) before the Provider is asked, so concurrent
// first requests cannot pass the limit together.
func (s *Server) chain(ctx context.Context, name string) (engine.Generator, *httpError) {
	s.mu.RLock()
	g, ok := s.chains[name]
	s.mu.RUnlock()
	if g != nil {
		return g, nil
	}
	if !ok {
		if !chainName.MatchString(name) {
			return nil, &httpError{http.StatusBadRequest, "bad_chain", fmt.Sprintf("chain name %q: %s", name, chainNameRule)}
		}
		if !s.serves(name) {
			return nil, &httpError{http.StatusNotFound, "unknown_chain", fmt.Sprintf("chain %q is not served here", name)}
		}
		s.mu.Lock()
		_, ok = s.chains[name]
		if !ok && s.allowed == nil && len(s.chains) >= MaxChains {
			s.mu.Unlock()
			return nil, &httpError{http.StatusTooManyRequests, "too_many_chains", fmt.Sprintf("this server already serves %d chains, its limit; configure an allow-list", MaxChains)}
		}
		if !ok {
			s.chains[name] = nil
		}
		s.mu.Unlock()
	}
	// The Provider makes one generator per name, however many ask at once.
	g, err := s.cfg.Provider.Generator(ctx, KindChain, name)
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		if s.chains[name] == nil {
			delete(s.chains, name) // give the slot back
		}
		return nil, generatorError(err)
	}
	s.chains[name] = g
	return g, nil
}

// generatorError maps an engine error to a status: configuration and unknown
// generators are the caller's fault (4xx), everything else is 503.
func generatorError(err error) *httpError {
	switch {
	case errors.Is(err, engine.ErrUnknownGenerator):
		return &httpError{http.StatusNotFound, "unknown_generator", err.Error()}
	case errors.Is(err, engine.ErrInvalidConfig):
		return &httpError{http.StatusBadRequest, "invalid", err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &httpError{http.StatusServiceUnavailable, "timeout", err.Error()}
	case errors.Is(err, engine.ErrStoreReset): // before lost: a reset ends the lease as lost too
		return &httpError{http.StatusServiceUnavailable, "store_reset", err.Error()}
	case errors.Is(err, engine.ErrMachineIDLost):
		return &httpError{http.StatusServiceUnavailable, "machine_id_lost", err.Error()}
	case errors.Is(err, engine.ErrClockBackwards):
		return &httpError{http.StatusServiceUnavailable, "clock_backwards", err.Error()}
	case errors.Is(err, engine.ErrClosed):
		return &httpError{http.StatusServiceUnavailable, "closed", err.Error()}
	default:
		return &httpError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	}
}

// NewHTTPServer returns an http.Server for h on addr with the timeouts and
// header limit `idforge serve` uses: 5 s to read the headers, 10 s for the
// whole request, 30 s to write the answer, 2 min idle keep-alive, 16 KiB of
// headers (net/http reads 4 KiB more before it answers 431).
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	return &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
}
