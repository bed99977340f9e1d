// Package server is the HTTP side of `idforge serve`: snowflake and chain IDs
// for callers in any language, decoding, the layout, health and readiness,
// Prometheus metrics, a state page, and the endpoints the proxy store
// (package proxystore) uses to take machine IDs and segment ranges from the
// store behind the server.
//
// Routes (Go's method+path patterns, no framework):
//
//	GET  /v1/ids                 snowflake IDs        ?count=1..10000 &format=decimal|number|radix62|radix36|friendly
//	GET  /v1/ids?kind=uuidv7     version 7 UUIDs      ?count= (canonical form, no format)
//	GET  /v1/ids/{chain}         segment-chain IDs    same parameters (friendly is snowflake-only), or a dated
//	                                                  format: ?format=INV-{yyyy}{MM}{dd}-{seq:6} (URL-encoded)
//	GET  /v1/decode/{id}         an ID's time, machine and sequence   ?format=; a UUIDv7's time
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
//
// # Threat model
//
// Callers are told apart by their bearer token ([Tokens]); a server without
// tokens has one anonymous caller and should listen on loopback only.
//
//   - Anyone who can connect may call /healthz and /readyz, which say ok or
//     not and nothing else: details go to token holders and to the log.
//     Probes are answered outside every request limit, and readiness is
//     cached (Config.ReadyInterval), so probes cannot load the store.
//   - A token holder may draw IDs, decode, read the layout, the metrics and
//     the state page. Its requests and connections are bounded per token
//     and overall (Config.MaxInFlightPerToken, MaxConnsPerToken, MaxInFlight,
//     MaxConns), so one token's flood leaves others served.
//   - Through the proxy a token may only name the namespaces and segments the
//     tokens file gives it. A machine-ID lease belongs to whoever
//     distributed it: the answer carries a secret that its guard and revert
//     must present, a second claimant of a live lease is refused, each
//     token holds at most its quota of machine IDs, and the server's own
//     lease is never reachable. Steps and timestamps are bounded
//     (Config.MaxStep, MaxTimestampAhead), so no call can burn a sequence
//     or poison a machine ID for its next holder. Every lease action is
//     logged with the token's name.
//   - A web page in a browser on the same machine holds no token: the server
//     refuses requests with a foreign Origin or a cross-site
//     Sec-Fetch-Site, POSTs without a JSON content type, and, without
//     tokens, any Host but a loopback name or one of Config.AllowedHosts,
//     which stops DNS rebinding.
//
// The proxy trusts a token holder with the IDs it draws: a caller that
// breaks its own lease (issues after its lease lapsed) gets duplicates of
// its own. It does not trust one caller with another's lease, namespace,
// sequence or share of the server.
package server

import (
	"context"
	"fmt"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"net/url"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/outage"
	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/internal/wire"
)

// MaxCount is the largest ?count= one request may ask for.
const MaxCount = 10000

// MaxChains bounds the distinct chain names a server without an allow-list
// creates, so that callers cannot make it open an unbounded number of
// sequences (each one a store row and a prefetch worker). Proxy segment
// names count against it too.
const MaxChains = 256

// Kinds of the registry the server draws from.
const (
	KindSnowflake = "snowflake"
	KindChain     = "chain"
	KindUUIDv7    = "uuidv7"
)

// nameRule says in words what validName accepts.
const nameRule = "want 1 to 128 of A-Z a-z 0-9 _ . : / -, not starting with a dot or a slash"

// nameRE is the one grammar of chain and segment names, namespaces and
// instance IDs: the stores keep them as keys (of at most 128 bytes), logs
// and the state page show them, and none may carry control, bidi or
// other characters that would make two names look alike.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9_:-][A-Za-z0-9_.:/-]{0,127}$`)

func validName(s string) bool { return nameRE.MatchString(s) }

// maxEcho is the longest value a refusal quotes back; a longer one is not
// quoted at all, so no message shows a value cut to look like another.
const maxEcho = 64

// quoteBounded quotes v for an error message, or says how long it was.
func quoteBounded(v string) string {
	if len(v) > maxEcho {
		return fmt.Sprintf("(%d bytes, not shown)", len(v))
	}
	return strconv.Quote(v)
}

// Defaults of the Config fields whose zero value means a default.
const (
	// DefaultMaxInFlight is the default bound on concurrent requests: with
	// MaxCount IDs an answer, it bounds the memory answers take to a few
	// hundred MiB.
	DefaultMaxInFlight = 1024

	defaultMaxInFlightPerToken = 64
	defaultMaxConns            = 4096
	defaultMaxConnsPerToken    = 256
	defaultMaxStep             = 100_000_000
	defaultMaxTimestampAhead   = 2 * time.Second
	defaultMaxMachinesPerToken = 256
	defaultReadyInterval       = time.Second
)

// Config configures [New]. Provider and Layout are required; every other
// field's zero value means its documented default, and a negative number
// is refused with an error wrapping engine.ErrInvalidConfig that names it.
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
	// Instance is the instance the server's own lease is held for: the proxy
	// refuses every call that names it, so no caller can take, guard or
	// give back the machine ID the server issues under.
	Instance machine.Instance
	// Chains, when not empty, is the list of chain names callers may draw
	// from, directly or as proxy segments; any other name is 404. Empty
	// admits any valid name, up to MaxChains.
	Chains []string
	// Dated gives chains a dated format (name → format, such as "invoice" →
	// "INV-{yyyy}{MM}{dd}-{seq:6}"): /v1/ids/{name} then serves that
	// format, and no other. Other chains take one in ?format=. The Provider
	// must make dated chains (an *idforge.Registry with a store, or the
	// metrics collector's Provider of one).
	Dated map[string]string
	// Tokens, when not nil, requires "Authorization: Bearer <token>" on every
	// route but /healthz and /readyz. [Server.SetTokens] replaces them.
	Tokens *Tokens
	// AllowedHosts are the host names (without port) requests may name in
	// their Host header besides loopback ones. Empty: a server without
	// tokens takes loopback names only (so that DNS rebinding cannot reach
	// it from a browser), one with tokens any name.
	AllowedHosts []string
	// Ready reports whether the server can issue IDs (lease held, store
	// answers); nil means always ready.
	Ready func(ctx context.Context) error
	// ReadyInterval is how long an answer of Ready is reused by /readyz
	// (default 1 s), so that probes cannot load the store.
	ReadyInterval time.Duration
	// Metrics serves /metrics when not nil (for example
	// promhttp.HandlerFor(registry, promhttp.HandlerOpts{})).
	Metrics http.Handler
	// Page renders the state page at / when not nil.
	Page http.Handler
	// Proxy enables the /v1/proxy endpoints on this store when not nil.
	Proxy ProxyStore
	// MaxInFlight bounds the requests served at once; more get 429 at
	// once rather than queue. 0 is DefaultMaxInFlight. Probes do not count.
	MaxInFlight int
	// MaxInFlightPerToken bounds the requests of one token served at once
	// (default 64), so that one caller cannot take all of MaxInFlight. A
	// server without tokens has MaxInFlight alone.
	MaxInFlightPerToken int
	// MaxConns bounds the open connections (default 4096): one more is
	// closed as soon as it is accepted. It holds with [NewHTTPServer]'s
	// http.Server, which counts connections.
	MaxConns int
	// MaxConnsPerToken bounds the connections one token's requests arrive
	// on (default 256): the request that would pass it gets 429 and its
	// connection is closed. With NewHTTPServer only, like MaxConns.
	MaxConnsPerToken int
	// MaxStep is the largest step a proxy segment fetch may take (default
	// 10^8), so that no call burns a sequence: a hungry chain asks for at
	// most twice its prefetch distance in one fetch.
	MaxStep int64
	// MaxTimestampAhead is how far ahead of the server's clock a proxy
	// guard or revert may put a machine ID's last timestamp (default 2 s:
	// the lease's default reservation of 1 s and as much for clock skew).
	// The next holder of the machine ID waits that timestamp out, and
	// fails at once if it is further ahead than it can wait.
	MaxTimestampAhead time.Duration
	// MaxMachinesPerToken is the number of machine IDs one token may hold
	// through the proxy at once (default 256), unless the tokens file gives
	// it another (machines=N). A stable instance's ID counts even after
	// its revert, as the store keeps it for the instance.
	MaxMachinesPerToken int
	// Logger receives recovered panics, readiness changes and the proxy's
	// audit lines; nil is slog.Default().
	Logger *slog.Logger
}

// validate fills in the defaults and refuses negative limits.
func (c *Config) validate() error {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"MaxInFlight", &c.MaxInFlight, DefaultMaxInFlight},
		{"MaxInFlightPerToken", &c.MaxInFlightPerToken, defaultMaxInFlightPerToken},
		{"MaxConns", &c.MaxConns, defaultMaxConns},
		{"MaxConnsPerToken", &c.MaxConnsPerToken, defaultMaxConnsPerToken},
		{"MaxMachinesPerToken", &c.MaxMachinesPerToken, defaultMaxMachinesPerToken},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: server: Config.%s %d: want 0 (the default, %d) or more", engine.ErrInvalidConfig, f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"MaxTimestampAhead", &c.MaxTimestampAhead, defaultMaxTimestampAhead},
		{"ReadyInterval", &c.ReadyInterval, defaultReadyInterval},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: server: Config.%s %v: want 0 (the default, %v) or more", engine.ErrInvalidConfig, f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.MaxStep < 0:
		return fmt.Errorf("%w: server: Config.MaxStep %d: want 0 (the default, %d) or more", engine.ErrInvalidConfig, c.MaxStep, defaultMaxStep)
	case c.MaxStep == 0:
		c.MaxStep = defaultMaxStep
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/:@ \t[]") {
			return fmt.Errorf("%w: server: Config.AllowedHosts %s: want a host name without port", engine.ErrInvalidConfig, quoteBounded(h))
		}
	}
	return nil
}

// Server is the HTTP handler of `idforge serve`. It is safe for concurrent use.
type Server struct {
	cfg     Config
	mux     *http.ServeMux
	allowed map[string]bool
	hosts   map[string]bool
	log     *slog.Logger
	started time.Time
	fmts    formatters
	tokens  atomic.Pointer[Tokens]

	sfOnce sync.Once
	sf     engine.Generator
	sfErr  error

	uuidOnce sync.Once
	uuid     engine.UUIDGenerator
	uuidErr  error

	mu     sync.RWMutex
	chains map[string]engine.Generator

	inFlight atomic.Int64
	limits   limits
	ready    readiness
	leases   leases
}

// New returns the server for cfg. A missing Provider, an invalid layout,
// chain name or limit wraps engine.ErrInvalidConfig.
func New(cfg Config) (*Server, error) {
	if cfg.Provider == nil {
		return nil, fmt.Errorf("%w: server: no Provider", engine.ErrInvalidConfig)
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: server: %w", engine.ErrInvalidConfig, err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger, started: time.Now(), chains: map[string]engine.Generator{}, fmts: newFormatters(cfg.Layout)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.ready.outage = outage.Log{Logger: s.log, Still: "idforge serve: still not ready", End: "idforge serve: ready again"}
	s.tokens.Store(cfg.Tokens)
	if len(cfg.Chains) > 0 {
		s.allowed = map[string]bool{}
		for _, c := range cfg.Chains {
			if !validName(c) {
				return nil, fmt.Errorf("%w: server: chain name %s: %s", engine.ErrInvalidConfig, quoteBounded(c), nameRule)
			}
			s.allowed[c] = true
		}
	}
	for name, format := range cfg.Dated {
		if !validName(name) {
			return nil, fmt.Errorf("%w: server: dated chain name %s: %s", engine.ErrInvalidConfig, quoteBounded(name), nameRule)
		}
		if _, err := dated.Parse(format); err != nil {
			return nil, fmt.Errorf("server: dated chain %s: %w", name, err)
		}
	}
	s.hosts = map[string]bool{}
	for _, h := range cfg.AllowedHosts {
		s.hosts[strings.ToLower(h)] = true
	}
	s.limits.init()
	s.leases.init()
	s.routes()
	return s, nil
}

// SetTokens replaces the tokens callers must present, at once for every
// request that starts afterwards. nil is refused: a reload must not open
// the server to everyone.
func (s *Server) SetTokens(t *Tokens) error {
	if t == nil {
		return fmt.Errorf("%w: server: SetTokens(nil) would admit every request", engine.ErrInvalidConfig)
	}
	s.tokens.Store(t)
	return nil
}

func (s *Server) routes() {
	m := s.mux
	// Drawing IDs is a side effect: the ID routes take GET alone, where a
	// "GET" pattern would take HEAD too.
	m.HandleFunc("/v1/ids", getOnly(s.handleSnowflake))
	m.HandleFunc("/v1/ids/{chain}", getOnly(s.handleChain))
	m.HandleFunc("GET /v1/decode/{id}", s.handleDecode)
	m.HandleFunc("GET /v1/layout", s.handleLayout)
	// Probes are answered in ServeHTTP; these patterns make the mux answer
	// 405 to other methods.
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

// isProbe reports whether r is a health or readiness probe.
func isProbe(r *http.Request) bool {
	p := r.URL.Path
	return (p == "/healthz" || p == "/readyz") && (r.Method == http.MethodGet || r.Method == http.MethodHead)
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
	// Probes first: outside every limit, so that a flood never makes a
	// liveness probe restart the process, and they say nothing that needs
	// protecting.
	if isProbe(r) {
		s.mux.ServeHTTP(w, r)
		return
	}
	tokens := s.tokens.Load()
	if herr := s.checkSite(r, tokens == nil); herr != nil {
		herr.write(w)
		return
	}
	if n := s.inFlight.Add(1); n > int64(s.cfg.MaxInFlight) {
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("more than %d requests in flight; retry", s.cfg.MaxInFlight))
		return
	}
	defer s.inFlight.Add(-1)
	c := tokens.lookup(r)
	if c == nil && r.URL.Path != "/healthz" && r.URL.Path != "/readyz" {
		w.Header().Set("WWW-Authenticate", `Bearer realm="idforge"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a valid \"Authorization: Bearer <token>\" header is required")
		return
	}
	if c != nil && c != anonymous { // without tokens, MaxInFlight is everyone's
		cl, herr := s.limits.enter(w, r, c.name, s.cfg.MaxInFlightPerToken, s.cfg.MaxConnsPerToken)
		if herr != nil {
			herr.write(w)
			return
		}
		defer cl.inFlight.Add(-1)
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
	if strings.HasPrefix(pattern, "POST ") {
		// A form or text/plain POST is what a web page may send without
		// asking the server first (no CORS preflight).
		if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
			writeError(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "a POST must carry Content-Type: application/json")
			return
		}
		r = r.WithContext(context.WithValue(r.Context(), callerKey{}, c))
	}
	s.mux.ServeHTTP(w, r)
}

// checkSite refuses what a web page in a browser could send: a foreign
// Origin, a cross-site fetch, and, on a server without tokens, a Host
// that is not this machine's (DNS rebinding) unless AllowedHosts has it.
func (s *Server) checkSite(r *http.Request, tokenless bool) *httpError {
	if (tokenless || len(s.hosts) > 0) && !s.hostAllowed(r.Host) {
		return &httpError{http.StatusForbidden, "forbidden_host", fmt.Sprintf("Host %s is not served here: this server answers loopback names and its allowed hosts only",
			quoteBounded(r.Host))}
	}
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || !strings.EqualFold(u.Host, r.Host) || (u.Scheme != "http" && u.Scheme != "https") {
			return &httpError{http.StatusForbidden, "cross_origin", fmt.Sprintf("Origin %s is not this server's: cross-site requests are refused", quoteBounded(o))}
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return &httpError{http.StatusForbidden, "cross_origin", "cross-site requests are refused (Sec-Fetch-Site)"}
	}
	return nil
}

// hostAllowed reports whether a Host header names this machine or one of
// the allowed hosts.
func (s *Server) hostAllowed(host string) bool {
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(strings.TrimSuffix(strings.Trim(host, "[]"), "."))
	if host == "localhost" || s.hosts[host] {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
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

// admit checks a chain or proxy segment name and takes its slot among the
// names this server serves, within the allow-list and MaxChains. A new
// name takes its slot (a nil entry) before the Provider or the store is
// asked, so concurrent first requests cannot pass the limit together.
func (s *Server) admit(name string) *httpError {
	if !validName(name) {
		return &httpError{http.StatusBadRequest, "bad_chain", fmt.Sprintf("chain name %s: %s", quoteBounded(name), nameRule)}
	}
	if !s.serves(name) {
		return &httpError{http.StatusNotFound, wire.CodeUnknownChain, fmt.Sprintf("chain %q is not served here", name)}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.chains[name]; ok {
		return nil
	}
	if s.allowed == nil && len(s.chains) >= MaxChains {
		return &httpError{http.StatusTooManyRequests, wire.CodeTooManyChains, fmt.Sprintf("this server already serves %d chains, its limit; configure an allow-list", MaxChains)}
	}
	s.chains[name] = nil
	return nil
}

// chain returns the chain generator for name, creating it through the
// Provider on first use (see admit).
func (s *Server) chain(ctx context.Context, name string) (engine.Generator, *httpError) {
	s.mu.RLock()
	g := s.chains[name]
	s.mu.RUnlock()
	if g != nil {
		return g, nil
	}
	if herr := s.admit(name); herr != nil {
		return nil, herr
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

// generatorError maps an engine error to a status and a code, by its
// reason (internal/reason): configuration and unknown generators are the
// caller's fault (4xx), everything else is 503.
func generatorError(err error) *httpError {
	switch r := reason.Of(err); r {
	case reason.UnknownGenerator:
		return &httpError{http.StatusNotFound, r, err.Error()}
	case reason.InvalidConfig:
		return &httpError{http.StatusBadRequest, "invalid", err.Error()}
	case reason.Canceled, reason.Deadline:
		return &httpError{http.StatusServiceUnavailable, wire.CodeTimeout, err.Error()}
	case reason.StoreReset, reason.MachineIDLost, reason.ClockBackwards, reason.Closed:
		return &httpError{http.StatusServiceUnavailable, r, err.Error()}
	default:
		return &httpError{http.StatusServiceUnavailable, "unavailable", err.Error()}
	}
}

// NewHTTPServer returns an http.Server for h on addr with the timeouts and
// header limit `idforge serve` uses: 5 s to read the headers, 10 s for the
// whole request, 30 s to write the answer, 2 min idle keep-alive, 16 KiB of
// headers (net/http reads 4 KiB more before it answers 431). When h is a
// *Server, the http.Server counts connections for its MaxConns and
// MaxConnsPerToken.
func NewHTTPServer(addr string, h http.Handler) *http.Server {
	srv := &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
	}
	if s, ok := h.(*Server); ok {
		srv.ConnContext = s.limits.connContext
		srv.ConnState = func(c net.Conn, st http.ConnState) { s.limits.connState(c, st, s.cfg.MaxConns) }
	}
	return srv
}
