package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/idgen"
	"github.com/idforge/idforge/internal/leased"
	"github.com/idforge/idforge/internal/uuidv7"
)

// genKinds are the kinds gen draws.
var genKinds = []string{genreg.Snowflake, genreg.UUIDv7, genreg.Chain}

func setupGen(fs *flag.FlagSet) runFunc {
	n := parsedVar(fs, "n", 1, strconv.Atoi, "want a whole number", "how many IDs to print, a whole `number`")
	machineID := parsedVar(fs, "machine", 0, func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
		"want a whole number", "machine `ID` (0 to the layout's maximum), without -store")
	kind := enumVar(fs, "kind", genreg.Snowflake, genKinds, "`kind` of ID")
	name := fs.String("name", "", "chain `name` (kind chain)")
	layout := enumVar(fs, "layout", "default", layoutNames(), "bit `layout`")
	format := formatVar(fs, "format", "output `format`")
	store := fs.String("store", "", "the `store` to lease the machine ID from, as serve's -store: a redis:// URL, a postgres:// URL, "+
		"a MariaDB DSN user@tcp(host:3306)/db, or sqlite:PATH; needed for chains. Without it snowflake IDs use -machine, with no lease")
	namespace := fs.String("namespace", "default", "machine-ID `namespace` with -store")
	rideThrough := parsedVar(fs, "ride-through", 0, positiveDuration, "want a positive duration such as 60s",
		"with -store, the store's ride-through window, a `duration` (default 1s): the one the store records, as serve's -ride-through")
	zone := parsedVar(fs, "zone", time.UTC, time.LoadLocation, "want a time zone such as UTC or Europe/Berlin",
		"time `zone` whose days a dated format counts in (default UTC)")
	return func(ctx context.Context, args []string, stdout, stderr io.Writer) error {
		machineGiven := false
		fs.Visit(func(f *flag.Flag) { machineGiven = machineGiven || f.Name == "machine" })
		switch {
		case len(args) > 0:
			return usagef("unexpected arguments %q", args)
		case *n < 1:
			return usagef("-n %d: want at least 1", *n)
		case *store != "" && machineGiven:
			return usagef("-machine with -store: the store leases the machine ID")
		case kind.value == genreg.Chain && (*store == "" || *name == ""):
			return usagef("-kind chain needs -store and -name: chains count in a store")
		case kind.value != genreg.Chain && *name != "":
			return usagef("-name is for -kind chain")
		case kind.value == genreg.UUIDv7 && format.value != "decimal":
			return usagef("-kind uuidv7 takes no -format: UUIDs come in their canonical form")
		case kind.value == genreg.Chain && format.value == "friendly":
			return usagef("-format friendly is for snowflake IDs")
		case dated.IsFormat(format.value) && kind.value != genreg.Chain:
			return usagef("a dated -format is for -kind chain")
		}
		l := layoutByName(layout.value)
		var prov engine.Provider
		if *store == "" {
			m := *machineID
			reg := genreg.New()
			defer reg.Close()
			g, err := snowflake.New(m, snowflake.Settings{Layout: l})
			if err != nil {
				return err
			}
			if err := reg.Register(genreg.Snowflake, "", g); err != nil {
				return err
			}
			if err := reg.Register(genreg.UUIDv7, "", uuidv7.New(nil)); err != nil {
				return err
			}
			if kind.value == genreg.Snowflake {
				fmt.Fprintf(stderr, "idforge gen: machine ID %d (-machine), no lease: another process issuing under machine ID %d now "+
					"can issue the same IDs; give -store to lease a machine ID\n", m, m)
			}
			prov = reg
		} else {
			wd, err := os.Getwd()
			if err != nil {
				return err
			}
			// The store says why it waits (a new epoch) and warns of Redis
			// without persistence; the registry's events stay quiet.
			quiet := slog.New(slog.DiscardHandler)
			st, err := openStore(ctx, *store, "-store", wd, slog.New(slog.NewTextHandler(stderr, nil)), false, *rideThrough)
			if err != nil {
				return err
			}
			defer st.close()
			inst, err := leased.HostInstance(*namespace, 0)
			if err != nil {
				return err
			}
			reg, err := idforge.New(ctx, idforge.Settings{Namespace: *namespace, Instance: inst, Store: st.store, Layout: l, Zone: *zone, Logger: quiet})
			if err != nil {
				return err
			}
			defer reg.Close() // gives the machine ID back
			fmt.Fprintf(stderr, "idforge gen: machine ID %d leased from %s (namespace %s), given back on exit\n", reg.Stats().MachineID, st.describe, *namespace)
			prov = reg
		}
		next, err := drawer(ctx, prov, kind.value, *name, format.value, l)
		if err != nil {
			return err
		}
		return gen(ctx, next, *n, stdout)
	}
}

// drawer returns the function that draws one ID of kind (and chain name)
// from p as text in format.
func drawer(ctx context.Context, p engine.Provider, kind, name, format string, l snowflake.Layout) (func(context.Context) (string, error), error) {
	switch {
	case kind == genreg.UUIDv7:
		g, err := genreg.UUIDOf(ctx, p, kind, "")
		if err != nil {
			return nil, err
		}
		return func(ctx context.Context) (string, error) {
			u, err := g.NextUUID(ctx)
			return uuid.UUID(u).String(), err
		}, nil
	case dated.IsFormat(format):
		g, err := idgen.Dated(p, name, format)
		if err != nil {
			return nil, err
		}
		return g, nil
	}
	f, err := formatter(format, l)
	if err != nil {
		return nil, err
	}
	g, err := p.Generator(ctx, kind, name)
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) (string, error) {
		id, err := g.NextID(ctx)
		if err != nil {
			return "", err
		}
		return f.Format(id), nil
	}, nil
}

// gen writes n IDs from next, one per line. Buffered: a million IDs are a
// handful of writes.
func gen(ctx context.Context, next func(context.Context) (string, error), n int, stdout io.Writer) error {
	w := bufio.NewWriterSize(stdout, 64<<10)
	for range n {
		s, err := next(ctx)
		if err != nil {
			return err
		}
		w.WriteString(s)
		if err := w.WriteByte('\n'); err != nil {
			return fmt.Errorf("write: %w", err)
		}
	}
	if err := w.Flush(); err != nil {
		return fmt.Errorf("write: %w", err)
	}
	return nil
}
