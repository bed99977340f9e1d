package idgen

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// Sequence reports whether kind draws its IDs from a store's sequences
// (the registry's "chain" and "segment"), whose counters need a Floor when a
// store forgets them.
func Sequence(kind string) bool { return kind == "chain" || kind == "segment" }

// Column is a field that receives IDs and the table column it is stored
// in: what a Floor of the field's sequence reads.
type Column struct {
	Field *Field
	Name  string // the column's name, unquoted
}

// Query runs a statement that returns one value and scans it into dest.
type Query func(ctx context.Context, query string, dest *sql.NullString) error

// Floor returns the engine.Floor of the field's sequence held in one table,
// to add under [Field.FloorName]: the largest ID in column of table (both
// quoted for dialect: "mysql", "postgres" or "sqlite"), read with query; 0
// for an empty table. For a dated chain it is the largest counter among the
// values of the period the Floor is asked for. It is nil when the field
// does not draw from a sequence. A dialect it does not know gives a Floor
// that answers engine.ErrNoFloor, naming the field.
func (f *Field) Floor(dialect, table, column string, query Query) engine.Floor {
	if !Sequence(f.Spec.Kind) {
		return nil
	}
	expr, ok := f.maxExpr(dialect, column)
	if !ok {
		return func(context.Context, string) (int64, error) {
			return 0, fmt.Errorf("%w: model %s field %s: cannot read the largest ID on dialect %q", engine.ErrNoFloor, f.Model, f.Name, dialect)
		}
	}
	stmt := "SELECT " + expr + " FROM " + table
	if f.dated != nil {
		return func(ctx context.Context, seq string) (int64, error) {
			// seq is "<name>:<period>"; a period of another length (a
			// format of the same name by month, say) has no values here.
			like, ok := f.dated.Like(seq[strings.LastIndexByte(seq, ':')+1:])
			if !ok {
				return 0, nil
			}
			v, err := f.readMax(ctx, query, stmt+" WHERE "+column+" LIKE '"+like+"' ESCAPE '!'")
			if err != nil || v == "" {
				return 0, err
			}
			_, n, err := f.dated.Read(v)
			if err != nil {
				return 0, fmt.Errorf("model %s field %s: the largest value of %s: %w", f.Model, f.Name, seq, err)
			}
			return n, nil
		}
	}
	return func(ctx context.Context, _ string) (int64, error) {
		v, err := f.readMax(ctx, query, stmt)
		if err != nil || v == "" {
			return 0, err
		}
		var id int64
		if f.kind == reflect.String && f.Spec.Format != "" && f.Spec.Format != "decimal" {
			id, err = f.format.Parse(v)
		} else {
			id, err = strconv.ParseInt(v, 10, 64)
		}
		if err != nil {
			return 0, fmt.Errorf("model %s field %s: %s gave %q: %w", f.Model, f.Name, stmt, v, err)
		}
		return id, nil
	}
}

// FloorName is the name the field's Floor answers for in the registry (see
// idforge.Registry.AddFloor): the chain's name, or "<name>:*" for a dated
// chain, whose every period is a sequence of its own.
func (f *Field) FloorName() string {
	if f.dated != nil {
		return f.Spec.Name + ":*"
	}
	return f.Spec.Name
}

// readMax runs stmt, which reads one value, "" for NULL (an empty table).
func (f *Field) readMax(ctx context.Context, query Query, stmt string) (string, error) {
	var v sql.NullString
	if err := query(ctx, stmt, &v); err != nil {
		return "", fmt.Errorf("model %s field %s: %s: %w", f.Model, f.Name, stmt, err)
	}
	return v.String, nil
}

// maxExpr is the SQL that reads the largest ID of the field from column:
// integers as they are, decimal strings cast to integers, padded radix
// strings compared byte by byte (a case-insensitive collation would put
// "a" and "A" level).
func (f *Field) maxExpr(dialect, column string) (string, bool) {
	if f.kind != reflect.String {
		return "MAX(" + column + ")", true
	}
	// A dated format's strings are compared byte by byte, as radix ones.
	decimal := f.dated == nil && (f.Spec.Format == "" || f.Spec.Format == "decimal")
	switch {
	case dialect == "mysql" && decimal:
		return "MAX(CAST(" + column + " AS SIGNED))", true
	case dialect == "mysql":
		return "MAX(CAST(" + column + " AS BINARY))", true
	case dialect == "postgres" && decimal:
		return "MAX(CAST(" + column + " AS BIGINT))", true
	case dialect == "postgres":
		return "MAX(" + column + ` COLLATE "C")`, true
	case dialect == "sqlite" && decimal:
		return "MAX(CAST(" + column + " AS INTEGER))", true
	case dialect == "sqlite":
		return "MAX(" + column + ")", true
	}
	return "", false
}

// AddFloor gives f to p when p takes floors (an idforge registry's
// AddFloor) and reports whether it did.
func AddFloor(p engine.Provider, name string, f engine.Floor) bool {
	fa, ok := p.(interface {
		AddFloor(name string, f engine.Floor)
	})
	if ok && f != nil {
		fa.AddFloor(name, f)
	}
	return ok
}
