package idplugin

import (
	"context"

	"gorm.io/gorm"

	"github.com/idforge/idforge/internal/gormids"
)

// learnCallbackName is the create callback that builds the plan of a model
// the plugin has not seen yet, before GORM's transaction begins.
const learnCallbackName = "idforge:learn"

// learn builds the plan of the create's model on first sight before the
// create's own transaction begins, so that what the plugin reads of the
// table then (see inspect) waits for no connection the create holds.
func (p *plugin) learn(db *gorm.DB) {
	s := db.Statement.Schema
	if db.Error != nil || s == nil {
		return
	}
	if _, ok := p.plans.Load(s); ok {
		return
	}
	_, err := p.plan(ctxOf(db), db, s, false)
	db.AddError(err)
}

// rootKey identifies the *gorm.DB that db is a session or transaction of:
// they all share its callbacks.
func rootKey(db *gorm.DB) any { return db.Callback() }

// root is the *gorm.DB the plugin was registered on (db.Use) that db is a
// session or transaction of; db itself when the plugin does not know it.
func (p *plugin) root(db *gorm.DB) *gorm.DB {
	if r, ok := p.roots.Load(rootKey(db)); ok {
		return r.(*gorm.DB)
	}
	return db
}

// pool is a session of the plugin's own on the connection pool of db's
// database: not the caller's session, its prepared statements, nor the
// transaction db may be in.
func (p *plugin) pool(ctx context.Context, db *gorm.DB) *gorm.DB {
	root := p.root(db)
	s := root.Session(&gorm.Session{NewDB: true, SkipHooks: true, Context: ctx})
	pool := gormids.Unprepared(root.Config.ConnPool)
	s.Statement.ConnPool = pool
	s.Config.ConnPool, s.Config.PrepareStmt = pool, false
	return s
}

// inspect runs read, which learns something of a table (whether its key
// numbers itself), on a session of the plugin's own on the pool (see
// pool), so that it leaves no statement, lock or transaction in the
// caller's session. When db's statement holds a connection (a transaction:
// the caller's, or the create's when the model is first seen inside it),
// read runs in the background and this returns at once: waiting there for
// a second connection could wait for ever on a pool of one (SQLite) or on
// one that callers doing the same have exhausted.
func (p *plugin) inspect(ctx context.Context, db *gorm.DB, read func(*gorm.DB)) {
	if _, inTx := db.Statement.ConnPool.(gorm.TxCommitter); !inTx {
		read(p.pool(ctx, db))
		return
	}
	s := p.pool(context.WithoutCancel(ctx), db)
	p.inspecting.Add(1)
	go func() {
		defer p.inspecting.Done()
		read(s)
	}()
}
