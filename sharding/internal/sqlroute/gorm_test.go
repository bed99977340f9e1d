package sqlroute

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

type order struct {
	ID     int64
	UserID int64
	Amount int
}

// softOrder is an order with soft delete and a user to join.
type softOrder struct {
	ID        int64
	UserID    int64
	User      user
	DeletedAt gorm.DeletedAt
}

type user struct {
	ID   int64
	Name string
}

type item struct {
	ID      int64
	OrderID int64
	Name    string
}

var testTables = []Table{
	{Name: "orders", ID: "id", Owner: "user_id"},
	{Name: "items", ID: "id", Owner: "order_id"},
	{Name: "events", ID: "key", Owner: "user"}, // keywords to the parser
}

// dryRuns returns a session that only builds statements, per dialect.
func dryRuns(t *testing.T) map[string]*gorm.DB {
	t.Helper()
	dialectors := map[string]gorm.Dialector{
		"mysql":    mysql.New(mysql.Config{DSN: "u@tcp(127.0.0.1:1)/db", SkipInitializeWithVersion: true}),
		"postgres": postgres.New(postgres.Config{DSN: "host=127.0.0.1 port=1"}),
		"sqlite":   sqlite.Open(":memory:"),
	}
	out := map[string]*gorm.DB{}
	for name, d := range dialectors {
		db, err := gorm.Open(d, &gorm.Config{DryRun: true, DisableAutomaticPing: true, SkipDefaultTransaction: true,
			NowFunc: func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out[name] = db
	}
	return out
}

// dry returns the statement and args GORM sends for op on table.
func dry(t *testing.T, db *gorm.DB, table string, op func(tx *gorm.DB) *gorm.DB) (string, []any) {
	t.Helper()
	tx := op(db.Session(&gorm.Session{DryRun: true}).Table(table))
	if tx.Error != nil {
		t.Fatalf("dry run: %v", tx.Error)
	}
	return tx.Statement.SQL.String(), tx.Statement.Vars
}

type gormCase struct {
	name   string
	table  string // logical table the op runs on
	op     func(tx *gorm.DB) *gorm.DB
	kind   Kind
	ids    []any // nil: unknown
	owners []any
	sets   []string // routing columns reported as assigned
	// narrowed, when set, keeps these indexes of IDs (or Owners when
	// byOwner) and must give narrowOp's statement.
	narrow   []int
	byOwner  bool
	narrowOp func(tx *gorm.DB) *gorm.DB
}

func gormCases() []gormCase {
	two := []order{{ID: 11, UserID: 1}, {ID: 12, UserID: 2}, {ID: 13, UserID: 3}}
	return []gormCase{
		{name: "create one", table: "orders", kind: Insert,
			op:  func(tx *gorm.DB) *gorm.DB { return tx.Create(&order{ID: 11, UserID: 1, Amount: 5}) },
			ids: []any{int64(11)}, owners: []any{int64(1)}},
		{name: "create batch", table: "orders", kind: Insert,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Create(&two) },
			ids:    []any{int64(11), int64(12), int64(13)},
			owners: []any{int64(1), int64(2), int64(3)},
			narrow: []int{0, 2},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Create(&[]order{two[0], two[2]})
			}},
		{name: "create batch one row kept", table: "orders", kind: Insert,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Create(&two) },
			ids:    []any{int64(11), int64(12), int64(13)},
			owners: []any{int64(1), int64(2), int64(3)},
			narrow: []int{1}, byOwner: true,
			narrowOp: func(tx *gorm.DB) *gorm.DB { return tx.Create(&[]order{two[1]}) }},
		{name: "create batch without ids", table: "orders", kind: Insert,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Create(&[]order{{UserID: 1}, {ID: 12, UserID: 2}})
			},
			owners: []any{int64(1), int64(2)},
			narrow: []int{1}, byOwner: true,
			narrowOp: func(tx *gorm.DB) *gorm.DB { return tx.Create(&[]order{{ID: 12, UserID: 2}}) }},
		{name: "upsert all", table: "orders", kind: Insert,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&order{ID: 11, UserID: 1})
			},
			ids: []any{int64(11)}, owners: []any{int64(1)}},
		{name: "upsert batch", table: "orders", kind: Insert,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&two)
			},
			ids:    []any{int64(11), int64(12), int64(13)},
			owners: []any{int64(1), int64(2), int64(3)},
			narrow: []int{2},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.OnConflict{UpdateAll: true}).Create(&[]order{two[2]})
			}},
		{name: "upsert do nothing", table: "orders", kind: Insert,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&order{ID: 11, UserID: 1})
			},
			ids: []any{int64(11)}, owners: []any{int64(1)}},
		{name: "upsert sets owner", table: "orders", kind: Insert,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.OnConflict{
					Columns:   []clause.Column{{Name: "id"}},
					DoUpdates: clause.Assignments(map[string]any{"user_id": 9}),
				}).Create(&order{ID: 11, UserID: 1})
			},
			ids: []any{int64(11)}, owners: []any{int64(1)}, sets: []string{"user_id"}},
		{name: "first by id", table: "orders", kind: Select,
			op:  func(tx *gorm.DB) *gorm.DB { return tx.First(&order{}, 5) },
			ids: []any{5}},
		{name: "take where", table: "orders", kind: Select,
			op:  func(tx *gorm.DB) *gorm.DB { return tx.Take(&order{}, "id = ?", 6) },
			ids: []any{6}},
		{name: "find in", table: "orders", kind: Select,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Find(&[]order{}, []int64{1, 2, 3}) },
			ids:    []any{int64(1), int64(2), int64(3)},
			narrow: []int{0, 2},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Find(&[]order{}, []int64{1, 3})
			}},
		{name: "find in then limit", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id = ?", 4).Limit(10).Offset(20).Order("id").Find(&[]order{}, []int64{1, 2, 3})
			},
			ids: []any{int64(1), int64(2), int64(3)}, owners: []any{4},
			narrow: []int{1, 2},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id = ?", 4).Limit(10).Offset(20).Order("id").Find(&[]order{}, []int64{2, 3})
			}},
		{name: "where owner", table: "orders", kind: Select,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Where("user_id = ?", 7).Find(&[]order{}) },
			owners: []any{7}},
		{name: "where owner in", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id IN ?", []int64{7, 8, 9}).Where("amount > ?", 1).Find(&[]order{})
			},
			owners: []any{int64(7), int64(8), int64(9)},
			narrow: []int{1}, byOwner: true,
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id IN (?)", int64(8)).Where("amount > ?", 1).Find(&[]order{})
			}},
		{name: "where or", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id = ?", 7).Or("user_id = ?", 8).Find(&[]order{})
			}},
		{name: "not", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("id = ?", 4).Not("user_id = ?", 1).Not("amount = ? AND user_id = ?", 1, 2).Find(&[]order{})
			},
			ids: []any{4}},
		{name: "where struct", table: "orders", kind: Select,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Where(&order{UserID: 3}).Find(&[]order{}) },
			owners: []any{int64(3)}},
		{name: "updates", table: "orders", kind: Update,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Model(&order{ID: 1}).Updates(map[string]any{"amount": 3})
			},
			ids: []any{int64(1)}},
		{name: "update where owner", table: "orders", kind: Update,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id = ?", 2).Updates(map[string]any{"amount": 3})
			},
			owners: []any{2}},
		{name: "save sets owner", table: "orders", kind: Update,
			op:  func(tx *gorm.DB) *gorm.DB { return tx.Save(&order{ID: 1, UserID: 3}) },
			ids: []any{int64(1)}, sets: []string{"user_id"}},
		{name: "delete in", table: "orders", kind: Delete,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Delete(&order{}, []int64{4, 5}) },
			ids:    []any{int64(4), int64(5)},
			narrow: []int{1},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Where(inOne("id", int64(5))).Delete(&order{})
			}},
		{name: "delete where owner", table: "orders", kind: Delete,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Where("user_id = ?", 2).Delete(&order{}) },
			owners: []any{2}},
		{name: "count", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				var n int64
				return tx.Model(&order{}).Where("user_id = ?", 3).Count(&n)
			},
			owners: []any{3}},
		{name: "pluck", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				var ids []int64
				return tx.Model(&order{}).Where("user_id IN ?", []int{1, 2}).Pluck("id", &ids)
			},
			owners: []any{1, 2}},
		{name: "locking", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Clauses(clause.Locking{Strength: "UPDATE"}).Find(&[]order{}, 1)
			},
			ids: []any{1}},
		{name: "soft delete", table: "orders", kind: Update,
			op:     func(tx *gorm.DB) *gorm.DB { return tx.Delete(&softOrder{}, []int64{4, 5, 6}) },
			ids:    []any{int64(4), int64(5), int64(6)},
			narrow: []int{0, 1},
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Delete(&softOrder{}, []int64{4, 5})
			}},
		{name: "soft find", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where("user_id = ?", 3).Find(&[]softOrder{})
			},
			owners: []any{3}},
		{name: "join unsharded", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Joins("User").Where(&softOrder{UserID: 3}).Find(&[]softOrder{})
			},
			owners: []any{int64(3)}},
		{name: "group", table: "orders", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				var rows []struct{ UserID, Total int64 }
				return tx.Model(&order{}).Select("user_id, sum(amount) AS total").
					Where("user_id IN ?", []int64{1, 2}).Group("user_id").Having("sum(amount) > ?", 10).Find(&rows)
			},
			owners: []any{int64(1), int64(2)}},
		{name: "preload second query", table: "items", kind: Select,
			op: func(tx *gorm.DB) *gorm.DB {
				return tx.Where(clause.IN{Column: clause.Column{Table: clause.CurrentTable, Name: "order_id"},
					Values: []any{int64(1), int64(2)}}).Find(&[]item{})
			},
			owners: []any{int64(1), int64(2)},
			narrow: []int{0}, byOwner: true,
			narrowOp: func(tx *gorm.DB) *gorm.DB {
				return tx.Where(inOne("order_id", int64(1))).Find(&[]item{})
			}},
	}
}

// inOne is `table`.`col` IN (?) with one value, which GORM's own IN
// writes as =.
func inOne(col string, v any) clause.Expr {
	return clause.Expr{SQL: "?.? IN (?)", Vars: []any{clause.Table{Name: clause.CurrentTable}, clause.Column{Name: col}, v}}
}

// TestGORMStatements reads what GORM generates for a logical table and
// checks each result against GORM's own statement for the physical one:
// the rewrite must be byte for byte what GORM writes for that table.
func TestGORMStatements(t *testing.T) {
	const physical = "orders_7"
	for dialect, db := range dryRuns(t) {
		for _, c := range gormCases() {
			t.Run(dialect+"/"+c.name, func(t *testing.T) {
				phys := physical
				if c.table == "items" {
					phys = "items_3"
				}
				query, args := dry(t, db, c.table, c.op)
				st, err := Parse(query, args, testTables)
				if err != nil {
					t.Fatalf("Parse(%s): %v", query, err)
				}
				if st.Kind != c.kind || st.Table.Name != c.table {
					t.Fatalf("%s: kind %v table %q, want %v %q", query, st.Kind, st.Table.Name, c.kind, c.table)
				}
				checkValues(t, query, "IDs", st.IDs, c.ids, args)
				checkValues(t, query, "Owners", st.Owners, c.owners, args)
				var sets []string
				for _, a := range st.Assigned {
					sets = append(sets, a.Column)
				}
				if !reflect.DeepEqual(sets, c.sets) {
					t.Errorf("%s: assigned %v, want %v", query, sets, c.sets)
				}
				got, err := st.Rewrite(phys)
				if err != nil {
					t.Fatal(err)
				}
				want, wantArgs := dry(t, db, phys, c.op)
				if got != want {
					t.Errorf("rewrite\n got %s\nwant %s", got, want)
				}
				if !reflect.DeepEqual(args, wantArgs) {
					t.Errorf("args %v, GORM's for the physical table %v", args, wantArgs)
				}
				if c.narrowOp == nil {
					return
				}
				from := st.IDs
				if c.byOwner {
					from = st.Owners
				}
				var keep []Value
				for _, i := range c.narrow {
					keep = append(keep, from[i])
				}
				nq, nargs, err := st.Narrow(phys, keep)
				if err != nil {
					t.Fatalf("Narrow: %v", err)
				}
				want, wantArgs = dry(t, db, phys, c.narrowOp)
				if nq != want || !reflect.DeepEqual(nargs, wantArgs) {
					t.Errorf("narrow\n got %s %v\nwant %s %v", nq, nargs, want, wantArgs)
				}
			})
		}
	}
}

// checkValues compares routing values with the expected ones and checks
// each placeholder's Arg points at its value.
func checkValues(t *testing.T, query, what string, got []Value, want []any, args []any) {
	t.Helper()
	var vals []any
	for _, v := range got {
		vals = append(vals, v.Value)
		if v.Arg >= 0 && !reflect.DeepEqual(args[v.Arg], v.Value) {
			t.Errorf("%s: %s value %v at arg %d holding %v", query, what, v.Value, v.Arg, args[v.Arg])
		}
	}
	if !reflect.DeepEqual(vals, want) {
		t.Errorf("%s: %s %v, want %v", query, what, vals, want)
	}
}

// orderWithItems has items to preload.
type orderWithItems struct {
	ID     int64
	UserID int64
	Items  []item `gorm:"foreignKey:OrderID"`
}

// TestPreloadQuery runs a Preload on SQLite (DryRun does not run the
// second query) and reads the second query GORM sent.
func TestPreloadQuery(t *testing.T) {
	db, err := gorm.Open(sqlite.Open(":memory:"), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Table("orders").AutoMigrate(&order{}); err != nil {
		t.Fatal(err)
	}
	if err := db.AutoMigrate(&item{}); err != nil {
		t.Fatal(err)
	}
	if err := db.Table("orders").Create(&[]order{{ID: 1, UserID: 1}, {ID: 2, UserID: 1}}).Error; err != nil {
		t.Fatal(err)
	}
	type sent struct {
		sql  string
		vars []any
	}
	var queries []sent
	if err := db.Callback().Query().After("gorm:query").Register("capture", func(tx *gorm.DB) {
		queries = append(queries, sent{tx.Statement.SQL.String(), tx.Statement.Vars})
	}); err != nil {
		t.Fatal(err)
	}
	var got []orderWithItems
	if err := db.Table("orders").Preload("Items").Where("user_id = ?", 1).Find(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(queries) != 2 {
		t.Fatalf("%d queries, want the order's and the preload's: %v", len(queries), queries)
	}
	q := queries[0] // the preload's, run from the first query's callbacks
	t.Logf("preload: %s %v", q.sql, q.vars)
	st, err := Parse(q.sql, q.vars, testTables)
	if err != nil {
		t.Fatalf("%s: %v", q.sql, err)
	}
	if st.Table.Name != "items" || st.Kind != Select {
		t.Fatalf("%s: table %q kind %v", q.sql, st.Table.Name, st.Kind)
	}
	checkValues(t, q.sql, "Owners", st.Owners, []any{int64(1), int64(2)}, q.vars)
	narrowed, args, err := st.Narrow("items_0", st.Owners[1:])
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(q.sql, "`items`", "`items_0`"); narrowed != strings.Replace(want, "IN (?,?)", "IN (?)", 1) ||
		!reflect.DeepEqual(args, []any{int64(2)}) {
		t.Errorf("narrowed to %s %v", narrowed, args)
	}
}
