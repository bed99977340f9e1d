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
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/leased"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/outage"
	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/internal/wire"
	"github.com/idforge/idforge/metrics"
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

// Defaults of the limits: a Settings value leaves them zero, so they are
// these.
const (
	// defaultMaxInFlight bounds concurrent requests: with wire.MaxCount IDs
	// an answer, it bounds the memory answers take to a few hundred MiB.
	defaultMaxInFlight         = 1024
	defaultMaxInFlightPerToken = 64
	defaultMaxConns            = 4096
	defaultMaxConnsPerToken    = 256
	defaultMaxStep             = 100_000_000
	defaultMaxTimestampAhead   = 2 * time.Second
	defaultMaxMachinesPerToken = 256
	defaultReadyInterval       = time.Second
)

// Settings configures [New]. Registry and Layout are required; every other
// field's zero value means its documented default. New refuses a bad
// value with an error wrapping engine.ErrInvalidConfig that names the field.
type Settings struct {
	// Registry hands out the generators: kind "snowflake" (name ""), and
	// "chain" (one per name) and "uuidv7" when it has them. An
	// *idforge.Registry also gives the machine ID on /v1/layout, the
	// Prometheus metrics on /metrics and the state page at /; with another
	// engine.Provider those two routes are absent.
	Registry engine.Provider
	// Layout is the layout of the Registry's snowflake generator, used by
	// /v1/decode, /v1/layout and the friendly format.
	Layout snowflake.Layout
	// Instance is the instance the server's own lease is held for: the proxy
	// refuses every call that names it, so no caller can take, guard or
	// give back the machine ID the server issues under. Its Namespace is
	// shown on the state page.
	Instance machine.Instance
	// Chains, when not empty, is the list of chain names callers may draw
	// from, directly or as proxy segments, with the names of Dated; any
	// other name is 404. Empty admits any valid name; a name neither here
	// nor in Dated takes a slot of the caller's allowance of 256 names, so
	// that callers cannot make the server open an unbounded number of
	// sequences, and one caller's names cannot keep another's out. Names of
	// the form <chain>:<yyyy>, <chain>:<yyyyMM> and <chain>:<yyyyMMdd> are
	// the sequences of dated chains' periods: no caller may draw or fetch
	// them by those names.
	Chains []string
	// Dated gives chains a dated format (name → format, such as "invoice" →
	// "INV-{yyyy}{MM}{dd}-{seq:6}"): /v1/ids/{name} then serves that
	// format, and no other. Other chains take one in ?format=. The Registry
	// must make dated chains (an *idforge.Registry with a store).
	Dated map[string]string
	// TokensFile, when set, is the file of the bearer tokens callers must
	// present ("Authorization: Bearer <token>") on every route but /healthz
	// and /readyz, one caller a line:
	//
	//	name token [namespaces=a,b|*] [segments=a,b|*] [chains=a,b|*] [machines=N]
	//
	// or a bare token (named after its line number, with no proxy rights);
	// blank lines and lines starting with # are skipped. namespaces and
	// segments are the machine-ID namespaces and the sequences the caller
	// may use through the proxy ("*": any; none when absent); chains the
	// chains it may draw on /v1/ids/{chain} (every chain served when
	// absent); machines its quota of machine IDs held through the proxy
	// (default 256). Tokens shorter than 16 bytes, repeated names or tokens,
	// unknown options, an empty file and, on Unix, anything but a regular
	// file of the server's user (or root) that group and others may neither
	// read nor write are refused. [Server.ReloadTokens] reads it again.
	TokensFile string
	// AllowedHosts are the host names (without port) requests may name in
	// their Host header besides loopback ones. Empty: a server without
	// tokens takes loopback names only (so that DNS rebinding cannot reach
	// it from a browser), one with tokens any name.
	AllowedHosts []string
	// Ready reports whether the server can issue IDs (lease held, store
	// answers); nil means always ready. /readyz reuses an answer for a
	// second, so that probes cannot load the store.
	Ready func(ctx context.Context) error
	// StoreName names the store behind the Registry on the state page, such
	// as "sqlite idforge.db": every token holder reads it, so leave paths
	// and credentials out. Empty: the Proxy's String, if any.
	StoreName string
	// Proxy enables the /v1/proxy endpoints on this store when not nil
	// (engine/sqlstore's and engine/redisstore's Store are ones).
	Proxy idforge.Store
	// Admin, the operator's commands on the Proxy's store (its OpenAdmin),
	// lets the machine-ID quotas count the stable instances the store
	// holds, which survive restarts of the server; nil counts only the
	// leases this server saw.
	Admin machine.Admin
	// Logger receives recovered panics, readiness changes, the audit lines
	// of what tokens do and the summaries of what they were refused; nil is
	// slog.Default().
	Logger *slog.Logger

	// Limits, fixed by `idforge serve`; the zero value is the default
	// above. Tests set them.
	maxInFlight         int           // requests served at once; more get 429 at once. Probes do not count.
	maxInFlightPerToken int           // of one token, so that one caller cannot take all of maxInFlight
	maxConns            int           // open connections, with NewHTTPServer's http.Server
	maxConnsPerToken    int           // connections one token's requests arrive on, with NewHTTPServer
	maxStep             int64         // largest proxy segment step, so that no call burns a sequence
	maxTimestampAhead   time.Duration // how far ahead of this clock a proxy guard may put a last timestamp
	maxMachinesPerToken int           // machine IDs one token may hold through the proxy (tokens file: machines=N)
	maxChainsPerToken   int           // chain and segment names one token may open beyond the configured ones
	safeGuard           time.Duration // the proxy's reclaim cut-off: the safe-guard every proxy Distribute goes to the store with
	logInterval         time.Duration // how often refusals and dropped audit lines are summed up in the log
	auditBudget         int           // audit lines one token may write per logInterval
	readyInterval       time.Duration // how long /readyz reuses an answer of Ready
	machineID           func() int64  // the machine ID in use; default the Registry's
	tokens              *tokenSet     // instead of TokensFile
}

// validate fills in the defaults and refuses negative limits.
func (c *Settings) validate() error {
	for _, f := range []struct {
		name string
		v    *int
		def  int
	}{
		{"maxInFlight", &c.maxInFlight, defaultMaxInFlight},
		{"maxInFlightPerToken", &c.maxInFlightPerToken, defaultMaxInFlightPerToken},
		{"maxConns", &c.maxConns, defaultMaxConns},
		{"maxConnsPerToken", &c.maxConnsPerToken, defaultMaxConnsPerToken},
		{"maxMachinesPerToken", &c.maxMachinesPerToken, defaultMaxMachinesPerToken},
		{"maxChainsPerToken", &c.maxChainsPerToken, wire.MaxChains},
		{"auditBudget", &c.auditBudget, defaultAuditBudget},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: server: Settings.%s %d: want 0 (the default, %d) or more", engine.ErrInvalidConfig, f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	aheadDefault := c.maxTimestampAhead == 0
	for _, f := range []struct {
		name string
		v    *time.Duration
		def  time.Duration
	}{
		{"maxTimestampAhead", &c.maxTimestampAhead, defaultMaxTimestampAhead},
		{"readyInterval", &c.readyInterval, defaultReadyInterval},
		{"safeGuard", &c.safeGuard, leased.DefaultSafeGuard},
		{"logInterval", &c.logInterval, defaultLogInterval},
	} {
		if *f.v < 0 {
			return fmt.Errorf("%w: server: Settings.%s %v: want 0 (the default, %v) or more", engine.ErrInvalidConfig, f.name, *f.v, f.def)
		}
		if *f.v == 0 {
			*f.v = f.def
		}
	}
	switch {
	case c.maxStep < 0:
		return fmt.Errorf("%w: server: Settings.maxStep %d: want 0 (the default, %d) or more", engine.ErrInvalidConfig, c.maxStep, defaultMaxStep)
	case c.maxStep == 0:
		c.maxStep = defaultMaxStep
	}
	for _, h := range c.AllowedHosts {
		if h == "" || strings.ContainsAny(h, "/:@ \t[]") {
			return fmt.Errorf("%w: server: Settings.AllowedHosts %s: want a host name without port", engine.ErrInvalidConfig, quoteBounded(h))
		}
	}
	if c.Proxy != nil && reflect.ValueOf(c.Proxy).Kind() == reflect.Pointer && reflect.ValueOf(c.Proxy).IsNil() {
		return fmt.Errorf("%w: server: Settings.Proxy is a nil %T", engine.ErrInvalidConfig, c.Proxy)
	}
	if aheadDefault && c.Proxy != nil && c.Proxy.Terms().RideThrough > 0 {
		w := c.Proxy.Terms().RideThrough
		// A client lease's heartbeat reserves the store's ride-through
		// window ahead of its clock; allow that plus the clock skew
		// between hosts a reset grace tolerates (1 s).
		c.maxTimestampAhead = max(c.maxTimestampAhead, w+time.Second)
	}
	return nil
}

// Server is the HTTP handler of `idforge serve`. It is safe for concurrent use.
type Server struct {
	cfg     Settings
	mux     *http.ServeMux
	allowed map[string]bool
	hosts   map[string]bool
	log     *slog.Logger
	started time.Time
	fmts    formatters
	tokens  atomic.Pointer[tokenSet]

	page    http.Handler // the state page, nil without an *idforge.Registry
	metrics http.Handler // /metrics, likewise

	mu     sync.RWMutex
	names  map[string]*slot // chain and segment names admitted
	opened map[string]int   // names each caller opened, by caller name; the configured ones are nobody's
	dated  map[string]*dated.Format

	inFlight atomic.Int64
	limits   limits
	ready    readiness
	leases   leases
	ledger   ledger
}

// slot is a chain or segment name the server serves.
type slot struct {
	built bool   // the Registry built the chain
	owner string // the caller that opened it and whose allowance it takes; "" for a configured name
	fixed bool   // configured (Chains, Dated): it takes nobody's allowance
}

// New returns the server for cfg. A missing Registry, an invalid layout,
// chain name or limit wraps engine.ErrInvalidConfig.
func New(cfg Settings) (*Server, error) {
	if cfg.Registry == nil || reflect.ValueOf(cfg.Registry).Kind() == reflect.Pointer && reflect.ValueOf(cfg.Registry).IsNil() {
		return nil, fmt.Errorf("%w: server: Settings.Registry is required", engine.ErrInvalidConfig)
	}
	if err := cfg.Layout.Validate(); err != nil {
		return nil, fmt.Errorf("%w: server: Settings.Layout: %w", engine.ErrInvalidConfig, err)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), log: cfg.Logger, started: time.Now(), names: map[string]*slot{}, opened: map[string]int{},
		dated: map[string]*dated.Format{}, fmts: newFormatters(cfg.Layout)}
	if s.log == nil {
		s.log = slog.Default()
	}
	s.ledger.init(s.log, cfg.logInterval, cfg.auditBudget)
	if reg, ok := cfg.Registry.(*idforge.Registry); ok {
		if s.cfg.machineID == nil {
			s.cfg.machineID = func() int64 { return reg.Stats().MachineID }
		}
		s.page = newPage(reg.Stats, s)
		s.metrics = metricsHandler(reg, &s.ledger)
	}
	s.ready.outage = outage.Log{Logger: s.log, Still: "idforge serve: still not ready", End: "idforge serve: ready again"}
	switch {
	case cfg.tokens != nil:
		s.tokens.Store(cfg.tokens)
	case cfg.TokensFile != "":
		t, err := readTokens(cfg.TokensFile)
		if err != nil {
			return nil, err
		}
		s.tokens.Store(t)
	}
	for _, c := range cfg.Chains {
		switch {
		case !validName(c):
			return nil, fmt.Errorf("%w: server: chain name %s: %s", engine.ErrInvalidConfig, quoteBounded(c), nameRule)
		case derived(c):
			return nil, fmt.Errorf("%w: server: chain name %q: %s", engine.ErrInvalidConfig, c, reservedRule)
		}
		s.names[c] = &slot{fixed: true}
	}
	for name, format := range cfg.Dated {
		switch {
		case !validName(name):
			return nil, fmt.Errorf("%w: server: dated chain name %s: %s", engine.ErrInvalidConfig, quoteBounded(name), nameRule)
		case derived(name):
			return nil, fmt.Errorf("%w: server: dated chain name %q: %s", engine.ErrInvalidConfig, name, reservedRule)
		}
		f, err := dated.Parse(format)
		if err != nil {
			return nil, fmt.Errorf("server: dated chain %s: %w", name, err)
		}
		s.dated[name] = f
		s.names[name] = &slot{fixed: true}
	}
	if len(cfg.Chains) > 0 {
		// The allow-list is the configured names: the chains and the dated ones.
		s.allowed = map[string]bool{}
		for name := range s.names {
			s.allowed[name] = true
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

// ReloadTokens reads Settings.TokensFile again and puts its tokens in
// force at once for every request that starts afterwards. A file that
// cannot be read or parsed leaves the tokens in use as they are; a server
// started without a tokens file has none to reload and stays as it is.
func (s *Server) ReloadTokens() error {
	if s.cfg.TokensFile == "" {
		return fmt.Errorf("%w: server: no Settings.TokensFile to reload", engine.ErrInvalidConfig)
	}
	t, err := readTokens(s.cfg.TokensFile)
	if err != nil {
		return err
	}
	return s.setTokens(t)
}

// setTokens replaces the tokens callers must present. nil is refused: a
// reload must not open the server to everyone.
func (s *Server) setTokens(t *tokenSet) error {
	if t == nil {
		return fmt.Errorf("%w: server: setTokens(nil) would admit every request", engine.ErrInvalidConfig)
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
	if s.metrics != nil {
		m.Handle("GET /metrics", s.metrics)
	}
	if s.page != nil {
		m.Handle("GET /{$}", s.page)
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
	// Every answer goes through rp, which counts the refusals by token.
	rp := &reply{ResponseWriter: w, s: s, r: r}
	w = rp
	tokens := s.tokens.Load()
	if herr := s.checkSite(r, tokens == nil); herr != nil {
		herr.write(w)
		return
	}
	if n := s.inFlight.Add(1); n > int64(s.cfg.maxInFlight) {
		s.inFlight.Add(-1)
		w.Header().Set("Retry-After", "1")
		writeError(w, http.StatusTooManyRequests, "busy", fmt.Sprintf("more than %d requests in flight; retry", s.cfg.maxInFlight))
		return
	}
	defer s.inFlight.Add(-1)
	c := tokens.lookup(r)
	if c == nil {
		w.Header().Set("WWW-Authenticate", `Bearer realm="idforge"`)
		writeError(w, http.StatusUnauthorized, "unauthorized", "a valid \"Authorization: Bearer <token>\" header is required")
		return
	}
	rp.c = c
	if c != anonymous { // without tokens, MaxInFlight is everyone's
		cl, herr := s.limits.enter(w, r, c.name, s.cfg.maxInFlightPerToken, s.cfg.maxConnsPerToken)
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
	}
	s.mux.ServeHTTP(w, r)
}

// checkSite refuses what a web page in a browser could send: a foreign
// Origin, a cross-site fetch, and, on a server without tokens, a Host
// that is not this machine's (DNS rebinding) unless AllowedHosts has it.
func (s *Server) checkSite(r *http.Request, tokenless bool) *httpError {
	if (tokenless || len(s.hosts) > 0) && !s.hostAllowed(r.Host) {
		return refusal(http.StatusForbidden, "forbidden_host", fmt.Sprintf("Host %s is not served here: this server answers loopback names and its allowed hosts only",
			quoteBounded(r.Host)))
	}
	if o := r.Header.Get("Origin"); o != "" {
		if u, err := url.Parse(o); err != nil || !strings.EqualFold(u.Host, r.Host) || (u.Scheme != "http" && u.Scheme != "https") {
			return refusal(http.StatusForbidden, "cross_origin", fmt.Sprintf("Origin %s is not this server's: cross-site requests are refused", quoteBounded(o)))
		}
	}
	switch r.Header.Get("Sec-Fetch-Site") {
	case "", "same-origin", "none":
	default:
		return refusal(http.StatusForbidden, "cross_origin", "cross-site requests are refused (Sec-Fetch-Site)")
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

// reply is the ResponseWriter the handlers get: it carries the request's
// caller (nil until its token was checked), and writeError counts the
// refusals written through it against that caller.
type reply struct {
	http.ResponseWriter
	s *Server
	c *caller
	r *http.Request
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *reply) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// nobody is the caller of a request that did not come through ServeHTTP:
// it may do nothing that needs a right.
var nobody = &caller{name: ""}

// callerOf returns the caller of the request w answers.
func callerOf(w http.ResponseWriter) *caller {
	if rp, ok := w.(*reply); ok && rp.c != nil {
		return rp.c
	}
	return nobody
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
	if s.cfg.machineID == nil {
		return -1
	}
	return s.cfg.machineID()
}

// snowflake returns the shared snowflake generator.
func (s *Server) snowflake(ctx context.Context) (engine.Generator, error) {
	return s.cfg.Registry.Generator(ctx, genreg.Snowflake, "")
}

// serves reports whether the allow-list, if any, admits chain name.
func (s *Server) serves(name string) bool { return s.allowed == nil || s.allowed[name] }

// admit checks a chain or proxy segment name for caller c and takes its
// slot among the names this server serves: a configured name has one; a
// new name takes one of c's allowance (maxChainsPerToken), before the
// Registry or the store is asked, so that concurrent first requests cannot
// pass the allowance together. A name the server derives (a dated chain's
// period) is nobody's to draw or fetch.
func (s *Server) admit(c *caller, name string) *httpError {
	if !validName(name) {
		return refusal(http.StatusBadRequest, "bad_chain", fmt.Sprintf("chain name %s: %s", quoteBounded(name), nameRule))
	}
	if derived(name) {
		return refusal(http.StatusForbidden, wire.CodeForbidden, fmt.Sprintf("name %q: %s", name, reservedRule))
	}
	if !s.serves(name) {
		return refusal(http.StatusNotFound, wire.CodeUnknownChain, fmt.Sprintf("chain %q is not served here", name))
	}
	s.mu.Lock()
	if _, ok := s.names[name]; ok {
		s.mu.Unlock()
		return nil
	}
	if s.opened[c.name] >= s.cfg.maxChainsPerToken {
		s.mu.Unlock()
		return refusal(http.StatusTooManyRequests, wire.CodeTooManyChains, fmt.Sprintf(
			"this token has opened %d chain and segment names, its allowance; draw from those, or have the operator configure the chain (-chains, -dated)",
			s.cfg.maxChainsPerToken))
	}
	s.names[name] = &slot{owner: c.name}
	s.opened[c.name]++
	s.mu.Unlock()
	s.ledger.audit(c.name, slog.LevelInfo, "idforge serve: chain opened", "token", c.name, "name", name)
	return nil
}

// release gives back the slot of name, opened but never built.
func (s *Server) release(name string) {
	sl := s.names[name]
	if sl == nil || sl.built || sl.fixed {
		return
	}
	delete(s.names, name)
	s.opened[sl.owner]--
}

// chain returns the chain generator for name, which the Registry creates
// on first use (see admit).
func (s *Server) chain(ctx context.Context, c *caller, name string) (engine.Generator, *httpError) {
	s.mu.RLock()
	sl := s.names[name]
	built := sl != nil && sl.built
	s.mu.RUnlock()
	if !built {
		if herr := s.admit(c, name); herr != nil {
			return nil, herr
		}
	}
	// The Registry makes one generator per name, however many ask at once.
	g, err := s.cfg.Registry.Generator(ctx, genreg.Chain, name)
	if built {
		if err != nil {
			return nil, s.generatorError(c, name, err)
		}
		return g, nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.release(name)
		return nil, s.generatorError(c, name, err)
	}
	if sl := s.names[name]; sl != nil {
		sl.built = true
	}
	return g, nil
}

// generatorError maps an engine error to a status and a code, by its
// reason (internal/reason): configuration and unknown generators are the
// caller's fault (4xx), everything else is 503. The answer says what
// happened in the server's words (see publicMessage): the error's own text
// may name the store's address and key prefix, and goes to the log.
func (s *Server) generatorError(c *caller, name string, err error) *httpError {
	r := reason.Of(err)
	e := &httpError{status: http.StatusServiceUnavailable, code: r, message: publicMessage(r, name), detail: err.Error()}
	switch r {
	case reason.UnknownGenerator:
		// The Registry's own words on the kinds and names it makes: no
		// store speaks here, and they say what to configure.
		e.status, e.message = http.StatusNotFound, err.Error()
	case reason.InvalidConfig:
		e.status, e.code = http.StatusBadRequest, "invalid"
	case reason.Canceled, reason.Deadline:
		e.code = wire.CodeTimeout
	case reason.StoreReset, reason.MachineIDLost, reason.ClockBackwards, reason.Closed, reason.IDOverflow:
	default:
		e.code = "unavailable"
	}
	if r == reason.IDOverflow {
		s.ledger.audit(c.name, slog.LevelWarn, "idforge serve: sequence exhausted", "token", c.name, "name", name, "err", err)
	}
	return e
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
		srv.ConnState = func(c net.Conn, st http.ConnState) { s.limits.connState(c, st, s.cfg.maxConns) }
		// Shutdown writes the summaries of the interval in progress.
		srv.RegisterOnShutdown(s.ledger.flush)
	}
	return srv
}

// metricsHandler serves the registry's metrics, the server's refusals, the
// Go runtime's and the process's, from a Prometheus registry of the
// server's own.
func metricsHandler(reg *idforge.Registry, l *ledger) http.Handler {
	r := prometheus.NewRegistry()
	r.MustRegister(metrics.New(reg), l, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return promhttp.HandlerFor(r, promhttp.HandlerOpts{})
}
