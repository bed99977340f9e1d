// Package shardtest holds what the tests of the GORM and sqlx sharded
// repositories share: the course router, the registry they draw IDs from,
// and pairs of throw-away databases standing for m0 and m1.
package shardtest

import (
	"cmp"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/sharding"
	"github.com/idforge/idforge/tests/testdb"
)

// Backend opens two throw-away databases of one kind, standing for m0 and m1.
type Backend struct {
	Name string
	Open func(t testing.TB) [2]testdb.DB
}

// Backends are SQLite, MariaDB and PostgreSQL; the servers' tests skip when
// the server is down (and fail when IDFORGE_REQUIRE_SERVERS=1).
var Backends = []Backend{
	{"sqlite", func(t testing.TB) [2]testdb.DB { return [2]testdb.DB{testdb.SQLite(t), testdb.SQLite(t)} }},
	{"mariadb", func(t testing.TB) [2]testdb.DB { return [2]testdb.DB{testdb.MariaDB(t), testdb.MariaDB(t)} }},
	{"postgres", func(t testing.TB) [2]testdb.DB { return [2]testdb.DB{testdb.Postgres(t), testdb.Postgres(t)} }},
}

// Start is the time the registry's fake clock stands still at.
var Start = time.Date(2026, 11, 21, 9, 30, 0, 0, time.UTC)

// Registry holds kind "snowflake" on a fake clock standing still: a batch's
// IDs share a tick and carry consecutive sequences, so 4·k IDs split k per
// shard under the course rule.
func Registry(t testing.TB) *genreg.Registry {
	t.Helper()
	g, err := snowflake.New(5, snowflake.Settings{Clock: clocktest.NewFake(Start)})
	if err != nil {
		t.Fatal(err)
	}
	reg := genreg.New()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// OwnerRegistry is [Registry] with snowflake.JSSafe's 53-bit layout, whose
// values leave room for owner-keyed IDs of up to 1,024 residues.
func OwnerRegistry(t testing.TB) *genreg.Registry {
	t.Helper()
	g, err := snowflake.New(5, snowflake.Settings{Layout: snowflake.JSSafe, Clock: clocktest.NewFake(Start)})
	if err != nil {
		t.Fatal(err)
	}
	reg := genreg.New()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reg.Close() })
	return reg
}

// CourseRouter is ShardingSphere's course rule: m{id%2}.course_{(id+1)%4/2+1}.
func CourseRouter(t testing.TB) *sharding.Router {
	t.Helper()
	r, err := sharding.NewMod(sharding.Mod{
		Databases: "m{0..1}", Tables: "course_{1..2}",
		TableRule: "(id+1)%4/2+1",
	})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// MonthRouter puts course rows of 2026 in monthly tables course_202601 ...,
// reading the time on c, the clock of the generator the IDs come from.
func MonthRouter(t testing.TB, c clock.Clock) *sharding.Router {
	t.Helper()
	r, err := sharding.NewInterval(sharding.Interval{Layout: snowflake.Default, Table: "course_{200601}",
		Start: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), End: time.Date(2027, 1, 1, 0, 0, 0, 0, time.UTC), Clock: c})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// Placed checks that every row read from shard s routes there, and that no
// ID was read before (seen collects them).
func Placed(t testing.TB, r *sharding.Router, s sharding.Shard, ids []int64, seen map[int64]bool) {
	t.Helper()
	for _, id := range ids {
		want, err := r.Route(id)
		if err != nil || want != s {
			t.Errorf("row %d found in %s, routes to %s (%v)", id, s, want, err)
		}
		if seen[id] {
			t.Errorf("row %d found twice", id)
		}
		seen[id] = true
	}
}

// Table fills shard s's table, unquoted, into query's {table}.
func Table(s sharding.Shard, query string) string {
	return strings.ReplaceAll(query, "{table}", s.TableName)
}

// Socket returns d, a PostgreSQL database reached over TCP, reached over
// the server's Unix socket in /var/run/postgresql instead, and false when
// d is of another kind or there is no such socket.
func Socket(t testing.TB, d testdb.DB) (testdb.DB, bool) {
	t.Helper()
	const dir = "/var/run/postgresql"
	if d.Name != "postgres" {
		return d, false
	}
	u, err := url.Parse(d.DSN)
	if err != nil {
		t.Fatal(err)
	}
	port := cmp.Or(u.Port(), "5432")
	if _, err := os.Stat(filepath.Join(dir, ".s.PGSQL."+port)); err != nil {
		t.Logf("no PostgreSQL socket: %v", err)
		return d, false
	}
	q := u.Query()
	q.Set("host", dir)
	q.Set("port", port)
	u.Host, u.RawQuery = "", q.Encode()
	d.DSN = u.String()
	return d, true
}
