package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	_ "github.com/glebarez/go-sqlite"  // driver "sqlite": the embedded store
	_ "github.com/go-sql-driver/mysql" // driver "mysql": MariaDB/MySQL DSNs
	_ "github.com/jackc/pgx/v5/stdlib" // driver "pgx": PostgreSQL DSNs
	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/sqlstore"
)

// defaultStoreFile is the embedded SQLite store serve opens in the working
// directory when no -store is given.
const defaultStoreFile = "idforge.db"

// openedStore is the store serve runs on (the root store contract) with a
// liveness probe for /readyz, a closer, a description for logs (with no
// password in it) and a shorter one for the state page (no address, no
// path: what kind of store, and a SQLite file's name), and the operator's
// commands on it (serve's proxy quotas list its machine IDs). Opened for
// the operator's commands, it holds no store but their admin.
type openedStore struct {
	store    idforge.Store
	admin    machine.Admin
	describe string
	public   string
	ping     func(ctx context.Context) error
	close    func() error
}

// openStore opens the store spec names: "" is the SQLite file idforge.db in
// dir; "redis://" or "rediss://" URLs open Redis; "postgres://",
// "postgresql://" URLs and "host=... " keyword DSNs open PostgreSQL;
// "user:pass@tcp(host:port)/db" DSNs (or the same after "mysql://") open
// MariaDB/MySQL; "sqlite:PATH" opens another SQLite file. Every form is one
// edit here when the stores' constructors change. src names where spec came
// from (-store or its variable) in errors; log gets the store's warnings.
// init declares a store found without an epoch brand-new (`store init`); a
// SQLite file this call creates counts as brand-new anyway. window is the
// store's RideThrough (0: its default).
func openStore(ctx context.Context, spec, src, dir string, log *slog.Logger, init bool, window time.Duration) (*openedStore, error) {
	return openStoreFor(ctx, spec, src, dir, log, init, window, false)
}

// openStoreFor is openStore, or with admin the store's operator commands
// (sqlstore.OpenAdmin, redisstore.OpenAdmin), which accept whatever
// ride-through window the store records.
func openStoreFor(ctx context.Context, spec, src, dir string, log *slog.Logger, init bool, window time.Duration, admin bool) (*openedStore, error) {
	switch {
	case spec == "":
		path := filepath.Join(dir, defaultStoreFile)
		return openSQL(ctx, src, "sqlite", sqliteDSN(path), "sqlite "+path, init || !exists(path), window, log, admin)
	case strings.HasPrefix(spec, "sqlite:"):
		path := strings.TrimPrefix(spec, "sqlite:")
		return openSQL(ctx, src, "sqlite", sqliteDSN(path), "sqlite "+path, init || !exists(path), window, log, admin)
	case strings.HasPrefix(spec, "redis://"), strings.HasPrefix(spec, "rediss://"):
		// prefix=... is ours (the key prefix), the rest is go-redis's URL.
		u, err := url.Parse(spec)
		if err != nil {
			return nil, usagef("%s: %v", src, redact(err.Error(), spec))
		}
		q := u.Query()
		rs := redisstore.Settings{Logger: log, Init: init, RideThrough: window}
		if q.Has("prefix") {
			rs.Prefix = q.Get("prefix")
			q.Del("prefix")
		}
		if q.Has("allow_volatile") {
			rs.AllowVolatile = q.Get("allow_volatile") == "1" || q.Get("allow_volatile") == "true"
			q.Del("allow_volatile")
		}
		u.RawQuery = q.Encode()
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, usagef("%s: %v", src, redact(err.Error(), spec))
		}
		client := redis.NewClient(opts)
		if err := client.Ping(ctx).Err(); err != nil {
			client.Close()
			return nil, fmt.Errorf("%w: redis %s: %v", engine.ErrStoreUnavailable, opts.Addr, err)
		}
		octx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		opened := &openedStore{
			describe: "redis " + opts.Addr,
			public:   "redis",
			ping:     func(ctx context.Context) error { return client.Ping(ctx).Err() },
			close:    client.Close,
		}
		if !admin {
			opened.store, err = redisstore.Open(octx, client, rs)
		}
		if err == nil {
			opened.admin, err = redisstore.OpenAdmin(octx, client, rs)
		}
		if err != nil {
			client.Close()
			if errors.Is(err, redisstore.ErrVolatile) { // its message names the Go setting
				err = fmt.Errorf("%w: %s (appendonly no, no save rules): a restart forgets every machine ID and segment handed out;"+
					" run it with appendonly yes and appendfsync always, or add ?allow_volatile=1 to the %s URL to accept that",
					redisstore.ErrVolatile, opts.Addr, src)
			}
			return nil, err
		}
		return opened, nil
	case strings.HasPrefix(spec, "postgres://"), strings.HasPrefix(spec, "postgresql://"), strings.Contains(spec, "host="):
		return openSQL(ctx, src, "pgx", spec, "postgresql", init, window, log, admin)
	case strings.HasPrefix(spec, "mysql://"):
		return openSQL(ctx, src, "mysql", strings.TrimPrefix(spec, "mysql://"), "mariadb", init, window, log, admin)
	case strings.Contains(spec, "@tcp(") || strings.Contains(spec, "@unix("):
		return openSQL(ctx, src, "mysql", spec, "mariadb", init, window, log, admin)
	}
	return nil, usagef("%s %q: want a redis:// URL, a postgres:// URL, a MariaDB DSN (user@tcp(host:3306)/db) or sqlite:PATH", src, redact(spec, spec))
}

// redact hides the password of a URL-style spec in s.
func redact(s, spec string) string {
	if i := strings.Index(spec, "://"); i >= 0 {
		if at := strings.LastIndex(spec, "@"); at > i {
			if c := strings.Index(spec[i+3:at], ":"); c >= 0 {
				pw := spec[i+3+c+1 : at]
				if pw != "" {
					s = strings.ReplaceAll(s, pw, "xxxxx")
				}
			}
		}
	}
	return s
}

func sqliteDSN(path string) string {
	return "file:" + path + "?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)"
}

// exists reports whether a file is at path: a SQLite store whose file is
// not there yet has never handed out anything.
func exists(path string) bool {
	_, err := os.Stat(path)
	return err == nil
}

func openSQL(ctx context.Context, src, driver, dsn, describe string, init bool, window time.Duration, log *slog.Logger, admin bool) (*openedStore, error) {
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, usagef("%s: %v", src, err)
	}
	public := describe
	if driver == "sqlite" {
		file := strings.TrimPrefix(strings.SplitN(dsn, "?", 2)[0], "file:")
		public = "sqlite " + filepath.Base(file)
		if dir := filepath.Dir(file); dir != "" {
			if _, err := os.Stat(dir); err != nil {
				db.Close()
				return nil, usagef("%s: %v", src, err)
			}
		}
	} else {
		db.SetMaxOpenConns(16)
		db.SetConnMaxIdleTime(time.Minute)
	}
	octx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	set := sqlstore.Settings{CreateTables: true, Init: init, RideThrough: window, Logger: log}
	opened := &openedStore{describe: describe, public: public, ping: db.PingContext}
	if admin {
		ad, err := sqlstore.OpenAdmin(octx, db, set)
		if err != nil {
			db.Close()
			return nil, err
		}
		opened.admin, opened.close = ad, func() error { return errors.Join(ad.Close(), db.Close()) }
		return opened, nil
	}
	st, err := sqlstore.Open(octx, db, set)
	if err != nil {
		db.Close()
		return nil, err
	}
	ad, err := sqlstore.OpenAdmin(octx, db, set)
	if err != nil {
		st.Close()
		db.Close()
		return nil, err
	}
	opened.store, opened.admin = st, ad
	opened.close = func() error { return errors.Join(ad.Close(), st.Close(), db.Close()) }
	return opened, nil
}

// storeActions are the actions of `idforge store` and the argument each
// takes ("" for none), in the order usage lists them. A new action is one
// entry here and one case in storeAction (or, like init, in setupStore).
var storeActions = []struct{ name, arg string }{
	{"init", ""},
	{"machines", ""},
	{"release", "MACHINE_ID"},
	{"chain", "NAME"},
	{"ride-through", "DURATION"},
	{"restored", ""},
}

// storeActionList is the actions as usage shows them: init, machines,
// release MACHINE_ID, ...
func storeActionList(sep string) string {
	var b strings.Builder
	for i, a := range storeActions {
		if i > 0 {
			b.WriteString(sep)
		}
		b.WriteString(strings.TrimSpace(a.name + " " + a.arg))
	}
	return b.String()
}

// storeActionOf checks the arguments of `idforge store` (flags taken out):
// one action and the argument it takes.
func storeActionOf(args []string) (string, error) {
	if len(args) == 0 {
		return "", usagef("want an action: %s", storeActionList(", "))
	}
	for _, a := range storeActions {
		if a.name != args[0] {
			continue
		}
		switch {
		case a.arg == "" && len(args) > 1:
			return "", usagef("%s takes no argument, got %q", a.name, args[1:])
		case a.arg != "" && len(args) == 1:
			return "", usagef("%s needs %s", a.name, a.arg)
		case a.arg != "" && len(args) > 2:
			return "", usagef("%s takes one %s, got %q", a.name, a.arg, args[1:])
		}
		return a.name, nil
	}
	return "", usagef("unknown action %q: want one of %s", args[0], storeActionList(", "))
}

func setupStore(fs *flag.FlagSet) runFunc {
	spec := fs.String("store", "", "the store: a redis:// URL, a postgres:// URL, a MariaDB DSN user@tcp(host:3306)/db, or sqlite:PATH; "+
		"empty means the SQLite file "+defaultStoreFile+" in the working directory [IDFORGE_STORE]")
	namespace := fs.String("namespace", "default", "machine-ID `namespace` of machines and release")
	force := fs.Bool("force", false, "release: give back a machine ID even if its holder looks alive; ride-through: rewrite the window even if a holder heartbeated within the old one")
	existsOK := fs.Bool("exists-ok", false, "init: exit 0 on a store that already has an epoch, saying so and changing nothing (for a setup step that runs at every deploy)")
	raise := fs.Int64("raise", 0, "chain: raise the counter to at least `N` (never lowers it)")
	rideThrough := parsedVar(fs, "ride-through", 0, positiveDuration, "want a positive duration such as 60s",
		"init: the ride-through window, a `duration`, the store records (default 1s); every process of the store must then use it")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		action, err := storeActionOf(args)
		if err != nil {
			return err
		}
		src := "-store"
		if *spec == "" {
			if env := os.Getenv("IDFORGE_STORE"); env != "" {
				*spec, src = env, "IDFORGE_STORE"
			}
		}
		if strings.HasPrefix(*spec, "http://") || strings.HasPrefix(*spec, "https://") {
			// A proxy store hands out leases and ranges only: the operator's
			// commands change what every holder relies on, so they go to
			// the store itself.
			return usagef("%s %q is an HTTP address: `idforge store` works on the store itself, not through idforge serve -proxy;"+
				" give it the -store that serve runs on", src, redact(*spec, *spec))
		}
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		// The operator's commands hold no machine ID, so any window the
		// store records will do: they open the store's Admin, which takes
		// the window it records. ride-through rewrites it, and init on a
		// store that records another one says the store is set up already;
		// a new store records the one given.
		// An epoch created before this moment was there already. The
		// store dates a new one by this process's clock, to the
		// millisecond.
		began := time.Now().Truncate(time.Millisecond)
		log := slog.New(slog.NewTextHandler(stderr, nil))
		st, err := openStoreFor(ctx, *spec, src, wd, log, action == "init", *rideThrough, true)
		if err != nil {
			return err
		}
		defer st.close()
		if action == "init" {
			return storeInit(st.admin, st.describe, began, *existsOK, *rideThrough != 0, stdout)
		}
		return storeAction(ctx, st.admin, action, args[1:], *namespace, *force, *raise, stdout)
	}
}

// storeInit reports what `idforge store init` found: a store it declared
// brand-new, or one that already had an epoch (an error unless existsOK).
func storeInit(ad machine.Admin, store string, began time.Time, existsOK, window bool, stdout io.Writer) error {
	created := ad.EpochCreated()
	if ad.BrandNew() && !created.Before(began) {
		_, err := fmt.Fprintf(stdout, "%s: brand-new: sequences missing from it start at the store's Start\n", store)
		return err
	}
	var msg string
	if ad.BrandNew() {
		msg = fmt.Sprintf("%s: already initialised (brand-new epoch of %s): it may have handed out IDs since; init changed nothing",
			store, created.UTC().Format(time.RFC3339))
	} else {
		msg = fmt.Sprintf("%s: already has an epoch (of %s) that is not brand-new: it may have handed out IDs, "+
			"so sequences missing from it start above a Floor; init changed nothing", store, created.UTC().Format(time.RFC3339))
	}
	if window {
		msg += ", nor the window it records (idforge store ride-through changes that)"
	}
	if !existsOK {
		return errors.New(msg + " (-exists-ok makes this exit 0)")
	}
	_, err := fmt.Fprintln(stdout, msg)
	return err
}

// storeAction runs machines, release, chain, ride-through or restored on an
// opened store.
func storeAction(ctx context.Context, ad machine.Admin, action string, args []string, namespace string, force bool, raise int64, stdout io.Writer) error {
	switch action {
	case "machines":
		as, err := ad.Machines(ctx, namespace)
		if err != nil {
			return err
		}
		w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(w, "MACHINE\tINSTANCE\tSTABLE\tHELD\tLAST TIMESTAMP")
		for _, a := range as {
			inst := a.Instance.ID
			if inst == "" {
				inst = "-"
			}
			last := "-"
			if a.LastTimestamp > 0 {
				last = time.UnixMilli(a.LastTimestamp).UTC().Format("2006-01-02T15:04:05.000Z")
			}
			fmt.Fprintf(w, "%d\t%s\t%t\t%t\t%s\n", a.MachineID, inst, a.Instance.Stable, a.Held, last)
		}
		return w.Flush()
	case "release":
		id, err := strconv.ParseInt(args[0], 10, 64)
		if err != nil || id < 0 {
			return usagef("release: machine ID %q is not a non-negative integer", args[0])
		}
		if err := ad.Release(ctx, namespace, id, force); err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "namespace %q: machine ID %d released\n", namespace, id)
		return err
	case "ride-through":
		w, err := time.ParseDuration(args[0])
		if err != nil || w <= 0 {
			return usagef("ride-through: %q is not a positive duration (60s, 1m)", args[0])
		}
		old, err := ad.SetRideThrough(ctx, w, force)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "ride-through window %v (was %v): start every process of the store with RideThrough %v\n", w, old, w)
		return err
	case "restored":
		if err := ad.Restored(ctx); err != nil {
			return err
		}
		_, err := fmt.Fprintln(stdout, "declared restored: a new epoch, every sequence untrusted: running processes see a reset and go on above what they held;"+
			" any other sequence starts only above a Floor (the GORM plugin and the sharding repositories derive one) or after `idforge store chain NAME -raise N`")
		return err
	default: // chain
		name := args[0]
		var c int64
		var found bool
		var err error
		if raise != 0 {
			c, err = ad.RaiseCounter(ctx, name, raise)
			found = err == nil
		} else {
			c, found, err = ad.Counter(ctx, name)
		}
		switch {
		case err != nil:
			return err
		case !found:
			return fmt.Errorf("chain %q: no such sequence in the store", name)
		}
		_, err = fmt.Fprintf(stdout, "chain %q: counter %d\n", name, c)
		return err
	}
}
