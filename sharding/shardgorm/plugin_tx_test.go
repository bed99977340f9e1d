package shardgorm_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/shardtest"
	"github.com/idforge/idforge/sharding/shardgorm"
)

// TestPluginCreateInBatches writes CreateInBatches over every shard in
// GORM's own transaction as a Create writes a slice: each database's rows
// in a transaction of that database, all rolled back when a batch fails,
// with positions in the value given.
func TestPluginCreateInBatches(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			for _, prepared := range []bool{false, true} {
				db := e.db.Session(&gorm.Session{PrepareStmt: prepared})
				db.SkipDefaultTransaction = false // GORM's transaction around the batches
				before := len(e.physical(t))
				rows := orders(10) // users 1 to 5: every shard
				res := db.CreateInBatches(&rows, 3)
				if res.Error != nil {
					t.Fatalf("prepared=%v: %v", prepared, res.Error)
				}
				if res.RowsAffected != 10 {
					t.Errorf("prepared=%v: RowsAffected = %d, want 10", prepared, res.RowsAffected)
				}
				stored := e.physical(t)
				if len(stored) != before+10 {
					t.Fatalf("prepared=%v: %d rows stored, want %d", prepared, len(stored), before+10)
				}
				for i, o := range rows {
					if s, ok := stored[o.ID]; !ok || s.Amount != o.Amount {
						t.Errorf("prepared=%v: row %d (ID %d) stored as %+v", prepared, i, o.ID, s)
					}
				}

				// A duplicate key in the third batch rolls every shard's
				// rows back, the first two batches' too.
				more := orders(10)
				more[7].ID, more[7].UserID = rows[0].ID, rows[0].UserID
				err := db.CreateInBatches(&more, 3).Error
				var se *sharding.ShardError
				if !errors.As(err, &se) || !slices.Contains(se.Rows, 7) {
					t.Fatalf("prepared=%v: a duplicate in the third batch: %v, want a ShardError naming row 7", prepared, err)
				}
				if got := len(e.physical(t)); got != before+10 {
					t.Fatalf("prepared=%v: a failed CreateInBatches left %d rows, want %d", prepared, got, before+10)
				}
			}

			// In the application's transaction, CreateInBatches is a
			// statement of it: held to one shard.
			err := e.db.Transaction(func(tx *gorm.DB) error {
				rows := orders(4)
				return tx.CreateInBatches(&rows, 2).Error
			})
			if !errors.Is(err, sharding.ErrWrongShard) {
				t.Fatalf("CreateInBatches over shards in a transaction: %v, want ErrWrongShard", err)
			}
		})
	}
}

// TestPluginCreateInBatchesCommit makes the COMMIT of the second
// database of a CreateInBatches fail: the first database's rows are
// written, the second's are not, and the ShardError says which rows are
// which.
func TestPluginCreateInBatchesCommit(t *testing.T) {
	b := shardtest.Backends[len(shardtest.Backends)-1]
	if b.Name != "postgres" {
		t.Fatalf("the last backend is %s; a constraint checked at COMMIT is PostgreSQL's", b.Name)
	}
	e := newPluginEnv(t, b, shardgorm.PluginSettings{})
	shards, err := e.router.Shards()
	if err != nil {
		t.Fatal(err)
	}
	// The databases commit in order: fail the second at a table of it.
	failing := shards[len(shards)-1]
	if err := e.dbs[failing.Database].Exec(`ALTER TABLE ` + failing.TableName + ` ADD CONSTRAINT one_amount UNIQUE (amount) DEFERRABLE INITIALLY DEFERRED`).Error; err != nil {
		t.Fatal(err)
	}
	rows := orders(12)
	var want, written []int
	for i := range rows {
		s, err := e.router.Route(rows[i].UserID)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case s == failing:
			rows[i].Amount = 5 // twice or more: refused at COMMIT
			want = append(want, i)
		case s.Database == failing.Database:
			want = append(want, i)
		default:
			written = append(written, i)
		}
	}
	if failing.Database != 1 || len(want) < 3 || len(written) == 0 {
		t.Fatalf("rows %v in database %d, %v in the other: the test needs rows in both, two in the failing table", want, failing.Database, written)
	}
	db := e.db.Session(&gorm.Session{})
	db.SkipDefaultTransaction = false
	err = db.CreateInBatches(&rows, 5).Error
	var se *sharding.ShardError
	if !errors.As(err, &se) {
		t.Fatalf("CreateInBatches refused at COMMIT: %v, want a ShardError", err)
	}
	if errors.Is(err, sharding.ErrOutcomeUnknown) {
		t.Errorf("a COMMIT the server refused is not an unknown outcome: %v", err)
	}
	if !slices.Equal(se.Rows, want) || !slices.Equal(se.Written, written) {
		t.Errorf("ShardError rows %v, written %v; want %v and %v", se.Rows, se.Written, want, written)
	}
	stored := e.physical(t)
	var got []int
	for i, o := range rows {
		if _, ok := stored[o.ID]; ok {
			got = append(got, i)
		}
	}
	if !slices.Equal(got, written) {
		t.Errorf("rows stored %v, want %v", got, written)
	}
}

// errNegative is what Order's BeforeCreate answers a negative amount.
var errNegative = errors.New("negative amount")

// BeforeCreate refuses a negative amount, as an application's validation
// would: the plugin must run it wherever the row is written.
func (o *Order) BeforeCreate(*gorm.DB) error {
	if o.Amount < 0 {
		return errNegative
	}
	return nil
}

// TestPluginHooksEverywhere runs a sharded model's create hooks in
// every way a row is created: plainly, in a transaction, and in
// CreateInBatches; a session skipping hooks skips them.
func TestPluginHooksEverywhere(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			db := e.db.Session(&gorm.Session{})
			db.SkipDefaultTransaction = false
			bad := func() []Order {
				return []Order{{UserID: 1, Amount: 1}, {UserID: 2, Amount: -1}, {UserID: 3, Amount: 1}}
			}
			ways := map[string]func() error{
				"Create": func() error { rows := bad(); return db.Create(&rows).Error },
				"Transaction": func() error {
					return db.Transaction(func(tx *gorm.DB) error { return tx.Create(&Order{UserID: 2, Amount: -1}).Error })
				},
				"CreateInBatches": func() error { rows := bad(); return db.CreateInBatches(&rows, 1).Error },
			}
			for name, create := range ways {
				if err := create(); !errors.Is(err, errNegative) {
					t.Errorf("%s of a negative amount: %v, want the hook's error", name, err)
				}
			}
			for _, o := range e.physical(t) {
				if o.Amount < 0 {
					t.Errorf("a negative amount was stored: %+v", o)
				}
			}
			before := len(e.physical(t))
			rows := bad()
			if err := db.Session(&gorm.Session{SkipHooks: true}).Create(&rows).Error; err != nil {
				t.Fatalf("Create skipping hooks: %v", err)
			}
			if got := len(e.physical(t)); got != before+3 {
				t.Errorf("Create skipping hooks stored %d rows, want 3", got-before)
			}
		})
	}
}

// TestPluginTransactionCreateOneShard refuses a Create in a transaction
// whose rows go to several shards before any row is written, and lets
// tx.DB() answer as in a transaction of GORM's own.
func TestPluginTransactionCreateOneShard(t *testing.T) {
	for _, b := range shardtest.Backends {
		t.Run(b.Name, func(t *testing.T) {
			e := newPluginEnv(t, b, shardgorm.PluginSettings{})
			tx := e.db.Begin()
			if sqlDB, err := tx.DB(); err != nil || sqlDB == nil {
				t.Errorf("tx.DB() in the plugin's transaction: %v, %v", sqlDB, err)
			}
			batch := []Order{{UserID: 4, Amount: 1}, {UserID: 2, Amount: 2}} // two tables of m0
			err := tx.Create(&batch).Error
			if !errors.Is(err, sharding.ErrWrongShard) || !strings.Contains(err.Error(), "nothing was written") {
				t.Errorf("Create over two shards in a transaction: %v, want ErrWrongShard before any row", err)
			}
			if err := tx.Create(&Order{UserID: 2, Amount: 3}).Error; err != nil {
				t.Fatalf("Create in the one shard after the refusal: %v", err)
			}
			err = tx.Create(&Order{UserID: 4, Amount: 4}).Error
			if !errors.Is(err, sharding.ErrWrongShard) || !strings.Contains(err.Error(), "nothing was written") && !strings.Contains(err.Error(), "outside") {
				t.Errorf("Create in another shard of the held one: %v, want ErrWrongShard", err)
			}
			if err := tx.Commit().Error; err != nil {
				t.Fatal(err)
			}
			stored := e.physical(t)
			if len(stored) != 1 {
				t.Fatalf("the transaction committed %d rows, want the one of user 2: %v", len(stored), stored)
			}
			for _, o := range stored {
				if o.UserID != 2 || o.Amount != 3 {
					t.Errorf("committed %+v, want user 2's amount 3", o)
				}
			}
		})
	}
}
