package shardgorm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

const (
	// guardName is the callback that checks a bound statement's shard.
	guardName = "idforge:shard_guard"
	// fillName is the idforge plugin's create callback, which fills the
	// IDs the guard routes by.
	fillName = "idforge:fill_ids"
	// bindingKey holds a statement's *binding in its Settings, which GORM
	// copies into every statement and transaction chained from it.
	bindingKey = "idforge:shard"
)

// write is the kind of statement the guard checks.
type write int

const (
	creates write = iota
	updates
	deletes
)

// binding is the shard a session of DB or ForEach is bound to.
type binding struct {
	g     *Repository
	shard sharding.Shard
	pool  any // Callback() of the shard's database
}

// bind selects s's table on db and binds the statement to s.
func (g *Repository) bind(db *gorm.DB, s sharding.Shard) *gorm.DB {
	return db.Table(s.TableName).Set(bindingKey, &binding{g: g, shard: s, pool: g.base.DBs[s.Database].Callback()})
}

// registerGuard registers the guard on db's create, update and delete,
// once per callbacks: every session and transaction of db shares them, and
// repositories sharing db share the guard, which reads its shard from the
// statement.
func registerGuard(db *gorm.DB) error {
	cb := db.Callback()
	if cb.Create().Get(guardName) != nil {
		return nil
	}
	return errors.Join(
		cb.Create().After(fillName).Before("gorm:before_create").Register(guardName, func(db *gorm.DB) { guard(db, creates) }),
		cb.Update().Before("gorm:update").Register(guardName, func(db *gorm.DB) { guard(db, updates) }),
		cb.Delete().Before("gorm:delete").Register(guardName, func(db *gorm.DB) { guard(db, deletes) }),
	)
}

// guard fails a bound statement that would write outside its shard: on
// another database or table, or, for a create, with a row routing
// elsewhere.
func guard(db *gorm.DB, w write) {
	v, ok := db.Statement.Settings.Load(bindingKey)
	if !ok || db.Error != nil {
		return
	}
	b := v.(*binding)
	if err := b.check(db, w); err != nil {
		_ = db.AddError(err)
	}
}

func (b *binding) check(db *gorm.DB, w write) error {
	if db.Callback() != b.pool {
		return fmt.Errorf("%w: a statement bound to %s runs on another database", sharding.ErrWrongShard, b.shard)
	}
	if err := b.table(db.Statement, w); err != nil {
		return err
	}
	switch w {
	case updates:
		return b.sets(db.Statement)
	case deletes:
		return nil
	}
	if db.Statement.Schema == nil {
		return fmt.Errorf("%w: a create bound to %s has no model to route its rows by", sharding.ErrWrongShard, b.shard)
	}
	key, err := b.g.keyField(db.Statement.Schema)
	if err != nil {
		return err
	}
	rv := reflect.Indirect(db.Statement.ReflectValue)
	rows := []reflect.Value{rv}
	switch rv.Kind() {
	case reflect.Slice, reflect.Array:
		rows = rows[:0]
		for i := range rv.Len() {
			rows = append(rows, reflect.Indirect(rv.Index(i)))
		}
	case reflect.Struct:
	default:
		return fmt.Errorf("%w: a create bound to %s of a %s: create structs, whose shard keys can be routed", sharding.ErrWrongShard, b.shard, rv.Kind())
	}
	for i, row := range rows {
		id, err := repo.KeyValue(key.ReflectValueOf(db.Statement.Context, row))
		if err != nil {
			return err
		}
		_, s, err := b.g.base.Route(id)
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		if err := repo.Within(&b.shard, s, fmt.Sprintf("row %d with key", i), id); err != nil {
			return err
		}
	}
	return nil
}

// table checks that st writes the bound table and no other: the table
// expression bind set (not another table aliased as it, "course_2 AS
// course_1", nor one of another schema or database, "m1.course_1"), and
// no INSERT, UPDATE or DELETE clause naming another.
func (b *binding) table(st *gorm.Statement, w write) error {
	// Table("schema.table") keeps the table part in Statement.Table.
	want := b.shard.TableName[strings.LastIndex(b.shard.TableName, ".")+1:]
	expr := st.TableExpr
	if st.Table != want || expr == nil || len(expr.Vars) > 0 || expr.SQL != st.Quote(b.shard.TableName) {
		what := st.Table
		if expr != nil {
			what = expr.SQL
		}
		return fmt.Errorf("%w: a statement bound to %s writes table %s", sharding.ErrWrongShard, b.shard, what)
	}
	named := func(t clause.Table) bool {
		return t.Name == "" || t.Name == clause.CurrentTable || t.Name == b.shard.TableName
	}
	for name, c := range st.Clauses {
		ok := true
		switch name {
		case "INSERT":
			e, is := c.Expression.(clause.Insert)
			ok = is && named(e.Table)
		case "UPDATE":
			e, is := c.Expression.(clause.Update)
			ok = is && named(e.Table)
		case "DELETE":
			_, ok = c.Expression.(clause.Delete)
		case "FROM":
			// An UPDATE may read other tables (UPDATE ... FROM); a DELETE
			// FROM writes the tables it names.
			e, is := c.Expression.(clause.From)
			ok = w != deletes || is && len(e.Tables) == 0 && len(e.Joins) == 0
		}
		if !ok {
			return fmt.Errorf("%w: a statement bound to %s carries a %s clause of its own (%v): it may write another table",
				sharding.ErrWrongShard, b.shard, name, c.Expression)
		}
	}
	return nil
}

// sets checks that an update through st leaves every row in the bound
// shard: a column that routes rows (the shard key, and the primary key
// when IDs route) may only take an integer routing to it.
func (b *binding) sets(st *gorm.Statement) error {
	routes := b.routing(st)
	check := func(name string, v any) error {
		if !routes(name) {
			return nil
		}
		rv := reflect.ValueOf(v)
		for rv.IsValid() && rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		if !rv.IsValid() || repo.KeyKind("", "", rv.Type()) != nil {
			return fmt.Errorf("%w: an update bound to %s sets %s, which routes rows, to %v (%T): only an integer can be checked to stay in the shard",
				sharding.ErrWrongShard, b.shard, name, v, v)
		}
		id, err := repo.KeyValue(rv)
		if err != nil {
			return err
		}
		_, s, err := b.g.base.Route(id)
		if err != nil {
			return err
		}
		return repo.Within(&b.shard, s, "an update setting "+name+" to", id)
	}
	if c, ok := st.Clauses["SET"]; ok {
		set, _ := c.Expression.(clause.Set)
		for _, a := range set {
			if err := check(a.Column.Name, a.Value); err != nil {
				return err
			}
		}
	}
	switch d := st.Dest.(type) {
	case map[string]any:
		for k, v := range d {
			if err := check(k, v); err != nil {
				return err
			}
		}
		return nil
	}
	rv := reflect.Indirect(reflect.ValueOf(st.Dest))
	if st.Schema == nil || rv.Kind() != reflect.Struct || rv.Type() != st.Schema.ModelType {
		return nil // nothing GORM writes from
	}
	all := slices.Contains(st.Selects, "*")
	for _, f := range st.Schema.Fields {
		v, zero := f.ValueOf(st.Context, rv)
		if f.DBName == "" || !routes(f.DBName) || zero && !all && !slices.Contains(st.Selects, f.DBName) && !slices.Contains(st.Selects, f.Name) {
			continue
		}
		if err := check(f.DBName, v); err != nil {
			return err
		}
	}
	return nil
}

// routing returns what tells the names (column or field) of the columns
// that route st's rows: the shard key's, and the primary key's when IDs
// route (rows are routed by ID, or their IDs are owner-keyed). Without
// a model (Table(...).Updates(map)), the key is Settings.ShardKey's
// column by the naming strategy, and the ID is "id".
func (b *binding) routing(st *gorm.Statement) func(name string) bool {
	var names []string
	if st.Schema != nil {
		if key, err := b.g.keyField(st.Schema); err == nil {
			names = append(names, key.DBName, key.Name)
		}
		if pk := st.Schema.PrioritizedPrimaryField; pk != nil && b.g.base.Settings.OwnerResidues > 0 {
			names = append(names, pk.DBName, pk.Name)
		}
	} else if key := b.g.base.Settings.ShardKey; key != "" {
		names = append(names, key, st.DB.NamingStrategy.ColumnName("", key))
		if b.g.base.Settings.OwnerResidues > 0 {
			names = append(names, "id")
		}
	} else {
		names = append(names, "id")
	}
	return func(name string) bool {
		return slices.ContainsFunc(names, func(n string) bool { return strings.EqualFold(n, name) })
	}
}
