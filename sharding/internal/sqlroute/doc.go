// Package sqlroute reads one SQL statement as GORM (or a user) sends it to
// the driver and says how to route it over the shards of a logical table:
// which sharded table it touches, what kind of statement it is, the values
// its routing columns are bound to, and the same statement with the logical
// table replaced by a physical one.
//
// [Parse] takes the statement, its args and the sharded [Table]s. The
// statement may be MySQL (backtick identifiers, ? placeholders),
// PostgreSQL (double-quoted identifiers, $1..$n) or SQLite (either quote,
// ? or ?NNN). A statement that names no sharded table is returned with
// [Statement.Sharded] false and is the caller's to pass through unchanged.
//
// # Routing values
//
// For an INSERT, [Statement.IDs] and [Statement.Owners] hold the ID and
// owner column of every VALUES row, in row order. For SELECT, UPDATE and
// DELETE they hold the values the column is bound to by the top level of
// WHERE: `key = v`, `v = key` or `key IN (v1, ...)`, plain or qualified by
// the table or its alias, combined with the rest of the condition by AND.
// When nothing binds the column so (an OR at the top, NOT, a range, a
// function of the column, a subquery, a value that is an expression) the
// list is nil: the statement may reach every shard. An OR, or MySQL's ||,
// anywhere in the WHERE outside parentheses and CASE is an OR at the top
// (whatever the parser makes of it), since OR binds loosest. A value is a
// placeholder's arg or a literal (int64 or string).
//
// A statement sent to several shards returns the union of their rows,
// which is its meaning since each row lives in one shard, except where
// rows of different shards combine: aggregates (COUNT, SUM), DISTINCT,
// GROUP BY, ORDER BY with LIMIT, and an outer join that keeps an
// unsharded table's unmatched rows (they come once per shard). Merging
// or refusing those is the caller's.
//
// [Statement.Assigned] reports the routing columns that an UPDATE or an
// upsert sets, so that the caller can refuse to move a row to another
// shard.
//
// # What is refused
//
// A statement that touches a sharded table and cannot be routed is an
// error naming the table: [ErrSeveralTables] when a join or subquery
// reaches two sharded tables or one twice, [ErrMultipleStatements],
// [ErrDDL] for CREATE, ALTER, DROP, TRUNCATE or RENAME of a logical table,
// [ErrSyntax] for what the parser does not read, [ErrUnsupported] for a
// construct whose rewrite could not be checked.
//
// The parser (github.com/longbridgeapp/sqlparser, the one gorm.io/sharding
// uses) reads the statements GORM writes and plain SELECT, INSERT, UPDATE
// and DELETE, but not WITH, casts (::), IN (SELECT ...), row values,
// UPDATE or DELETE with ORDER BY or LIMIT, multi-table UPDATE, REPLACE,
// INSERT ... SET, schema-qualified tables, INTERVAL or ILIKE: on a
// sharded table these are [ErrSyntax]. Its keywords used as column names
// (key, value, user, row...) are read as names, and GORM's NOT x (which
// the parser lacks) as a term that binds nothing. The parser takes every
// AND term after a BETWEEN into the range: those terms bind nothing
// either, so put a routing term before a BETWEEN.
//
// # Rewriting
//
// [Statement.Rewrite] returns the statement's own text with each reference
// to the logical table (FROM, JOIN, INSERT INTO, UPDATE, DELETE FROM, and
// the qualifier of a column such as `orders`.`id`) replaced by the
// physical name, quoted as the reference was. Nothing else changes:
// placeholders, RETURNING, ON CONFLICT, ON DUPLICATE KEY UPDATE, ORDER BY,
// LIMIT and comments stay as sent. The rewrite works on token positions,
// not on the parser's printer, which changes what it prints: MySQL's
// LIMIT 10, 20 (offset 10) comes out as LIMIT 10 OFFSET 20 (offset 20),
// an optimizer hint /*+ ... */ as /* + ... */ (no longer a hint),
// comments elsewhere vanish, and what it cannot read (VALUES(col) in ON
// DUPLICATE KEY UPDATE, DEFAULT in a VALUES row) it cannot print. The
// parse tree is used to read the statement and to check that the tokens
// replaced are exactly its table references.
//
// # Splitting a statement by shard
//
// When the routing values of a statement belong to several shards, the
// caller groups them by shard and calls [Statement.Narrow] once per group:
// the INSERT keeps only that group's VALUES rows, the WHERE keeps only that
// group's elements of the IN list, and the args shrink to match
// (PostgreSQL's $n renumbered). Narrow finds an IN list's elements in
// the text from a placeholder among them; for a list of literals only,
// send [Statement.Rewrite]'s text to each shard of the list instead,
// which is correct too since each row lives in one shard.
package sqlroute
