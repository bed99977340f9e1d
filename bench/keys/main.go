// Command keys measures how primary keys shape a B-tree on real MariaDB
// (InnoDB) and PostgreSQL: the same table (a 100-byte payload and one
// secondary index) filled through GORM's CreateInBatches with keys from
// AUTO_INCREMENT / BIGSERIAL, an idforge snowflake, an idforge segment chain,
// eight idforge snowflake instances writing at once (eight machine IDs
// interleaved), UUIDv4 and UUIDv7 (BINARY(16) / uuid). The idforge keys are
// filled by the GORM plugin (idplugin), the path users run.
//
// For every variant it reports rows/s for each tenth of the run, the size of
// the primary and secondary index at the end, and buffer-pool reads and page
// splits where the server exposes them. Variants run interleaved (A B C …
// A B C …) -reps times; medians are reported. It writes JSON and one SVG
// chart per server (rows/s against rows in the table).
//
//	cd bench
//	go run ./keys                                   # 2,000,000 rows per variant, 3 reps, both servers
//	go run ./keys -rows 500000 -reps 3 -servers mariadb -json /tmp/keys/keys.json -svg /tmp/keys
//
// It creates its own database on each server (idforge_keys_<random>) and
// drops it at the end. Addresses come from IDFORGE_MYSQL_DSN and
// IDFORGE_POSTGRES_DSN (defaults root@tcp(127.0.0.1:3306)/ and
// postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
)

func main() {
	cfg := defaultConfig()
	var servers, variants, jsonPath, svgDir, replot string
	flag.Int64Var(&cfg.Rows, "rows", cfg.Rows, "rows per variant and rep")
	flag.IntVar(&cfg.Reps, "reps", cfg.Reps, "times every variant runs, interleaved with the others")
	flag.IntVar(&cfg.Batch, "batch", cfg.Batch, "rows per INSERT (CreateInBatches)")
	flag.IntVar(&cfg.Fleet, "fleet", cfg.Fleet, "instances of the fleet variant, writing at once")
	flag.Int64Var(&cfg.Accounts, "accounts", cfg.Accounts, "distinct account_id values, drawn uniformly for each row")
	flag.StringVar(&cfg.AccountType, "account-type", cfg.AccountType, "type of the indexed account_id column: bigint or int")
	flag.StringVar(&cfg.Index, "index", cfg.Index, "column of the secondary index: account_id (random order) or created_at (insert order)")
	flag.DurationVar(&cfg.MaxTime, "time", cfg.MaxTime, "stop after this long overall (runs cut short are marked incomplete); 0: no limit")
	flag.StringVar(&servers, "servers", strings.Join(cfg.Servers, ","), "servers to run on: mariadb, postgres")
	flag.StringVar(&variants, "variants", strings.Join(cfg.Variants, ","), "variants, in the order they interleave")
	flag.StringVar(&jsonPath, "json", "", "write the JSON report here (default: standard output)")
	flag.StringVar(&svgDir, "svg", "", "write keys-<server>.svg charts into this directory")
	flag.StringVar(&replot, "replot", "", "run nothing: read this JSON report, evaluate its checks again and redraw its charts (-svg) and tables")
	flag.Parse()
	if replot != "" {
		b, err := os.ReadFile(replot)
		if err != nil {
			log.Fatal(err)
		}
		var rep Report
		if err := json.Unmarshal(b, &rep); err != nil {
			log.Fatal(err)
		}
		for _, sr := range rep.Servers {
			sr.Checks = checks(sr)
		}
		if jsonPath != "" {
			writeJSON(&rep, jsonPath)
		}
		output(&rep, svgDir)
		return
	}
	cfg.Servers = splitList(servers)
	cfg.Variants = splitList(variants)
	cfg.Command = "go run ./keys " + strings.Join(os.Args[1:], " ")
	cfg.Log = log.New(os.Stderr, "keys: ", log.Ltime)

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	rep, runErr := Run(ctx, cfg)
	if rep == nil {
		log.Fatal(runErr)
	}
	// A run that failed part way still writes what it measured.
	writeJSON(rep, jsonPath)
	output(rep, svgDir)
	if runErr != nil {
		log.Fatal(runErr)
	}
}

// writeJSON writes the report to path, or to standard output if path is "".
func writeJSON(rep *Report, path string) {
	out, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		log.Fatal(err)
	}
	out = append(out, '\n')
	if path == "" {
		os.Stdout.Write(out)
	} else if err := os.WriteFile(path, out, 0o644); err != nil {
		log.Fatal(err)
	}
}

// output draws the charts into svgDir (if set) and prints the tables.
func output(rep *Report, svgDir string) {
	if svgDir != "" {
		for _, s := range rep.Servers {
			path := filepath.Join(svgDir, "keys-"+s.Name+".svg")
			if err := os.WriteFile(path, []byte(Chart(rep, s)), 0o644); err != nil {
				log.Fatal(err)
			}
		}
	}
	for _, s := range rep.Servers {
		fmt.Fprint(os.Stderr, Table(s))
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}
