package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/idforge/idforge/tests/testdb"
)

// runJSON runs the demo with -json and decodes its one object.
func runJSON(t *testing.T, args ...string) report {
	t.Helper()
	var out, errOut bytes.Buffer
	if code := run(context.Background(), append([]string{"-json"}, args...), &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	dec := json.NewDecoder(&out)
	var rep report
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("decode %q: %v", out.String(), err)
	}
	if dec.More() {
		t.Fatalf("more than one JSON value in %q", out.String())
	}
	return rep
}

// checkContrast asserts what the demo is for: at one insert per
// millisecond the plain snowflake leaves shards empty, idforge's IDs fill all
// four evenly, and every row is read back.
func checkContrast(t *testing.T, rep report, n int) {
	t.Helper()
	if rep.N != n || len(rep.Generators) != 3 {
		t.Fatalf("report has n=%d and %d generators, want n=%d and 3", rep.N, len(rep.Generators), n)
	}
	byName := map[string]generatorReport{}
	for _, g := range rep.Generators {
		byName[g.Name] = g
		if g.RowsReadBack != n {
			t.Errorf("%s: %d rows read back, want %d", g.Name, g.RowsReadBack, n)
		}
		if len(g.Shards) != 4 {
			t.Errorf("%s: %d shards, want 4: %v", g.Name, len(g.Shards), g.Shards)
		}
	}
	empty := 0
	for _, c := range byName["plain-snowflake"].Shards {
		if c == 0 {
			empty++
		}
	}
	if empty < 2 {
		t.Errorf("plain-snowflake left %d shards empty, want at least 2: %v", empty, byName["plain-snowflake"].Shards)
	}
	if byName["plain-snowflake"].MaxMinRatio != nil {
		t.Errorf("plain-snowflake max_min_ratio = %v, want null (a shard is empty)", *byName["plain-snowflake"].MaxMinRatio)
	}
	for _, name := range []string{"idforge-snowflake", "segment-chain"} {
		g := byName[name]
		if g.MaxMinRatio == nil || *g.MaxMinRatio > 1.05 {
			t.Errorf("%s: max/min %v, want <= 1.05: %v", name, g.MaxMinRatio, g.Shards)
		}
	}
}

func TestDemoSQLite(t *testing.T) {
	checkContrast(t, runJSON(t, "-n", "200"), 200)
}

func TestDemoMariaDB(t *testing.T) {
	testdb.MariaDB(t) // skips, or fails when servers are required, if MariaDB is down
	cfg, err := mysql.ParseDSN(testdb.MySQLDSN())
	if err != nil {
		t.Fatal(err)
	}
	cfg.DBName = "DBNAME"
	cfg.ParseTime = true
	dsn := strings.Replace(cfg.FormatDSN(), "DBNAME", "{db}", 1)
	checkContrast(t, runJSON(t, "-n", "200", "-dsn", dsn, "-prefix", testdb.UniqueName("idf_demo_")), 200)
}

func TestDemoPostgres(t *testing.T) {
	testdb.Postgres(t)
	u, err := url.Parse(testdb.PostgresDSN())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/DBNAME"
	dsn := strings.Replace(u.String(), "DBNAME", "{db}", 1)
	checkContrast(t, runJSON(t, "-n", "200", "-dsn", dsn, "-prefix", testdb.UniqueName("idf_demo_")), 200)
}

func TestDemoBadFlags(t *testing.T) {
	for _, args := range [][]string{{"-n", "0"}, {"-rate", "-1"}, {"-dsn", "postgres://x/y"}, {"extra"}, {"-nope"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), args, &out, &errOut); code != 2 {
			t.Errorf("%v: exit %d, want 2", args, code)
		}
		if errOut.Len() == 0 {
			t.Errorf("%v: no message on stderr", args)
		}
	}
}
