package main

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/chain"
	mrand "math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/gormplugin"
)

// Cols are the columns every variant shares: about 100 bytes of payload and one
// indexed column (an account, as an orders table would have), filled from
// the same pseudo-random stream in every variant.
type Cols struct {
	AccountID int64
	CreatedAt time.Time
	Payload   string
}

func (c *Cols) base() *Cols { return c }

// autoRow's key comes from the server.
type autoRow struct {
	ID int64 `gorm:"primaryKey;autoIncrement"`
	Cols
}

// idRow's key is filled by idplugin from the registry's kind "key".
type idRow struct {
	ID int64 `gorm:"primaryKey" idgen:"key"`
	Cols
}

// binUUID is a UUID stored as BINARY(16) in MariaDB.
type binUUID uuid.UUID

// Value returns the 16 bytes.
func (u binUUID) Value() (driver.Value, error) { return u[:], nil }

type binUUIDRow struct {
	ID binUUID `gorm:"primaryKey"`
	Cols
}

// uuidRow's key is a uuid.UUID, which PostgreSQL stores as uuid.
type uuidRow struct {
	ID uuid.UUID `gorm:"primaryKey"`
	Cols
}

// idUUIDRow's key is filled by idplugin from the registry's kind "uuidv7",
// which it writes to BINARY(16) as 16 bytes once prepared.
type idUUIDRow struct {
	ID uuid.UUID `gorm:"primaryKey" idgen:"uuidv7"`
	Cols
}

// row is what a writer fills before each batch.
type row interface {
	base() *Cols
}

// writer inserts its share of a run's rows in batches through its own GORM
// handle and connection pool, as one instance of a service would.
type writer struct {
	db     *gorm.DB
	sqlDB  *sql.DB
	table  string
	data   *dataStream
	insert func(ctx context.Context, n int, created time.Time) error
	closer func()
}

func (w *writer) write(ctx context.Context, rows int64, batch int, prog *progress) error {
	for done := int64(0); done < rows; {
		if err := ctx.Err(); err != nil {
			return err
		}
		n := int(min(int64(batch), rows-done))
		if err := w.insert(ctx, n, time.Now()); err != nil {
			return err
		}
		done += int64(n)
		prog.add(int64(n))
	}
	return nil
}

func (w *writer) close() {
	if w.closer != nil {
		w.closer()
		w.closer = nil
	}
	if w.sqlDB != nil {
		w.sqlDB.Close()
		w.sqlDB = nil
	}
}

func closeAll(ws []*writer) {
	for _, w := range ws {
		w.close()
	}
}

// newWriters makes the writers of one run: one, or cfg.Fleet for the fleet.
func newWriters(cfg *Config, srv *server, variant, table string) (ws []*writer, err error) {
	defer func() {
		if err != nil {
			closeAll(ws)
		}
	}()
	n := 1
	if variant == VarFleet {
		n = cfg.Fleet
	}
	for i := range n {
		reg := provider{}
		var closer func()
		switch variant {
		case VarSnowflake, VarFleet:
			g, err := snowflake.New(int64(i + 1))
			if err != nil {
				return ws, err
			}
			reg["key"] = g
		case VarIDUUIDv7:
			r, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(int64(i + 1)), StateDir: "off"})
			if err != nil {
				return ws, err
			}
			g, err := r.Generator(context.Background(), "uuidv7", "")
			if err != nil {
				r.Close()
				return ws, err
			}
			reg["uuidv7"] = g
			closer = func() { r.Close() }
		case VarChain:
			var next atomic.Int64 // the store: one instance, so any counter serves
			c, err := chain.New(distFunc(func(_ context.Context, step int64) (int64, error) {
				return next.Add(step), nil
			}), segment.Settings{}, chain.Owned{})
			if err != nil {
				return ws, err
			}
			closer = func() { c.Close() }
			reg["key"] = c
		}
		w, err := newWriter(cfg, srv, variant, table, reg, uint64(i))
		if err != nil {
			if closer != nil {
				closer()
			}
			return ws, err
		}
		w.closer = closer
		ws = append(ws, w)
	}
	return ws, nil
}

func newWriter(cfg *Config, srv *server, variant, table string, reg provider, stream uint64) (*writer, error) {
	sqlDB, err := srv.OpenPool()
	if err != nil {
		return nil, err
	}
	db, err := gorm.Open(srv.Dialector(sqlDB), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		sqlDB.Close()
		return nil, err
	}
	// Every variant runs the same callbacks; only the idforge ones have a tag to fill.
	if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
		sqlDB.Close()
		return nil, err
	}
	w := &writer{db: db, sqlDB: sqlDB, table: table, data: newDataStream(cfg, stream)}
	switch variant {
	case VarAuto:
		w.insert = inserter(w, cfg.Batch, func(r *autoRow) { r.ID = 0 })
	case VarSnowflake, VarChain, VarFleet:
		w.insert = inserter(w, cfg.Batch, func(r *idRow) { r.ID = 0 })
	case VarIDUUIDv7:
		// The table is made by hand; Prepare on it, so that the plugin
		// sends BINARY(16) the 16 bytes.
		if err := idplugin.Prepare(db.Table(table), &idUUIDRow{}); err != nil {
			sqlDB.Close()
			return nil, err
		}
		w.insert = inserter(w, cfg.Batch, func(r *idUUIDRow) { r.ID = uuid.Nil })
	case VarUUIDv4, VarUUIDv7:
		gen := uuid.New
		if variant == VarUUIDv7 {
			gen = func() uuid.UUID { return uuid.Must(uuid.NewV7()) }
		}
		if srv.name == "mariadb" {
			w.insert = inserter(w, cfg.Batch, func(r *binUUIDRow) { r.ID = binUUID(gen()) })
		} else {
			w.insert = inserter(w, cfg.Batch, func(r *uuidRow) { r.ID = gen() })
		}
	default:
		sqlDB.Close()
		return nil, fmt.Errorf("unknown variant %q", variant)
	}
	return w, nil
}

// inserter returns a function that fills n rows of T (setKey sets or clears
// the key; idplugin fills zero keys) and inserts them with CreateInBatches.
func inserter[T any, P interface {
	*T
	row
}](w *writer, batch int, setKey func(P)) func(ctx context.Context, n int, created time.Time) error {
	rows := make([]T, batch)
	return func(ctx context.Context, n int, created time.Time) error {
		rs := rows[:n]
		for i := range rs {
			p := P(&rs[i])
			setKey(p)
			c := p.base()
			c.AccountID, c.Payload = w.data.next()
			c.CreatedAt = created
		}
		return w.db.WithContext(ctx).Table(w.table).CreateInBatches(&rs, batch).Error
	}
}

// dataStream yields the indexed column and the payload: the same sequence
// for the same stream number in every variant.
type dataStream struct {
	rng      *mrand.Rand
	accounts int64
	payload  int
	text     string
}

func newDataStream(cfg *Config, stream uint64) *dataStream {
	rng := mrand.New(mrand.NewPCG(13, stream))
	const letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
	b := make([]byte, 4096+cfg.Payload)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return &dataStream{rng: rng, accounts: cfg.Accounts, payload: cfg.Payload, text: string(b)}
}

func (d *dataStream) next() (int64, string) {
	off := d.rng.IntN(len(d.text) - d.payload + 1)
	return d.rng.Int64N(d.accounts) + 1, d.text[off : off+d.payload]
}

// provider hands out one generator per kind, by the kind's shared default
// name "": all a writer draws from.
type provider map[string]engine.Generator

// Generator implements engine.Provider.
func (p provider) Generator(_ context.Context, kind, name string) (engine.Generator, error) {
	if g, ok := p[kind]; ok && name == "" {
		return g, nil
	}
	return nil, fmt.Errorf("%w: %s %q", engine.ErrUnknownGenerator, kind, name)
}

// distFunc adapts a function to segment.Distributor.
type distFunc func(ctx context.Context, step int64) (int64, error)

// NextMaxID calls f.
func (f distFunc) NextMaxID(ctx context.Context, step int64) (int64, error) { return f(ctx, step) }

// Confirmed is the zero time: only the answers confirm.
func (distFunc) Confirmed() time.Time { return time.Time{} }
