package sharding

import (
	"fmt"
	"math"
	"strings"

	"github.com/idforge/idforge/engine"
)

// Mod configures a mod router over Databases × Tables shards (Tables tables
// in each database). Build it with [NewMod].
//
// The default rules are
//
//	database = id % Databases
//	table    = (id / Databases) % Tables
//
// so the shard is a one-to-one function of id % (Databases × Tables): IDs
// whose residues mod D×T come up evenly fill all D×T shards evenly. (Reusing
// id % Tables for the table, as many setups do, would tie the table to the
// database whenever the counts share a factor: with 2 × 2, database 0 would
// only ever get table 0.)
type Mod struct {
	// Databases is the number of databases, at least 1.
	Databases int
	// Tables is the number of tables in each database, at least 1.
	Tables int

	// DatabasePattern names the databases with one %d verb, e.g. "m%d";
	// default "ds_%d". With one database it may be a plain name.
	DatabasePattern string
	// DatabaseBase is the number in the first database's name (0 by default).
	DatabaseBase int
	// TablePattern names the tables with one %d verb, e.g. "course_%d".
	// Required; with one table per database it may be a plain name.
	TablePattern string
	// TableBase is the number in the first table's name: 0 by default, 1 for
	// course_1, course_2.
	TableBase int

	// DatabaseRule overrides the database rule. It returns the 0-based index
	// in [0, Databases); the base only changes names.
	DatabaseRule Rule
	// TableRule overrides the table rule, returning the 0-based index in
	// [0, Tables). ShardingSphere's course_$->{((id+1)%4).intdiv(2)+1} is
	// ID().Add(1).Mod(4).Div(2) with TableBase 1.
	TableRule Rule
}

// Bounds on a router's shards. A shard count is a deployment, not data: past
// these, a count is a mistake (math.MaxInt32 tables would take the process's
// memory just to name them), and NewMod and NewInterval refuse it.
const (
	// MaxDatabases is the most databases a [Mod] router spreads over.
	MaxDatabases = 4096
	// MaxTables is the most tables per database of a [Mod] router.
	MaxTables = 65536
	// MaxShards is the most shards a router lists: databases × tables of a
	// [Mod], time buckets between Start and End of an [Interval], and the
	// tables one [IntervalRouter.Tables] call may return.
	MaxShards = 65536
)

// ModRouter is a validated [Mod]: it routes IDs and lists its shards. It is
// safe for concurrent use.
type ModRouter struct {
	cfg    Mod
	dbRule Rule
	tbRule Rule
	dbs    []string
	tables []string
}

// NewMod validates cfg and builds the router. A count below 1 or above
// [MaxDatabases], [MaxTables] or (their product) [MaxShards], a negative
// base or one that overflows the names, a pattern without its one integer
// verb, a table name with characters other than letters, digits, '_', '$'
// and '.', or a rule dividing by zero is an error wrapping
// engine.ErrInvalidConfig that names the field.
func NewMod(cfg Mod) (*ModRouter, error) {
	if err := cfg.checkCounts(); err != nil {
		return nil, err
	}
	if cfg.DatabasePattern == "" {
		cfg.DatabasePattern = "ds_%d"
	}
	if cfg.TablePattern == "" {
		return nil, fmt.Errorf("%w: sharding.Mod needs a TablePattern such as \"course_%%d\"", engine.ErrInvalidConfig)
	}
	r := &ModRouter{cfg: cfg, dbRule: cfg.DatabaseRule, tbRule: cfg.TableRule}
	var err error
	if r.dbs, err = expandNames("database", cfg.DatabasePattern, cfg.Databases, cfg.DatabaseBase, false); err != nil {
		return nil, err
	}
	if r.tables, err = expandNames("table", cfg.TablePattern, cfg.Tables, cfg.TableBase, true); err != nil {
		return nil, err
	}
	if r.dbRule == nil {
		r.dbRule = ID().Mod(int64(cfg.Databases))
	}
	if r.tbRule == nil {
		r.tbRule = ID().Div(int64(cfg.Databases)).Mod(int64(cfg.Tables))
	}
	for _, rule := range []Rule{r.dbRule, r.tbRule} {
		if e, ok := rule.(Expr); ok {
			if err := e.validate(); err != nil {
				return nil, err
			}
		}
	}
	return r, nil
}

// checkCounts bounds the counts and bases before anything is allocated.
func (cfg Mod) checkCounts() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: sharding.Mod."+format, append([]any{engine.ErrInvalidConfig}, args...)...)
	}
	switch {
	case cfg.Databases < 1:
		return bad("Databases is %d, want at least 1", cfg.Databases)
	case cfg.Tables < 1:
		return bad("Tables is %d, want at least 1", cfg.Tables)
	case cfg.Databases > MaxDatabases:
		return bad("Databases is %d, more than sharding.MaxDatabases (%d)", cfg.Databases, MaxDatabases)
	case cfg.Tables > MaxTables:
		return bad("Tables is %d, more than sharding.MaxTables (%d)", cfg.Tables, MaxTables)
	case cfg.Databases*cfg.Tables > MaxShards:
		return bad("Databases × Tables is %d × %d = %d shards, more than sharding.MaxShards (%d)",
			cfg.Databases, cfg.Tables, cfg.Databases*cfg.Tables, MaxShards)
	case cfg.DatabaseBase < 0 || cfg.DatabaseBase > math.MaxInt32-cfg.Databases:
		return bad("DatabaseBase is %d, want 0 to %d", cfg.DatabaseBase, math.MaxInt32-cfg.Databases)
	case cfg.TableBase < 0 || cfg.TableBase > math.MaxInt32-cfg.Tables:
		return bad("TableBase is %d, want 0 to %d", cfg.TableBase, math.MaxInt32-cfg.Tables)
	}
	return nil
}

// Route returns the shard of id. A rule that returns an index out of range
// is reported as an error wrapping engine.ErrInvalidConfig, naming the rule,
// the ID and the index.
func (r *ModRouter) Route(id int64) (Shard, error) {
	if id < 0 {
		return Shard{}, negativeID(id)
	}
	db, err := r.index("database", r.dbRule, id, len(r.dbs))
	if err != nil {
		return Shard{}, err
	}
	tb, err := r.index("table", r.tbRule, id, len(r.tables))
	if err != nil {
		return Shard{}, err
	}
	return Shard{Database: db, Table: tb, DatabaseName: r.dbs[db], TableName: r.tables[tb]}, nil
}

func (r *ModRouter) index(what string, rule Rule, id int64, n int) (int, error) {
	i, err := rule.Index(id)
	if err != nil {
		return 0, err
	}
	if i < 0 || i >= int64(n) {
		return 0, fmt.Errorf("%w: %s rule %s gave index %d for id %d, want 0..%d",
			engine.ErrInvalidConfig, what, ruleString(rule), i, id, n-1)
	}
	return int(i), nil
}

// Shards lists all Databases × Tables shards, by database then table.
func (r *ModRouter) Shards() ([]Shard, error) {
	out := make([]Shard, 0, len(r.dbs)*len(r.tables))
	for d, dn := range r.dbs {
		for t, tn := range r.tables {
			out = append(out, Shard{Database: d, Table: t, DatabaseName: dn, TableName: tn})
		}
	}
	return out, nil
}

// String describes the routing in ShardingSphere's inline style, with the
// base added into the expression: "m{id%2}.course_{(id+1)%4/2+1}".
func (r *ModRouter) String() string {
	return describe(r.cfg.DatabasePattern, r.dbs, r.dbRule, r.cfg.DatabaseBase) + "." +
		describe(r.cfg.TablePattern, r.tables, r.tbRule, r.cfg.TableBase)
}

func describe(pattern string, names []string, rule Rule, base int) string {
	if len(names) == 1 {
		return names[0]
	}
	s := ruleString(rule)
	if base != 0 {
		if e, ok := rule.(Expr); ok {
			s = e.Add(int64(base)).String()
		} else {
			s += fmt.Sprintf("+%d", base)
		}
	}
	return strings.Replace(pattern, "%d", "{"+s+"}", 1)
}

// expandNames formats pattern for n consecutive numbers from base and checks
// the pattern holds one integer verb (and, for tables, that the names are
// safe to put into SQL).
func expandNames(what, pattern string, n, base int, sqlSafe bool) ([]string, error) {
	if !strings.Contains(pattern, "%") {
		if n != 1 {
			return nil, fmt.Errorf("%w: %s pattern %q has no %%d verb but there are %d %ss",
				engine.ErrInvalidConfig, what, pattern, n, what)
		}
		if sqlSafe {
			if err := checkTableName(pattern); err != nil {
				return nil, err
			}
		}
		return []string{pattern}, nil
	}
	out := make([]string, n)
	for i := range out {
		name := fmt.Sprintf(pattern, base+i)
		if strings.Contains(name, "%!") {
			return nil, fmt.Errorf("%w: %s pattern %q must hold exactly one integer verb such as %%d, gave %q",
				engine.ErrInvalidConfig, what, pattern, name)
		}
		if sqlSafe {
			if err := checkTableName(name); err != nil {
				return nil, err
			}
		}
		out[i] = name
	}
	return out, nil
}

// checkTableName accepts the names the SQL helpers may substitute into a
// statement unquoted: letters, digits, '_', '$' and '.' (schema.table).
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
