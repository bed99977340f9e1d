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
)

// ErrUpsertRow is wrapped by the error of a create with clause.OnConflict
// when a row met a conflict and the plugin cannot tell which row of the
// table it met, so it cannot give the struct that row's key. The error names
// the model and what to do; the create fails, and its transaction (GORM's
// default one, or the caller's) is rolled back.
var ErrUpsertRow = errors.New("idplugin: cannot tell which row of the table an upsert's row met")

// upsertCallbackName is the create callback that reads an upsert's keys back.
const upsertCallbackName = "idforge:upsert_keys"

// lookupBranches caps the SELECTs one look-up query joins with UNION ALL:
// SQLite's default limit on the terms of a compound SELECT.
const lookupBranches = 500

// lastInsertIDSQL is the value of the assignment key = key that the plugin
// adds to an ON DUPLICATE KEY UPDATE on MySQL/MariaDB, for its side
// effect: the statement then reports, as its last insert ID, the key of
// the last row that met a conflict, and 0 when none did. The top bit is
// flipped so that a row keyed 0 (written around the plugin) does not read
// as no conflict; only a key of -2^63 (or 2^63, unsigned) would.
const lastInsertIDSQL = "IF(LAST_INSERT_ID(? ^ 9223372036854775808), ?, ?)"

func lastInsertID(key string) clause.Assignment {
	col := clause.Column{Name: key}
	return clause.Assignment{Column: col, Value: clause.Expr{SQL: lastInsertIDSQL, Vars: []any{col, col, col}}}
}

func isLastInsertID(a clause.Assignment) bool {
	e, ok := a.Value.(clause.Expr)
	return ok && e.SQL == lastInsertIDSQL
}

type upsertKey struct{}

// upsert is a create with an ON CONFLICT clause, from the callback that
// fills its rows to the one that reads their keys back.
type upsert struct {
	stmt *gorm.Statement
	plan *modelPlan
	// rows are the rows whose key the plugin draws, in the create's order.
	rows []*upsertRow
	// total is the number of rows the statement inserts.
	total int
	// ownResult: the plugin set stmt.Result, to read the insert ID.
	ownResult bool
}

// upsertRow is a row whose key the plugin draws: a struct or a map, and
// what each field of the plan held before.
type upsertRow struct {
	at    int            // position in the create, for errors
	v     reflect.Value  // the struct
	m     map[string]any // or the map
	drawn []drawn        // per field of the plan
	prior []any          // maps: the zero values the plugin replaces
}

// drawn says whether the plugin draws a field's value, and over what.
type drawn uint8

const (
	kept   drawn = iota // set by the caller, or not a column
	filled              // over a zero value (through a pointer, for a pointer field)
	added               // into a nil pointer, or a map key left out
)

// beginUpsert notes which values of stmt's rows the plugin is about to
// draw, for a create with an ON CONFLICT clause; it returns nil when no
// row's key is drawn, leaving GORM's behaviour as it is.
func (mp *modelPlan) beginUpsert(ctx context.Context, stmt *gorm.Statement) *upsert {
	if mp.key < 0 {
		return nil
	}
	u := &upsert{stmt: stmt, plan: mp}
	note := func(r *upsertRow) {
		u.total++
		if r.drawn[mp.key] != kept {
			u.rows = append(u.rows, r)
		}
	}
	if ms, ok := mapsOf(stmt.Dest); ok {
		for i, m := range ms {
			note(mp.mapRow(i, m))
		}
	} else {
		i := 0
		for row := range rows(stmt.ReflectValue) {
			note(mp.structRow(ctx, i, row))
			i++
		}
	}
	if len(u.rows) == 0 {
		return nil
	}
	return u
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

// prepare readies stmt for reading its keys back. On MySQL/MariaDB, with an
// integer key, it adds an assignment that changes nothing but records the
// key met (see lastInsertIDSQL) to the ON DUPLICATE KEY UPDATE, so that the
// statement itself says whether a row met a conflict and, for a single
// row, which.
func (u *upsert) prepare() {
	stmt := u.stmt
	key := u.plan.fields[u.plan.key]
	if stmt.Dialector.Name() != "mysql" || key.GORMDataType != schema.Int && key.GORMDataType != schema.Uint {
		return
	}
	oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !ok {
		return
	}
	if !slices.ContainsFunc(oc.DoUpdates, func(a clause.Assignment) bool { return a.Column.Name == key.DBName }) {
		// A new slice: the old one may be the caller's.
		oc.DoUpdates = append(slices.Clip(oc.DoUpdates), lastInsertID(key.DBName))
		stmt.AddClause(oc)
	}
	if stmt.Result == nil {
		stmt.Result, u.ownResult = gorm.WithResult(), true
	}
}

// upserted reads the keys of an upsert's rows back (see settle): after
// gorm:create, before the associations saved after the row take its key.
func (p *Plugin) upserted(db *gorm.DB) {
	stmt := db.Statement
	if _, ok := stmt.Clauses["ON CONFLICT"]; !ok {
		return
	}
	v, ok := stmt.Settings.LoadAndDelete(upsertKey{})
	if u, _ := v.(*upsert); ok && u.stmt == stmt { // else copied from the create this one saves associations for
		if db.Error == nil && !db.DryRun {
			db.AddError(u.settle(db))
		}
		if u.ownResult {
			stmt.Result = nil
		}
	}
}

// settle makes the rows whose key the plugin drew agree with the table. A
// row the database inserted keeps its key. A row that met a conflict takes
// the key (and the other values the plugin drew) of the row it met, as
// GORM gives an auto-increment key; except with DoNothing where GORM leaves
// an auto-increment key unset (SQLite, PostgreSQL, MySQL/MariaDB without
// RETURNING), where it gets back the values it came with.
func (u *upsert) settle(db *gorm.DB) error {
	stmt := u.stmt
	oc, ok := stmt.Clauses["ON CONFLICT"].Expression.(clause.OnConflict)
	if !ok {
		return nil
	}
	mysql := stmt.Dialector.Name() == "mysql"
	// MySQL has no conflict target (any unique index counts) and writes
	// DoNothing as key = key, which MariaDB's RETURNING answers with the row.
	resolve := updates(oc, mysql) || mysql && slices.Contains(stmt.BuildClauses, "RETURNING")
	pending := u.rows
	var target []*schema.Field
	if !mysql && len(oc.Columns) > 0 && oc.OnConstraint == "" {
		target = u.plan.targetFields(oc.Columns)
		// A row whose target holds a value the plugin drew met no conflict:
		// the value is new. The common upsert, on the primary key, ends here.
		pending = slices.DeleteFunc(slices.Clone(pending), func(r *upsertRow) bool { return u.plan.drewAny(r, target) })
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
			if u.total == 1 {
				met = u.plan.keyValue(uint64(id) ^ 1<<63)
			}
		}
	}
	// DO NOTHING counts only the rows it inserts (without RETURNING, whose
	// scan GORM counts otherwise; MySQL may count found rows as affected).
	if _, returning := stmt.Clauses["RETURNING"]; !resolve && !mysql && !returning && db.RowsAffected == int64(u.total) {
		return nil
	}
	pending, err := u.absent(db, pending)
	if err != nil || len(pending) == 0 {
		return err
	}
	if !resolve {
		for _, r := range pending {
			u.restore(r)
		}
		return nil
	}
	keys, err := u.conflictKeys(db, oc, target, met)
	if err != nil {
		return err
	}
	return u.lookup(db, pending, keys)
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

// session runs the plugin's queries on the create's connection, inside its
// transaction, with its context and logger.
func session(db *gorm.DB) *gorm.DB { return db.Session(&gorm.Session{NewDB: true}) }

// absent returns the rows of pending whose drawn key is not in the table:
// those that met a conflict. The plugin's keys are new, so a row holding
// one is the row inserted for it.
func (u *upsert) absent(db *gorm.DB, pending []*upsertRow) ([]*upsertRow, error) {
	key := u.plan.fields[u.plan.key]
	ids := make([]any, len(pending))
	for i, r := range pending {
		ids[i] = u.value(r, key)
	}
	col := clause.Column{Name: key.DBName}
	rows, err := session(db).Raw("SELECT ? FROM ? WHERE ? IN ?", col, clause.Table{Name: u.stmt.Table}, col, ids).Rows()
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	present := map[any]bool{}
	for rows.Next() {
		v := reflect.New(key.FieldType)
		if err := rows.Scan(v.Interface()); err != nil {
			return nil, err
		}
		present[deref(v.Elem().Interface())] = true
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var met []*upsertRow
	for _, r := range pending {
		if !present[deref(u.value(r, key))] {
			met = append(met, r)
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

// conflictKeys lists the keys a conflict may have met: the row the
// database named on MySQL, the conflict target on SQLite and PostgreSQL,
// the table's unique indexes on MySQL, where any of them counts.
func (u *upsert) conflictKeys(db *gorm.DB, oc clause.OnConflict, target []*schema.Field, met any) ([]conflictKey, error) {
	model := u.plan.schema.Name
	switch {
	case met != nil:
		key := u.plan.fields[u.plan.key]
		return []conflictKey{{name: key.DBName, fields: []*schema.Field{key}, value: met}}, nil
	case target != nil:
		names := make([]string, len(oc.Columns))
		for i, c := range oc.Columns {
			names[i] = c.Name
		}
		k := conflictKey{name: strings.Join(names, ", "), fields: target}
		if len(oc.TargetWhere.Exprs) > 0 {
			k.where = clause.AndConditions{Exprs: oc.TargetWhere.Exprs}
		}
		return []conflictKey{k}, nil
	case db.Dialector.Name() != "mysql":
		return nil, fmt.Errorf("%w: model %s: a row met a conflict, and the plugin finds the row it met by the conflict columns: "+
			"name them in clause.OnConflict.Columns (OnConstraint, or no target, does not say which they are)", ErrUpsertRow, model)
	}
	keys, err := u.uniqueIndexes(db)
	if err != nil {
		return nil, fmt.Errorf("idplugin: model %s: reading the unique indexes of %s: %w", model, u.stmt.Table, err)
	}
	return keys, nil
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

// drewAny reports whether the plugin drew the value of any of fields in r.
func (mp *modelPlan) drewAny(r *upsertRow, fields []*schema.Field) bool {
	for _, f := range fields {
		if j := slices.Index(mp.fields, f); j >= 0 && r.drawn[j] != kept {
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
// the keys a conflict may have met, and copies into it the values the
// plugin drew. A row of pending must match exactly one row of the table:
// otherwise the plugin cannot tell which it met, an error wrapping
// ErrUpsertRow.
func (u *upsert) lookup(db *gorm.DB, pending []*upsertRow, keys []conflictKey) error {
	model := u.plan.schema.Name
	var branches []branch
	searched := make([][]string, len(pending)) // per row of pending, the keys it is looked up by
	for i, r := range pending {
		for k := range keys {
			key := &keys[k]
			if key.value == nil && u.plan.drewAny(r, key.fields) {
				continue // it holds a new value: no conflict met it
			}
			if slices.Contains(key.fields, nil) {
				return fmt.Errorf("%w: model %s: row %d met a conflict, and the key %s of %s is on an expression or a column the model does not map, "+
					"so the plugin cannot look the row it met up by it: map the column, or create such rows without clause.OnConflict",
					ErrUpsertRow, model, r.at, key.name, u.stmt.Table)
			}
			branches = append(branches, branch{at: i, r: r, key: key})
			searched[i] = append(searched[i], key.name)
		}
		if len(searched[i]) == 0 {
			return fmt.Errorf("%w: model %s: row %d met a conflict, on no unique key that the plugin can look up (%s hold values it drew)",
				ErrUpsertRow, model, r.at, keyNames(keys))
		}
	}
	// Per row of pending, the rows of the table it matches by their key,
	// with the keys it matches them through.
	found := make([]map[any]*match, len(pending))
	for start := 0; start < len(branches); start += lookupBranches {
		part := branches[start:min(start+lookupBranches, len(branches))]
		err := u.query(db, part, func(b branch, values []reflect.Value) {
			if found[b.at] == nil {
				found[b.at] = map[any]*match{}
			}
			k := deref(values[slices.Index(u.plan.cols, u.plan.key)].Interface())
			m := found[b.at][k]
			if m == nil {
				m = &match{values: values}
				found[b.at][k] = m
			}
			m.keys = append(m.keys, b.key.name)
		})
		if err != nil {
			return err
		}
	}
	for i, r := range pending {
		switch len(found[i]) {
		case 1:
			for _, m := range found[i] {
				u.copyIn(r, m.values)
			}
		case 0:
			return fmt.Errorf("%w: model %s: row %d met a conflict, but no row of %s holds its values in %s after the upsert "+
				"(does DoUpdates change them?): the struct would hold a key that is not in the table",
				ErrUpsertRow, model, r.at, u.stmt.Table, strings.Join(searched[i], " or "))
		default:
			var by []string
			for _, m := range found[i] {
				by = append(by, strings.Join(m.keys, ", "))
			}
			slices.Sort(by)
			return fmt.Errorf("%w: model %s: row %d met a conflict, and %d rows of %s hold its values, by different unique keys (%s): "+
				"MySQL/MariaDB updates one of them and the plugin cannot tell which; create such a row on its own, so that the database says which "+
				"(with an integer key)", ErrUpsertRow, model, r.at, len(found[i]), u.stmt.Table, strings.Join(by, "; "))
		}
	}
	return nil
}

// match is a row of the table a look-up found: its values, and the keys it
// was found by.
type match struct {
	values []reflect.Value
	keys   []string
}

// query runs one look-up: a SELECT per branch, joined with UNION ALL and
// numbered by its first column, reading the plan's columns. On MySQL each
// SELECT locks what it reads, so that it reads the latest rows (a caller's
// REPEATABLE READ transaction would read its snapshot); those rows are
// already the create's, locked by its update.
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
		for _, j := range u.plan.cols {
			sb.WriteString(", ?")
			vars = append(vars, clause.Column{Name: u.plan.fields[j].DBName})
		}
		sb.WriteString(" FROM ? WHERE ")
		vars = append(vars, clause.Table{Name: u.stmt.Table})
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
	rows, err := session(db).Raw(sb.String(), vars...).Rows()
	if err != nil {
		return err
	}
	defer rows.Close()
	dest := make([]any, 1+len(u.plan.cols))
	var n int
	dest[0] = &n
	for rows.Next() {
		values := make([]reflect.Value, len(u.plan.cols))
		for k, j := range u.plan.cols {
			values[k] = reflect.New(u.plan.fields[j].FieldType)
			dest[k+1] = values[k].Interface()
		}
		if err := rows.Scan(dest...); err != nil {
			return err
		}
		for k := range values {
			values[k] = values[k].Elem()
		}
		yield(part[n], values)
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

// copyIn sets the values the plugin drew for r to those of the row of the
// table it met: values holds the plan's columns.
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
