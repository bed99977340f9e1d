package shardgorm

import (
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/sharding/internal/repo"
)

// target is the shards a statement reaches: routed by a key, or every
// shard when its conditions name none.
type target struct {
	shards []sharding.Shard
	routed bool
}

// route finds the shards stmt on m reaches: the intersection of the shards
// of every condition on a routing column ANDed into its WHERE, and of the
// rows given (the struct of First(&o) with its ID set, the model of
// Model(&o).Updates, the rows of Delete(&rows)): a struct for a read,
// where GORM writes the conditions of a struct only, and a slice too for a
// write.
func (p *Plugin) route(stmt *gorm.Statement, m *pmodel, write bool) (target, error) {
	var sets [][]sharding.Shard
	add := func(keys []int64) error {
		var set []sharding.Shard
		for _, k := range keys {
			_, s, err := p.g.base.Route(k)
			if err != nil {
				return err
			}
			if !slices.Contains(set, s) {
				set = append(set, s)
			}
		}
		sets = append(sets, set)
		return nil
	}
	if w, ok := stmt.Clauses["WHERE"].Expression.(clause.Where); ok {
		if hasOr(w.Exprs) {
			// GORM joins the conditions it adds for the rows given to
			// the last OR too: nothing bounds the rows.
			all, err := p.g.base.Router.Shards()
			return target{shards: all}, err
		}
		for _, keys := range p.whereKeys(m, w.Exprs) {
			if err := add(keys); err != nil {
				return target{}, err
			}
		}
	}
	keys, err := rowKeys(stmt, m, write)
	if err != nil {
		return target{}, err
	}
	if keys != nil {
		if err := add(keys); err != nil {
			return target{}, err
		}
	}
	if len(sets) == 0 {
		all, err := p.g.base.Router.Shards()
		return target{shards: all}, err
	}
	out := sets[0]
	for _, set := range sets[1:] {
		out = slices.DeleteFunc(out, func(s sharding.Shard) bool { return !slices.Contains(set, s) })
	}
	slices.SortFunc(out, p.order)
	return target{shards: out, routed: true}, nil
}

// order orders shards as the router lists them.
func (p *Plugin) order(a, b sharding.Shard) int {
	if a.Database != b.Database {
		return a.Database - b.Database
	}
	return strings.Compare(a.TableName, b.TableName)
}

// rowKeys reads the routing keys of the rows stmt carries, nil when it
// carries none of m with a key set; slices reads slices of rows too.
func rowKeys(stmt *gorm.Statement, m *pmodel, slices bool) ([]int64, error) {
	rv := reflect.ValueOf(stmt.Model)
	if stmt.Model == nil {
		rv = stmt.ReflectValue
	}
	for rv.IsValid() && rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil, nil
		}
		rv = rv.Elem()
	}
	var rows []reflect.Value
	switch {
	case !rv.IsValid():
	case rv.Kind() == reflect.Struct && rv.Type() == m.schema.ModelType:
		rows = append(rows, rv)
	case slices && (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array):
		for i := range rv.Len() {
			row := reflect.Indirect(rv.Index(i))
			if row.Kind() != reflect.Struct || row.Type() != m.schema.ModelType {
				return nil, nil
			}
			rows = append(rows, row)
		}
	}
	var keys []int64
	for _, row := range rows {
		f := m.key
		if m.idsRoute {
			f = m.id // GORM writes the row's primary key into the condition
		}
		k, err := repo.KeyValue(f.ReflectValueOf(stmt.Context, row))
		if err != nil {
			return nil, err
		}
		if k == 0 {
			return nil, nil // a row without its key: the conditions route, or nothing does
		}
		keys = append(keys, k)
	}
	return keys, nil
}

// hasOr reports whether GORM joins exprs with an OR: a clause.Or among
// them, which Or() and Where(map or struct).Or() build too.
func hasOr(exprs []clause.Expression) bool {
	return slices.ContainsFunc(exprs, func(e clause.Expression) bool {
		_, ok := e.(clause.OrConditions)
		return ok
	})
}

// whereKeys lists, for each condition ANDed in exprs that names a routing
// column with integer values, those values. Conditions under OR or NOT,
// on other columns, or with values that are no integers route nothing; a
// level of exprs holding an OR routes nothing at all.
func (p *Plugin) whereKeys(m *pmodel, exprs []clause.Expression) [][]int64 {
	if hasOr(exprs) {
		return nil
	}
	var out [][]int64
	for _, e := range exprs {
		switch e := e.(type) {
		case clause.Eq:
			if keys, ok := m.routes(e.Column, e.Value); ok {
				out = append(out, keys)
			}
		case clause.IN:
			if keys, ok := m.routes(e.Column, e.Values); ok {
				out = append(out, keys)
			}
		case clause.Expr:
			out = append(out, m.exprKeys(e.SQL, e.Vars)...)
		case clause.AndConditions:
			out = append(out, p.whereKeys(m, e.Exprs)...)
		}
	}
	return out
}

// routes returns the integer values v holds when col is a routing column
// of m.
func (m *pmodel) routes(col any, v any) ([]int64, bool) {
	name := ""
	switch c := col.(type) {
	case clause.Column:
		if c.Raw || c.Table != "" && c.Table != clause.CurrentTable && c.Table != m.schema.Table {
			return nil, false
		}
		name = c.Name
		if name == clause.PrimaryKey {
			if m.schema.PrioritizedPrimaryField == nil {
				return nil, false
			}
			name = m.schema.PrioritizedPrimaryField.DBName
		}
	case string:
		name = c
	default:
		return nil, false
	}
	if name != m.key.DBName && !(m.idsRoute && name == m.id.DBName) {
		return nil, false
	}
	return ints(v)
}

// ints reads v as integers: an integer, a pointer to one, or a slice or
// array of them (of any, too).
func ints(v any) ([]int64, bool) {
	rv := reflect.ValueOf(v)
	for rv.IsValid() && (rv.Kind() == reflect.Pointer || rv.Kind() == reflect.Interface) {
		if rv.IsNil() {
			return nil, false
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil, false
	}
	if rv.Kind() == reflect.Slice || rv.Kind() == reflect.Array {
		if rv.Type().Elem().Kind() == reflect.Uint8 {
			return nil, false // []byte is a value, not a list
		}
		out := make([]int64, 0, rv.Len())
		for i := range rv.Len() {
			one, ok := ints(rv.Index(i).Interface())
			if !ok || len(one) != 1 {
				return nil, false
			}
			out = append(out, one[0])
		}
		return out, len(out) > 0
	}
	if repo.KeyKind("", "", rv.Type()) != nil {
		return nil, false
	}
	n, err := repo.KeyValue(rv)
	return []int64{n}, err == nil
}

// exprCond is one condition of a string Where that routes: a column
// (optionally qualified by a table, optionally quoted) compared with = or
// IN to one placeholder.
var exprCond = regexp.MustCompile("^\\s*(?:[`\"]?(\\w+)[`\"]?\\.)?[`\"]?(\\w+)[`\"]?\\s*(=|(?i:in))\\s*\\(?\\s*\\?\\s*\\)?\\s*$")

// exprKeys reads the routing conditions of a string Where: "id = ?",
// "customer_id IN ?", "orders.id = ? AND status = ?". A condition holding
// OR, NOT, parentheses beyond "IN (?)" or named arguments routes nothing:
// only conditions that hold whatever the rest says are read.
func (m *pmodel) exprKeys(sql string, vars []any) [][]int64 {
	var out [][]int64
	for _, at := range m.exprConds(sql, vars) {
		keys, _ := m.routes(at.col, vars[at.arg])
		out = append(out, keys)
	}
	return out
}

// exprArg is a routing condition of a string Where: its column, and the
// index of its value in the vars.
type exprArg struct {
	col string
	arg int
}

// orNot finds the words that make a condition's parts optional (MySQL
// reads || as OR and ! as NOT).
var orNot = regexp.MustCompile(`(?i)\b(x?or|not)\b|@|\|\||!([^=]|$)`)

// exprConds lists the routing conditions of a string Where.
func (m *pmodel) exprConds(sql string, vars []any) []exprArg {
	if orNot.MatchString(sql) {
		return nil
	}
	var out []exprArg
	at := 0 // index of the next var
	for _, part := range splitAnd(sql) {
		n := strings.Count(part, "?")
		if g := exprCond.FindStringSubmatch(part); g != nil && n == 1 && at < len(vars) && (g[1] == "" || g[1] == m.schema.Table) {
			if _, ok := m.routes(g[2], vars[at]); ok {
				out = append(out, exprArg{col: g[2], arg: at})
			}
		}
		at += n
	}
	return out
}

// narrow cuts the IN lists on routing columns in exprs down to the values
// of shard s: each shard's part of a statement over several asks for its
// own keys only.
func (p *Plugin) narrow(m *pmodel, exprs []clause.Expression, s sharding.Shard) []clause.Expression {
	keep := func(v any) (any, bool) {
		rv := reflect.ValueOf(v)
		if rv.Kind() != reflect.Slice || rv.Type().Elem().Kind() == reflect.Uint8 {
			return v, false
		}
		out := reflect.MakeSlice(rv.Type(), 0, rv.Len())
		for i := range rv.Len() {
			keys, ok := ints(rv.Index(i).Interface())
			if !ok || len(keys) != 1 {
				return v, false
			}
			if _, at, err := p.g.base.Route(keys[0]); err == nil && at == s {
				out = reflect.Append(out, rv.Index(i))
			}
		}
		return out.Interface(), true
	}
	out := make([]clause.Expression, len(exprs))
	for i, e := range exprs {
		out[i] = e
		switch e := e.(type) {
		case clause.IN:
			if _, ok := m.routes(e.Column, e.Values); ok {
				if v, ok := keep(e.Values); ok {
					e.Values = v.([]any)
					out[i] = e
				}
			}
		case clause.Expr:
			conds := m.exprConds(e.SQL, e.Vars)
			if len(conds) == 0 {
				continue
			}
			e.Vars = slices.Clone(e.Vars)
			for _, c := range conds {
				if v, ok := keep(e.Vars[c.arg]); ok {
					e.Vars[c.arg] = v
				}
			}
			out[i] = e
		case clause.AndConditions:
			e.Exprs = p.narrow(m, e.Exprs, s)
			out[i] = e
		}
	}
	return out
}

// onlyShard returns clauses with the WHERE narrowed to shard s.
func (p *Plugin) onlyShard(m *pmodel, clauses map[string]clause.Clause, s sharding.Shard) map[string]clause.Clause {
	out := cloneClauses(clauses)
	if c, ok := out["WHERE"]; ok {
		if w, ok := c.Expression.(clause.Where); ok {
			w.Exprs = p.narrow(m, w.Exprs, s)
			c.Expression = w
			out["WHERE"] = c
		}
	}
	return out
}

// andSplit matches the AND between two conditions.
var andSplit = regexp.MustCompile(`(?i)\s+and\s+`)

// splitAnd cuts a condition at its ANDs (BETWEEN ... AND ... stays a
// condition that routes nothing, whole or cut).
func splitAnd(sql string) []string {
	return andSplit.Split(sql, -1)
}
