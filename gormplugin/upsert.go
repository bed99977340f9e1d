package idplugin

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/idforge/idforge/internal/gormids"
)

// ErrUpsertRow is wrapped by the error of a create with clause.OnConflict
// that updates the row a conflict meets (DoUpdates, UpdateAll) when the
// plugin cannot tell which row of the table that is, so it cannot give the
// struct that row's values: no conflict Columns on SQLite or PostgreSQL
// (where DoUpdates without them is refused before it runs, and UpdateAll
// without them, which GORM aims at the primary key, meets a conflict on
// another unique key as a duplicate-key error, wrapped too), or a row of a
// MySQL/MariaDB batch that matches different rows. The error names the
// model and what to do; the create fails, and its transaction (GORM's
// default one, or the caller's) is rolled back. DoNothing never fails so:
// a row whose conflict the plugin cannot place gets back the values it
// came with.
var ErrUpsertRow = errors.New("idplugin: cannot tell which row of the table an upsert's row met")

// upsertCallbackName is the create callback that reads an upsert's keys back.
const upsertCallbackName = "idforge:upsert_keys"

// lookupBranches caps the SELECTs one look-up query joins with UNION ALL:
// SQLite's default limit on the terms of a compound SELECT.
const lookupBranches = 500

// lastInsertIDSQL is the value of the assignment col = col that the
// plugin adds to an ON DUPLICATE KEY UPDATE on MySQL/MariaDB, for its side
// effect: the statement then reports, as its last insert ID, the value of
// col (an integer column, the key when it can) in the last row that met a
// conflict, and 0 when none did. The top bit is flipped so that a value of
// 0 (or NULL) does not read as no conflict; only -2^63 (or 2^63, unsigned)
// would.
const lastInsertIDSQL = "IF(LAST_INSERT_ID(COALESCE(?, 0) ^ 9223372036854775808), ?, ?)"

func lastInsertID(col string) clause.Assignment {
	c := clause.Column{Name: col}
	return clause.Assignment{Column: c, Value: clause.Expr{SQL: lastInsertIDSQL, Vars: []any{c, c, c}}}
}

func isLastInsertID(a clause.Assignment) bool {
	e, ok := a.Value.(clause.Expr)
	return ok && e.SQL == lastInsertIDSQL
}

type upsertKey struct{}

// upsert is a create with an ON CONFLICT clause, from the callback that
// fills its rows to the one that reads them back.
type upsert struct {
	stmt *gorm.Statement
	plan *modelPlan
	// rows are the rows for which the plugin draws a column's value, in
	// the create's order.
	rows []*upsertRow
	// total is the number of rows the statement inserts.
	total int
	// untargeted: the caller's clause names no conflict target (GORM aims
	// UpdateAll without one at the primary key).
	untargeted bool
	// ownResult: the plugin set stmt.Result, to read the insert ID.
	ownResult bool
	// metKey: the insert ID names the key of the row met (see prepare).
	metKey bool
	// read are the columns the plugin reads back (see readFields).
	read []*schema.Field
}

// upsertRow is a row for which the plugin draws a column's value: a struct
// or a map, and what each field of the plan held before.
type upsertRow struct {
	at    int            // position in the create, for errors
	v     reflect.Value  // the struct
	m     map[string]any // or the map
	drawn []drawn        // per field of the plan
	prior []any          // maps: the zero values the plugin replaces
	// generated is the primary key when the database numbers it for this
	// row: an auto-increment column the plugin does not fill, left zero.
	generated *schema.Field
}

// drawn says whether the plugin draws a field's value, and over what.
type drawn uint8

const (
	kept   drawn = iota // set by the caller, or not a column
	filled              // over a zero value (through a pointer, for a pointer field)
	added               // into a nil pointer, or a map key left out
)

// refuseUpsert returns an error wrapping ErrUpsertRow, before any ID is
// drawn, for an upsert the database refuses whatever its rows: DO UPDATE
// without a conflict target on PostgreSQL.
func (mp *modelPlan) refuseUpsert(stmt *gorm.Statement) error {
	oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !ok || stmt.Dialector.Name() != "postgres" || oc.DoNothing || oc.UpdateAll || len(oc.Columns) > 0 || oc.OnConstraint != "" {
		return nil
	}
	return fmt.Errorf("%w: model %s: clause.OnConflict with DoUpdates and no Columns: PostgreSQL updates the row a conflict meets "+
		"only when told which unique key to watch; name the conflict columns in clause.OnConflict.Columns", ErrUpsertRow, mp.schema.Name)
}

// beginUpsert notes which values of stmt's rows the plugin is about to
// draw, for a create with an ON CONFLICT clause; it returns nil when it
// draws none, leaving GORM's behaviour as it is.
func (mp *modelPlan) beginUpsert(ctx context.Context, stmt *gorm.Statement) *upsert {
	if len(mp.cols) == 0 {
		return nil
	}
	oc, _ := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	u := &upsert{stmt: stmt, plan: mp, untargeted: len(oc.Columns) == 0 && oc.OnConstraint == "", read: mp.readFields()}
	gen := mp.databaseKey(stmt.Schema)
	note := func(r *upsertRow) {
		u.total++
		if slices.ContainsFunc(mp.cols, func(j int) bool { return r.drawn[j] != kept }) {
			u.rows = append(u.rows, r)
		}
	}
	if ms, ok := mapsOf(stmt.Dest); ok {
		for i, m := range ms {
			r := mp.mapRow(i, m)
			if gen != nil && isZero(m[mapKey(m, gen)]) {
				r.generated = gen
			}
			note(r)
		}
	} else {
		i := 0
		for row := range rows(stmt.ReflectValue) {
			r := mp.structRow(ctx, i, row)
			if gen != nil {
				if _, zero := gen.ValueOf(ctx, row); zero {
					r.generated = gen
				}
			}
			note(r)
			i++
		}
	}
	if len(u.rows) == 0 {
		return nil
	}
	return u
}

// databaseKey is the primary key of s when the database numbers it (an
// auto-increment column, or one with a default, that the plugin does not
// fill), else nil.
func (mp *modelPlan) databaseKey(s *schema.Schema) *schema.Field {
	pk := s.PrioritizedPrimaryField
	if pk == nil || !pk.HasDefaultValue || pk.DefaultValueInterface != nil || pk.DBName == "" || slices.Contains(mp.fields, pk) {
		return nil
	}
	return pk
}

func (mp *modelPlan) structRow(ctx context.Context, at int, row reflect.Value) *upsertRow {
	r := &upsertRow{at: at, v: row, drawn: make([]drawn, len(mp.fields))}
	for _, j := range mp.cols {
		v, _ := mp.fields[j].ValueOf(ctx, row)
		switch fv := reflect.ValueOf(v); {
		case !fv.IsValid() || fv.Kind() == reflect.Pointer && fv.IsNil(): // nil, or behind a nil embedded pointer
			r.drawn[j] = added
		case mp.ids[j].IsZero(fv):
			r.drawn[j] = filled
		}
	}
	return r
}

func (mp *modelPlan) mapRow(at int, m map[string]any) *upsertRow {
	r := &upsertRow{at: at, m: m, drawn: make([]drawn, len(mp.fields)), prior: make([]any, len(mp.fields))}
	for _, j := range mp.cols {
		switch v, ok := m[mapKey(m, mp.fields[j])]; {
		case !ok:
			r.drawn[j] = added
		case isZero(v):
			r.drawn[j], r.prior[j] = filled, v
		}
	}
	return r
}

// prepare readies stmt for reading its rows back. On MySQL/MariaDB it adds
// to the ON DUPLICATE KEY UPDATE an assignment that changes nothing but
// records a value of the row met (see lastInsertIDSQL), so that the
// statement itself says whether a row met a conflict and, for a single row
// and an integer key the plugin fills, which. It leaves a table whose key
// the database numbers alone: GORM reads that key from the same report.
func (u *upsert) prepare() {
	stmt := u.stmt
	if stmt.Dialector.Name() != "mysql" {
		return
	}
	oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !ok {
		return
	}
	var col *schema.Field
	integer := func(f *schema.Field) bool { return f.GORMDataType == schema.Int || f.GORMDataType == schema.Uint }
	switch {
	case u.plan.key >= 0 && integer(u.plan.fields[u.plan.key]):
		col, u.metKey = u.plan.fields[u.plan.key], true
	case u.plan.databaseKey(stmt.Schema) == nil && !oc.UpdateAll: // UpdateAll assigns every other column
		for _, j := range u.plan.cols {
			if integer(u.plan.fields[j]) {
				col = u.plan.fields[j]
				break
			}
		}
	}
	if col == nil {
		return
	}
	if !slices.ContainsFunc(oc.DoUpdates, func(a clause.Assignment) bool { return a.Column.Name == col.DBName }) {
		// A new slice: the old one may be the caller's.
		oc.DoUpdates = append(slices.Clip(oc.DoUpdates), lastInsertID(col.DBName))
		stmt.AddClause(oc)
	}
	if stmt.Result == nil {
		stmt.Result, u.ownResult = gorm.WithResult(), true
	}
}

// upserted makes an upsert's rows agree with the table (see settle): after
// gorm:create, before the associations saved after the row take its key.
func (p *plugin) upserted(db *gorm.DB) {
	stmt := db.Statement
	if _, ok := stmt.Clauses["ON CONFLICT"]; !ok {
		return
	}
	v, ok := stmt.Settings.LoadAndDelete(upsertKey{})
	if u, _ := v.(*upsert); ok && u.stmt == stmt { // else copied from the create this one saves associations for
		switch {
		case db.DryRun:
		case db.Error == nil:
			db.AddError(u.settle(db))
		case u.duplicate(db):
			db.Error = fmt.Errorf("%w: model %s: clause.OnConflict{UpdateAll: true} without Columns, which GORM aims at the primary key: "+
				"a row met a conflict on another unique key, which the database refuses as a duplicate; "+
				"name the conflict columns in clause.OnConflict.Columns: %w", ErrUpsertRow, u.plan.schema.Name, db.Error)
		}
		if u.ownResult {
			stmt.Result = nil
		}
	}
}

// duplicate reports whether the upsert failed as UpdateAll without a
// conflict target does on SQLite and PostgreSQL when a row meets a
// conflict: GORM aims it at the primary key, which the plugin draws new,
// and the database refuses a duplicate on another unique key.
func (u *upsert) duplicate(db *gorm.DB) bool {
	oc, _ := u.stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !u.untargeted || !oc.UpdateAll || db.Dialector.Name() == "mysql" || errors.Is(db.Error, ErrUpsertRow) {
		return false
	}
	if errors.Is(db.Error, gorm.ErrDuplicatedKey) {
		return true
	}
	t, ok := db.Dialector.(gorm.ErrorTranslator)
	return ok && errors.Is(t.Translate(db.Error), gorm.ErrDuplicatedKey)
}

// settle makes every value the plugin drew for an upsert's rows agree with
// the table. A row that holds, in the table, a value drawn for it takes
// the values the table holds: the row inserted for it, or the row it met
// when the update wrote that value. A row that met a conflict otherwise
// takes the values of the row it met, looked up by the conflict target
// (SQLite, PostgreSQL), the key the database names (MySQL/MariaDB, a
// single row) or the unique keys of the table (MySQL/MariaDB). When it
// cannot tell which row that is, DoNothing gives the row back the values
// it came with (nothing of it was written), and an update fails with
// ErrUpsertRow.
func (u *upsert) settle(db *gorm.DB) error {
	stmt := u.stmt
	oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !ok {
		return nil
	}
	mysql := stmt.Dialector.Name() == "mysql"
	update := updates(oc, mysql)
	pending := u.rows
	var target []*schema.Field
	if !mysql && len(oc.Columns) > 0 && oc.OnConstraint == "" {
		target = u.plan.targetFields(oc.Columns)
		// A row whose target holds a value that is new (drawn by the
		// plugin, or numbered by the database) met no conflict. The
		// common upsert, on the primary key, ends here.
		pending = slices.DeleteFunc(slices.Clone(pending), func(r *upsertRow) bool { return u.fresh(r, target) })
		if len(pending) == 0 {
			return nil
		}
	}
	var met any // MySQL, a single row: the key of the row it met
	if res := stmt.Result; mysql && res != nil && res.Result != nil && slices.ContainsFunc(oc.DoUpdates, isLastInsertID) {
		if id, err := res.Result.LastInsertId(); err == nil {
			if id == 0 {
				return nil // no row met a conflict
			}
			if u.total == 1 && u.metKey {
				met = u.plan.keyValue(uint64(id) ^ 1<<63)
			}
		}
	}
	// DO NOTHING counts only the rows it inserts (without RETURNING, whose
	// scan GORM counts otherwise; MySQL may count found rows as affected).
	if _, returning := stmt.Clauses["RETURNING"]; !update && !mysql && !returning && db.RowsAffected == int64(u.total) {
		return nil
	}
	pending, err := u.readBack(db, pending)
	if err != nil || len(pending) == 0 {
		return err
	}
	keys, known := u.conflictKeys(oc, target, met)
	if !known && mysql {
		if keys, err = u.uniqueIndexes(db); err != nil {
			return fmt.Errorf("idplugin: model %s: reading the unique indexes of %s: %w", u.plan.schema.Name, stmt.Table, err)
		}
		known = true
	}
	if !known {
		if !update {
			for _, r := range pending {
				u.restore(r)
			}
			return nil
		}
		return fmt.Errorf("%w: model %s: a row met a conflict, and the plugin finds the row it met by the conflict columns: "+
			"name them in clause.OnConflict.Columns (OnConstraint, or no target, does not say which they are)", ErrUpsertRow, u.plan.schema.Name)
	}
	return u.lookup(db, pending, keys, update)
}

// updates reports whether oc updates the row a conflict meets: DoNothing
// does not (except on MySQL, which writes the assignments whatever it
// says), nor do assignments that change nothing, such as GORM's MySQL form
// of DoNothing (key = key) and the plugin's LAST_INSERT_ID.
func updates(oc clause.OnConflict, mysql bool) bool {
	if oc.DoNothing && !mysql {
		return false
	}
	return slices.ContainsFunc(oc.DoUpdates, func(a clause.Assignment) bool {
		col, self := a.Value.(clause.Column)
		return !(self && col.Table == "" && col.Name == a.Column.Name) && !isLastInsertID(a)
	})
}

// session runs the plugin's reads of an upsert's rows on the create's
// connection, inside its transaction (they read rows it wrote and has not
// committed), with its context and logger; but not through the caller's
// prepared statements, which would keep one for each of them.
func session(db *gorm.DB) *gorm.DB {
	s := db.Session(&gorm.Session{NewDB: true, SkipHooks: true}) // SkipHooks: a statement of its own
	s.Statement.ConnPool = gormids.Unprepared(db.Statement.ConnPool)
	return s
}

// readBackChunk caps the values one read-back query lists.
const readBackChunk = 1000

// readBack reads back the rows of pending whose table row holds a value
// the plugin drew for them (the key when it drew it, else another), gives
// them that row's values, and returns the others: those that met a
// conflict the update did not write their values into. The plugin's values
// are new, so the row holding one is the row inserted for it, or the row
// it met when the update wrote that value.
func (u *upsert) readBack(db *gorm.DB, pending []*upsertRow) ([]*upsertRow, error) {
	// The rows by the field of the plan whose value tells them.
	by := map[int][]*upsertRow{}
	var order []int
	for _, r := range pending {
		j := u.plan.key
		if j < 0 || r.drawn[j] == kept {
			j = u.plan.cols[slices.IndexFunc(u.plan.cols, func(j int) bool { return r.drawn[j] != kept })]
		}
		if by[j] == nil {
			order = append(order, j)
		}
		by[j] = append(by[j], r)
	}
	var met []*upsertRow
	for _, j := range order {
		sf, k := u.plan.fields[j], slices.Index(u.plan.cols, j)
		for part := range slices.Chunk(by[j], readBackChunk) {
			index := make(map[any]*upsertRow, len(part))
			vals := make([]any, len(part))
			for i, r := range part {
				vals[i] = u.value(r, sf)
				index[deref(vals[i])] = r
			}
			found := map[*upsertRow][]reflect.Value{}
			held := map[*upsertRow]int{}
			var sb strings.Builder
			sb.WriteString("SELECT 0")
			vars := u.selectList(&sb, nil)
			sb.WriteString(" WHERE ? IN ?")
			vars = append(vars, clause.Column{Name: sf.DBName}, vals)
			err := u.scan(session(db).Raw(sb.String(), vars...), func(_ int, values []reflect.Value) {
				if r := index[deref(values[k].Interface())]; r != nil {
					found[r] = values
					held[r]++
				}
			})
			if err != nil {
				return nil, err
			}
			for _, r := range part {
				if held[r] == 1 {
					u.copyIn(r, found[r])
				} else {
					met = append(met, r)
				}
			}
		}
	}
	return met, nil
}

// restore puts back the values r came with in place of those the plugin
// drew for it: they were not written.
func (u *upsert) restore(r *upsertRow) {
	ctx := u.stmt.Context
	for j, sf := range u.plan.fields {
		d := r.drawn[j]
		switch {
		case d == kept:
		case r.m != nil && d == added:
			delete(r.m, mapKey(r.m, sf))
		case r.m != nil:
			r.m[mapKey(r.m, sf)] = r.prior[j]
		default:
			fv := sf.ReflectValueOf(ctx, r.v)
			if d == filled && fv.Kind() == reflect.Pointer {
				fv = fv.Elem()
			}
			fv.SetZero()
		}
	}
}

// conflictKey is a unique key a conflict may have met: the row met is
// looked up by the values the row meeting it holds in its columns.
type conflictKey struct {
	name   string
	fields []*schema.Field // nil where the column is not the model's
	where  clause.Expression
	value  any // the key the row met, when the database said (fields is the key)
}

// conflictKeys lists the keys a conflict may have met, and whether it
// knows them: the row the database named on MySQL, the conflict target on
// SQLite and PostgreSQL. On MySQL, where any unique key counts, they are
// the table's unique indexes (see uniqueIndexes); on SQLite and
// PostgreSQL without a target (or with OnConstraint) it cannot tell.
func (u *upsert) conflictKeys(oc clause.OnConflict, target []*schema.Field, met any) ([]conflictKey, bool) {
	switch {
	case met != nil:
		key := u.plan.fields[u.plan.key]
		return []conflictKey{{name: key.DBName, fields: []*schema.Field{key}, value: met}}, true
	case target != nil:
		names := make([]string, len(oc.Columns))
		for i, c := range oc.Columns {
			names[i] = c.Name
		}
		k := conflictKey{name: strings.Join(names, ", "), fields: target}
		if len(oc.TargetWhere.Exprs) > 0 {
			k.where = clause.AndConditions{Exprs: oc.TargetWhere.Exprs}
		}
		return []conflictKey{k}, true
	}
	return nil, false
}

// targetFields are the model's fields for the columns of a conflict
// target, nil for a column the model does not map.
func (mp *modelPlan) targetFields(cols []clause.Column) []*schema.Field {
	fields := make([]*schema.Field, len(cols))
	for i, c := range cols {
		if !c.Raw {
			fields[i] = mp.schema.LookUpField(c.Name)
		}
	}
	return fields
}

// fresh reports whether any of fields holds a new value in r: one the
// plugin drew, or the key the database numbers. No conflict meets a key
// holding one.
func (u *upsert) fresh(r *upsertRow, fields []*schema.Field) bool {
	for _, f := range fields {
		if f != nil && f == r.generated {
			return true
		}
		if j := slices.Index(u.plan.fields, f); j >= 0 && r.drawn[j] != kept {
			return true
		}
	}
	return false
}

// keyValue is a key as MySQL reports it, 64 bits, typed for the key column.
func (mp *modelPlan) keyValue(id uint64) any {
	if mp.fields[mp.key].GORMDataType == schema.Uint {
		return id
	}
	return int64(id)
}

// uniqueIndexes reads the unique indexes of the table from MySQL's
// catalog, rather than from the model, which may not declare them all.
func (u *upsert) uniqueIndexes(db *gorm.DB) ([]conflictKey, error) {
	q := "SELECT index_name, column_name FROM information_schema.statistics " +
		"WHERE table_schema = DATABASE() AND table_name = ? AND non_unique = 0 ORDER BY index_name, seq_in_index"
	args := []any{u.stmt.Table}
	if schemaName, table, ok := strings.Cut(u.stmt.Table, "."); ok {
		q = strings.Replace(q, "DATABASE()", "?", 1)
		args = []any{schemaName, table}
	}
	rows, err := session(db).Raw(q, args...).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var keys []conflictKey
	for rows.Next() {
		var name string
		var col sql.NullString // NULL: an expression
		if err := rows.Scan(&name, &col); err != nil {
			return nil, err
		}
		if len(keys) == 0 || keys[len(keys)-1].name != name {
			keys = append(keys, conflictKey{name: name})
		}
		var f *schema.Field
		if col.Valid {
			f = u.plan.schema.LookUpField(col.String)
		}
		last := &keys[len(keys)-1]
		last.fields = append(last.fields, f)
	}
	return keys, rows.Err()
}

// branch is one SELECT of a look-up: the rows of the table holding the
// values of row r (pending[at]) in the columns of key.
type branch struct {
	at  int
	r   *upsertRow
	key *conflictKey
}

// lookup finds, for each row of pending, the row of the table it met, by
// the keys a conflict may have met, and gives it that row's values. A row
// of pending must match exactly one row of the table: otherwise the plugin
// cannot tell which it met, and an update fails with an error wrapping
// ErrUpsertRow, while DoNothing (!update) gives the row back the values it
// came with.
func (u *upsert) lookup(db *gorm.DB, pending []*upsertRow, keys []conflictKey, update bool) error {
	model := u.plan.schema.Name
	var branches []branch
	searched := make([][]string, len(pending)) // per row of pending, the keys it is looked up by
	unsure := make([]bool, len(pending))       // DoNothing: a key it may have met cannot be looked up
	for i, r := range pending {
		var mine []branch
		for k := range keys {
			key := &keys[k]
			if key.value == nil && u.fresh(r, key.fields) {
				continue // it holds a new value: no conflict met it
			}
			if slices.Contains(key.fields, nil) {
				if !update {
					unsure[i] = true
					break
				}
				return fmt.Errorf("%w: model %s: row %d met a conflict, and the key %s of %s is on an expression or a column the model does not map, "+
					"so the plugin cannot look the row it met up by it: map the column, or create such rows without clause.OnConflict",
					ErrUpsertRow, model, r.at, key.name, u.stmt.Table)
			}
			mine = append(mine, branch{at: i, r: r, key: key})
			searched[i] = append(searched[i], key.name)
		}
		switch {
		case unsure[i]:
		case len(mine) == 0 && update:
			return fmt.Errorf("%w: model %s: row %d met a conflict, on no unique key that the plugin can look up (%s hold new values)",
				ErrUpsertRow, model, r.at, keyNames(keys))
		case len(mine) == 0:
			unsure[i] = true
		default:
			branches = append(branches, mine...)
		}
	}
	// Per row of pending, the rows of the table it matches, by their
	// primary key, with the keys it matches them through.
	found := make([]map[any]*match, len(pending))
	for part := range slices.Chunk(branches, lookupBranches) {
		err := u.query(db, part, func(b branch, values []reflect.Value) {
			if found[b.at] == nil {
				found[b.at] = map[any]*match{}
			}
			id := u.identity(values)
			m := found[b.at][id]
			if m == nil {
				m = &match{values: values}
				found[b.at][id] = m
			}
			m.keys = append(m.keys, b.key.name)
		})
		if err != nil {
			return err
		}
	}
	for i, r := range pending {
		if !unsure[i] && len(found[i]) == 1 {
			for _, m := range found[i] {
				u.copyIn(r, m.values)
			}
			continue
		}
		if !update {
			u.restore(r) // DoNothing wrote nothing of it
			continue
		}
		if len(found[i]) == 0 {
			return fmt.Errorf("%w: model %s: row %d met a conflict, but no row of %s holds its values in %s after the upsert "+
				"(does DoUpdates change them?): the struct would hold values that are not in the table",
				ErrUpsertRow, model, r.at, u.stmt.Table, strings.Join(searched[i], " or "))
		}
		var by []string
		for _, m := range found[i] {
			by = append(by, strings.Join(m.keys, ", "))
		}
		slices.Sort(by)
		return fmt.Errorf("%w: model %s: row %d met a conflict, and %d rows of %s hold its values, by different unique keys (%s): "+
			"MySQL/MariaDB updates one of them and the plugin cannot tell which; create such a row on its own, so that the database says which "+
			"(with an integer key)", ErrUpsertRow, model, r.at, len(found[i]), u.stmt.Table, strings.Join(by, "; "))
	}
	return nil
}

// match is a row of the table a look-up found: its values, and the keys it
// was found by.
type match struct {
	values []reflect.Value
	keys   []string
}

// readFields are the columns the plugin reads back: the plan's, then those
// of the table's primary key that the plan does not fill, which tell rows
// apart.
func (mp *modelPlan) readFields() []*schema.Field {
	fields := make([]*schema.Field, 0, len(mp.cols)+1)
	for _, j := range mp.cols {
		fields = append(fields, mp.fields[j])
	}
	for _, pk := range mp.schema.PrimaryFields {
		if pk.DBName != "" && pk.Readable && !slices.Contains(fields, pk) {
			fields = append(fields, pk)
		}
	}
	return fields
}

// identity tells apart the rows of the table read back as values (see
// readFields): by their primary key, or by all their values without one.
func (u *upsert) identity(values []reflect.Value) any {
	var id []any
	for i, f := range u.read {
		if f.PrimaryKey {
			id = append(id, deref(values[i].Interface()))
		}
	}
	if len(id) == 0 {
		for _, v := range values {
			id = append(id, deref(v.Interface()))
		}
	}
	if len(id) == 1 {
		return id[0]
	}
	return fmt.Sprintf("%#v", id)
}

// query runs one look-up: a SELECT per branch, joined with UNION ALL and
// numbered by its first column, reading the readFields. On MySQL each
// SELECT locks what it reads, so that it reads the latest rows (a caller's
// REPEATABLE READ transaction would read its snapshot); those rows are
// already the create's, locked by its insert.
func (u *upsert) query(db *gorm.DB, part []branch, yield func(branch, []reflect.Value)) error {
	mysql := db.Dialector.Name() == "mysql"
	var (
		sb   strings.Builder
		vars []any
	)
	for n, b := range part {
		if n > 0 {
			sb.WriteString(" UNION ALL ")
		}
		if mysql {
			sb.WriteByte('(')
		}
		sb.WriteString("SELECT " + strconv.Itoa(n))
		vars = u.selectList(&sb, vars)
		sb.WriteString(" WHERE ")
		for i, f := range b.key.fields {
			if i > 0 {
				sb.WriteString(" AND ")
			}
			v := b.key.value
			if v == nil {
				v = u.value(b.r, f)
			}
			sb.WriteString("? = ?")
			vars = append(vars, clause.Column{Name: f.DBName}, v)
		}
		if b.key.where != nil {
			sb.WriteString(" AND (?)")
			vars = append(vars, b.key.where)
		}
		if mysql {
			sb.WriteString(" FOR UPDATE)")
		}
	}
	return u.scan(session(db).Raw(sb.String(), vars...), func(n int, values []reflect.Value) { yield(part[n], values) })
}

// selectList writes the readFields, each after a comma, and the FROM
// clause of a read-back.
func (u *upsert) selectList(sb *strings.Builder, vars []any) []any {
	for _, f := range u.read {
		sb.WriteString(", ?")
		vars = append(vars, clause.Column{Name: f.DBName})
	}
	sb.WriteString(" FROM ?")
	return append(vars, clause.Table{Name: u.stmt.Table})
}

// scan runs q, which reads a number and then the readFields, and yields
// each row's number and values.
func (u *upsert) scan(q *gorm.DB, yield func(n int, values []reflect.Value)) error {
	rows, err := q.Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	var n int
	dest := make([]any, 1+len(u.read))
	dest[0] = &n
	for rows.Next() {
		values := make([]reflect.Value, len(u.read))
		for k, f := range u.read {
			values[k] = reflect.New(f.FieldType)
			dest[k+1] = values[k].Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for k := range values {
			values[k] = values[k].Elem()
		}
		yield(n, values)
	}
	return rows.Err()
}

// value is the value of field sf in row r, as the create sent it.
func (u *upsert) value(r *upsertRow, sf *schema.Field) any {
	if r.m != nil {
		return r.m[mapKey(r.m, sf)]
	}
	v, _ := sf.ValueOf(u.stmt.Context, r.v)
	return v
}

// copyIn sets the values the plugin drew for r to those of a row of the
// table: values holds the readFields, the plan's columns first.
func (u *upsert) copyIn(r *upsertRow, values []reflect.Value) {
	for k, j := range u.plan.cols {
		if r.drawn[j] == kept {
			continue
		}
		sf := u.plan.fields[j]
		if r.m != nil {
			r.m[mapKey(r.m, sf)] = values[k].Interface()
		} else {
			sf.ReflectValueOf(u.stmt.Context, r.v).Set(values[k])
		}
	}
}

func keyNames(keys []conflictKey) string {
	names := make([]string, len(keys))
	for i, k := range keys {
		names[i] = k.name
	}
	return strings.Join(names, "; ")
}

// deref is v with pointers followed: values compared as keys.
func deref(v any) any {
	rv := reflect.ValueOf(v)
	for rv.Kind() == reflect.Pointer {
		if rv.IsNil() {
			return nil
		}
		rv = rv.Elem()
	}
	if !rv.IsValid() {
		return nil
	}
	if rv.Kind() == reflect.Array && rv.Len() == 16 && rv.Type().Elem().Kind() == reflect.Uint8 {
		var u [16]byte // a uuid.UUID scanned and the binaryUUID sent compare alike
		reflect.Copy(reflect.ValueOf(&u).Elem(), rv)
		return u
	}
	return rv.Interface()
}
