// Package gormids is what the GORM integrations (idplugin, shardgorm) share
// about the columns the idforge plugin fills: which columns of a model the
// plugin fills ([Columns], which shardgorm reads and the plugin does not
// export), and the Floor of a sequence in one table.
package gormids

import (
	"context"
	"database/sql"

	"gorm.io/gorm"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// Floor returns the Floor of c's sequence in table on db: the largest ID in
// c's column (names quoted for db's dialect), 0 while the table does not
// exist. It is nil when c does not draw from a sequence.
func Floor(db *gorm.DB, table string, c idgen.Column) engine.Floor {
	// A statement of its own (a Context makes Session clone it) on the pool,
	// not on the transaction db may be in: a Floor is asked again after
	// every store reset, long after that transaction ended, and from the
	// chain's own goroutine. Nor through GORM's prepared statements
	// (PrepareStmt), which would keep one for the caller.
	sess := db.Session(&gorm.Session{NewDB: true, SkipHooks: true, Context: context.Background()})
	if pool := db.Config.ConnPool; pool != nil {
		sess.Statement.ConnPool = Unprepared(pool)
		sess.Config.ConnPool, sess.Config.PrepareStmt = sess.Statement.ConnPool, false
	}
	quote := (&gorm.Statement{DB: sess}).Quote
	return c.Field.Floor(db.Dialector.Name(), quote(table), quote(c.Name), func(ctx context.Context, q string, dest *sql.NullString) error {
		tx := sess.WithContext(ctx)
		if tx.Migrator().HasTable(table) {
			return tx.Raw(q).Scan(dest).Error
		}
		// HasTable answers false when its own query fails too: the table
		// counts as missing (0) only on a database that answers.
		return tx.Exec("SELECT 1").Error
	})
}

// Unprepared is pool without GORM's prepared statements (gorm.Config and
// gorm.Session PrepareStmt): a statement run on it leaves none behind in
// the caller's cache.
func Unprepared(pool gorm.ConnPool) gorm.ConnPool {
	switch p := pool.(type) {
	case *gorm.PreparedStmtTX:
		return p.Tx
	case *gorm.PreparedStmtDB:
		return p.ConnPool
	}
	return pool
}
