package idplugin

import (
	"context"
	"errors"
	"fmt"
	"reflect"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// ErrHookCopy is wrapped by the error of a create, run from a hook of a row
// being created, that would insert a copy of that row with the same key into
// the same table. The plugin fills IDs before the BeforeCreate hooks, so
// hooks see them, and a copy (c := *row) keeps them, as any set ID is kept:
// the copy and its original would share a key. Set the copy's key to zero to
// give it its own. The error also matches gorm.ErrDuplicatedKey.
var ErrHookCopy = errors.New("idplugin: a hook creates a copy of the row being created, with the same key")

// inflight is a create, of a model with hooks, whose hooks may be running:
// creates made from them (on the transaction GORM hands the hook, which
// carries the statement's context) check that they do not copy its keys.
type inflight struct {
	stmt   *gorm.Statement
	parent context.Context // the statement's context before
	plan   *modelPlan
	table  string
}

type inflightKey struct{}

// enterHooks records stmt's create as in flight in its context, until the
// end callback restores it.
func (mp *modelPlan) enterHooks(stmt *gorm.Statement) {
	rec := &inflight{stmt: stmt, parent: stmt.Context, plan: mp, table: stmt.Table}
	stmt.Context = context.WithValue(rec.parent, inflightKey{}, rec)
}

// end restores the statement's context after its AfterCreate hooks.
func (p *plugin) end(db *gorm.DB) {
	if rec, ok := db.Statement.Context.Value(inflightKey{}).(*inflight); ok && rec.stmt == db.Statement {
		db.Statement.Context = rec.parent
	}
}

// checkCopies refuses rows of stmt whose key the plugin fills equals the key
// of a row of the same table that a create in flight around this one inserts.
func (mp *modelPlan) checkCopies(ctx context.Context, stmt *gorm.Statement) error {
	for rec, _ := ctx.Value(inflightKey{}).(*inflight); rec != nil; rec, _ = rec.parent.Value(inflightKey{}).(*inflight) {
		if rec.table != stmt.Table || rec.stmt == stmt {
			continue
		}
		for _, sf := range mp.fields {
			if sf.DBName == "" || !sf.PrimaryKey && !sf.Unique {
				continue
			}
			outer := rec.plan.schema.LookUpField(sf.DBName)
			if outer == nil {
				continue
			}
			theirs := map[any]bool{}
			for row := range rows(rec.stmt.ReflectValue) {
				if v, ok := keyValue(ctx, outer, row); ok {
					theirs[v] = true
				}
			}
			for row := range rows(stmt.ReflectValue) {
				if v, ok := keyValue(ctx, sf, row); ok && theirs[v] {
					return hookCopyError{fmt.Errorf("%w: model %s field %s: the row holds %v, the key of the %s being created around this hook: "+
						"a copy keeps the key of the row it was copied from; set the copy's %s to zero before creating it, so that it gets its own",
						ErrHookCopy, mp.schema.Name, sf.Name, v, rec.plan.schema.Name, sf.Name)}
				}
			}
		}
	}
	return nil
}

type hookCopyError struct{ err error }

func (e hookCopyError) Error() string   { return e.err.Error() }
func (e hookCopyError) Unwrap() []error { return []error{e.err, gorm.ErrDuplicatedKey} }

// keyValue is f's value in row, pointers followed, and whether it is set.
func keyValue(ctx context.Context, f *schema.Field, row reflect.Value) (any, bool) {
	v, zero := f.ValueOf(ctx, row)
	if zero || v == nil {
		return nil, false
	}
	rv := reflect.Indirect(reflect.ValueOf(v))
	if !rv.IsValid() || rv.IsZero() || !rv.Comparable() {
		return nil, false
	}
	return rv.Interface(), true
}

// rows yields the structs of a GORM ReflectValue: itself, or the elements of
// a slice or array, pointers followed and nil ones skipped.
func rows(v reflect.Value) func(yield func(reflect.Value) bool) {
	return func(yield func(reflect.Value) bool) {
		switch v.Kind() {
		case reflect.Struct:
			yield(v)
		case reflect.Slice, reflect.Array:
			for i := range v.Len() {
				row := reflect.Indirect(v.Index(i))
				if row.Kind() == reflect.Interface {
					row = reflect.Indirect(row.Elem())
				}
				if row.Kind() == reflect.Struct && !yield(row) {
					return
				}
			}
		}
	}
}
