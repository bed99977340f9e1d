package sqlroute

import (
	"errors"
	"fmt"
)

// Table describes one sharded logical table.
type Table struct {
	// Name is the logical table name as written in SQL, e.g. "orders".
	// Names in SQL match it whatever their case, quoted or not.
	Name string
	// ID is the table's ID column, e.g. "id".
	ID string
	// Owner is the shard-key column rows are routed by, e.g. "user_id";
	// empty when rows are routed by their ID.
	Owner string
}

// Kind is the kind of a statement.
type Kind int

// The kinds of statement; Other is anything else (or what was not parsed
// because it names no sharded table).
const (
	Other Kind = iota
	Select
	Insert
	Update
	Delete
)

// String returns the statement's keyword, or "OTHER".
func (k Kind) String() string {
	switch k {
	case Select:
		return "SELECT"
	case Insert:
		return "INSERT"
	case Update:
		return "UPDATE"
	case Delete:
		return "DELETE"
	}
	return "OTHER"
}

// Value is one routing value of a statement.
type Value struct {
	// Value is the arg of the placeholder as given (not converted: a
	// driver.Valuer stays one), or the literal as int64 or string; nil when
	// the statement's expression is neither.
	Value any
	// Arg is the index in the args of the placeholder; -1 for a literal or
	// an expression.
	Arg int

	from  *Statement // the statement it was read from
	group int        // which IN list or VALUES clause; see Statement.Narrow
	item  int        // index in that list or clause
}

// Assignment is a routing column set by an UPDATE or an upsert.
type Assignment struct {
	// Column is the routing column as named in [Table].
	Column string
	// Value is the value assigned.
	Value Value
}

// Sentinel errors; every error of the package wraps one and names the
// table concerned, or "statement" and a byte offset when the text cannot
// be cut into tokens.
var (
	// ErrSyntax: the statement could not be read.
	ErrSyntax = errors.New("sqlroute: statement not understood")
	// ErrMultipleStatements: more than one statement in one string.
	ErrMultipleStatements = errors.New("sqlroute: several statements in one string")
	// ErrSeveralTables: a join or subquery reaches two sharded tables, or
	// one sharded table twice.
	ErrSeveralTables = errors.New("sqlroute: statement reaches several sharded tables")
	// ErrDDL: schema change of a logical table.
	ErrDDL = errors.New("sqlroute: schema change of a logical table")
	// ErrUnsupported: the statement is read but cannot be rewritten safely.
	ErrUnsupported = errors.New("sqlroute: statement cannot be rewritten")
	// ErrArgs: the args do not match the placeholders.
	ErrArgs = errors.New("sqlroute: args do not match the placeholders")
	// ErrName: a table or column name (of a [Table], or a physical table)
	// that is not a plain identifier of letters, digits and underscores.
	ErrName = errors.New("sqlroute: not a plain identifier")
	// ErrSelection: values given to Narrow that are not from one list of
	// routing values of the statement.
	ErrSelection = errors.New("sqlroute: values not from one list of the statement")
)

// tableError names the table (or statement) an error is about.
func tableError(sentinel error, table, format string, a ...any) error {
	return fmt.Errorf("%w: %s: %s", sentinel, table, fmt.Sprintf(format, a...))
}
