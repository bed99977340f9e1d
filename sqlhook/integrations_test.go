package sqlhook_test

import (
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/glebarez/sqlite"
	"github.com/jmoiron/sqlx"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/gormplugin"
	"github.com/idforge/idforge/sqlhook"
	"github.com/idforge/idforge/tests/testdb"
	"github.com/idforge/idforge/tests/testreg"
)

// gormOn opens GORM on conn, as a user who opened conn through the plugin
// hands it to GORM.
func gormOn(t *testing.T, d testdb.DB, conn *sql.DB) *gorm.DB {
	t.Helper()
	var dial gorm.Dialector
	switch d.Name {
	case "mariadb":
		dial = mysql.New(mysql.Config{Conn: conn})
	case "postgres":
		dial = postgres.New(postgres.Config{Conn: conn})
	default:
		dial = sqlite.Dialector{Conn: conn}
	}
	db, err := gorm.Open(dial, &gorm.Config{Logger: logger.Discard, TranslateError: true})
	if err != nil {
		t.Fatal(err)
	}
	return db
}

// Account is a plain GORM model: an auto-increment key, no idforge tag.
type Account struct {
	ID    int64
	Email string `gorm:"size:64;uniqueIndex"`
	Score int
}

// gormScript runs GORM's own features on db and returns what it saw:
// keys from auto-increment, batches, upserts, transactions, errors.
func gormScript(db *gorm.DB) []string {
	var out []string
	note := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if err := db.AutoMigrate(&Account{}); err != nil {
		return []string{err.Error()}
	}
	a := Account{Email: "a@x", Score: 1}
	note("create: %v id=%d", db.Create(&a).Error, a.ID)
	batch := []Account{{Email: "b@x"}, {Email: "c@x"}, {Email: "d@x"}}
	note("batch: %v ids=%d,%d,%d", db.CreateInBatches(&batch, 2).Error, batch[0].ID, batch[1].ID, batch[2].ID)
	dup := Account{Email: "a@x"}
	note("duplicate: %v", errors.Is(db.Create(&dup).Error, gorm.ErrDuplicatedKey))
	up := Account{Email: "a@x", Score: 9}
	res := db.Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "email"}}, DoUpdates: clause.AssignmentColumns([]string{"score"})}).Create(&up)
	note("upsert: %v", res.Error)
	note("update: %d", db.Model(&Account{}).Where("score < ?", 5).Update("score", 5).RowsAffected)
	err := db.Transaction(func(tx *gorm.DB) error {
		tx.Create(&Account{Email: "rolled@x"})
		return errors.New("roll back")
	})
	note("transaction: %v", err)
	note("delete: %d", db.Where("email = ?", "d@x").Delete(&Account{}).RowsAffected)
	var all []Account
	db.Order("id").Find(&all)
	for _, r := range all {
		note("row %d %s %d", r.ID, r.Email, r.Score)
	}
	var n int64
	db.Raw("SELECT COUNT(*) FROM accounts").Scan(&n)
	note("count %d", n)
	return out
}

// TestGORMUnchanged: GORM on a connection opened through the plugin, with
// no marker in use, does what it does on the bare driver.
func TestGORMUnchanged(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			bare := gormOn(t, d, d.Open(t))
			other := testdb.SQLite(t)
			switch d.Name {
			case "mariadb":
				other = testdb.MariaDB(t)
			case "postgres":
				other = testdb.Postgres(t)
			}
			conn, err := sqlhook.Open(other.Driver, other.DSN, sqlhook.Settings{Registry: testreg.New(t)})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			want, got := gormScript(bare), gormScript(gormOn(t, other, conn))
			if !reflect.DeepEqual(got, want) {
				t.Errorf("through the plugin:\n%q\nbare:\n%q", got, want)
			}
		})
	}
}

// HookedOrder is filled by the GORM plugin.
type HookedOrder struct {
	ID       int64 `idgen:"snowflake"`
	Customer string
}

// TestGORMWithPlugin: the GORM plugin fills models and markers fill
// hand-written statements on the same connection.
func TestGORMWithPlugin(t *testing.T) {
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			reg := testreg.New(t)
			conn, err := sqlhook.Open(d.Driver, d.DSN, sqlhook.Settings{Registry: reg})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { conn.Close() })
			db := gormOn(t, d, conn)
			if err := db.Use(idplugin.New(idplugin.Settings{Registry: reg})); err != nil {
				t.Fatal(err)
			}
			if err := idplugin.Prepare(db, &HookedOrder{}); err != nil {
				t.Fatal(err)
			}
			if err := db.AutoMigrate(&HookedOrder{}); err != nil {
				t.Fatal(err)
			}
			o := HookedOrder{Customer: "ada"}
			if err := db.Create(&o).Error; err != nil || o.ID == 0 {
				t.Fatalf("Create: %v, ID %d", err, o.ID)
			}
			n := sqlhook.Next("snowflake", "")
			if err := db.Exec("INSERT INTO hooked_orders (id, customer) VALUES (?, ?)", n, "bob").Error; err != nil {
				t.Fatal(err)
			}
			var got HookedOrder
			if err := db.Where("customer = ?", "bob").First(&got).Error; err != nil || got.ID != n.ID() || n.ID() == 0 {
				t.Errorf("row %+v, %v; marker %d", got, err, n.ID())
			}
			var back int64
			if err := db.Raw("SELECT id FROM hooked_orders WHERE id = ?", n).Scan(&back).Error; err != nil || back != 0 {
				t.Errorf("a marker in a query draws anew, so no row: got %d, %v", back, err)
			}
		})
	}
}

// TestSqlx: markers through sqlx, positional and named.
func TestSqlx(t *testing.T) {
	for _, tg := range targets(t) {
		t.Run(tg.name, func(t *testing.T) {
			db := sqlx.NewDb(tg.open(t, testreg.New(t), "sx"), tg.d.Driver)
			n := sqlhook.Next("snowflake", "")
			res, err := db.Exec(db.Rebind("INSERT INTO sx (id, name) VALUES (?, ?)"), n, "pos")
			if err != nil {
				t.Fatal(err)
			}
			if got := lastID(t, res); got != keyOf(t, db, tg.d, "sx", "pos") || got != n.ID() {
				t.Errorf("positional: LastInsertId %d, marker %d", got, n.ID())
			}
			res, err = db.NamedExec("INSERT INTO sx (id, name) VALUES (:id, :name)", map[string]any{"id": n, "name": "map"})
			if err != nil {
				t.Fatal(err)
			}
			if got := lastID(t, res); got != keyOf(t, db, tg.d, "sx", "map") || got != n.ID() {
				t.Errorf("named map: LastInsertId %d, marker %d", got, n.ID())
			}
			row := struct {
				ID   *sqlhook.Marker `db:"id"`
				Name string          `db:"name"`
			}{n, "struct"}
			res, err = db.NamedExec("INSERT INTO sx (id, name) VALUES (:id, :name)", row)
			if err != nil {
				t.Fatal(err)
			}
			if got := lastID(t, res); got != keyOf(t, db, tg.d, "sx", "struct") || got != n.ID() {
				t.Errorf("named struct: LastInsertId %d, marker %d", got, n.ID())
			}
		})
	}
}
