package sharding

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/idforge/idforge/engine"
)

// Shard is where a row lives: a database (by index into the databases a
// repository was given, and by name) and a physical table in it.
type Shard struct {
	Database     int    // 0-based index of the database
	Table        int    // 0-based index of the table within the database
	DatabaseName string // e.g. "m0"; empty for single-database routers that were not given one
	TableName    string // physical table name, e.g. "course_1"
}

// String returns "database.table", or just the table when the shard has no
// database name: the key used in statistics, e.g. "m0.course_1".
func (s Shard) String() string {
	if s.DatabaseName == "" {
		return s.TableName
	}
	return s.DatabaseName + "." + s.TableName
}

// TablePlaceholder is what statements run on every shard (the
// repositories' Exec, [Shard.Query]) write for the physical table:
// "CREATE TABLE {table} (id BIGINT PRIMARY KEY, name TEXT)".
const TablePlaceholder = "{table}"

// Query returns template with every {table} replaced by the shard's table.
func (s Shard) Query(template string) string {
	return strings.ReplaceAll(template, TablePlaceholder, s.TableName)
}

// Router maps an ID to its shard.
type Router interface {
	// Route returns the shard of id. Negative IDs and IDs outside the
	// router's range are errors wrapping engine.ErrInvalidID.
	Route(id int64) (Shard, error)
	// Shards lists every shard the router can return, ordered by database
	// then table: the fan-out list for queries and migrations. A router
	// whose range is unbounded returns an error wrapping engine.ErrInvalidConfig.
	Shards() ([]Shard, error)
}

// Rule computes a 0-based database or table index from an ID. [Expr] is the
// readable, printable form; [RuleFunc] takes any function.
type Rule interface {
	Index(id int64) (int64, error)
}

// RuleFunc adapts a function to [Rule]:
//
//	TableRule: sharding.RuleFunc(func(id int64) int64 { return (id + 1) % 4 / 2 })
type RuleFunc func(id int64) int64

// Index returns f(id).
func (f RuleFunc) Index(id int64) (int64, error) { return f(id), nil }

// String makes routers that print their rules show custom rules as such.
func (RuleFunc) String() string { return "func(id)" }

// Expr is an integer expression over the ID built left to right, the
// ShardingSphere inline-expression style as Go calls:
//
//	sharding.ID().Mod(2)               // id%2
//	sharding.ID().Add(1).Mod(4).Div(2) // (id+1)%4/2
//
// Arithmetic is checked: a step that overflows int64 makes Index return an
// error instead of wrapping around. The zero Expr is ID().
type Expr struct {
	steps []step
}

type step struct {
	op byte // '+', '*', '/', '%'
	n  int64
}

// ID starts an expression with the ID itself.
func ID() Expr { return Expr{} }

// Add adds n (subtracts when n is negative).
func (e Expr) Add(n int64) Expr { return e.then('+', n) }

// Mul multiplies by n.
func (e Expr) Mul(n int64) Expr { return e.then('*', n) }

// Div divides by n, truncating; n must be positive.
func (e Expr) Div(n int64) Expr { return e.then('/', n) }

// Mod takes the remainder of division by n; n must be positive.
func (e Expr) Mod(n int64) Expr { return e.then('%', n) }

func (e Expr) then(op byte, n int64) Expr {
	// Copy so that two expressions built from one prefix never share steps.
	steps := make([]step, len(e.steps), len(e.steps)+1)
	copy(steps, e.steps)
	return Expr{steps: append(steps, step{op, n})}
}

// Index evaluates the expression for id.
func (e Expr) Index(id int64) (int64, error) {
	v := id
	for _, s := range e.steps {
		var ok bool
		switch s.op {
		case '+':
			v, ok = addChecked(v, s.n)
		case '*':
			v, ok = mulChecked(v, s.n)
		case '/', '%':
			if ok = s.n > 0; ok && s.op == '/' {
				v /= s.n
			} else if ok {
				v %= s.n
			}
		}
		if !ok {
			return 0, fmt.Errorf("%w: rule %s cannot be evaluated for id %d (overflow or division by %d)",
				engine.ErrInvalidConfig, e, id, s.n)
		}
	}
	return v, nil
}

// validate rejects division or remainder by a non-positive number.
func (e Expr) validate() error {
	for _, s := range e.steps {
		if (s.op == '/' || s.op == '%') && s.n <= 0 {
			return fmt.Errorf("%w: rule %s: %c by %d (must be positive)", engine.ErrInvalidConfig, e, s.op, s.n)
		}
	}
	return nil
}

// String prints the expression with the parentheses it needs, e.g. "(id+1)%4/2".
func (e Expr) String() string {
	var b strings.Builder
	b.WriteString("id")
	prev := 2 // precedence of what is written so far: "id" binds tightest
	for _, s := range e.steps {
		p := 2
		if s.op == '+' {
			p = 1
		}
		if p > prev {
			expr := b.String()
			b.Reset()
			b.WriteString("(" + expr + ")")
		}
		if s.op == '+' && s.n < 0 {
			b.WriteString(strconv.FormatInt(s.n, 10)) // "id-1", not "id+-1"
		} else {
			b.WriteByte(s.op)
			b.WriteString(strconv.FormatInt(s.n, 10))
		}
		prev = p
	}
	return b.String()
}

func addChecked(a, b int64) (int64, bool) {
	if (b > 0 && a > math.MaxInt64-b) || (b < 0 && a < math.MinInt64-b) {
		return 0, false
	}
	return a + b, true
}

func mulChecked(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

// ruleString prints a rule for router descriptions.
func ruleString(r Rule) string {
	if s, ok := r.(fmt.Stringer); ok {
		return s.String()
	}
	return fmt.Sprintf("%T", r)
}

func negativeID(id int64) error {
	return fmt.Errorf("%w: cannot route negative id %d", engine.ErrInvalidID, id)
}
