package shardgorm_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/logger"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/internal/sqlroute"
	"github.com/idforge/idforge/sharding/shardgorm"
	"github.com/idforge/idforge/tests/testdb"
)

// Order is gorm.io/sharding's example model, sharded by its user.
type Order struct {
	ID        int64 `gorm:"primaryKey" idgen:"snowflake"`
	UserID    int64 `gorm:"index"`
	ProductID int64
	Amount    int64
	CreatedAt time.Time
	ShippedAt *time.Time // NULL until shipped
	Items     []OrderItem
}

// OrderItem is kept in its order's shard: sharded by the same user.
type OrderItem struct {
	ID      int64 `gorm:"primaryKey" idgen:"snowflake"`
	OrderID int64 `gorm:"index"`
	UserID  int64
	Name    string `gorm:"size:32"`
}

// pluginEnv is a plugin over two databases × two tables, registered on
// the first database's *gorm.DB, which the test uses as an application
// does.
type pluginEnv struct {
	db       *gorm.DB
	dbs      []*gorm.DB
	dsn      [2]testdb.DB
	router   *sharding.Router
	plugin   *shardgorm.Plugin
	settings shardgorm.PluginSettings
}

func ordersRouter(t testing.TB) *sharding.Router {
	t.Helper()
	r, err := sharding.NewMod(sharding.Mod{Databases: "m{0..1}", Tables: "orders_{0..1}"})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newPluginEnv(t testing.TB, b shardtest.Backend, s shardgorm.PluginSettings) *pluginEnv {
	t.Helper()
	dsn := b.Open(t)
	reg := shardtest.OwnerRegistry(t)
	dbs := []*gorm.DB{openGorm(t, dsn[0], reg), openGorm(t, dsn[1], reg)}
	if s.Settings.ShardKey == "" {
		s.Settings = sharding.Settings{ShardKey: "UserID", OwnerResidues: 4, Parallel: 2}
	}
	r := ordersRouter(t)
	p, err := shardgorm.NewPlugin(dbs, r, s, &Order{}, &OrderItem{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Migrate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := dbs[0].Use(p); err != nil {
		t.Fatal(err)
	}
	return &pluginEnv{db: dbs[0], dbs: dbs, dsn: dsn, router: r, plugin: p, settings: s}
}

// physical reads every order of every shard from its physical table,
// checking each lies in the shard its router names by user and by ID.
func (e *pluginEnv) physical(t *testing.T) map[int64]Order {
	t.Helper()
	shards, err := e.router.Shards()
	if err != nil {
		t.Fatal(err)
	}
	out := map[int64]Order{}
	for _, s := range shards {
		table := "orders_" + s.TableName[len("orders_"):]
		var rows []Order
		if err := e.dbs[s.Database].Table(table).Order("id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, o := range rows {
			for _, key := range []int64{o.UserID, o.ID} {
				if at, err := e.router.Route(key); err != nil || at != s {
					t.Errorf("order %d of user %d is in %s, key %d routes to %s (%v)", o.ID, o.UserID, s, key, at, err)
				}
			}
			out[o.ID] = o
		}
	}
	return out
}

func orders(n int) []Order {
	out := make([]Order, n)
	for i := range out {
		out[i] = Order{UserID: int64(i%5 + 1), ProductID: 100 + int64(i), Amount: int64(i*37%101 + 1),
			Items: []OrderItem{{UserID: int64(i%5 + 1), Name: "item"}}}
	}
	return out
}

func ids(os []Order) []int64 {
	out := make([]int64, len(os))
	for i, o := range os {
		out[i] = o.ID
	}
	slices.Sort(out)
	return out
}

// TestPluginGORMCode runs GORM code written for one database unchanged
// over two databases × two tables: every row lands in the shard its
// router names, and every read answers as one table would.
func TestPluginGORMCode(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			db := e.db

			one := Order{UserID: 2, ProductID: 1, Amount: 1000}
			if err := db.Create(&one).Error; err != nil {
				t.Fatal(err)
			}
			if one.ID == 0 {
				t.Fatal("Create left the ID 0")
			}
			batch := orders(20)
			if err := db.Create(batch[:10]).Error; err != nil {
				t.Fatal(err)
			}
			rest := batch[10:]
			if err := db.CreateInBatches(&rest, 3).Error; err != nil {
				t.Fatal(err)
			}
			all := append([]Order{one}, batch...)
			stored := e.physical(t)
			if len(stored) != len(all) {
				t.Fatalf("%d rows stored, want %d", len(stored), len(all))
			}

			// Reads routed by key.
			var got Order
			if err := db.First(&got, one.ID).Error; err != nil || got.ID != one.ID || got.Amount != 1000 {
				t.Fatalf("First(id) = %+v, %v", got, err)
			}
			want := ids(batch[:7])
			var found []Order
			if err := db.Find(&found, want).Error; err != nil || !slices.Equal(ids(found), want) {
				t.Fatalf("Find(ids) = %v, %v; want %v", ids(found), err, want)
			}
			found = nil
			if err := db.Where("id IN ?", want).Find(&found).Error; err != nil || !slices.Equal(ids(found), want) {
				t.Fatalf(`Where("id IN ?") = %v, %v; want %v`, ids(found), err, want)
			}
			var mine []Order
			if err := db.Where("user_id = ?", 2).Order("id").Find(&mine).Error; err != nil {
				t.Fatal(err)
			}
			var wantMine []int64
			for _, o := range all {
				if o.UserID == 2 {
					wantMine = append(wantMine, o.ID)
				}
			}
			slices.Sort(wantMine)
			if !slices.Equal(ids(mine), wantMine) {
				t.Fatalf("orders of user 2 = %v, want %v", ids(mine), wantMine)
			}
			var taken Order
			if err := db.Take(&taken, "user_id = ?", 3).Error; err != nil || taken.UserID != 3 {
				t.Fatalf("Take = %+v, %v", taken, err)
			}
			var amounts []int64
			if err := db.Model(&Order{}).Where("user_id = ?", 2).Order("amount").Pluck("amount", &amounts).Error; err != nil || len(amounts) != len(wantMine) {
				t.Fatalf("Pluck = %v, %v", amounts, err)
			}
			var n int64
			if err := db.Model(&Order{}).Where("user_id = ?", 2).Count(&n).Error; err != nil || n != int64(len(wantMine)) {
				t.Fatalf("Count(user 2) = %d, %v; want %d", n, err, len(wantMine))
			}
			var withItems []Order
			if err := db.Preload("Items").Where("user_id = ?", 4).Find(&withItems).Error; err != nil {
				t.Fatal(err)
			}
			for _, o := range withItems {
				if len(o.Items) != 1 || o.Items[0].OrderID != o.ID {
					t.Fatalf("order %d preloaded items %+v", o.ID, o.Items)
				}
			}

			// Reads without a key: every shard, merged.
			if err := db.Model(&Order{}).Count(&n).Error; err != nil || n != int64(len(all)) {
				t.Fatalf("Count() = %d, %v; want %d", n, err, len(all))
			}
			var sum, wantSum int64
			for _, o := range all {
				wantSum += o.Amount
			}
			if err := db.Model(&Order{}).Select("SUM(amount)").Find(&sum).Error; err != nil || sum != wantSum {
				t.Fatalf("SUM(amount) = %d, %v; want %d", sum, err, wantSum)
			}
			var page []Order
			if err := db.Order("amount desc").Limit(5).Offset(3).Find(&page).Error; err != nil {
				t.Fatal(err)
			}
			byAmount := slices.Clone(all)
			slices.SortFunc(byAmount, func(a, b Order) int { return int(b.Amount - a.Amount) })
			wantPage := byAmount[3:8]
			for i := range wantPage {
				if page[i].ID != wantPage[i].ID {
					t.Fatalf("page = %v, want %v", ids(page), ids(wantPage))
				}
			}
			var first Order
			if err := db.First(&first).Error; err != nil || first.ID != slices.Min(ids(all)) {
				t.Fatalf("First() = %d, %v; want the smallest ID", first.ID, err)
			}

			// Updates and deletes.
			if err := db.Model(&one).Updates(map[string]any{"amount": 1001}).Error; err != nil {
				t.Fatal(err)
			}
			if o := e.physical(t)[one.ID]; o.Amount != 1001 {
				t.Fatalf("updated amount = %d", o.Amount)
			}
			other := int64(1) // user 1 routes elsewhere than user 2 under id%2
			if err := db.Model(&one).Update("user_id", other).Error; !errors.Is(err, sharding.ErrWrongShard) {
				t.Fatalf("moving update: %v, want ErrWrongShard", err)
			}
			if err := db.Where("amount > ?", 0).Delete(&Order{}).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
				t.Fatalf("unrouted delete: %v, want ErrUnrouted", err)
			}
			saved := batch[1]
			saved.Amount = 555
			saved.Items = nil
			if err := db.Save(&saved).Error; err != nil {
				t.Fatal(err)
			}
			if o := e.physical(t)[saved.ID]; o.Amount != 555 {
				t.Fatalf("saved amount = %d", o.Amount)
			}
			var byStruct []Order
			if err := db.Where(&Order{UserID: 3}).Find(&byStruct).Error; err != nil || len(byStruct) != 4 {
				t.Fatalf("Where(struct) = %d rows, %v; want 4", len(byStruct), err)
			}
			gone := batch[2]
			if err := db.Delete(&gone).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Delete(&Order{}, batch[3].ID).Error; err != nil {
				t.Fatal(err)
			}
			if err := db.Where("id = ?", one.ID).Delete(&Order{}).Error; err != nil {
				t.Fatal(err)
			}
			for _, id := range []int64{gone.ID, batch[3].ID} {
				if _, ok := e.physical(t)[id]; ok {
					t.Fatalf("deleted order %d still stored", id)
				}
			}
			all = slices.DeleteFunc(all, func(o Order) bool { return o.ID == gone.ID || o.ID == batch[3].ID })
			if _, ok := e.physical(t)[one.ID]; ok {
				t.Fatal("deleted order still stored")
			}
			if err := db.First(&got, one.ID).Error; !errors.Is(err, gorm.ErrRecordNotFound) {
				t.Fatalf("First(deleted) = %v, want ErrRecordNotFound", err)
			}

			// A key already stored is a duplicate, as on one table.
			dup := batch[0]
			dup.Items = nil
			var se *sharding.ShardError
			if err := db.Create(&dup).Error; !errors.As(err, &se) {
				t.Fatalf("duplicate Create: %v, want a *sharding.ShardError", err)
			}
			if len(e.physical(t)) != len(all)-1 { // one deleted since
				t.Fatal("duplicate Create wrote a row")
			}
			// In a transaction, what it left is the transaction's.
			err := db.Transaction(func(tx *gorm.DB) error { return tx.Create(&dup).Error })
			if !errors.As(err, &se) || !strings.Contains(err.Error(), "written in the transaction") {
				t.Fatalf("duplicate Create in a transaction: %v, want a *sharding.ShardError saying so", err)
			}

			// Joins are refused: a shard's table is joined with nothing.
			var joined []Order
			if err := db.Joins("JOIN order_items ON order_items.order_id = orders.id").Where("orders.user_id = ?", 2).Find(&joined).Error; !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("a join of a sharded table: %v, want the plugin's refusal", err)
			}

			// Raw SQL on the logical table is never sent as is.
			if err := db.Exec("UPDATE orders SET amount = 1 WHERE amount > ?", 0).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
				t.Fatalf("raw unrouted: %v, want ErrUnrouted", err)
			}
		})
	}
}

// TestPluginRefuseUnrouted refuses reads without a shard key when told to.
func TestPluginRefuseUnrouted(t *testing.T) {
	e := newPluginEnv(t, shardtest.Backends[0], shardgorm.PluginSettings{
		Settings:       sharding.Settings{ShardKey: "UserID", OwnerResidues: 4},
		RefuseUnrouted: true,
	})
	var os []Order
	err := e.db.Where("amount > ?", 1).Find(&os).Error
	if !errors.Is(err, shardgorm.ErrUnrouted) {
		t.Fatalf("unrouted read: %v, want ErrUnrouted", err)
	}
	if err := e.db.Where("user_id = ?", 1).Find(&os).Error; err != nil {
		t.Fatal(err)
	}
	// Row over several shards: a row whose Scan reports the refusal.
	var x int64
	if err := e.db.Model(&Order{}).Select("amount").Row().Scan(&x); !errors.Is(err, shardgorm.ErrUnrouted) {
		t.Fatalf("Row over shards: %v, want ErrUnrouted", err)
	}
	// A nil plugin is refused, not a panic.
	other, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{Logger: logger.Discard})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Use((*shardgorm.Plugin)(nil)); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("Use of a nil plugin: %v, want ErrInvalidConfig", err)
	}
}

// TestPluginConfig refuses a plugin without models or with a model lacking
// the shard key.
func TestPluginConfig(t *testing.T) {
	d := testdb.SQLite(t)
	reg := shardtest.OwnerRegistry(t)
	dbs := []*gorm.DB{openGorm(t, d, reg), openGorm(t, testdb.SQLite(t), reg)}
	r := ordersRouter(t)
	if _, err := shardgorm.NewPlugin(dbs, r, shardgorm.PluginSettings{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("no models: %v", err)
	}
	owned := shardgorm.PluginSettings{Settings: sharding.Settings{ShardKey: "UserID"}}
	if _, err := shardgorm.NewPlugin(dbs, r, owned, &Order{}, &Order{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("a model twice: %v", err)
	}
	unnumbered, err := sharding.NewMod(sharding.Mod{Databases: "m{0..1}", Tables: "t_{1..2}x"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := shardgorm.NewPlugin(dbs, unnumbered, owned, &Order{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("tables the numbers do not tell apart: %v", err)
	}
	type Ticket struct {
		ID     int64 `gorm:"primaryKey" idgen:"chain,name=ticket"`
		UserID int64
	}
	if _, err := shardgorm.NewPlugin(dbs, r, owned, &Order{}, &Ticket{}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "Floor") {
		t.Errorf("a sequence whose Floor would read another model's tables: %v", err)
	}
	type Plain struct{ Name string }
	if _, err := shardgorm.NewPlugin(dbs, r, shardgorm.PluginSettings{Settings: sharding.Settings{ShardKey: "UserID"}}, &Plain{}); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("model without the key: %v", err)
	}
}

// Memo is a model the plugin does not shard, in the application's
// database.
type Memo struct {
	ID   int64 `gorm:"primaryKey" idgen:"snowflake"`
	Text string
}

// TestPluginTransaction runs a transaction in the one database its
// statements reach, and refuses a second before writing there.
func TestPluginTransaction(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			if err := e.db.AutoMigrate(&Memo{}); err != nil {
				t.Fatal(err)
			}
			s2, _ := e.router.Route(2)
			s4, _ := e.router.Route(4)
			if s6, _ := e.router.Route(6); s2 != s6 || s2.Database != 0 || s4.Database != 0 || s4 == s2 {
				t.Fatalf("users 2, 4, 6 route to %s, %s, %s: the test wants 2 and 6 in one shard of m0, 4 in another", s2, s4, s6)
			}
			for _, prepared := range []bool{false, true} {
				db := e.db.Session(&gorm.Session{PrepareStmt: prepared})
				before := len(e.physical(t))
				rollback := errors.New("roll back")
				err := db.Transaction(func(tx *gorm.DB) error {
					// Users 2 and 6 share a shard of m0, where Memo lives.
					for _, u := range []int64{2, 6} {
						if err := tx.Create(&Order{UserID: u, Amount: 7}).Error; err != nil {
							return err
						}
					}
					if err := tx.Model(&Order{}).Where("user_id = ?", 2).Update("amount", 8).Error; err != nil {
						return err
					}
					if err := tx.Create(&Memo{Text: "in m0 too"}).Error; err != nil {
						return err
					}
					var n int64
					if err := tx.Model(&Order{}).Where("user_id = ? AND amount = ?", 2, 8).Count(&n).Error; err != nil || n != 1 {
						return fmt.Errorf("count in the transaction = %d, %v", n, err)
					}
					var both []Order
					if err := tx.Where("user_id IN ?", []int64{2, 6}).Where("amount IN ?", []int64{7, 8}).Order("user_id").Find(&both).Error; err != nil || len(both) != 2 {
						return fmt.Errorf("read of the shard in the transaction = %d rows, %v", len(both), err)
					}
					var all []Order
					if err := tx.Find(&all).Error; !errors.Is(err, sharding.ErrWrongShard) {
						return fmt.Errorf("read of every shard in the transaction: %v, want ErrWrongShard", err)
					}
					if err := tx.Where("user_id IN ?", []int64{2, 4}).Find(&all).Error; !errors.Is(err, sharding.ErrWrongShard) {
						return fmt.Errorf("read of two shards in the transaction: %v, want ErrWrongShard", err)
					}
					return rollback
				})
				if !errors.Is(err, rollback) {
					t.Fatalf("prepared=%v: %v", prepared, err)
				}
				if got := len(e.physical(t)); got != before {
					t.Fatalf("prepared=%v: rolled back transaction left %d rows, want %d", prepared, got, before)
				}
				// Users 2 and 4 are in database m0, in two tables: two
				// shards, which a transaction never spans, even in one
				// database (the tables may move to two).
				err = db.Transaction(func(tx *gorm.DB) error {
					if err := tx.Create(&Order{UserID: 2, Amount: 9}).Error; err != nil {
						return err
					}
					return tx.Model(&Order{}).Where("user_id = ?", 4).Update("amount", 1).Error
				})
				if !errors.Is(err, sharding.ErrWrongShard) {
					t.Fatalf("prepared=%v: a transaction over two tables of one database: %v, want ErrWrongShard", prepared, err)
				}
				if got := len(e.physical(t)); got != before {
					t.Fatalf("prepared=%v: refused transaction left %d rows, want %d", prepared, got, before)
				}
				err = db.Transaction(func(tx *gorm.DB) error {
					if err := tx.Create(&Order{UserID: 2, Amount: 9}).Error; err != nil {
						return err
					}
					return tx.Create(&Order{UserID: 1, Amount: 9}).Error // database m1
				})
				if !errors.Is(err, sharding.ErrWrongShard) {
					t.Fatalf("prepared=%v: a transaction over two databases: %v, want ErrWrongShard", prepared, err)
				}
				if got := len(e.physical(t)); got != before {
					t.Fatalf("prepared=%v: refused transaction left %d rows, want %d", prepared, got, before)
				}
				err = db.Transaction(func(tx *gorm.DB) error {
					if err := tx.Create(&Order{UserID: 3, Amount: 10}).Error; err != nil {
						return err
					}
					// A nested transaction is a savepoint in the same database.
					nested := tx.Transaction(func(tx *gorm.DB) error {
						if err := tx.Create(&Order{UserID: 3, Amount: 12}).Error; err != nil {
							return err
						}
						return rollback
					})
					if !errors.Is(nested, rollback) {
						return fmt.Errorf("nested: %w", nested)
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(e.physical(t)); got != before+1 {
					t.Fatalf("prepared=%v: committed transaction left %d rows, want %d", prepared, got, before+1)
				}
				// A savepoint before the first statement is kept for it.
				err = db.Transaction(func(tx *gorm.DB) error {
					return tx.Transaction(func(tx *gorm.DB) error { return tx.Create(&Order{UserID: 3, Amount: 13}).Error })
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := len(e.physical(t)); got != before+2 {
					t.Fatalf("prepared=%v: nested first transaction left %d rows, want %d", prepared, got, before+2)
				}
				var o Order
				if err := db.Where("user_id = ?", 3).Order("amount").First(&o).Error; err != nil || o.Amount != 10 {
					t.Fatalf("prepared=%v: read back %+v, %v", prepared, o, err)
				}
				if err := db.Where("user_id = ?", 3).Delete(&Order{}).Error; err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestPluginRawSQL routes statements written by hand by the key in their
// WHERE or VALUES, and refuses those it cannot route.
func TestPluginRawSQL(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			for _, prepared := range []bool{false, true} {
				db := e.db.Session(&gorm.Session{PrepareStmt: prepared})
				base := int64(1000)
				if prepared {
					base = 2000
				}
				var made []int64
				for u := int64(1); u <= 4; u++ {
					id, err := e.router.OwnerID(u, base+u, 4)
					if err != nil {
						t.Fatal(err)
					}
					made = append(made, id)
					err = db.Exec("INSERT INTO orders (id, user_id, product_id, amount, created_at) VALUES (?, ?, ?, ?, ?)",
						id, u, 7, 10*u, time.Now()).Error
					if err != nil {
						t.Fatalf("prepared=%v: raw insert: %v", prepared, err)
					}
				}
				stored := e.physical(t)
				for _, id := range made {
					if _, ok := stored[id]; !ok {
						t.Fatalf("prepared=%v: raw insert of %d not stored in its shard", prepared, id)
					}
				}
				var got []Order
				if err := db.Raw("SELECT * FROM orders WHERE user_id = ? AND product_id = ?", 3, 7).Scan(&got).Error; err != nil || len(got) != 1 || got[0].ID != made[2] {
					t.Fatalf("prepared=%v: raw select = %+v, %v", prepared, got, err)
				}
				res := db.Exec("UPDATE orders SET amount = ? WHERE id IN ?", 99, made)
				if res.Error != nil || res.RowsAffected != 4 {
					t.Fatalf("prepared=%v: raw update over 4 shards: %d rows, %v", prepared, res.RowsAffected, res.Error)
				}
				for _, id := range made {
					if e.physical(t)[id].Amount != 99 {
						t.Fatalf("prepared=%v: order %d not updated", prepared, id)
					}
				}
				if err := db.Exec("UPDATE orders SET user_id = ? WHERE user_id = ?", 1, 2).Error; !errors.Is(err, sharding.ErrWrongShard) {
					t.Fatalf("prepared=%v: raw update moving rows: %v, want ErrWrongShard", prepared, err)
				}
				if err := db.Raw("SELECT * FROM orders WHERE amount = ?", 99).Scan(&got).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
					t.Fatalf("prepared=%v: raw unrouted select: %v, want ErrUnrouted", prepared, err)
				}
				err := db.Raw("SELECT o.id FROM orders o JOIN order_items i ON i.order_id = o.id WHERE o.user_id = ?", 2).Scan(&got).Error
				if !errors.Is(err, sqlroute.ErrSeveralTables) {
					t.Fatalf("prepared=%v: raw join of two sharded tables: %v, want ErrSeveralTables", prepared, err)
				}
				if err := db.Exec("DELETE FROM orders WHERE id IN ?", made).Error; err != nil {
					t.Fatal(err)
				}
				for _, id := range made {
					if _, ok := e.physical(t)[id]; ok {
						t.Fatalf("prepared=%v: order %d not deleted", prepared, id)
					}
				}
			}
			// An ID must be given, drawn for its owner: by it the row is found.
			foreign, err := e.router.OwnerID(1, 3000, 4)
			if err != nil {
				t.Fatal(err)
			}
			if err := e.db.Exec("INSERT INTO orders (id, user_id, amount) VALUES (?, ?, ?)", foreign, 2, 1).Error; !errors.Is(err, sharding.ErrWrongShard) {
				t.Errorf("raw insert of another owner's ID: %v, want ErrWrongShard", err)
			}
			if err := e.db.Exec("INSERT INTO orders (user_id, amount) VALUES (?, ?)", 2, 1).Error; !errors.Is(err, sharding.ErrWrongShard) || !strings.Contains(err.Error(), "db.Create") {
				t.Errorf("raw insert without ID: %v, want ErrWrongShard saying to use db.Create", err)
			}
			if n := len(e.physical(t)); n != 0 {
				t.Errorf("%d rows stored by refused inserts", n)
			}
			// Other tables are untouched.
			if err := e.db.AutoMigrate(&Memo{}); err != nil {
				t.Fatal(err)
			}
			if err := e.db.Exec("INSERT INTO memos (id, text) VALUES (?, ?)", 1, "plain").Error; err != nil {
				t.Fatal(err)
			}
			var memo Memo
			if err := e.db.Raw("SELECT * FROM memos WHERE text = ?", "plain").Scan(&memo).Error; err != nil || memo.ID != 1 {
				t.Fatalf("plain table: %+v, %v", memo, err)
			}
			// What the SQL reader cannot read passes on other tables only.
			if b.Name == "sqlite" {
				if err := e.db.Exec("UPDATE memos SET text = 'x' /* to the end").Error; err != nil {
					t.Fatalf("unread statement on another table: %v", err)
				}
			}
			if err := e.db.Exec("DELETE FROM orders /* to the end").Error; !errors.Is(err, sqlroute.ErrSyntax) || !errors.Is(err, shardgorm.ErrUnrouted) || strings.Contains(err.Error(), "sqlroute") {
				t.Fatalf("an unread statement on orders: %v, want the reader's refusal wrapping ErrUnrouted", err)
			}
		})
	}
}

// Customer is not sharded; its orders are, by its ID.
type Customer struct {
	ID     int64 `gorm:"primaryKey"`
	Name   string
	Orders []Order `gorm:"foreignKey:UserID"`
}

// TestPluginPreload reads associations in their rows' shards, with
// unrouted reads refused: a sharded row's sharded items from its shard, a
// plain row's sharded orders by their key.
func TestPluginPreload(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{
				Settings:       sharding.Settings{ShardKey: "UserID", OwnerResidues: 4, Parallel: 2},
				RefuseUnrouted: true,
			})
			db := e.db
			if err := db.AutoMigrate(&Customer{}); err != nil {
				t.Fatal(err)
			}
			customers := []Customer{{ID: 1, Name: "a"}, {ID: 2, Name: "b"}, {ID: 3, Name: "c"}}
			if err := db.Create(&customers).Error; err != nil {
				t.Fatal(err)
			}
			batch := orders(15)
			if err := db.Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			var mine []Order
			if err := db.Preload("Items").Where("user_id IN ?", []int64{1, 2}).Order("id").Find(&mine).Error; err != nil {
				t.Fatal(err)
			}
			if len(mine) != 6 {
				t.Fatalf("orders of users 1 and 2: %d, want 6", len(mine))
			}
			for _, o := range mine {
				if len(o.Items) != 1 || o.Items[0].OrderID != o.ID || o.Items[0].UserID != o.UserID {
					t.Fatalf("order %d: items %+v", o.ID, o.Items)
				}
			}
			var got []Customer
			if err := db.Preload("Orders.Items").Order("id").Find(&got).Error; err != nil {
				t.Fatal(err)
			}
			for _, c := range got {
				if len(c.Orders) != 3 {
					t.Fatalf("customer %d: %d orders, want 3", c.ID, len(c.Orders))
				}
				for _, o := range c.Orders {
					if o.UserID != c.ID || len(o.Items) != 1 {
						t.Fatalf("customer %d: order %+v", c.ID, o)
					}
				}
			}
			if err := db.Preload("Items").Find(&mine).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
				t.Fatalf("unrouted preload: %v, want ErrUnrouted", err)
			}
		})
	}
}

// TestPluginUnroutedEqualsOneTable reads without a key (which many
// sharding plugins refuse) and answers as the same rows in one table do.
func TestPluginUnroutedEqualsOneTable(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			batch := orders(40)
			for i := range batch {
				batch[i].Items = nil
				batch[i].CreatedAt = time.Date(2026, 1, 1+i%7, 0, 0, 0, 0, time.UTC)
				if i%3 == 0 {
					shipped := time.Date(2026, 2, 1+i%5, 0, 0, 0, 0, time.UTC)
					batch[i].ShippedAt = &shipped
				}
			}
			if err := e.db.Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			// The same rows in one table, through GORM without the plugin.
			one := openGorm(t, e.dsn[1], shardtest.OwnerRegistry(t))
			if err := one.AutoMigrate(&Order{}); err != nil {
				t.Fatal(err)
			}
			if err := one.Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			counts := map[int]int{}
			for _, o := range e.physical(t) {
				s, _ := e.router.Route(o.UserID)
				counts[s.Database]++
			}
			if counts[0] == 0 || counts[1] == 0 {
				t.Fatalf("rows per database: %v, want both databases used", counts)
			}
			queries := map[string]func(db *gorm.DB, dest *[]Order) error{
				"all by id": func(db *gorm.DB, d *[]Order) error { return db.Order("id").Find(d).Error },
				"page by amount": func(db *gorm.DB, d *[]Order) error {
					return db.Order("amount desc").Limit(7).Offset(5).Find(d).Error
				},
				"page by time then id": func(db *gorm.DB, d *[]Order) error {
					return db.Order("created_at").Order("id desc").Limit(9).Offset(2).Find(d).Error
				},
				"page by a column with NULLs": func(db *gorm.DB, d *[]Order) error {
					return db.Order("shipped_at desc").Order("id").Limit(20).Offset(4).Find(d).Error
				},
				"condition on another column": func(db *gorm.DB, d *[]Order) error {
					return db.Where("amount > ?", 50).Order("product_id").Find(d).Error
				},
				"last": func(db *gorm.DB, d *[]Order) error {
					var o Order
					err := db.Last(&o).Error
					*d = []Order{o}
					return err
				},
			}
			for name, q := range queries {
				var sharded, plain []Order
				if err := q(e.db, &sharded); err != nil {
					t.Fatalf("%s: sharded: %v", name, err)
				}
				if err := q(one, &plain); err != nil {
					t.Fatalf("%s: one table: %v", name, err)
				}
				if len(plain) == 0 || !slices.EqualFunc(sharded, plain, func(a, b Order) bool { return a.ID == b.ID }) {
					t.Fatalf("%s: sharded %v, one table %v", name, ids(sharded), ids(plain))
				}
			}
			var n, m int64
			if err := e.db.Model(&Order{}).Where("amount < ?", 60).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Where("amount < ?", 60).Count(&m).Error; err != nil || n != m {
				t.Fatalf("count: sharded %d, one table %d (%v)", n, m, err)
			}
			var amounts, amountsOne []int64
			if err := e.db.Model(&Order{}).Order("amount desc").Limit(6).Pluck("amount", &amounts).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Order("amount desc").Limit(6).Pluck("amount", &amountsOne).Error; err != nil || !slices.Equal(amounts, amountsOne) {
				t.Fatalf("pluck: sharded %v, one table %v (%v)", amounts, amountsOne, err)
			}
			if err := e.db.Model(&Order{}).Distinct("product_id").Count(&n).Error; err == nil {
				t.Fatal("COUNT(DISTINCT) of a column shards share was summed")
			}
			if err := e.db.Model(&Order{}).Distinct("user_id").Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Distinct("user_id").Count(&m).Error; err != nil || n != m || n != 5 {
				t.Fatalf("distinct users: sharded %d, one table %d (%v)", n, m, err)
			}
			var products []int64
			if err := e.db.Model(&Order{}).Distinct().Pluck("product_id", &products).Error; !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("DISTINCT of a column shards share: %v, want a refusal", err)
			}
			var users, usersOne []int64
			if err := e.db.Model(&Order{}).Distinct().Order("user_id").Pluck("user_id", &users).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Distinct().Order("user_id").Pluck("user_id", &usersOne).Error; err != nil || !slices.Equal(users, usersOne) {
				t.Fatalf("distinct users: sharded %v, one table %v (%v)", users, usersOne, err)
			}
			var hi, hiOne int64
			if err := e.db.Model(&Order{}).Select("MAX(amount)").Find(&hi).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Select("MAX(amount)").Find(&hiOne).Error; err != nil || hi != hiOne {
				t.Fatalf("max: sharded %d, one table %d (%v)", hi, hiOne, err)
			}
			// Some columns, the order's among them; rows as maps.
			var sel, selOne []Order
			if err := e.db.Select("id", "amount").Order("amount desc").Order("id").Limit(7).Find(&sel).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Select("id", "amount").Order("amount desc").Order("id").Limit(7).Find(&selOne).Error; err != nil ||
				!slices.EqualFunc(sel, selOne, func(a, b Order) bool { return a.ID == b.ID }) {
				t.Fatalf("selected: sharded %v, one table %v (%v)", ids(sel), ids(selOne), err)
			}
			var maps, mapsOne []map[string]any
			if err := e.db.Model(&Order{}).Order("amount desc").Order("id").Limit(7).Find(&maps).Error; err != nil {
				t.Fatal(err)
			}
			if err := one.Model(&Order{}).Order("amount desc").Order("id").Limit(7).Find(&mapsOne).Error; err != nil || len(maps) != 7 ||
				!slices.EqualFunc(maps, mapsOne, func(a, b map[string]any) bool { return fmt.Sprint(a["id"]) == fmt.Sprint(b["id"]) }) {
				t.Fatalf("maps: sharded %v, one table %v (%v)", maps, mapsOne, err)
			}
			// An order column not selected is zero in every row: refused.
			for name, q := range map[string]func() error{
				"Select":     func() error { return e.db.Select("id").Order("amount desc").Limit(2).Find(&sel).Error },
				"Omit":       func() error { return e.db.Omit("Amount").Order("amount desc").Limit(2).Find(&sel).Error },
				"maps":       func() error { return e.db.Model(&Order{}).Select("id").Order("amount desc").Limit(2).Find(&maps).Error },
				"Select str": func() error { return e.db.Select("id, user_id").Order("amount desc").Limit(2).Find(&sel).Error },
			} {
				if err := q(); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(fmt.Sprint(err), "amount") {
					t.Errorf("%s: order by a column not selected: %v, want a refusal naming it", name, err)
				}
			}
		})
	}
}

// TestPluginApplicationHandle registers the plugin on a handle of the
// application's own, with GORM's default transactions and prepared
// statements, apart from the databases it routes to.
func TestPluginApplicationHandle(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			app, err := gorm.Open(dialector(e.dsn[0]), &gorm.Config{Logger: logger.Discard, PrepareStmt: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() {
				if s, err := app.DB(); err == nil {
					s.Close()
				}
			})
			if err := app.Use(e.plugin); err != nil {
				t.Fatal(err)
			}
			one := Order{UserID: 3, Amount: 4}
			if err := app.Create(&one).Error; err != nil {
				t.Fatal(err)
			}
			rows := orders(4) // users 1 to 4: both databases
			for i := range rows {
				rows[i].Items = nil
			}
			if err := app.CreateInBatches(&rows, 2).Error; err != nil {
				t.Fatalf("CreateInBatches over two databases in GORM's transaction: %v", err)
			}
			if err := app.Model(&one).Update("amount", 5).Error; err != nil {
				t.Fatal(err)
			}
			var got Order
			if err := app.First(&got, one.ID).Error; err != nil || got.Amount != 5 {
				t.Fatalf("First = %+v, %v", got, err)
			}
			if err := app.Delete(&got).Error; err != nil {
				t.Fatal(err)
			}
			if n := len(e.physical(t)); n != len(rows) {
				t.Fatalf("%d rows stored, want %d", n, len(rows))
			}
		})
	}
}

// dialector opens d with GORM's driver for its server.
func dialector(d testdb.DB) gorm.Dialector {
	switch d.Name {
	case "sqlite":
		return sqlite.Open(d.DSN)
	case "mariadb":
		return mysql.Open(d.DSN)
	}
	return postgres.Open(d.DSN)
}

// sqlLog records the statements a database runs.
type sqlLog struct {
	logger.Interface
	mu  sync.Mutex
	sql []string
}

func (l *sqlLog) Trace(_ context.Context, _ time.Time, fc func() (string, int64), _ error) {
	s, _ := fc()
	l.mu.Lock()
	l.sql = append(l.sql, s)
	l.mu.Unlock()
}

// TestPluginINGroupedByShard reads and writes an IN over keys of several
// shards with each shard asked for its own keys only.
func TestPluginINGroupedByShard(t *testing.T) {
	e := newPluginEnv(t, shardtest.Backends[0], shardgorm.PluginSettings{})
	batch := orders(12)
	for i := range batch {
		batch[i].Items = nil
	}
	if err := e.db.Create(&batch).Error; err != nil {
		t.Fatal(err)
	}
	logs := make([]*sqlLog, len(e.dbs))
	for i, db := range e.dbs {
		logs[i] = &sqlLog{Interface: logger.Discard}
		db.Config.Logger = logs[i]
	}
	want := ids(batch)
	var got []Order
	if err := e.db.Where("id IN ?", want).Find(&got).Error; err != nil || !slices.Equal(ids(got), want) {
		t.Fatalf("Where id IN = %v, %v", ids(got), err)
	}
	if res := e.db.Model(&Order{}).Where("id IN ?", want).Update("amount", 3); res.Error != nil || res.RowsAffected != int64(len(want)) {
		t.Fatalf("update over shards: %d rows, %v", res.RowsAffected, res.Error)
	}
	if res := e.db.Delete(&batch); res.Error != nil || res.RowsAffected != int64(len(batch)) {
		t.Fatalf("delete of rows over shards: %d rows, %v", res.RowsAffected, res.Error)
	}
	statements := 0
	for db, l := range logs {
		for _, q := range l.sql {
			statements++
			for _, o := range batch {
				s, _ := e.router.Route(o.UserID)
				in := strings.Contains(q, strconv.FormatInt(o.ID, 10))
				if mine := s.Database == db && strings.Contains(q, "orders_"+s.TableName[len("orders_"):]+"`"); in && !mine {
					t.Errorf("database m%d was asked for %d of %s: %s", db, o.ID, s, q)
				}
			}
		}
	}
	if statements < 3*4 {
		t.Fatalf("%d statements recorded, want one per shard for each of 3 calls", statements)
	}
	if len(e.physical(t)) != 0 {
		t.Fatal("rows left after the delete")
	}
}

// TestPluginKeyNotID routes by the owner when IDs do not route, and reads
// a row by its ID over every shard.
func TestPluginKeyNotID(t *testing.T) {
	e := newPluginEnv(t, shardtest.Backends[0], shardgorm.PluginSettings{Settings: sharding.Settings{ShardKey: "UserID"}})
	batch := orders(10)
	if err := e.db.Create(&batch).Error; err != nil {
		t.Fatal(err)
	}
	got := Order{ID: batch[6].ID}
	if err := e.db.First(&got).Error; err != nil || got.UserID != batch[6].UserID || got.Amount != batch[6].Amount {
		t.Fatalf("First(&Order{ID}) = %+v, %v; want %+v", got, err, batch[6])
	}
	var os []Order
	if err := e.db.Where("id IN ?", []int64{batch[1].ID, batch[8].ID}).Find(&os).Error; err != nil || len(os) != 2 {
		t.Fatalf("IDs over every shard: %d rows, %v", len(os), err)
	}
	if err := e.db.Model(&batch[2]).Update("amount", 77).Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := e.db.Model(&Order{}).Where("user_id = ? AND amount = ?", batch[2].UserID, 77).Count(&n).Error; err != nil || n != 1 {
		t.Fatalf("count after update = %d, %v", n, err)
	}
}

// TestPluginByID routes rows by their own ID, the repository's default.
func TestPluginByID(t *testing.T) {
	e := newPluginEnv(t, shardtest.Backends[0], shardgorm.PluginSettings{Settings: sharding.Settings{ShardKey: "ID"}})
	batch := orders(12)
	// Items routed by their own IDs do not live with their order: saving
	// them with it is refused.
	if err := e.db.Create(&batch).Error; !errors.Is(err, sharding.ErrWrongShard) {
		t.Fatalf("items of another shard saved with their order: %v, want ErrWrongShard", err)
	}
	for i := range batch {
		batch[i].ID, batch[i].Items = 0, nil
	}
	if err := e.db.Create(&batch).Error; err != nil {
		t.Fatal(err)
	}
	shards, _ := e.router.Shards()
	for _, s := range shards {
		var rows []Order
		if err := e.dbs[s.Database].Table("orders_" + s.TableName[len("orders_"):]).Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		for _, o := range rows {
			if at, _ := e.router.Route(o.ID); at != s {
				t.Errorf("order %d in %s, routes to %s", o.ID, s, at)
			}
		}
	}
	var os []Order
	if err := e.db.Preload("Items").Find(&os, ids(batch[:5])).Error; err != nil || len(os) != 5 {
		t.Fatalf("Find(ids) = %d rows, %v", len(os), err)
	}
	if err := e.db.Where("user_id = ?", 1).Find(&os).Error; err != nil || len(os) != 3 {
		t.Fatalf("by user over every shard = %d rows, %v", len(os), err)
	}
	if err := e.db.Model(&batch[0]).Update("id", batch[1].ID+1).Error; !errors.Is(err, sharding.ErrWrongShard) {
		t.Fatalf("moving an ID: %v", err)
	}
	if err := e.db.Delete(&Order{}, batch[0].ID).Error; err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := e.db.Model(&Order{}).Count(&n).Error; err != nil || n != 11 { // the refused batch left nothing
		t.Fatalf("count = %d, %v", n, err)
	}
}

// TestPluginAllowUnroutedWrites runs an update and a delete naming no key
// on every shard when told to.
func TestPluginAllowUnroutedWrites(t *testing.T) {
	e := newPluginEnv(t, shardtest.Backends[0], shardgorm.PluginSettings{
		Settings:            sharding.Settings{ShardKey: "UserID", OwnerResidues: 4},
		AllowUnroutedWrites: true,
	})
	batch := orders(12)
	if err := e.db.Create(&batch).Error; err != nil {
		t.Fatal(err)
	}
	res := e.db.Model(&Order{}).Where("product_id < ?", 106).Update("amount", 1)
	if res.Error != nil || res.RowsAffected != 6 {
		t.Fatalf("unrouted update: %d rows, %v; want 6", res.RowsAffected, res.Error)
	}
	res = e.db.Where("amount = ?", 1).Delete(&Order{})
	if res.Error != nil || res.RowsAffected != 6 {
		t.Fatalf("unrouted delete: %d rows, %v; want 6", res.RowsAffected, res.Error)
	}
	if n := len(e.physical(t)); n != 6 {
		t.Fatalf("%d rows left, want 6", n)
	}
}

// TestPluginOr reads every shard for a WHERE holding an OR, however GORM
// built it, and refuses a write it cannot route: the first condition of an
// OR does not bound the rows.
func TestPluginOr(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			batch := orders(10)
			if err := e.db.Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			want := 0
			for _, o := range e.physical(t) {
				if o.UserID == 2 || o.UserID == 3 {
					want++
				}
			}
			reads := map[string]func() *gorm.DB{
				"Or":       func() *gorm.DB { return e.db.Where("user_id = ?", 2).Or("user_id = ?", 3) },
				"Or map":   func() *gorm.DB { return e.db.Where(map[string]any{"user_id": 2}).Or(map[string]any{"user_id": 3}) },
				"Or group": func() *gorm.DB { return e.db.Where(e.db.Where("user_id = ?", 2).Or("user_id = ?", 3)) },
				"Or struct": func() *gorm.DB {
					return e.db.Where(&Order{UserID: 2}).Or(&Order{UserID: 3})
				},
				"clause.Or": func() *gorm.DB {
					return e.db.Clauses(clause.Where{Exprs: []clause.Expression{clause.Or(
						clause.Eq{Column: "user_id", Value: 2}, clause.Eq{Column: "user_id", Value: 3})}})
				},
				"||": func() *gorm.DB {
					if b.Name != "mariadb" {
						return e.db.Where("user_id = ? OR user_id = ?", 2, 3)
					}
					return e.db.Where("user_id = ? || user_id = ?", 2, 3)
				},
			}
			for name, q := range reads {
				var os []Order
				if err := q().Find(&os).Error; err != nil || len(os) != want {
					t.Errorf("%s: %d rows, %v; want %d", name, len(os), err, want)
				}
				var n int64
				if err := q().Model(&Order{}).Count(&n).Error; err != nil || n != int64(want) {
					t.Errorf("%s count: %d, %v; want %d", name, n, err, want)
				}
			}
			if err := e.db.Model(&Order{}).Where("user_id = ?", 2).Or("user_id = ?", 3).Update("amount", 7).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
				t.Errorf("update under Or: %v, want ErrUnrouted", err)
			}
			if err := e.db.Where("user_id = ?", 2).Or("user_id = ?", 3).Delete(&Order{}).Error; !errors.Is(err, shardgorm.ErrUnrouted) {
				t.Errorf("delete under Or: %v, want ErrUnrouted", err)
			}
			if n := len(e.physical(t)); n != 10 {
				t.Errorf("%d rows left, want 10", n)
			}
		})
	}
}

// TestPluginCreateSelectOmit writes the fields a Create selects, or does
// not omit, and its associations only when not omitted; the ID and shard
// key are written whatever is selected, as they place the row.
func TestPluginCreateSelectOmit(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			omit := Order{UserID: 2, ProductID: 7, Amount: 5, Items: []OrderItem{{UserID: 2, Name: "a"}}}
			if err := e.db.Omit("ProductID", clause.Associations).Create(&omit).Error; err != nil {
				t.Fatal(err)
			}
			sel := Order{UserID: 3, ProductID: 8, Amount: 6, Items: []OrderItem{{UserID: 3, Name: "b"}}}
			if err := e.db.Select("UserID", "Amount").Create(&sel).Error; err != nil {
				t.Fatal(err)
			}
			rows := e.physical(t)
			if o, ok := rows[omit.ID]; !ok || o.ProductID != 0 || o.Amount != 5 {
				t.Errorf("Omit: stored %+v (found %v), want no product and amount 5", o, ok)
			}
			if o, ok := rows[sel.ID]; !ok || o.ProductID != 0 || o.Amount != 6 || o.UserID != 3 {
				t.Errorf("Select: stored %+v (found %v), want user 3, amount 6, no product", o, ok)
			}
			var n int64
			if err := e.db.Model(&OrderItem{}).Where("user_id IN ?", []int64{2, 3}).Count(&n).Error; err != nil || n != 0 {
				t.Errorf("items stored: %d (%v), want none", n, err)
			}
		})
	}
}

// TestPluginQualified reads what GORM code qualifies by the logical table,
// or names by db.Table, from the physical tables: one shard's or all.
func TestPluginQualified(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			batch := orders(10)
			if err := e.db.Create(&batch).Error; err != nil {
				t.Fatal(err)
			}
			mine := 0
			for _, o := range e.physical(t) {
				if o.UserID == 2 {
					mine++
				}
			}
			var os []Order
			if err := e.db.Where("orders.user_id = ?", 2).Find(&os).Error; err != nil || len(os) != mine {
				t.Errorf("Where(orders.user_id): %d rows, %v; want %d", len(os), err, mine)
			}
			if err := e.db.Select("orders.*").Where("user_id = ?", 2).Order("orders.id").Find(&os).Error; err != nil || len(os) != mine || !slices.IsSortedFunc(os, func(a, b Order) int { return int(a.ID - b.ID) }) {
				t.Errorf("Select(orders.*).Order(orders.id): %v, %v", ids(os), err)
			}
			if err := e.db.Order("orders.id").Find(&os).Error; err != nil || len(os) != 10 || !slices.IsSortedFunc(os, func(a, b Order) int { return int(a.ID - b.ID) }) {
				t.Errorf("Order(orders.id) over shards: %d rows, %v", len(os), err)
			}
			var n int
			if err := e.db.Model(&Order{}).Select("count(*)").Where("orders.user_id = ?", 2).Row().Scan(&n); err != nil || n != mine {
				t.Errorf("Row with orders.user_id: %d, %v; want %d", n, err, mine)
			}
			var maps []map[string]any
			if err := e.db.Table("orders").Where("user_id = ?", 2).Find(&maps).Error; err != nil || len(maps) != mine {
				t.Errorf("Table(orders): %d rows, %v; want %d", len(maps), err, mine)
			}
			o := batch[0]
			var items []OrderItem
			if err := e.db.Model(&o).Association("Items").Find(&items); err != nil || len(items) != 1 {
				t.Errorf("Association Find: %d items, %v; want 1", len(items), err)
			}
			if n := e.db.Model(&o).Association("Items").Count(); n != 1 {
				t.Errorf("Association Count: %d, want 1", n)
			}
		})
	}
}

// TestPluginQualifiedWrites updates and deletes rows with conditions that
// qualify columns by the logical table, bare or quoted: routed by the
// qualified key to one shard or several, or unrouted, each with or
// without prepared statements. Every physical row changes as one table's
// would, and a qualified key moving rows to another shard is refused.
func TestPluginQualifiedWrites(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{
				Settings:            sharding.Settings{ShardKey: "UserID", OwnerResidues: 4, Parallel: 2},
				AllowUnroutedWrites: true,
			})
			s1, _ := e.router.Route(1)
			s2, _ := e.router.Route(2)
			s3, _ := e.router.Route(3)
			if s1 == s2 || s2 == s3 || s1.Database == s2.Database {
				t.Fatalf("users 1, 2, 3 route to %s, %s, %s: the test wants them in several shards of both databases", s1, s2, s3)
			}
			type fields struct{ user, product, amount int64 }
			of := func(o Order) fields { return fields{o.UserID, o.ProductID, o.Amount} }
			// step runs a write and checks each physical row against what
			// want makes of it (false: deleted).
			step := func(t *testing.T, name string, run func() *gorm.DB, want func(o *Order) bool) {
				t.Helper()
				before := e.physical(t)
				res := run()
				if res.Error != nil {
					t.Fatalf("%s: %v", name, res.Error)
				}
				after := e.physical(t)
				changed := 0
				for id, o := range before {
					w := o
					kept := want(&w)
					if !kept || of(w) != of(o) {
						changed++
					}
					got, ok := after[id]
					switch {
					case ok != kept:
						t.Errorf("%s: order %d of user %d stored %v, want %v", name, id, o.UserID, ok, kept)
					case kept && of(got) != of(w):
						t.Errorf("%s: order %d stored %+v, want %+v", name, id, of(got), of(w))
					}
				}
				if len(after) > len(before) {
					t.Errorf("%s: %d rows after, %d before", name, len(after), len(before))
				}
				if changed == 0 {
					t.Fatalf("%s changes no row", name)
				}
				if res.RowsAffected != int64(changed) {
					t.Errorf("%s: %d rows affected, want %d", name, res.RowsAffected, changed)
				}
			}
			q := `"`
			if b.Name == "mariadb" {
				q = "`"
			}
			forms := []string{"orders.%s", q + "orders" + q + "." + q + "%s" + q}
			round := int64(0)
			for _, form := range forms {
				col := func(c string) string { return fmt.Sprintf(form, c) }
				for _, prepared := range []bool{false, true} {
					t.Run(fmt.Sprintf("%s/prepared=%v", col("user_id"), prepared), func(t *testing.T) {
						round++
						v := round * 1000 // values no earlier round wrote
						db := e.db.Session(&gorm.Session{PrepareStmt: prepared})
						batch := orders(10)
						if err := db.Create(&batch).Error; err != nil {
							t.Fatal(err)
						}
						step(t, "update in one shard", func() *gorm.DB {
							return db.Model(&Order{}).Where(col("user_id")+" = ?", 2).Update("amount", v+1)
						}, func(o *Order) bool {
							if o.UserID == 2 {
								o.Amount = v + 1
							}
							return true
						})
						o := batch[2] // user 3
						step(t, "update of a model", func() *gorm.DB {
							return db.Model(&o).Where(col("amount")+" > ?", 0).Updates(map[string]any{"amount": v + 2})
						}, func(r *Order) bool {
							if r.ID == o.ID {
								r.Amount = v + 2
							}
							return true
						})
						step(t, "update in several shards", func() *gorm.DB {
							return db.Model(&Order{}).Where(col("user_id")+" IN ?", []int64{1, 2, 3}).Update("product_id", v+3)
						}, func(r *Order) bool {
							if r.UserID <= 3 {
								r.ProductID = v + 3
							}
							return true
						})
						step(t, "unrouted update", func() *gorm.DB {
							return db.Model(&Order{}).Where(col("product_id")+" = ?", v+3).Update("amount", v+4)
						}, func(r *Order) bool {
							if r.ProductID == v+3 {
								r.Amount = v + 4
							}
							return true
						})
						before := e.physical(t)
						away := []string{col("user_id"), "user_id"}
						for _, c := range away {
							err := db.Model(&Order{}).Where(col("user_id")+" = ?", 3).Update(c, 2).Error
							if !errors.Is(err, sharding.ErrWrongShard) {
								t.Errorf("Update(%s) moving user 3 to user 2's shard: %v, want ErrWrongShard", c, err)
							}
							err = db.Model(&o).Updates(map[string]any{c: 2}).Error
							if !errors.Is(err, sharding.ErrWrongShard) {
								t.Errorf("Updates(%s) moving user 3 to user 2's shard: %v, want ErrWrongShard", c, err)
							}
						}
						if after := e.physical(t); !maps.EqualFunc(before, after, func(a, b Order) bool { return of(a) == of(b) }) {
							t.Errorf("refused moves changed rows")
						}
						step(t, "delete in one shard", func() *gorm.DB {
							return db.Where(col("user_id")+" = ?", 4).Delete(&Order{})
						}, func(r *Order) bool { return r.UserID != 4 })
						gone := []int64{batch[0].ID, batch[1].ID, batch[5].ID} // users 1, 2, 1
						step(t, "delete by IDs in several shards", func() *gorm.DB {
							return db.Where(col("id")+" IN ?", gone).Delete(&Order{})
						}, func(r *Order) bool { return !slices.Contains(gone, r.ID) })
						step(t, "unrouted delete", func() *gorm.DB {
							return db.Where(col("amount")+" = ?", v+4).Delete(&Order{})
						}, func(r *Order) bool { return r.Amount != v+4 })
						if b.Name == "mariadb" {
							// Its DELETE with LIMIT keeps the physical name.
							first := int64(0)
							for id, r := range e.physical(t) {
								if r.UserID == 5 && (first == 0 || id < first) {
									first = id
								}
							}
							step(t, "delete with a limit", func() *gorm.DB {
								return db.Where("user_id = ?", 5).Order("id").Limit(1).Delete(&Order{})
							}, func(r *Order) bool { return r.ID != first })
						}
					})
				}
			}
		})
	}
}
