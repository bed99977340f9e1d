package sqlstore

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/schema"
	"github.com/idforge/idforge/tests/testdb"
)

// TestOpenAddsHolderColumn: tables created by the DDL from before the
// machine table's holder column get it at Open (from several pools at
// once), and a row an older version left behind goes back to its stable
// owner, whose holding the older version did not record.
func TestOpenAddsHolderColumn(t *testing.T) {
	ctx := context.Background()
	for _, d := range testdb.All(t) {
		t.Run(d.Name, func(t *testing.T) {
			dialect, err := schema.ParseDialect(d.Driver)
			if err != nil {
				t.Fatal(err)
			}
			ddl, err := schema.DDL(dialect, "")
			if err != nil {
				t.Fatal(err)
			}
			var stmts []string // one per table: drop the comments, split at ';'
			var code []string
			for line := range strings.Lines(ddl) {
				if c, _, _ := strings.Cut(line, "--"); strings.TrimSpace(c) != "" {
					code = append(code, strings.TrimRight(c, " \t\n")+"\n")
				}
			}
			for stmt := range strings.SplitSeq(strings.Join(code, ""), ";") {
				if strings.TrimSpace(stmt) != "" {
					stmts = append(stmts, stmt)
				}
			}
			db := d.Open(t)
			for _, stmt := range stmts {
				var old []string
				for line := range strings.Lines(stmt) {
					if !strings.HasPrefix(strings.TrimSpace(line), "holder ") {
						old = append(old, line)
					}
				}
				if _, err := db.ExecContext(ctx, strings.Join(old, "")); err != nil {
					t.Fatal(err)
				}
			}
			if rows, err := db.QueryContext(ctx, "SELECT holder FROM idforge_machine"); err == nil {
				rows.Close()
				t.Fatal("the table of the older DDL has a holder column")
			}
			now := time.Now().UnixMilli()
			if _, err := db.ExecContext(ctx, d.Rebind("INSERT INTO idforge_machine (namespace, machine_id, instance_id, stable, last_timestamp) VALUES ('svc', 0, 'pod-0', ?, ?)"),
				true, now); err != nil {
				t.Fatal(err)
			}

			stores := make([]*Store, 3)
			var wg sync.WaitGroup
			errs := make([]error, len(stores))
			for i := range stores {
				pool := d.Open(t)
				wg.Go(func() { stores[i], errs[i] = Open(ctx, pool, Settings{ResetGrace: -1}) })
			}
			wg.Wait()
			for i, err := range errs {
				if err != nil {
					t.Fatalf("Open #%d on the older tables: %v", i, err)
				}
				defer stores[i].Close()
			}
			pod := machine.Instance{Namespace: "svc", ID: "pod-0", Stable: true}
			st, err := stores[0].Distribute(ctx, pod, 10, time.Minute)
			if err != nil || st.MachineID != 0 || st.LastTimestamp != now || st.Holder == "" {
				t.Fatalf("pod-0's row from the older version: Distribute = %+v, %v; want machine ID 0, LastTimestamp %d, a holder", st, err, now)
			}
			if err := stores[1].Guard(ctx, pod, st); err != nil {
				t.Fatalf("Guard after the upgrade: %v", err)
			}
		})
	}
}
