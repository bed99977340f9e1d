package sharding

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/idforge/idforge/engine"
)

// Shard is where a row lives: a database, by its index into the databases
// a repository was given and by its name, and a physical table in it.
type Shard struct {
	Database     int    // 0-based index of the database
	DatabaseName string // e.g. "m0"; empty for a router of one unnamed database
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

// Bounds on a router's shards. A shard count is a deployment, not data: past
// these, a count is a mistake (math.MaxInt32 tables would take the process's
// memory just to name them), and NewMod and NewInterval refuse it.
const (
	maxDatabases = 4096  // databases of a Mod
	maxTables    = 65536 // tables per database of a Mod
	maxShards    = 65536 // shards a router lists, or tables one Tables call returns
)

// maxNameText bounds the text of Mod.Databases and Mod.Tables, and of
// Interval.Table, in bytes: a name pattern such as "course_{1..2}" is a
// few dozen bytes, and an SQL identifier at most 64 (MySQL) or 63
// (PostgreSQL) per part.
const maxNameText = 256

// Router maps an ID to its shard. Build it with [NewMod] or [NewInterval];
// it is safe for concurrent use.
type Router struct {
	r router
}

// router is what both kinds of router do.
type router interface {
	route(id int64) (Shard, error)
	shards() ([]Shard, error)
	tables(from, to time.Time) ([]string, error)
	String() string
}

func (r *Router) get() (router, error) {
	if r == nil || r.r == nil {
		return nil, fmt.Errorf("%w: sharding: a nil or zero Router: build it with NewMod or NewInterval", engine.ErrInvalidConfig)
	}
	return r.r, nil
}

// Route returns the shard of id. Negative IDs and IDs outside the router's
// range are errors wrapping engine.ErrInvalidID; a rule that overflows or
// names a database or table outside the lists wraps engine.ErrInvalidConfig.
func (r *Router) Route(id int64) (Shard, error) {
	rr, err := r.get()
	if err != nil {
		return Shard{}, err
	}
	if id < 0 {
		return Shard{}, fmt.Errorf("%w: cannot route negative id %d", engine.ErrInvalidID, id)
	}
	return rr.route(id)
}

// Shards lists every shard the router can return, ordered by database
// then table: the fan-out list for queries and migrations. An interval
// router without both Start and End has no end to its list and returns an
// error wrapping engine.ErrInvalidConfig.
func (r *Router) Shards() ([]Shard, error) {
	rr, err := r.get()
	if err != nil {
		return nil, err
	}
	return rr.shards()
}

// Tables lists, oldest first, the tables of an interval router holding
// rows issued in [from, to): the tables a query over that time range must
// read. The range is clipped to the router's [Start, End); an empty range
// gives nil. A range of more than 65,536 tables, or a mod router, which
// has no time, is an error wrapping engine.ErrInvalidConfig.
func (r *Router) Tables(from, to time.Time) ([]string, error) {
	rr, err := r.get()
	if err != nil {
		return nil, err
	}
	return rr.tables(from, to)
}

// String describes the routing in ShardingSphere's inline style, e.g.
// "m{id%2}.course_{(id+1)%4/2+1}" or "order_{200601}".
func (r *Router) String() string {
	if r == nil || r.r == nil {
		return "sharding.Router(nil)"
	}
	return r.r.String()
}

// Mod configures a router over databases × tables by integer rules on the
// ID: ShardingSphere's inline sharding. Build it with [NewMod]:
//
//	sharding.NewMod(sharding.Mod{ // db = id % 2, table = ((id+1) % 4)/2 + 1
//		Databases: "m{0..1}", Tables: "course_{1..2}",
//		TableRule: "(id+1)%4/2+1",
//	})
//
// Databases and Tables name the shards: a text with one range {lo..hi}
// where the numbers go ("course_{1..2}" is course_1 and course_2;
// "t_{00..15}" pads to two digits), or a plain name for one. Every
// database holds every table.
//
// A rule is an expression over id with integers, + - * / % and
// parentheses, computing the number in the name; arithmetic that
// overflows is an error, not a wrap-around. The default rules are
//
//	database = lo + id % D
//	table    = lo + (id / D) % T
//
// for D databases and T tables, so the shard is a one-to-one function of
// id % (D×T) and IDs whose residues come up evenly fill all D×T shards
// evenly. (Reusing id % T for the table, as many setups do, ties the table
// to the database whenever the counts share a factor: with 2 × 2, database
// 0 would only ever get table 0.)
type Mod struct {
	// Databases names the databases, e.g. "m{0..1}"; at most 4,096, in a
	// text of at most 256 bytes of printable UTF-8. Empty means one
	// database without a name.
	Databases string
	// Tables names the tables of each database, e.g. "course_{1..2}";
	// required, at most 65,536, and 65,536 shards in all, in a text of at
	// most 256 bytes. Names hold letters, digits, '_', '$' and '.'
	// (schema.table).
	Tables string
	// DatabaseRule computes the number of a row's database, e.g. "id%2".
	// A rule is at most 1,024 bytes of id, integers, + - * / %,
	// parentheses (nested at most 32 deep) and spaces.
	DatabaseRule string
	// TableRule computes the number of a row's table, e.g. "(id+1)%4/2+1";
	// bounded as DatabaseRule.
	TableRule string
}

// NewMod validates m and builds its router. A name list that is not one
// range (or holds more names than the bounds), a table name with other
// characters than letters, digits, '_', '$' and '.', or a rule that does
// not parse or divides by a number below 1 is an error wrapping
// engine.ErrInvalidConfig that names the field.
func NewMod(m Mod) (*Router, error) {
	bad := func(field string, err error) error {
		if errors.Is(err, engine.ErrInvalidConfig) { // a rule's or a table name's error
			return fmt.Errorf("sharding.Mod.%s: %w", field, err)
		}
		return fmt.Errorf("%w: sharding.Mod.%s: %v", engine.ErrInvalidConfig, field, err)
	}
	r := &modRouter{cfg: m}
	var err error
	if r.dbs, err = parseNames(m.Databases, maxDatabases, false); err != nil {
		return nil, bad("Databases", err)
	}
	if m.Tables == "" {
		return nil, bad("Tables", fmt.Errorf("required, e.g. \"course_{1..2}\""))
	}
	if r.tbls, err = parseNames(m.Tables, maxTables, true); err != nil {
		return nil, bad("Tables", err)
	}
	if n := len(r.dbs.names) * len(r.tbls.names); n > maxShards {
		return nil, bad("Databases × Tables", fmt.Errorf("%d × %d = %d shards, more than %d",
			len(r.dbs.names), len(r.tbls.names), n, maxShards))
	}
	d, t := int64(len(r.dbs.names)), int64(len(r.tbls.names))
	if r.dbRule, err = ruleOr(m.DatabaseRule, plus(r.dbs.lo, fmt.Sprintf("id%%%d", d))); err != nil {
		return nil, bad("DatabaseRule", err)
	}
	if r.tbRule, err = ruleOr(m.TableRule, plus(r.tbls.lo, fmt.Sprintf("id/%d%%%d", d, t))); err != nil {
		return nil, bad("TableRule", err)
	}
	return &Router{r: r}, nil
}

// plus writes the default rule expr with the range's first number added.
func plus(lo int64, expr string) string {
	if lo == 0 {
		return expr
	}
	return fmt.Sprintf("%d+%s", lo, expr)
}

func ruleOr(src, def string) (*rule, error) {
	if src == "" {
		src = def
	}
	return parseRule(src)
}

// modRouter is a validated Mod.
type modRouter struct {
	cfg            Mod
	dbs, tbls      names
	dbRule, tbRule *rule
}

// names is a parsed name list: prefix{lo..hi}suffix.
type names struct {
	prefix, suffix string
	lo             int64
	names          []string
	ranged         bool
}

// parseNames expands "prefix{lo..hi}suffix", or a plain name, checking
// the count against most and, for tables, that the names are safe in SQL.
func parseNames(src string, most int, sqlSafe bool) (names, error) {
	if len(src) > maxNameText {
		return names{}, fmt.Errorf("%s: %d bytes, more than %d", quotePrefix(src), len(src), maxNameText)
	}
	if err := checkText(src); err != nil {
		return names{}, err
	}
	open, close := strings.Index(src, "{"), strings.LastIndex(src, "}")
	if open < 0 && close < 0 {
		if sqlSafe {
			if err := checkTableName(src); err != nil {
				return names{}, err
			}
		}
		return names{prefix: src, names: []string{src}}, nil
	}
	if open < 0 || close < open {
		return names{}, fmt.Errorf("%q: unbalanced braces; want one range such as \"course_{1..2}\"", src)
	}
	lo, hi, ok := strings.Cut(src[open+1:close], "..")
	if !ok || strings.ContainsAny(src[:open]+src[close+1:], "{}") {
		return names{}, fmt.Errorf("%q: want one range such as \"course_{1..2}\"", src)
	}
	a, err1 := strconv.ParseInt(lo, 10, 32)
	b, err2 := strconv.ParseInt(hi, 10, 32)
	if err1 != nil || err2 != nil || a < 0 || b < a {
		return names{}, fmt.Errorf("%q: range {%s..%s} wants two numbers, 0 <= lo <= hi", src, lo, hi)
	}
	if b-a+1 > int64(most) {
		return names{}, fmt.Errorf("%q: %d names, more than %d", src, b-a+1, most)
	}
	width := 0
	if len(lo) > 1 && lo[0] == '0' {
		width = len(lo)
	}
	n := names{prefix: src[:open], suffix: src[close+1:], lo: a, ranged: true}
	for i := a; i <= b; i++ {
		name := fmt.Sprintf("%s%0*d%s", n.prefix, width, i, n.suffix)
		if sqlSafe {
			if err := checkTableName(name); err != nil {
				return names{}, err
			}
		}
		n.names = append(n.names, name)
	}
	return n, nil
}

func (r *modRouter) route(id int64) (Shard, error) {
	db, err := r.index("database", r.dbRule, r.dbs, id)
	if err != nil {
		return Shard{}, err
	}
	tb, err := r.index("table", r.tbRule, r.tbls, id)
	if err != nil {
		return Shard{}, err
	}
	return Shard{Database: db, DatabaseName: r.dbs.names[db], TableName: r.tbls.names[tb]}, nil
}

func (r *modRouter) index(what string, rule *rule, n names, id int64) (int, error) {
	v, ok := rule.eval(id)
	if !ok {
		return 0, fmt.Errorf("%w: %s rule %s cannot be evaluated for id %d (overflow or division by a number below 1)",
			engine.ErrInvalidConfig, what, rule, id)
	}
	i := v - n.lo
	if i < 0 || i >= int64(len(n.names)) {
		return 0, fmt.Errorf("%w: %s rule %s gave %d for id %d, want %d..%d",
			engine.ErrInvalidConfig, what, rule, v, id, n.lo, n.lo+int64(len(n.names))-1)
	}
	return int(i), nil
}

func (r *modRouter) shards() ([]Shard, error) {
	out := make([]Shard, 0, len(r.dbs.names)*len(r.tbls.names))
	for d, dn := range r.dbs.names {
		for _, tn := range r.tbls.names {
			out = append(out, Shard{Database: d, DatabaseName: dn, TableName: tn})
		}
	}
	return out, nil
}

func (r *modRouter) tables(time.Time, time.Time) ([]string, error) {
	return nil, fmt.Errorf("%w: sharding: Tables lists the tables of a time range; a mod router has no time (use Shards)", engine.ErrInvalidConfig)
}

func (r *modRouter) String() string {
	t := describe(r.tbls, r.tbRule)
	if db := describe(r.dbs, r.dbRule); db != "" {
		return db + "." + t
	}
	return t
}

func describe(n names, rule *rule) string {
	if !n.ranged {
		return n.prefix
	}
	return n.prefix + "{" + rule.String() + "}" + n.suffix
}

// checkText refuses name text that is not printable UTF-8: a control byte
// (a NUL, a newline) or a broken UTF-8 sequence in a name is a mistake, and
// would reach logs, statistics keys and error messages as is.
func checkText(s string) error {
	for i := 0; i < len(s); {
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 || c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s: byte %q at offset %d: names are printable text", quotePrefix(s), s[i], i)
		}
		i += size
	}
	return nil
}

// checkTableName accepts the names the SQL helpers may substitute into a
// statement: letters, digits, '_', '$' and '.' (schema.table).
func checkTableName(name string) error {
	ok := name != ""
	for _, c := range name {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c == '.') {
			ok = false
			break
		}
	}
	if !ok {
		return fmt.Errorf("%w: table name %q: use letters, digits, '_', '$' and '.' only",
			engine.ErrInvalidConfig, name)
	}
	return nil
}
