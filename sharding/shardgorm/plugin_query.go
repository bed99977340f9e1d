package shardgorm

import (
	"cmp"
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/sharding"
)

// query routes a read of a sharded model: on one shard, GORM's query runs
// there; on several, the plugin reads each (Settings.Parallel at once)
// and merges the rows into the destination by the statement's order,
// then applies its offset and limit, or combines counts and sums.
// Preloads and AfterFind hooks then run on the merged rows, as GORM's.
func (p *Plugin) query(db *gorm.DB) {
	if p.raw(db, false) || db.Statement.SQL.Len() > 0 {
		return // db.Raw(...).Find: SQL of the caller's
	}
	hint, _ := db.Statement.Settings.Load(parentKey)
	parent, _ := hint.(parentHint)
	m := p.modelOf(db.Statement)
	if m == nil {
		// Another model preloaded from a sharded row's statement reads
		// the pool the row's statement had before it was routed.
		if parent.pool != nil {
			db.Statement.ConnPool = parent.pool
		}
		return
	}
	if db.Error != nil {
		return
	}
	if len(db.Statement.Joins) > 0 {
		_ = db.AddError(fmt.Errorf("%w: query on model %s joins another table: a sharded table's shards are not joined; Preload its associations instead",
			engine.ErrInvalidConfig, m.schema.Name))
		return
	}
	t, err := p.route(db.Statement, m, false)
	if err != nil {
		_ = db.AddError(err)
		return
	}
	if !t.routed && parent.table != "" && parent.table != m.schema.Table {
		// Associations preloaded with sharded rows are read in the rows'
		// shards: keep them there by sharding them by the same key.
		t = target{shards: parent.shards, routed: true}
	}
	if !t.routed && p.set.RefuseUnrouted {
		_ = db.AddError(m.unrouted("Query"))
		return
	}
	db.Statement.Settings.Store(parentKey, parentHint{table: m.schema.Table, shards: t.shards, pool: db.Statement.ConnPool})
	if len(t.shards) == 1 {
		if err := p.use(db, m, t.shards[0]); err != nil {
			_ = db.AddError(err)
			return
		}
		m.alias(db.Statement, t.shards[0])
		return
	}
	if _, ok := db.Statement.Clauses["GROUP BY"]; ok {
		_ = db.AddError(fmt.Errorf("%w: query on model %s groups rows over %d shards: GROUP BY cannot be merged; route it by %s",
			engine.ErrInvalidConfig, m.schema.Name, len(t.shards), m.keys()))
		return
	}
	done(db)
	if err := p.fanQuery(db, m, t.shards); err != nil {
		_ = db.AddError(err)
	}
}

// parentKey holds, in a statement's Settings (which GORM copies into the
// statements preloading its associations), the parentHint of a read of
// sharded rows.
const parentKey = "idforge:shardgorm_parent"

// parentHint is where a read of sharded rows went: the model's table, its
// shards, and the pool its statement had before it was routed.
type parentHint struct {
	table  string
	shards []sharding.Shard
	pool   gorm.ConnPool
}

// row routes db.Row and db.Rows, and Scan, of a sharded model: one shard
// only, since their rows cannot be merged.
func (p *Plugin) row(db *gorm.DB) {
	defer func() {
		// Row returns the *sql.Row it finds in Dest, nil after an error:
		// give it one that reports the error from Scan.
		if rows, _ := db.Get("rows"); db.Error != nil && rows == false {
			db.Statement.Dest = errRow(ctxOf(db), db.Error)
		}
	}()
	if p.raw(db, false) || db.Statement.SQL.Len() > 0 {
		return
	}
	m := p.modelOf(db.Statement)
	if m == nil || db.Error != nil {
		return
	}
	t, err := p.route(db.Statement, m, false)
	if err != nil {
		_ = db.AddError(err)
		return
	}
	if len(t.shards) != 1 {
		_ = db.AddError(fmt.Errorf("%w: Row, Rows or Scan on model %s reaches %d shards, whose rows cannot be merged into one *sql.Rows: "+
			"give one shard's %s, or read with Find, Count or Pluck", ErrUnrouted, m.schema.Name, len(t.shards), m.keys()))
		return
	}
	if err := p.use(db, m, t.shards[0]); err != nil {
		_ = db.AddError(err)
		return
	}
	m.alias(db.Statement, t.shards[0])
}

// errRow returns a *sql.Row whose Scan returns err: the row of a
// database whose every connection fails with it.
func errRow(ctx context.Context, err error) *sql.Row {
	db := sql.OpenDB(failing{err})
	defer db.Close()
	return db.QueryRowContext(ctx, "")
}

// failing is a driver whose connections fail with err.
type failing struct{ err error }

func (f failing) Connect(context.Context) (driver.Conn, error) { return nil, f.err }
func (f failing) Driver() driver.Driver                        { return f }
func (f failing) Open(string) (driver.Conn, error)             { return nil, f.err }

// fanQuery reads every shard of shards into db's destination.
func (p *Plugin) fanQuery(db *gorm.DB, m *pmodel, shards []sharding.Shard) error {
	st := db.Statement
	dest := reflect.ValueOf(st.Dest)
	if dest.Kind() != reflect.Pointer || dest.IsNil() {
		return fmt.Errorf("%w: query on model %s over %d shards: the destination %T is no pointer", engine.ErrInvalidConfig, m.schema.Name, len(shards), st.Dest)
	}
	out := dest.Elem()
	var limit *int
	offset := 0
	clauses := cloneClauses(st.Clauses)
	if c, ok := st.Clauses["LIMIT"]; ok {
		if l, ok := c.Expression.(clause.Limit); ok {
			limit, offset = l.Limit, l.Offset
			part := clause.Limit{} // every shard's first limit+offset rows hold the page
			if limit != nil {
				n := *limit + offset
				part.Limit = &n
			}
			c.Expression = part
			clauses["LIMIT"] = c
		}
	}
	if out.Kind() == reflect.Struct && out.Type() == m.schema.ModelType {
		// GORM reads a struct's primary key as a condition; the parts
		// read into slices, so they are given it.
		var conds []clause.Expression
		for _, f := range m.schema.PrimaryFields {
			if v, zero := f.ValueOf(ctxOf(db), out); !zero {
				conds = append(conds, clause.Eq{Column: clause.Column{Table: clause.CurrentTable, Name: f.DBName}, Value: v})
			}
		}
		if len(conds) > 0 {
			c := clauses["WHERE"]
			w, _ := c.Expression.(clause.Where)
			w.Exprs = append(slices.Clone(w.Exprs), conds...)
			c.Name, c.Expression = "WHERE", w
			clauses["WHERE"] = c
		}
	}
	switch {
	case out.Kind() == reflect.Slice && out.Type().Elem().Kind() != reflect.Uint8 || out.Kind() == reflect.Struct:
	default:
		return p.aggregate(db, m, shards, clauses, out)
	}
	if st.Distinct && !m.selectsKey(st) {
		return fmt.Errorf("%w: DISTINCT on model %s over %d shards: two shards may hold the same values, which no merge removes; select %s too, or route it",
			engine.ErrInvalidConfig, m.schema.Name, len(shards), m.keys())
	}
	rowType := out.Type()
	if out.Kind() == reflect.Struct {
		rowType = reflect.SliceOf(out.Type())
	}
	parts := make([]reflect.Value, len(shards))
	err := p.fan(db, shards, func(ctx context.Context, i int) error {
		part := reflect.New(rowType)
		tx, err := p.on(db, m, shards[i], p.onlyShard(m, clauses, shards[i]))
		if err != nil {
			return err
		}
		m.alias(tx.Statement, shards[i])
		if err := tx.Find(part.Interface()).Error; err != nil {
			return err
		}
		parts[i] = part.Elem()
		return nil
	})
	if err != nil {
		return err
	}
	all := reflect.MakeSlice(rowType, 0, 0)
	for _, part := range parts {
		all = reflect.AppendSlice(all, part)
	}
	if err := p.sortRows(db, m, all); err != nil {
		return err
	}
	from := min(offset, all.Len())
	to := all.Len()
	if limit != nil && *limit >= 0 {
		to = min(to, from+*limit)
	}
	all = all.Slice(from, to)
	db.RowsAffected = int64(all.Len())
	if out.Kind() == reflect.Struct {
		if all.Len() == 0 {
			if st.RaiseErrorOnNotFound {
				return gorm.ErrRecordNotFound
			}
			return nil
		}
		out.Set(all.Index(0))
		return nil
	}
	out.Set(all)
	return nil
}

// selectsKey reports whether stmt selects a routing column of m, whose
// values no two shards share.
func (m *pmodel) selectsKey(stmt *gorm.Statement) bool {
	names := slices.Clone(stmt.Selects)
	if c, ok := stmt.Clauses["SELECT"]; ok {
		if sel, ok := c.Expression.(clause.Select); ok {
			for _, col := range sel.Columns {
				names = append(names, col.Name)
			}
		}
	}
	for _, n := range names {
		if f := m.schema.LookUpField(strings.TrimSpace(n)); f != nil && (f == m.key || m.idsRoute && f == m.id) {
			return true
		}
	}
	return false
}

// orderCol is one column of an ORDER BY.
type orderCol struct {
	name string
	desc bool
}

// orderTerm is one term of a raw ORDER BY: a column, optionally qualified
// and quoted, and its direction.
var orderTerm = regexp.MustCompile("(?i)^\\s*(?:[`\"]?\\w+[`\"]?\\.)?[`\"]?(\\w+)[`\"]?(?:\\s+(asc|desc))?\\s*$")

// orderOf reads the statement's ORDER BY as columns.
func orderOf(stmt *gorm.Statement) ([]orderCol, error) {
	c, ok := stmt.Clauses["ORDER BY"]
	if !ok {
		return nil, nil
	}
	ob, ok := c.Expression.(clause.OrderBy)
	if !ok || ob.Expression != nil {
		return nil, fmt.Errorf("%w: an ORDER BY expression cannot be merged over shards: order by columns", engine.ErrInvalidConfig)
	}
	var out []orderCol
	for _, col := range ob.Columns {
		if !col.Column.Raw {
			name := col.Column.Name
			if name == clause.PrimaryKey && stmt.Schema != nil && stmt.Schema.PrioritizedPrimaryField != nil {
				name = stmt.Schema.PrioritizedPrimaryField.DBName
			}
			out = append(out, orderCol{name: name, desc: col.Desc})
			continue
		}
		for _, term := range strings.Split(col.Column.Name, ",") {
			g := orderTerm.FindStringSubmatch(term)
			if g == nil {
				return nil, fmt.Errorf("%w: ORDER BY %q cannot be merged over shards: order by columns", engine.ErrInvalidConfig, term)
			}
			out = append(out, orderCol{name: g[1], desc: col.Desc || strings.EqualFold(g[2], "desc")})
		}
	}
	return out, nil
}

// sortRows orders rows, the shards' rows one shard after another, by the
// statement's ORDER BY; rows the order ties keep their shard order.
func (p *Plugin) sortRows(db *gorm.DB, m *pmodel, rows reflect.Value) error {
	order, err := orderOf(db.Statement)
	if err != nil || len(order) == 0 {
		return err
	}
	elem := rows.Type().Elem()
	ptr := elem.Kind() == reflect.Pointer
	if ptr {
		elem = elem.Elem()
	}
	var get []func(reflect.Value) any
	if elem.Kind() == reflect.Struct {
		s := m.schema
		if elem != s.ModelType {
			st := &gorm.Statement{DB: db}
			if err := st.Parse(reflect.New(elem).Interface()); err != nil {
				return err
			}
			s = st.Schema
		}
		ctx := ctxOf(db)
		for _, o := range order {
			f := s.LookUpField(o.name)
			if f == nil {
				return fmt.Errorf("%w: rows over shards are merged by %s, which %s does not hold: select it", engine.ErrInvalidConfig, o.name, elem)
			}
			if !selected(db.Statement, s, f.DBName) {
				return notSelected(o.name)
			}
			get = append(get, func(row reflect.Value) any { v, _ := f.ValueOf(ctx, reflect.Indirect(row)); return v })
		}
	} else if elem.Kind() == reflect.Map && elem.Key().Kind() == reflect.String {
		for _, o := range order {
			if !selected(db.Statement, m.schema, o.name) {
				return notSelected(o.name)
			}
			key := reflect.ValueOf(o.name).Convert(elem.Key())
			get = append(get, func(row reflect.Value) any {
				if v := reflect.Indirect(row).MapIndex(key); v.IsValid() {
					return v.Interface()
				}
				return nil
			})
		}
	} else {
		// Pluck: the values are the column, which must be the order's.
		if len(order) != 1 || !plucks(db.Statement, order[0].name) {
			return fmt.Errorf("%w: values plucked over shards are merged by their own column only", engine.ErrInvalidConfig)
		}
		get = append(get, func(row reflect.Value) any { return row.Interface() })
	}
	n := rows.Len()
	idx := make([]int, n)
	keys := make([][]any, n)
	for i := range n {
		idx[i] = i
		for _, g := range get {
			keys[i] = append(keys[i], g(rows.Index(i)))
		}
	}
	// PostgreSQL sorts NULL as the largest value, the others as the
	// smallest.
	nullsLast := db.Dialector.Name() == "postgres"
	var cmpErr error
	slices.SortStableFunc(idx, func(a, b int) int {
		for j, o := range order {
			c, err := compare(keys[a][j], keys[b][j], nullsLast)
			if err != nil {
				cmpErr = err
				return 0
			}
			if o.desc {
				c = -c
			}
			if c != 0 {
				return c
			}
		}
		return 0
	})
	if cmpErr != nil {
		return cmpErr
	}
	sorted := reflect.MakeSlice(rows.Type(), n, n)
	for i, j := range idx {
		sorted.Index(i).Set(rows.Index(j))
	}
	reflect.Copy(rows, sorted)
	return nil
}

// notSelected refuses to merge rows by a column the shards do not return.
func notSelected(col string) error {
	return fmt.Errorf("%w: rows over shards are merged by %s, which is not selected: select it", engine.ErrInvalidConfig, col)
}

// selected reports whether the rows stmt reads hold column col of s: no
// Select (or one of *) and no Omit of it, or a Select of it, by field or
// column name, or of an expression named col.
func selected(stmt *gorm.Statement, s *schema.Schema, col string) bool {
	is := func(name string) bool {
		name = unqualified(name)
		if strings.EqualFold(name, col) {
			return true
		}
		f := s.LookUpField(name)
		return f != nil && f.DBName == col
	}
	if slices.ContainsFunc(stmt.Omits, is) {
		return false
	}
	if len(stmt.Selects) == 0 {
		return true
	}
	for _, sel := range stmt.Selects {
		for _, term := range strings.Split(sel, ",") {
			words := strings.Fields(term)
			if len(words) == 0 {
				continue
			}
			last := words[len(words)-1]
			if last == "*" || strings.HasSuffix(last, ".*") || is(last) {
				return true
			}
		}
	}
	return false
}

// unqualified is a column's name without its quotes and the table
// qualifying it: "user_id" of `orders`.`user_id`.
func unqualified(name string) string {
	name = strings.Trim(name, "`\"")
	if i := strings.LastIndex(name, "."); i >= 0 {
		name = strings.Trim(name[i+1:], "`\"")
	}
	return name
}

// plucks reports whether stmt selects only column col.
func plucks(stmt *gorm.Statement, col string) bool {
	c, ok := stmt.Clauses["SELECT"]
	if !ok {
		return false
	}
	sel, ok := c.Expression.(clause.Select)
	if !ok || len(sel.Columns) != 1 {
		return false
	}
	return sel.Columns[0].Name == col
}

// compare orders two values of one column as the databases do for
// integers, floats, times, booleans and (byte-wise) text; NULL as the
// smallest value, or the largest with nullsLast.
func compare(a, b any, nullsLast bool) (int, error) {
	a, b = plain(a), plain(b)
	null := -1
	if nullsLast {
		null = 1
	}
	switch {
	case a == nil && b == nil:
		return 0, nil
	case a == nil:
		return null, nil
	case b == nil:
		return -null, nil
	}
	ra, rb := reflect.ValueOf(a), reflect.ValueOf(b)
	switch {
	case ra.CanInt() && rb.CanInt():
		return cmp.Compare(ra.Int(), rb.Int()), nil
	case ra.CanUint() && rb.CanUint():
		return cmp.Compare(ra.Uint(), rb.Uint()), nil
	case ra.CanFloat() && rb.CanFloat():
		return cmp.Compare(ra.Float(), rb.Float()), nil
	case ra.Kind() == reflect.String && rb.Kind() == reflect.String:
		return strings.Compare(ra.String(), rb.String()), nil
	case ra.Kind() == reflect.Bool && rb.Kind() == reflect.Bool:
		return cmp.Compare(boolInt(ra.Bool()), boolInt(rb.Bool())), nil
	}
	ta, okA := a.(time.Time)
	tb, okB := b.(time.Time)
	if okA && okB {
		return ta.Compare(tb), nil
	}
	return 0, fmt.Errorf("%w: rows over shards cannot be merged by values of %T and %T", engine.ErrInvalidConfig, a, b)
}

// plain follows pointers and driver.Valuers (sql.NullTime, gorm.DeletedAt)
// to a plain value, nil for NULL.
func plain(v any) any {
	for {
		switch x := v.(type) {
		case nil:
			return nil
		case time.Time:
			return x
		case driver.Valuer:
			rv := reflect.ValueOf(v)
			if rv.Kind() == reflect.Pointer && rv.IsNil() {
				return nil
			}
			val, err := x.Value()
			if err != nil {
				return v
			}
			v = val
			continue
		}
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Pointer {
			return v
		}
		if rv.IsNil() {
			return nil
		}
		v = rv.Elem().Interface()
	}
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// aggregate combines the scalar each shard answers: counts and sums add
// up, minima and maxima are compared.
func (p *Plugin) aggregate(db *gorm.DB, m *pmodel, shards []sharding.Shard, clauses map[string]clause.Clause, out reflect.Value) error {
	fn := aggregateOf(m, clauses, db.Statement.Selects)
	if fn == "" || !out.CanSet() || !(out.CanInt() || out.CanUint() || out.CanFloat()) {
		return fmt.Errorf("%w: query on model %s over %d shards into a %s: merge rows into a slice or struct of the model, or count, sum, min or max into a number",
			engine.ErrInvalidConfig, m.schema.Name, len(shards), out.Type())
	}
	delete(clauses, "ORDER BY")
	delete(clauses, "LIMIT")
	parts := make([]sql.NullString, len(shards))
	err := p.fan(db, shards, func(ctx context.Context, i int) error {
		// As text: MySQL and PostgreSQL answer a SUM as a DECIMAL, and a
		// shard without rows as NULL.
		tx, err := p.on(db, m, shards[i], p.onlyShard(m, clauses, shards[i]))
		if err != nil {
			return err
		}
		m.alias(tx.Statement, shards[i])
		return tx.Row().Scan(&parts[i])
	})
	if err != nil {
		return err
	}
	var acc reflect.Value
	for _, part := range parts {
		if !part.Valid {
			continue
		}
		v := reflect.New(out.Type()).Elem()
		if err := parseNumber(part.String, v); err != nil {
			return fmt.Errorf("shardgorm: %s over shards of model %s: %w", fn, m.schema.Name, err)
		}
		if !acc.IsValid() {
			acc = v
			continue
		}
		switch {
		case fn == "count" || fn == "sum":
			switch {
			case acc.CanInt():
				acc.SetInt(acc.Int() + v.Int())
			case acc.CanUint():
				acc.SetUint(acc.Uint() + v.Uint())
			default:
				acc.SetFloat(acc.Float() + v.Float())
			}
		default:
			c, err := compare(v.Interface(), acc.Interface(), false)
			if err != nil {
				return err
			}
			if fn == "min" && c < 0 || fn == "max" && c > 0 {
				acc = v
			}
		}
	}
	if acc.IsValid() {
		out.Set(acc)
	} else {
		out.Set(reflect.Zero(out.Type()))
	}
	db.RowsAffected = 1 // one value, as one database answers; Count reads it
	return nil
}

// parseNumber sets v, an integer or a float, from a number's text.
func parseNumber(text string, v reflect.Value) error {
	var err error
	switch {
	case v.CanInt():
		var n int64
		if n, err = strconv.ParseInt(text, 10, 64); err == nil {
			v.SetInt(n)
		}
	case v.CanUint():
		var n uint64
		if n, err = strconv.ParseUint(text, 10, 64); err == nil {
			v.SetUint(n)
		}
	default:
		var f float64
		if f, err = strconv.ParseFloat(text, 64); err == nil {
			v.SetFloat(f)
		}
	}
	return err
}

// aggregateFn matches a selection of one aggregate that combines over
// shards.
var aggregateFn = regexp.MustCompile(`(?i)^\s*(count|sum|min|max)\s*\(\s*([^()]*)\)\s*$`)

// aggregateOf names the aggregate the statement selects ("count", "sum",
// "min", "max"), "" for any other selection. COUNT(DISTINCT ...) adds up
// over shards only for a routing column, whose values no two shards share.
func aggregateOf(m *pmodel, clauses map[string]clause.Clause, selects []string) string {
	c, ok := clauses["SELECT"]
	if !ok || c.Expression == nil {
		// Select("SUM(amount)") without arguments is a selection of names.
		if len(selects) == 1 {
			c.Expression = clause.Expr{SQL: selects[0]}
		}
	}
	// clause.Select sets an expression of its own as the clause's.
	e, ok := c.Expression.(clause.Expr)
	if !ok {
		return ""
	}
	if strings.EqualFold(strings.ReplaceAll(e.SQL, " ", ""), "COUNT(DISTINCT(?))") && len(e.Vars) == 1 {
		if col, ok := e.Vars[0].(clause.Column); ok {
			if _, routes := m.routes(col, int64(1)); routes {
				return "count"
			}
		}
		return ""
	}
	if len(e.Vars) > 0 && !strings.Contains(strings.ToLower(e.SQL), "count(?)") {
		return ""
	}
	g := aggregateFn.FindStringSubmatch(strings.ReplaceAll(e.SQL, "?", "x"))
	if g == nil || strings.Contains(strings.ToLower(g[2]), "distinct") {
		return ""
	}
	return strings.ToLower(g[1])
}
