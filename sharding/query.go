package sharding

import (
	"fmt"
	"slices"
	"strings"
)

// Query selects rows for a repository's Page, Count, Update and Delete:
// the rows of every shard, narrowed by Key, IDs and Where. Key and IDs
// also pick the shards that are read or written: a query with neither
// reaches every shard, in parallel ([Settings.Parallel] at a time).
type Query struct {
	// Key narrows to the rows whose shard key ([Settings.ShardKey]) is
	// Key, in the one shard Key routes to; 0 narrows nothing.
	Key int64
	// IDs narrows to the rows with these IDs (the integer primary key on
	// GORM, the "id" column on sqlx), in the shards they route to. IDs
	// route only when rows are routed by their ID or when they are
	// owner-keyed ([Settings.OwnerResidues]); otherwise IDs is refused.
	IDs []int64
	// Where is an SQL condition on the table's columns with '?'
	// placeholders for Args, e.g. "status = ? AND total > ?", added with
	// AND. It is your SQL, run as written on every shard it reaches.
	Where string
	// Args are Where's values.
	Args []any
	// Order names the column a page is ordered by, as a Go field name or
	// a column name, optionally followed by " DESC": "CreatedAt DESC".
	// Rows with equal values are ordered by ID, in the same direction.
	// Empty means by ID, ascending. The column must hold integers or
	// times: the pages of all shards are merged by comparing its values
	// in Go, which for text would disagree with the database's collation.
	Order string
	// Limit is the most rows a page holds; 0 means no limit (every row
	// selected, merged in order).
	Limit int
	// After is the last row of the previous page (a pointer to it, or
	// the row), as Page returned it: the next page starts after its
	// Order value and ID (keyset paging, no OFFSET). nil starts at the
	// first row.
	After any
}

// MissingError is what Get returns when some of the IDs asked for are not
// stored: IDs lists them, in the order asked. The rows found are in Get's
// destination all the same. It matches [ErrNotFound].
type MissingError struct {
	IDs []int64
}

// Error lists the missing IDs (the first ten of them).
func (e *MissingError) Error() string {
	ids := e.IDs
	more := ""
	if len(ids) > 10 {
		ids, more = ids[:10], fmt.Sprintf(" and %d more", len(e.IDs)-10)
	}
	return fmt.Sprintf("%v: %d IDs not stored: %s%s", ErrNotFound, len(e.IDs),
		strings.Trim(fmt.Sprint(ids), "[]"), more)
}

// Unwrap returns [ErrNotFound].
func (e *MissingError) Unwrap() error { return ErrNotFound }

// FanoutError reports a repository call over several shards that some of
// them failed. Answered lists the shards that succeeded, Failed maps the
// others to their errors. A read returns no rows with it (a page or a
// count missing a shard would be wrong); an Update or Delete committed its
// change in each shard of Answered and in none of Failed. errors.Is and
// errors.As see each shard's error.
type FanoutError struct {
	Answered []Shard
	Failed   map[Shard]error
}

// Error names the failed shards and their errors, and counts those that
// answered.
func (e *FanoutError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "sharding: %d of %d shards failed", len(e.Failed), len(e.Failed)+len(e.Answered))
	for _, s := range e.failed() {
		fmt.Fprintf(&b, "; %s: %v", s, e.Failed[s])
	}
	fmt.Fprintf(&b, " (%d answered)", len(e.Answered))
	return b.String()
}

// Unwrap returns each failed shard's error, ordered by shard.
func (e *FanoutError) Unwrap() []error {
	out := make([]error, 0, len(e.Failed))
	for _, s := range e.failed() {
		out = append(out, e.Failed[s])
	}
	return out
}

// failed lists the failed shards by database, then table name.
func (e *FanoutError) failed() []Shard {
	out := make([]Shard, 0, len(e.Failed))
	for s := range e.Failed {
		out = append(out, s)
	}
	slices.SortFunc(out, func(a, b Shard) int {
		if a.Database != b.Database {
			return a.Database - b.Database
		}
		return strings.Compare(a.TableName, b.TableName)
	})
	return out
}
