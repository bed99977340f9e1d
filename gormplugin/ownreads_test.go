package idplugin_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/sqlstore"
	idplugin "github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/tests/testdb"
)

// Member embeds gorm.Model, whose ID the plugin fills; migrated without
// Prepare, its key auto-increments, which the plugin checks and warns of
// when it first sees the model.
type Member struct {
	gorm.Model
	Name string `gorm:"size:64;uniqueIndex"`
	Hits int
}

// TestPreparedStatementsStayTheCallers: in a session with PrepareStmt,
// many creates at once on a pool of one connection end, leave that
// connection free, and leave in the session's cache of prepared statements
// exactly the statements the calls made: the plugin's own reads (the
// auto-increment check when it first sees the model, the read-back of an
// upsert's rows) are not prepared there.
func TestPreparedStatementsStayTheCallers(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			log := &warnLogger{Interface: logger.Discard}
			db := open(t, d, idplugin.Settings{Logger: log})
			if err := db.AutoMigrate(&Member{}); err != nil {
				t.Fatal(err)
			}
			sqlDB, err := db.DB()
			if err != nil {
				t.Fatal(err)
			}
			sqlDB.SetMaxOpenConns(1)
			tx := db.Session(&gorm.Session{PrepareStmt: true})

			const n = 40
			errs := make(chan error, 2*n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					m := Member{Name: fmt.Sprint("m", i)}
					errs <- tx.Create(&m).Error
					var first Member
					errs <- tx.First(&first).Error
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatal(err)
				}
			}
			idplugin.WaitInspections(db)
			if w := log.about("Member"); len(w) != 1 {
				t.Fatalf("warnings %q; want the one of the auto-increment check, which the test needs to have run", w)
			}
			conn, ok := tx.ConnPool.(*gorm.PreparedStmtDB)
			if !ok {
				t.Fatalf("the session's pool is a %T", tx.ConnPool)
			}
			if keys := conn.Stmts.Keys(); len(keys) != 2 {
				t.Fatalf("%d prepared statements, want 2 (the INSERT and the SELECT):\n%s", len(keys), strings.Join(keys, "\n"))
			}

			// An upsert that meets a conflict: the plugin reads the row back,
			// in the create's transaction, but not through the cache.
			again := Member{Name: "m1", Hits: 1}
			upsert := clause.OnConflict{Columns: []clause.Column{{Name: "name"}}, DoUpdates: clause.AssignmentColumns([]string{"hits"})}
			if err := tx.Clauses(upsert).Create(&again).Error; err != nil {
				t.Fatal(err)
			}
			var stored Member
			if err := db.Where("name = ?", "m1").First(&stored).Error; err != nil || again.ID != stored.ID || stored.Hits != 1 {
				t.Fatalf("upsert: struct key %d, row %+v (%v)", again.ID, stored, err)
			}
			keys := conn.Stmts.Keys()
			if len(keys) != 3 || slices.ContainsFunc(keys, func(k string) bool { return strings.HasPrefix(k, "SELECT 0") }) {
				t.Fatalf("%d prepared statements, want 3 (the INSERT, the SELECT, the upsert):\n%s", len(keys), strings.Join(keys, "\n"))
			}
			if inUse := sqlDB.Stats().InUse; inUse != 0 {
				t.Fatalf("%d connections still in use", inUse)
			}
		})
	}
}

// recordingPool is a connection pool that records the statements run on
// it, and on the transactions it begins, apart.
type recordingPool struct {
	db *sql.DB
	mu sync.Mutex
	// pool and tx are the statements run outside and inside transactions.
	pool, tx []string
}

func (p *recordingPool) note(inTx bool, q string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if inTx {
		p.tx = append(p.tx, q)
	} else {
		p.pool = append(p.pool, q)
	}
}

// take returns the statements recorded so far, and forgets them.
func (p *recordingPool) take() (pool, tx []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pool, tx, p.pool, p.tx = p.pool, p.tx, nil, nil
	return pool, tx
}

func (p *recordingPool) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	p.note(false, q)
	return p.db.PrepareContext(ctx, q)
}

func (p *recordingPool) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	p.note(false, q)
	return p.db.ExecContext(ctx, q, args...)
}

func (p *recordingPool) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	p.note(false, q)
	return p.db.QueryContext(ctx, q, args...)
}

func (p *recordingPool) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	p.note(false, q)
	return p.db.QueryRowContext(ctx, q, args...)
}

func (p *recordingPool) BeginTx(ctx context.Context, opts *sql.TxOptions) (gorm.ConnPool, error) {
	tx, err := p.db.BeginTx(ctx, opts)
	if err != nil {
		return nil, err
	}
	return &recordingTx{Tx: tx, p: p}, nil
}

func (p *recordingPool) GetDBConn() (*sql.DB, error) { return p.db, nil }

type recordingTx struct {
	*sql.Tx
	p *recordingPool
}

func (tx *recordingTx) PrepareContext(ctx context.Context, q string) (*sql.Stmt, error) {
	tx.p.note(true, q)
	return tx.Tx.PrepareContext(ctx, q)
}

func (tx *recordingTx) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	tx.p.note(true, q)
	return tx.Tx.ExecContext(ctx, q, args...)
}

func (tx *recordingTx) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	tx.p.note(true, q)
	return tx.Tx.QueryContext(ctx, q, args...)
}

func (tx *recordingTx) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	tx.p.note(true, q)
	return tx.Tx.QueryRowContext(ctx, q, args...)
}

// openRecorded opens d with GORM on a recordingPool of maxConns
// connections (0: no limit) and the plugin drawing from reg.
func openRecorded(t *testing.T, d testdb.DB, maxConns int, s idplugin.Settings) (*gorm.DB, *recordingPool) {
	t.Helper()
	rec := &recordingPool{db: d.Open(t)}
	rec.db.SetMaxOpenConns(maxConns)
	var dial gorm.Dialector
	switch d.Name {
	case "mariadb":
		dial = mysql.New(mysql.Config{Conn: rec})
	case "postgres":
		dial = postgres.New(postgres.Config{Conn: rec})
	default:
		dial = sqlite.Dialector{Conn: rec}
	}
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if s.Registry == nil {
		s.Registry = newRegistry(t)
	}
	if err := db.Use(idplugin.New(s)); err != nil {
		t.Fatal(err)
	}
	return db, rec
}

// Visit and Visitor are migrated without Prepare: their keys auto-increment.
type (
	Visit struct {
		ID   int64 `idgen:"snowflake"`
		Page string
	}
	Visitor struct {
		ID   int64 `idgen:"snowflake"`
		Name string
	}
)

// catalogue reports whether q reads the database's catalogue, as the
// auto-increment check does.
func catalogue(q string) bool {
	return strings.Contains(q, "information_schema") || strings.Contains(q, "sqlite_master")
}

// TestInspectionStaysOutOfTheCallersTransaction: what the plugin reads of a
// table when it first sees a model (whether its key auto-increments) runs
// on a connection of its own, never in the caller's transaction nor in the
// one GORM opens for a create: those see the INSERT alone. On a pool of one
// connection, held by the caller's transaction, the read waits for it
// instead of blocking the create.
func TestInspectionStaysOutOfTheCallersTransaction(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			log := &warnLogger{Interface: logger.Discard}
			db, rec := openRecorded(t, d, 1, idplugin.Settings{Logger: log})
			if err := db.AutoMigrate(&Visit{}, &Visitor{}); err != nil {
				t.Fatal(err)
			}
			rec.take()

			// First sight inside the caller's transaction.
			err := db.Transaction(func(tx *gorm.DB) error {
				return tx.Create(&Visit{Page: "a"}).Error
			})
			if err != nil {
				t.Fatal(err)
			}
			idplugin.WaitInspections(db)
			pool, tx := rec.take()
			if len(tx) != 1 || !strings.HasPrefix(tx[0], "INSERT INTO") {
				t.Errorf("the caller's transaction ran:\n%s\nwant the INSERT alone", strings.Join(tx, "\n"))
			}
			if !slices.ContainsFunc(pool, catalogue) || len(log.about("Visit")) != 1 {
				t.Errorf("outside the transaction: %q, warnings %q; want the auto-increment check, and its warning", pool, log.about("Visit"))
			}

			// First sight in a plain create, whose transaction GORM opens.
			if err := db.Create(&Visitor{Name: "b"}).Error; err != nil {
				t.Fatal(err)
			}
			idplugin.WaitInspections(db)
			pool, tx = rec.take()
			if len(tx) != 1 || !strings.HasPrefix(tx[0], "INSERT INTO") {
				t.Errorf("GORM's transaction ran:\n%s\nwant the INSERT alone", strings.Join(tx, "\n"))
			}
			if !slices.ContainsFunc(pool, catalogue) || len(log.about("Visitor")) != 1 {
				t.Errorf("outside the transaction: %q, warnings %q; want the auto-increment check, and its warning", pool, log.about("Visitor"))
			}
		})
	}
}

// Voucher draws its key from a chain, whose Floor reads the table.
type Voucher struct {
	ID   int64 `gorm:"primaryKey;autoIncrement:false" idgen:"chain,name=voucher"`
	Code string
}

// TestFloorReadsOnThePool: the Floor of a chain, asked when the model's
// first create inside the caller's transaction (a PrepareStmt session)
// draws the first ID from a store not declared brand-new, reads the table
// on the pool: the transaction sees the INSERT alone, and the session's
// cache of prepared statements holds that INSERT alone.
func TestFloorReadsOnThePool(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			ids, err := sql.Open("sqlite", filepath.Join(t.TempDir(), "ids.db"))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ids.Close() })
			st, err := sqlstore.Open(t.Context(), ids, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { st.Close() })
			reg, err := idforge.New(t.Context(), idforge.Settings{Store: st, Namespace: "pool", StateDir: "off"})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { reg.Close() })
			db, rec := openRecorded(t, d, 0, idplugin.Settings{Registry: reg})
			if err := db.AutoMigrate(&Voucher{}); err != nil {
				t.Fatal(err)
			}
			if err := db.Exec("INSERT INTO vouchers (id, code) VALUES (?, 'old')", 4242).Error; err != nil {
				t.Fatal(err)
			}
			rec.take()

			session := db.Session(&gorm.Session{PrepareStmt: true})
			var v Voucher
			err = session.Transaction(func(tx *gorm.DB) error {
				v = Voucher{Code: "new"}
				return tx.Create(&v).Error
			})
			if err != nil || v.ID <= 4242 {
				t.Fatalf("key %d (%v); want one above the table's 4242, which the Floor read", v.ID, err)
			}
			pool, tx := rec.take()
			if !slices.ContainsFunc(pool, func(q string) bool { return strings.Contains(q, "MAX(") }) {
				t.Errorf("outside the transaction: %q; want the Floor's read", pool)
			}
			if slices.ContainsFunc(tx, func(q string) bool { return !strings.HasPrefix(q, "INSERT INTO") }) {
				t.Errorf("the transaction ran:\n%s\nwant INSERTs alone", strings.Join(tx, "\n"))
			}
			conn := session.ConnPool.(*gorm.PreparedStmtDB)
			if keys := conn.Stmts.Keys(); len(keys) != 1 || !strings.HasPrefix(keys[0], "INSERT INTO") {
				t.Errorf("prepared statements:\n%s\nwant the INSERT alone", strings.Join(keys, "\n"))
			}
		})
	}
}
