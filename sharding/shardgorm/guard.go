package shardgorm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

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
	m := int64(b.g.base.Settings.OwnerResidues)
	var id *schema.Field
	if m > 0 {
		id = db.Statement.Schema.PrioritizedPrimaryField
	}
	var owners []int64
	for i, row := range rows {
		owner, err := repo.KeyValue(key.ReflectValueOf(db.Statement.Context, row))
		if err != nil {
			return err
		}
		_, s, err := b.g.base.Route(owner)
		if err != nil {
			return fmt.Errorf("row %d: %w", i, err)
		}
		if err := repo.Within(&b.shard, s, fmt.Sprintf("row %d with key", i), owner); err != nil {
			return err
		}
		if id != nil {
			n, err := repo.KeyValue(id.ReflectValueOf(db.Statement.Context, row))
			if err != nil {
				return err
			}
			if err := repo.Residue(fmt.Sprintf("row %d", i), n, owner, m); err != nil {
				return err
			}
		}
		owners = append(owners, owner)
	}
	return b.upsert(db.Statement, owners)
}

// upsert checks the updates of a bound create's ON CONFLICT clause, run
// on a stored row that conflicts with one of the rows inserted, whose
// shard keys are owners: a column that routes rows may only take an
// integer routing to the bound shard that keeps the owners' residue
// ([sharding.Settings.OwnerResidues]), or, without owner-keyed IDs, the
// inserted row's own value (excluded.col, VALUES(col)), which routes here.
func (b *binding) upsert(st *gorm.Statement, owners []int64) error {
	c, ok := st.Clauses["ON CONFLICT"]
	if !ok {
		return nil
	}
	oc, _ := c.Expression.(clause.OnConflict)
	owned := b.g.base.Settings.OwnerResidues > 0
	routes := b.routing(st)
	if oc.UpdateAll && owned {
		// UpdateAll sets every column but the primary key, the owner among
		// them, to the inserted row's, whatever row it conflicts with.
		return fmt.Errorf("%w: an upsert bound to %s updates every column, the owner %s among them, of a row whose owner-keyed ID may carry another owner's residue: "+
			"list the columns to update (clause.OnConflict.DoUpdates) without it", sharding.ErrWrongShard, b.shard, b.g.base.Settings.ShardKey)
	}
	for _, a := range oc.DoUpdates {
		if !routes(a.Column.Name) {
			continue
		}
		if v, ok := a.Value.(clause.Column); ok && !owned && strings.EqualFold(v.Table, "excluded") && strings.EqualFold(v.Name, a.Column.Name) {
			continue
		}
		if err := b.keeps(st, "an upsert", a.Column.Name, a.Value, owners); err != nil {
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
	var owners []int64
	if b.g.base.Settings.OwnerResidues > 0 {
		owners = b.owners(st, routes)
	}
	check := func(name string, v any) error {
		if !routes(name) {
			return nil
		}
		return b.keeps(st, "an update", name, v, owners)
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

// keeps checks that v, the new value of column name, which routes rows,
// keeps the rows what writes in the bound shard: an integer routing to it
// that, with owner-keyed IDs, carries the residue of owners, the owners
// (or owner-keyed IDs) of the rows written; none known refuses it.
func (b *binding) keeps(st *gorm.Statement, what, name string, v any, owners []int64) error {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv = rv.Elem()
	}
	if !rv.IsValid() || repo.KeyKind("", "", rv.Type()) != nil {
		return fmt.Errorf("%w: %s bound to %s sets %s, which routes rows, to %v (%T): only an integer can be checked to stay in the shard",
			sharding.ErrWrongShard, what, b.shard, name, v, v)
	}
	n, err := repo.KeyValue(rv)
	if err != nil {
		return err
	}
	_, s, err := b.g.base.Route(n)
	if err != nil {
		return err
	}
	if err := repo.Within(&b.shard, s, what+" setting "+name+" to", n); err != nil {
		return err
	}
	m := int64(b.g.base.Settings.OwnerResidues)
	if m == 0 {
		return nil
	}
	if len(owners) == 0 {
		return fmt.Errorf("%w: %s bound to %s sets %s to %d, but an owner-keyed ID carries its owner's residue mod %d and the statement does not tell the rows' owner: "+
			"narrow it by the owner or the ID (Where(map[string]any{...}), Model(&row)), or use Repository.Update with Query.Key",
			sharding.ErrWrongShard, what, b.shard, name, n, m)
	}
	for _, o := range owners {
		if n%m != o%m {
			return fmt.Errorf("%w: %s bound to %s sets %s to %d, of another residue mod %d than the rows' owner-keyed IDs (of owner or ID %d): "+
				"they would no longer route with their owner", sharding.ErrWrongShard, what, b.shard, name, n, m, o)
		}
	}
	return nil
}

// owners returns what an update through st tells of its rows' owners:
// the values its WHERE conditions of equality give a routing column (the
// shard key or the owner-keyed ID, both carrying the owner's residue),
// and the ID of the row of st.Model, by which GORM narrows the update.
// Conditions written as SQL ("user_id = ?") tell nothing.
func (b *binding) owners(st *gorm.Statement, routes func(string) bool) []int64 {
	var out []int64
	add := func(v any) {
		rv := reflect.ValueOf(v)
		for rv.IsValid() && rv.Kind() == reflect.Pointer && !rv.IsNil() {
			rv = rv.Elem()
		}
		if rv.IsValid() && repo.KeyKind("", "", rv.Type()) == nil {
			if n, err := repo.KeyValue(rv); err == nil && n != 0 {
				out = append(out, n)
			}
		}
	}
	if c, ok := st.Clauses["WHERE"]; ok {
		w, _ := c.Expression.(clause.Where)
		if slices.ContainsFunc(w.Exprs, func(e clause.Expression) bool { _, or := e.(clause.OrConditions); return or }) {
			w.Exprs = nil // an equality ORed with another narrows nothing
		}
		for _, e := range w.Exprs {
			eq, ok := e.(clause.Eq)
			if !ok {
				continue
			}
			switch col := eq.Column.(type) {
			case string:
				if routes(col) {
					add(eq.Value)
				}
			case clause.Column:
				if routes(col.Name) {
					add(eq.Value)
				}
			}
		}
	}
	if st.Schema != nil && st.Schema.PrioritizedPrimaryField != nil {
		rv := reflect.Indirect(reflect.ValueOf(st.Model))
		if rv.Kind() == reflect.Struct && rv.Type() == st.Schema.ModelType {
			if v, zero := st.Schema.PrioritizedPrimaryField.ValueOf(st.Context, rv); !zero {
				add(v)
			}
		}
	}
	return out
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
