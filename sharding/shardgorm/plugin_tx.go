package shardgorm

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"

	"gorm.io/gorm"

	"github.com/idforge/idforge/sharding"
)

// pool wraps the connection pool of the *gorm.DB the plugin is registered
// on, so that its transactions (db.Begin, db.Transaction) are the
// plugin's: bound to one database at their first statement.
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
// statement, which binds it to that statement's database.
func (p *pool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	return &ptx{main: p.ConnPool, ctx: ctx, opts: opts}, nil
}

// ptx is a transaction of the plugin: a real transaction on the one
// database its statements reach, begun at the first of them. A statement
// reaching another database fails with sharding.ErrWrongShard, before
// anything is sent there.
type ptx struct {
	main gorm.ConnPool // the application's pool, for statements on other models
	ctx  context.Context
	opts *sql.TxOptions

	mu         sync.Mutex
	bound      any           // the pool of the database the transaction is bound to
	boundName  string        // that database, for errors
	tx         gorm.ConnPool // its transaction: a *sql.Tx, or a prepared-statement one
	savepoints []string      // SAVEPOINT statements run before the binding, replayed at it
	ended      bool
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

// bind returns the transaction on the database of pool c, beginning it
// at the first statement; a second database is refused.
func (t *ptx) bind(c gorm.ConnPool, name string) (gorm.ConnPool, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return nil, sql.ErrTxDone
	}
	id := identity(c)
	if t.bound != nil {
		if t.bound != id {
			return nil, fmt.Errorf("%w: a transaction bound to %s reaches %s: a transaction stays in one database (there is no distributed transaction)",
				sharding.ErrWrongShard, t.boundName, name)
		}
		return t.tx, nil
	}
	if w, ok := c.(*pool); ok {
		c = w.ConnPool // begin on the database, not another plugin transaction
	}
	var tx gorm.ConnPool
	var err error
	switch b := c.(type) {
	case gorm.TxBeginner:
		tx, err = b.BeginTx(t.ctx, t.opts)
	case gorm.ConnPoolBeginner:
		tx, err = b.BeginTx(t.ctx, t.opts)
	default:
		err = gorm.ErrInvalidTransaction
	}
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
	return tx, nil
}

// onMain binds the transaction for a statement on the application's
// database.
func (t *ptx) onMain() (gorm.ConnPool, error) { return t.bind(t.main, "the application's database") }

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

// Commit commits the bound transaction, if a statement began it.
func (t *ptx) Commit() error { return t.end(true) }

// Rollback rolls the bound transaction back, if a statement began it.
func (t *ptx) Rollback() error { return t.end(false) }

func (t *ptx) end(commit bool) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.ended {
		return sql.ErrTxDone
	}
	t.ended = true
	if t.tx == nil {
		return nil
	}
	c, ok := t.tx.(gorm.TxCommitter)
	if !ok {
		return gorm.ErrInvalidTransaction
	}
	if commit {
		return c.Commit()
	}
	return c.Rollback()
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
