package shardgorm

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// pool wraps the connection pool of the *gorm.DB the plugin is registered
// on, so that its transactions (db.Begin, db.Transaction) are the
// plugin's: bound to one shard at their first statement on a sharded
// model.
type pool struct {
	gorm.ConnPool
}

// GetDBConn returns the wrapped *sql.DB, for gorm.DB.DB.
func (p *pool) GetDBConn() (*sql.DB, error) {
	switch c := p.ConnPool.(type) {
	case *sql.DB:
		return c, nil
	case gorm.GetDBConnector:
		return c.GetDBConn()
	}
	return nil, gorm.ErrInvalidDB
}

// BeginTx begins a transaction that holds no connection until its first
// statement, which binds it to that statement's shard and database.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	return &ptx{main: p.ConnPool, ctx: ctx, opts: opts, batches: byCreateInBatches()}, nil
}

// byCreateInBatches reports whether the transaction being begun is the
// one GORM's CreateInBatches wraps its batches in. GORM gives a
// transaction no other sign of who began it, so the caller is read off
// the stack: BeginTx called by GORM's Begin and Transaction (through a
// prepared-statement pool, maybe) for CreateInBatches itself.
func byCreateInBatches() bool {
	pcs := make([]uintptr, 8)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		switch f.Function {
		case "gorm.io/gorm.(*DB).CreateInBatches":
			return true
		case "gorm.io/gorm.(*DB).Begin", "gorm.io/gorm.(*DB).Transaction", "gorm.io/gorm.(*PreparedStmtDB).BeginTx":
		default:
			return false
		}
		if !more {
			return false
		}
	}
}

// ptx is a transaction of the plugin: a real transaction on the one
// shard its statements on sharded models reach, begun at the first
// statement; the application's other models share it when their
// database is that shard's. A statement reaching another shard or
// database fails with sharding.ErrWrongShard, before anything is sent
// there.
//
// The transaction GORM's CreateInBatches begins is the batches' instead:
// as a Create splits its rows by shard, each database's rows of every
// batch go in a transaction of that database (one writer at a time on
// SQLite), committed one after the other when the last batch is written,
// or all rolled back at a batch's failure.
type ptx struct {
	main    gorm.ConnPool // the application's pool, for statements on other models
	ctx     context.Context
	opts    *sql.TxOptions
	batches bool // begun by CreateInBatches

	mu         sync.Mutex
	bound      any             // the pool of the database the transaction is bound to
	boundName  string          // that database, for errors
	tx         gorm.ConnPool   // its transaction: a *sql.Tx, or a prepared-statement one
	shard      *sharding.Shard // the shard it holds, at its first statement on a sharded model
	savepoints []string        // SAVEPOINT statements run before the binding, replayed at it
	ended      bool

	parts []*part // the batches' transactions, one per database
	rows  int     // the rows of the batches written so far
}

// part is a database's transaction in the batches of a CreateInBatches,
// with the positions of the rows written in it.
type part struct {
	db   int    // sharding.Shard.Database
	name string // sharding.Shard.DatabaseName
	tx   gorm.ConnPool
	rows []int
}

// identity is what tells two pools of one database apart from others: the
// *sql.DB under the wrappers.
func identity(c gorm.ConnPool) any {
	for {
		switch v := c.(type) {
		case *pool:
			c = v.ConnPool
		case *gorm.PreparedStmtDB:
			c = v.ConnPool
		default:
			return c
		}
	}
}

// begin begins a transaction on pool c.
func (t *ptx) begin(c gorm.ConnPool) (gorm.ConnPool, error) {
	if w, ok := c.(*pool); ok {
		c = w.ConnPool // begin on the database, not another plugin transaction
	}
	switch b := c.(type) {
	case gorm.TxBeginner:
		return b.BeginTx(t.ctx, t.opts)
	case gorm.ConnPoolBeginner:
		return b.BeginTx(t.ctx, t.opts)
	}
	return nil, gorm.ErrInvalidTransaction
}

// bind returns the transaction on the database of pool c, for shard s
// or, when s is nil, for a statement on another model, beginning it at
// the first statement; a second shard or database is refused.
func (t *ptx) bind(c gorm.ConnPool, s *sharding.Shard, name string) (gorm.ConnPool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, sql.ErrTxDone
	}
	if s != nil && t.batches {
		return t.part(c, *s)
	}
	if s != nil && t.shard != nil && *t.shard != *s {
		return nil, fmt.Errorf("%w: a transaction holding shard %s reaches shard %s: a transaction stays in one shard (there is no distributed transaction)",
			sharding.ErrWrongShard, t.shard, s)
	}
	id := identity(c)
	if t.bound != nil && t.bound != id {
		return nil, fmt.Errorf("%w: a transaction bound to %s reaches %s: a transaction stays in one database (there is no distributed transaction)",
			sharding.ErrWrongShard, t.boundName, name)
	}
	if t.bound == nil {
		tx, err := t.begin(c)
		if err != nil {
			return nil, err
		}
		for _, q := range t.savepoints {
			if _, err := tx.ExecContext(t.ctx, q); err != nil {
				_ = tx.(gorm.TxCommitter).Rollback()
				return nil, err
			}
		}
		t.bound, t.boundName, t.tx = id, name, tx
	}
	if s != nil && t.shard == nil {
		t.shard = s
	}
	return t.tx, nil
}

// part returns the batches' transaction of shard s's database, on pool
// c, beginning it at the database's first rows.
func (t *ptx) part(c gorm.ConnPool, s sharding.Shard) (gorm.ConnPool, error) {
	for _, p := range t.parts {
		if p.db == s.Database {
			return p.tx, nil
		}
	}
	tx, err := t.begin(c)
	if err != nil {
		return nil, err
	}
	t.parts = append(t.parts, &part{db: s.Database, name: s.DatabaseName, tx: tx})
	return tx, nil
}

// written records a batch of a CreateInBatches written: the shard of
// each of its rows, in order.
func (t *ptx) written(shards []sharding.Shard) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for i, s := range shards {
		for _, p := range t.parts {
			if p.db == s.Database {
				p.rows = append(p.rows, t.rows+i)
			}
		}
	}
	t.rows += len(shards)
}

// held returns the shard the transaction holds, nil before its first
// statement on a sharded model, for the batches' and outside one.
func (t *ptx) held() *sharding.Shard {
	if t == nil || t.batches {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.shard == nil {
		return nil
	}
	s := *t.shard
	return &s
}

// GetDBConn returns the application's *sql.DB, as tx.DB() does for a
// transaction of GORM's own.
func (t *ptx) GetDBConn() (*sql.DB, error) { return (&pool{ConnPool: t.main}).GetDBConn() }

// offset is the position, in the value given to CreateInBatches, of the
// batch being written.
func (t *ptx) offset() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.rows
}

// onMain binds the transaction for a statement on the application's
// database.
func (t *ptx) onMain() (gorm.ConnPool, error) {
	return t.bind(t.main, nil, "the application's database")
}

// savepoint runs a savepoint statement (GORM's nested transactions) in
// the bound transaction, or keeps it for the binding.
func (t *ptx) savepoint(ctx context.Context, query string) (bool, error) {
	q := strings.ToUpper(strings.TrimSpace(query))
	if !strings.HasPrefix(q, "SAVEPOINT ") && !strings.HasPrefix(q, "ROLLBACK TO ") && !strings.HasPrefix(q, "RELEASE ") {
		return false, nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.tx == nil {
		t.savepoints = append(t.savepoints, query)
		return true, nil
	}
	_, err := t.tx.ExecContext(ctx, query)
	return true, err
}

// PrepareContext prepares query in the transaction, bound to the
// application's database.
func (t *ptx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	c, err := t.onMain()
	if err != nil {
		return nil, err
	}
	return c.PrepareContext(ctx, query)
}

// ExecContext runs query in the transaction, bound to the application's
// database; a savepoint goes to the bound database, or waits for it.
func (t *ptx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if ok, err := t.savepoint(ctx, query); ok {
		return driverResult{}, err
	}
	c, err := t.onMain()
	if err != nil {
		return nil, err
	}
	return c.ExecContext(ctx, query, args...)
}

// QueryContext runs query in the transaction, bound to the application's
// database.
func (t *ptx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	c, err := t.onMain()
	if err != nil {
		return nil, err
	}
	return c.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query in the transaction; a *sql.Row cannot carry
// a refusal, so a statement of another database gets the error of a
// cancelled context (GORM's Row and Scan on other models only).
func (t *ptx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	c, err := t.onMain()
	if err != nil {
		cancelled, cancel := context.WithCancel(ctx)
		cancel()
		return t.main.QueryRowContext(cancelled, query, args...)
	}
	return c.QueryRowContext(ctx, query, args...)
}

// StmtContext lets a prepared-statement session's transaction run its
// statements here.
func (t *ptx) StmtContext(ctx context.Context, stmt *sql.Stmt) *sql.Stmt {
	c, err := t.onMain()
	if tx, ok := c.(interface {
		StmtContext(context.Context, *sql.Stmt) *sql.Stmt
	}); ok && err == nil {
		return tx.StmtContext(ctx, stmt)
	}
	return stmt
}

// Commit commits the bound transaction, if a statement began it, and
// the batches' transactions database by database.
func (t *ptx) Commit() error { return t.end(true) }

// Rollback rolls the bound transaction and the batches' back.
func (t *ptx) Rollback() error { return t.end(false) }

func (t *ptx) end(commit bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return sql.ErrTxDone
	}
	t.ended = true
	slices.SortFunc(t.parts, func(a, b *part) int { return cmp.Compare(a.db, b.db) })
	txs := make([]gorm.ConnPool, 0, len(t.parts)+1)
	for _, p := range t.parts {
		txs = append(txs, p.tx)
	}
	if t.tx != nil {
		txs = append(txs, t.tx)
	}
	var failed error
	var written []int
	for i, tx := range txs {
		c, ok := tx.(gorm.TxCommitter)
		if !ok {
			failed = errors.Join(failed, gorm.ErrInvalidTransaction)
			continue
		}
		if !commit || failed != nil {
			failed = errors.Join(failed, c.Rollback())
			continue
		}
		if err := c.Commit(); err != nil {
			if i == len(t.parts) {
				failed = err // the application's transaction, after every shard's
				continue
			}
			p := t.parts[i]
			if !repo.Refused(err) {
				err = fmt.Errorf("%w: %w", sharding.ErrOutcomeUnknown, err)
			}
			slices.Sort(written)
			failed = createError{
				se:   &sharding.ShardError{Rows: p.rows, Written: written, Err: fmt.Errorf("database %s: commit: %w", p.name, err)},
				what: fmt.Sprintf("the databases after it were rolled back; %s of those before it, stored (ShardError.Written)", rowsN(len(written))),
			}
			continue
		}
		if i < len(t.parts) {
			written = append(written, t.parts[i].rows...)
		}
	}
	return failed
}

// driverResult answers a savepoint kept for the binding.
type driverResult struct{}

// LastInsertId is not known for a savepoint.
func (driverResult) LastInsertId() (int64, error) { return 0, errors.ErrUnsupported }

// RowsAffected is 0 for a savepoint.
func (driverResult) RowsAffected() (int64, error) { return 0, nil }

// txOf returns the plugin's transaction a statement runs in, nil outside
// one.
func txOf(c gorm.ConnPool) *ptx {
	switch v := c.(type) {
	case *ptx:
		return v
	case *gorm.PreparedStmtTX:
		t, _ := v.Tx.(*ptx)
		return t
	}
	return nil
}

// wrap makes db's transactions the plugin's.
func wrap(db *gorm.DB) {
	if _, ok := db.ConnPool.(*pool); ok {
		return
	}
	w := &pool{ConnPool: db.ConnPool}
	if db.Statement.ConnPool == db.ConnPool {
		db.Statement.ConnPool = w
	}
	db.ConnPool = w
}
