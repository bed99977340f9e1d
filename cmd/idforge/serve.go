package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/wire"
	"github.com/idforge/idforge/server"
)

// serveEnv maps serve's flags to the environment variables that set them
// (a flag on the command line wins). The names follow the library's settings.
var serveEnv = []struct{ flag, env string }{
	{"addr", "IDFORGE_ADDR"},
	{"store", "IDFORGE_STORE"},
	{"namespace", "IDFORGE_NAMESPACE"},
	{"instance", "IDFORGE_INSTANCE"},
	{"layout", "IDFORGE_LAYOUT"},
	{"chains", "IDFORGE_CHAINS"},
	{"dated", "IDFORGE_DATED"},
	{"zone", "IDFORGE_ZONE"},
	{"tokens", "IDFORGE_TOKENS_FILE"},
	{"allowed-hosts", "IDFORGE_ALLOWED_HOSTS"},
	{"proxy", "IDFORGE_PROXY"},
	{"shutdown-timeout", "IDFORGE_SHUTDOWN_TIMEOUT"},
	{"ride-through", "IDFORGE_RIDE_THROUGH"},
}

// serveOptions are serve's parsed flags.
type serveOptions struct {
	addr, store, namespace, instance, chains, tokens, hosts string
	dated                                                   string
	zone                                                    **time.Location
	layout                                                  *enumFlag
	proxy                                                   *bool
	shutdown                                                *time.Duration
	rideThrough                                             *time.Duration    // 0: the store's default
	fromEnv                                                 map[string]string // flag name → the variable that set it
}

// source names what set flag name, as the user wrote it: -name, or the
// environment variable.
func (o *serveOptions) source(name string) string {
	if env, ok := o.fromEnv[name]; ok {
		return env
	}
	return "-" + name
}

func setupServe(fs *flag.FlagSet) runFunc {
	o := &serveOptions{}
	fs.StringVar(&o.addr, "addr", "127.0.0.1:8080", "listen `address` (host:port); 127.0.0.1 unless told otherwise [IDFORGE_ADDR]")
	fs.StringVar(&o.store, "store", "", "store: a redis:// URL, a postgres:// URL, a MariaDB DSN user@tcp(host:3306)/db, or sqlite:PATH; "+
		"empty means the SQLite file "+defaultStoreFile+" in the working directory [IDFORGE_STORE]")
	fs.StringVar(&o.namespace, "namespace", "default", "machine-ID `namespace`, usually the service name [IDFORGE_NAMESPACE]")
	fs.StringVar(&o.instance, "instance", "", "stable instance `ID` (a pod name) that keeps its machine ID across restarts; "+
		"empty means a new host:pid instance every start [IDFORGE_INSTANCE]")
	o.layout = enumVar(fs, "layout", "default", layoutNames(), "snowflake bit `layout` [IDFORGE_LAYOUT]")
	fs.StringVar(&o.chains, "chains", "", fmt.Sprintf("comma-separated chain `names` callers may draw from (and the -dated ones); "+
		"empty admits any name, up to %d new names per token [IDFORGE_CHAINS]", wire.MaxChains))
	fs.StringVar(&o.dated, "dated", "", "comma-separated `name=format` pairs: chains served in a dated format of their own, "+
		"as invoice=INV-{yyyy}{MM}{dd}-{seq:6}; other chains take one in ?format= [IDFORGE_DATED]")
	o.zone = parsedVar(fs, "zone", time.UTC, time.LoadLocation, "want a time zone such as UTC or Europe/Berlin",
		"time `zone` whose days, months and years dated formats count in (default UTC) [IDFORGE_ZONE]")
	fs.StringVar(&o.tokens, "tokens", "", "`file` of bearer tokens, one \"caller token [namespaces=a,b] [segments=a,b] [chains=a,b] [machines=N]\" a line, "+
		"a regular file of this user, mode 600; required on every route but /healthz and /readyz; SIGHUP reloads it [IDFORGE_TOKENS_FILE]")
	fs.StringVar(&o.hosts, "allowed-hosts", "", "comma-separated host `names` requests may name in Host besides loopback ones; "+
		"without -tokens only these and loopback names are answered [IDFORGE_ALLOWED_HOSTS]")
	o.proxy = parsedVar(fs, "proxy", false, strconv.ParseBool, "want true or false",
		"serve the /v1/proxy endpoints that proxy stores take machine IDs and segments from [IDFORGE_PROXY]")
	o.shutdown = parsedVar(fs, "shutdown-timeout", 10*time.Second, positiveDuration, "want a positive duration such as 10s",
		"how long SIGTERM waits for in-flight requests, a `duration` such as 10s [IDFORGE_SHUTDOWN_TIMEOUT]")
	o.rideThrough = parsedVar(fs, "ride-through", 0, positiveDuration, "want a positive duration such as 60s",
		"the store's ride-through window, a `duration`: how long the server goes on issuing snowflake IDs while the store is unreachable "+
			"(default 1s); every process of the store must use the one it records: `idforge store ride-through` changes it [IDFORGE_RIDE_THROUGH]")
	return func(ctx context.Context, args []string, stdout, _ io.Writer) error {
		if len(args) > 0 {
			return usagef("unexpected arguments %q", args)
		}
		var err error
		if o.fromEnv, err = applyEnv(fs, os.Getenv); err != nil {
			return err
		}
		ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
		defer stop()
		// SIGHUP reloads the tokens, from now on: its default would end
		// the process without its shutdown, holding its machine ID.
		hup := make(chan os.Signal, 1)
		signal.Notify(hup, syscall.SIGHUP)
		defer signal.Stop(hup)
		return serve(ctx, o, hup, stdout)
	}
}

// applyEnv sets each flag not given on the command line from its
// environment variable, and returns the variable of each flag it set.
func applyEnv(fs *flag.FlagSet, getenv func(string) string) (map[string]string, error) {
	given := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { given[f.Name] = true })
	set := map[string]string{}
	for _, e := range serveEnv {
		v := getenv(e.env)
		if v == "" || given[e.flag] {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return nil, usagef("%s=%q: %v", e.env, v, err)
		}
		set[e.flag] = e.env
	}
	return set, nil
}

// loopback reports whether host names only this machine.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// splitList returns the non-empty, trimmed items of a comma-separated list.
func splitList(s string) []string {
	var items []string
	for v := range strings.SplitSeq(s, ",") {
		if v = strings.TrimSpace(v); v != "" {
			items = append(items, v)
		}
	}
	return items
}

// reloadTokens reads the tokens file again and hands it to h; a file that
// cannot be read or parsed leaves the tokens in use as they are.
func reloadTokens(h *server.Server, path string, log *slog.Logger) {
	if path == "" {
		log.Warn("idforge serve: SIGHUP: no tokens file to reload (serving without -tokens)")
		return
	}
	if err := h.ReloadTokens(); err != nil {
		log.Error("idforge serve: SIGHUP: tokens not reloaded; the previous tokens stay in force", "err", err)
		return
	}
	log.Info("idforge serve: tokens reloaded", "file", path)
}

// serve runs the service until ctx ends, then shuts down: stop accepting,
// finish in-flight requests, close the registry (reverting the machine ID)
// and the store. Each value on hup reloads the tokens file.
func serve(ctx context.Context, o *serveOptions, hup <-chan os.Signal, stdout io.Writer) (err error) {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	tokens := o.tokens != ""
	if host, _, err := net.SplitHostPort(o.addr); err == nil && !loopback(host) {
		if *o.proxy && !tokens {
			return usagef("-proxy on %s, beyond loopback, hands out machine IDs and segments to anyone who can connect: give -tokens", o.addr)
		}
		if !tokens {
			log.Warn("idforge serve: listening beyond loopback without -tokens: anyone who can connect draws IDs, "+
				"if the request names a loopback host or one of -allowed-hosts", "addr", o.addr)
		}
	}
	// Listen before taking a machine ID: a port in use or a bad address
	// fails here, having taken nothing.
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		return usagef("%s: %v", o.source("addr"), err)
	}
	defer ln.Close() // for the failures before Serve, which closes it otherwise
	wd, err := os.Getwd()
	if err != nil {
		return err
	}
	st, err := openStore(ctx, o.store, o.source("store"), wd, log, false, *o.rideThrough)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, st.close()) }()

	layout := layoutByName(o.layout.value)
	// The instance is chosen here, not in the registry, so the proxy can
	// refuse to serve it to anyone else.
	inst := machine.Instance{Namespace: o.namespace, ID: o.instance, Stable: true}
	if o.instance == "" {
		if inst, err = leased.HostInstance(o.namespace, 0); err != nil {
			return err
		}
	}
	dated := map[string]string{}
	for _, pair := range splitList(o.dated) {
		name, format, ok := strings.Cut(pair, "=")
		if !ok {
			return usagef("%s: %q is not name=format", o.source("dated"), pair)
		}
		dated[name] = format
	}
	reg, err := newRegistry(ctx, registrySettings{Instance: inst, Layout: layout, Logger: log, Store: st.store, Zone: *o.zone})
	if err != nil {
		return err
	}
	defer func() {
		id := reg.Stats().MachineID
		if cerr := reg.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("give machine ID %d back: %w", id, cerr))
		} else if id >= 0 { // -1: the lease was lost, nothing to give back
			log.Info("idforge serve: machine ID given back", "machine_id", id)
		}
	}()

	cfg := server.Settings{
		Registry:     reg,
		Layout:       layout,
		Instance:     inst,
		Chains:       splitList(o.chains),
		Dated:        dated,
		TokensFile:   o.tokens,
		StoreName:    st.public,
		AllowedHosts: splitList(o.hosts),
		Logger:       log,
		Ready: func(ctx context.Context) error {
			// A snowflake ID is free to draw, and drawing one asks the
			// lease's fence whether the machine ID is still held.
			g, err := reg.Generator(ctx, genreg.Snowflake, "")
			if err == nil {
				_, err = g.NextID(ctx)
			}
			if err != nil {
				return fmt.Errorf("lease: %w", err)
			}
			if err := st.ping(ctx); err != nil {
				return fmt.Errorf("store: %w", err)
			}
			return nil
		},
	}
	if *o.proxy {
		cfg.Proxy, cfg.Admin = st.store, st.admin
	}
	h, err := server.New(cfg)
	if err != nil {
		return err
	}
	srv := server.NewHTTPServer(o.addr, h)
	fmt.Fprintf(stdout, "idforge serve: listening on http://%s (machine ID %d, namespace %s, store %s)\n",
		ln.Addr(), reg.Stats().MachineID, o.namespace, st.describe)
	if f, ok := stdout.(interface{ Sync() error }); ok {
		f.Sync()
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	// Reloads run off this loop, one at a time, so that a tokens file that
	// is slow to read cannot hold up SIGTERM; SIGHUPs that arrive during
	// one make one more.
	reload := make(chan struct{}, 1)
	defer close(reload)
	go func() {
		for range reload {
			reloadTokens(h, o.tokens, log)
		}
	}()
	for running := true; running; {
		select {
		case err := <-done:
			return err
		case <-hup:
			select {
			case reload <- struct{}{}:
			default: // one is pending already: it reads the file as it is then
			}
		case <-ctx.Done():
			running = false
		}
	}
	log.Info("idforge serve: shutting down: finishing in-flight requests, then giving the machine ID back")
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *o.shutdown)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		return fmt.Errorf("shutdown: %w", err)
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
