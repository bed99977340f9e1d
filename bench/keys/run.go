package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"math"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Variant names, in the default interleaving order.
const (
	VarAuto      = "auto"      // AUTO_INCREMENT / BIGSERIAL
	VarSnowflake = "snowflake" // one idforge snowflake, machine ID 1
	VarChain     = "chain"     // one idforge segment chain
	VarFleet     = "fleet"     // Config.Fleet snowflakes, machine IDs 1..Fleet, writing at once
	VarUUIDv4    = "uuidv4"    // github.com/google/uuid New
	VarUUIDv7    = "uuidv7"    // github.com/google/uuid NewV7
	VarIDUUIDv7  = "iduuidv7"  // idforge's kind "uuidv7" filled by idplugin
)

// Descriptions says what each variant's key is, for the report.
var descriptions = map[string]string{
	VarAuto:      "AUTO_INCREMENT (MariaDB) / BIGSERIAL (PostgreSQL), BIGINT, no idforge",
	VarSnowflake: "idforge snowflake (41/10/12 ms, machine 1) filled by idplugin, BIGINT",
	VarChain:     "idforge segment chain (step 1000) filled by idplugin, BIGINT",
	VarFleet:     "idforge snowflake, one instance per machine ID 1..N writing at once, each through its own idplugin, BIGINT",
	VarUUIDv4:    "github.com/google/uuid v4 (random), BINARY(16) / uuid",
	VarUUIDv7:    "github.com/google/uuid v7 (time-ordered), BINARY(16) / uuid",
	VarIDUUIDv7:  "idforge uuidv7 (time-ordered) filled by idplugin, BINARY(16) / uuid",
}

// Tenths is the number of slices of a run that get their own rows/s.
const Tenths = 10

// Config is one invocation of the benchmark.
type Config struct {
	Rows     int64         `json:"rows"`     // rows per variant and rep
	Reps     int           `json:"reps"`     // interleaved repetitions
	Batch    int           `json:"batch"`    // rows per INSERT
	Fleet    int           `json:"fleet"`    // instances of the fleet variant
	MaxTime  time.Duration `json:"max_time"` // overall bound; 0: none
	Servers  []string      `json:"servers"`  // mariadb, postgres
	Variants []string      `json:"variants"` // in interleaving order
	Command  string        `json:"command"`  // how it was invoked
	Payload  int           `json:"payload"`  // bytes of payload per row
	Accounts int64         `json:"accounts"` // distinct values in the indexed column
	// AccountType is the indexed column's type: "bigint" (8 bytes, the
	// default) or "int" (4 bytes). InnoDB's secondary entries hold it beside
	// the primary key, so it sets how much a narrower key can save there.
	AccountType string `json:"account_type,omitempty"`
	// Index is the column of the secondary index: "account_id" (the
	// default: random over the table, so inserts land all over the index)
	// or "created_at" (the insert time: every insert lands at its end).
	Index string `json:"index,omitempty"`

	Log      *log.Logger `json:"-"` // progress; nil: silent
	MySQL    string      `json:"-"` // server DSN, no database
	Postgres string      `json:"-"` // server URL, any database
}

func defaultConfig() Config {
	return Config{
		Rows:        2_000_000,
		Reps:        3,
		Batch:       1000,
		Fleet:       8,
		MaxTime:     3 * time.Hour,
		Servers:     []string{"mariadb", "postgres"},
		Variants:    []string{VarAuto, VarSnowflake, VarChain, VarFleet, VarUUIDv4, VarUUIDv7, VarIDUUIDv7},
		Payload:     100,
		Accounts:    100_000,
		AccountType: "bigint",
		Index:       "account_id",
		MySQL:       env("IDFORGE_MYSQL_DSN", "root@tcp(127.0.0.1:3306)/"),
		Postgres:    env("IDFORGE_POSTGRES_DSN", "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"),
	}
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func (c *Config) logf(format string, args ...any) {
	if c.Log != nil {
		c.Log.Printf(format, args...)
	}
}

func (c *Config) check() error {
	var errs []error
	if c.Rows < Tenths {
		errs = append(errs, fmt.Errorf("-rows %d: at least %d", c.Rows, Tenths))
	}
	if c.Reps < 1 {
		errs = append(errs, fmt.Errorf("-reps %d: at least 1", c.Reps))
	}
	if c.Batch < 1 {
		errs = append(errs, fmt.Errorf("-batch %d: at least 1", c.Batch))
	}
	if c.Fleet < 1 || c.Fleet > 1023 {
		errs = append(errs, fmt.Errorf("-fleet %d: 1 to 1023 (machine IDs of the default layout)", c.Fleet))
	}
	for _, v := range c.Variants {
		if _, ok := descriptions[v]; !ok {
			errs = append(errs, fmt.Errorf("unknown variant %q", v))
		}
	}
	if c.Accounts < 1 {
		errs = append(errs, fmt.Errorf("-accounts %d: at least 1", c.Accounts))
	}
	if accountSQL(c.AccountType) == "" {
		errs = append(errs, fmt.Errorf("-account-type %q: bigint or int", c.AccountType))
	}
	if c.Index != "account_id" && c.Index != "created_at" {
		errs = append(errs, fmt.Errorf("-index %q: account_id or created_at", c.Index))
	}
	for _, s := range c.Servers {
		if s != "mariadb" && s != "postgres" {
			errs = append(errs, fmt.Errorf("unknown server %q (mariadb, postgres)", s))
		}
	}
	if len(c.Variants) == 0 || len(c.Servers) == 0 {
		errs = append(errs, errors.New("nothing to run"))
	}
	return errors.Join(errs...)
}

// Report is the benchmark's output.
type Report struct {
	Config   Config          `json:"config"`
	Go       string          `json:"go"`
	CPUs     int             `json:"cpus"`
	CPU      string          `json:"cpu,omitempty"`
	LoadAvg  [2]string       `json:"load_avg"` // /proc/loadavg at the start and the end
	Started  time.Time       `json:"started"`
	Finished time.Time       `json:"finished"`
	Servers  []*ServerReport `json:"servers"`
}

// ServerReport holds one server's variants.
type ServerReport struct {
	Name       string           `json:"name"`
	Version    string           `json:"version"`
	Database   string           `json:"database"`          // created for the run and dropped at its end
	BufferPool int64            `json:"buffer_pool_bytes"` // innodb_buffer_pool_size / shared_buffers
	Notes      []string         `json:"notes,omitempty"`
	Variants   []*VariantReport `json:"variants"`
	Checks     []Check          `json:"checks"`
}

// VariantReport holds one variant's runs and their medians.
type VariantReport struct {
	Name   string   `json:"name"`
	Key    string   `json:"key"`
	Runs   []*Trial `json:"runs"`
	Median Summary  `json:"median"`
}

// Trial is one variant filling one fresh table once.
type Trial struct {
	Rep      int       `json:"rep"`
	Rows     int64     `json:"rows"`     // rows inserted
	Complete bool      `json:"complete"` // false when the time bound cut it short
	Seconds  float64   `json:"seconds"`
	RowsPerS []float64 `json:"rows_per_s"` // one per tenth of the rows; 0 for tenths not reached
	Sizes
	Counters
}

// Sizes are the table's on-disk sizes at the end of a run, in bytes.
type Sizes struct {
	Primary   int64 `json:"primary_bytes"`   // InnoDB: the clustered index (the rows); PostgreSQL: the primary key index
	Secondary int64 `json:"secondary_bytes"` // the index on Config.Index
	Table     int64 `json:"table_bytes"`     // InnoDB: data_length (= clustered index); PostgreSQL: the heap
	Indexes   int64 `json:"indexes_bytes"`   // InnoDB: index_length (secondary); PostgreSQL: pg_indexes_size (both indexes)
	// InnoDB only: leaf pages in use (n_leaf_pages). The byte sizes above
	// count allocated pages, which InnoDB reserves in 1 MiB extents.
	PrimaryLeafPages   int64 `json:"primary_leaf_pages,omitempty"`
	SecondaryLeafPages int64 `json:"secondary_leaf_pages,omitempty"`
}

// Counters are the server's I/O counters over the run; nil where the server
// does not expose one.
type Counters struct {
	// BufferPoolReads: InnoDB Innodb_buffer_pool_reads delta (server-wide);
	// PostgreSQL: idx_blks_read + heap_blks_read of the table.
	BufferPoolReads *int64 `json:"buffer_pool_reads,omitempty"`
	// IndexReads: PostgreSQL idx_blks_read of the table's indexes.
	IndexReads *int64 `json:"index_blocks_read,omitempty"`
	// IndexHits: PostgreSQL idx_blks_hit of the table's indexes.
	IndexHits *int64 `json:"index_blocks_hit,omitempty"`
	// PageSplits: InnoDB INNODB_METRICS index_page_splits delta (server-wide).
	PageSplits *int64 `json:"page_splits,omitempty"`
}

// Summary is the median over complete runs.
type Summary struct {
	Runs            int       `json:"runs"`
	RowsPerS        []float64 `json:"rows_per_s"`
	Overall         float64   `json:"overall_rows_per_s"`
	Primary         float64   `json:"primary_bytes"`
	Secondary       float64   `json:"secondary_bytes"`
	Table           float64   `json:"table_bytes"`
	Indexes         float64   `json:"indexes_bytes"`
	BufferPoolReads *float64  `json:"buffer_pool_reads,omitempty"`
	IndexReads      *float64  `json:"index_blocks_read,omitempty"`
	PageSplits      *float64  `json:"page_splits,omitempty"`
}

// Check is one of the benchmark's targets evaluated on the medians.
type Check struct {
	What   string  `json:"what"`
	Value  float64 `json:"value"`
	Target string  `json:"target"`
	Pass   bool    `json:"pass"`
	Note   string  `json:"note,omitempty"`
}

// Run runs the benchmark.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if cfg.MaxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.MaxTime)
		defer cancel()
	}
	rep := &Report{Config: cfg, Go: runtime.Version(), CPUs: runtime.NumCPU(), CPU: cpuModel(), Started: time.Now().UTC()}
	rep.LoadAvg[0] = loadAvg()
	for _, name := range cfg.Servers {
		sr, err := runServer(ctx, &cfg, name)
		if sr != nil {
			rep.Servers = append(rep.Servers, sr)
		}
		if err != nil {
			return rep, fmt.Errorf("%s: %w", name, err)
		}
	}
	rep.LoadAvg[1] = loadAvg()
	rep.Finished = time.Now().UTC()
	return rep, nil
}

func runServer(ctx context.Context, cfg *Config, name string) (_ *ServerReport, err error) {
	dbName := "idforge_keys_" + randomHex(6)
	srv, err := openServer(ctx, cfg, name, dbName)
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := srv.Close(context.Background()); cerr != nil && err == nil {
			err = cerr
		}
	}()
	sr := &ServerReport{Name: name, Database: dbName, Version: srv.Version(), BufferPool: srv.BufferPool(), Notes: srv.Notes()}
	for _, v := range cfg.Variants {
		sr.Variants = append(sr.Variants, &VariantReport{Name: v, Key: descriptions[v], Runs: []*Trial{}})
	}
	cfg.logf("%s %s: database %s, %d rows × %d variants × %d reps", name, sr.Version, dbName, cfg.Rows, len(cfg.Variants), cfg.Reps)
	for rep := 1; rep <= cfg.Reps && ctx.Err() == nil; rep++ {
		for _, vr := range sr.Variants {
			if ctx.Err() != nil {
				break
			}
			r, err := runOne(ctx, cfg, srv, vr.Name, rep)
			if err != nil {
				return sr, fmt.Errorf("%s rep %d: %w", vr.Name, rep, err)
			}
			vr.Runs = append(vr.Runs, r)
			cfg.logf("%s %-9s rep %d: %d rows in %.1f s, rows/s by tenth %s, primary %s, secondary %s",
				name, vr.Name, rep, r.Rows, r.Seconds, fmtRates(r.RowsPerS), mib(r.Primary), mib(r.Secondary))
		}
	}
	for _, vr := range sr.Variants {
		vr.Median = summarize(vr.Runs)
	}
	sr.Checks = checks(sr)
	return sr, nil
}

// runOne fills a fresh table with cfg.Rows rows of one variant.
func runOne(ctx context.Context, cfg *Config, srv *server, variant string, rep int) (*Trial, error) {
	table := "keys_" + variant
	kind := pkInt
	switch variant {
	case VarAuto:
		kind = pkAuto
	case VarUUIDv4, VarUUIDv7, VarIDUUIDv7:
		kind = pkUUID
	}
	if err := srv.CreateTable(ctx, table, kind); err != nil {
		return nil, err
	}
	defer srv.DropTable(context.Background(), table)
	before, err := srv.Counters(ctx, table)
	if err != nil {
		return nil, err
	}
	writers, err := newWriters(cfg, srv, variant, table)
	if err != nil {
		return nil, err
	}
	defer closeAll(writers)

	start := time.Now()
	prog := newProgress(cfg.Rows, start)
	var wg sync.WaitGroup
	errs := make([]error, len(writers))
	for i, w := range writers {
		share := cfg.Rows / int64(len(writers))
		if int64(i) < cfg.Rows%int64(len(writers)) {
			share++
		}
		wg.Go(func() { errs[i] = w.write(ctx, share, cfg.Batch, prog) })
	}
	wg.Wait()
	elapsed := time.Since(start)
	complete := true
	for _, e := range errs {
		if e != nil {
			if ctx.Err() == nil {
				return nil, e
			}
			complete = false
		}
	}
	closeAll(writers)
	r := &Trial{Rep: rep, Rows: prog.rows(), Complete: complete && prog.rows() == cfg.Rows, Seconds: elapsed.Seconds(), RowsPerS: prog.rates()}
	// The measurements below run even when ctx ended: a short run is still reported.
	mctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if r.Sizes, err = srv.Sizes(mctx, table); err != nil {
		return nil, err
	}
	after, err := srv.Counters(mctx, table)
	if err != nil {
		return nil, err
	}
	r.Counters = after.minus(before)
	return r, nil
}

// progress records when each tenth of the rows was reached. A boundary
// inside a batch is placed by linear interpolation between the end of the
// previous batch (any writer's) and the end of this one, so a batch that
// spans several tenths lends its rate to each.
type progress struct {
	mu     sync.Mutex
	total  int64
	done   int64
	lastAt time.Time // when done was last raised (the start at first)
	start  time.Time
	at     [Tenths]time.Time
}

func newProgress(total int64, start time.Time) *progress {
	return &progress{total: total, start: start, lastAt: start}
}

func (p *progress) add(n int64) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	prev := p.done
	p.done += n
	for k := range Tenths {
		if b := p.boundary(k); p.at[k].IsZero() && p.done >= b && n > 0 {
			frac := float64(b-prev) / float64(n)
			p.at[k] = p.lastAt.Add(time.Duration(frac * float64(now.Sub(p.lastAt))))
		}
	}
	p.lastAt = now
}

// boundary is the row count that ends tenth k.
func (p *progress) boundary(k int) int64 { return p.total * int64(k+1) / Tenths }

func (p *progress) rows() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// rates is rows/s in each tenth; 0 for tenths not reached.
func (p *progress) rates() []float64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]float64, Tenths)
	prevT, prevN := p.start, int64(0)
	for k := range Tenths {
		if p.at[k].IsZero() {
			break
		}
		n := p.boundary(k) - prevN
		if d := p.at[k].Sub(prevT).Seconds(); d > 0 {
			out[k] = float64(n) / d
		}
		prevT, prevN = p.at[k], p.boundary(k)
	}
	return out
}

func (a Counters) minus(b Counters) Counters {
	sub := func(x, y *int64) *int64 {
		if x == nil || y == nil {
			return nil
		}
		d := *x - *y
		return &d
	}
	return Counters{
		BufferPoolReads: sub(a.BufferPoolReads, b.BufferPoolReads),
		IndexReads:      sub(a.IndexReads, b.IndexReads),
		IndexHits:       sub(a.IndexHits, b.IndexHits),
		PageSplits:      sub(a.PageSplits, b.PageSplits),
	}
}

func summarize(runs []*Trial) Summary {
	var done []*Trial
	for _, r := range runs {
		if r.Complete {
			done = append(done, r)
		}
	}
	s := Summary{Runs: len(done), RowsPerS: make([]float64, Tenths)}
	if len(done) == 0 {
		return s
	}
	med := func(f func(*Trial) float64) float64 {
		v := make([]float64, len(done))
		for i, r := range done {
			v[i] = f(r)
		}
		return median(v)
	}
	medp := func(f func(*Trial) *int64) *float64 {
		v := make([]float64, 0, len(done))
		for _, r := range done {
			if p := f(r); p != nil {
				v = append(v, float64(*p))
			}
		}
		if len(v) == 0 {
			return nil
		}
		m := median(v)
		return &m
	}
	for k := range Tenths {
		s.RowsPerS[k] = med(func(r *Trial) float64 { return r.RowsPerS[k] })
	}
	s.Overall = med(func(r *Trial) float64 { return float64(r.Rows) / r.Seconds })
	s.Primary = med(func(r *Trial) float64 { return float64(r.Primary) })
	s.Secondary = med(func(r *Trial) float64 { return float64(r.Secondary) })
	s.Table = med(func(r *Trial) float64 { return float64(r.Table) })
	s.Indexes = med(func(r *Trial) float64 { return float64(r.Indexes) })
	s.BufferPoolReads = medp(func(r *Trial) *int64 { return r.BufferPoolReads })
	s.IndexReads = medp(func(r *Trial) *int64 { return r.IndexReads })
	s.PageSplits = medp(func(r *Trial) *int64 { return r.PageSplits })
	return s
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if n := len(v); n%2 == 1 {
		return v[n/2]
	} else {
		return (v[n/2-1] + v[n/2]) / 2
	}
}

// checks evaluates the benchmark's targets for the variants present. Sizes are
// compared as ratios of their medians (they barely move from rep to rep).
// Rows/s are compared rep by rep: the variants of one rep run one after
// the other, so a ratio within a rep cancels the machine's drift between
// reps, and the check's value is the median of those paired ratios; the
// note gives their range and the ratio of the medians beside it.
func checks(sr *ServerReport) []Check {
	get := func(name string) *VariantReport {
		for _, v := range sr.Variants {
			if v.Name == name && v.Median.Runs > 0 {
				return v
			}
		}
		return nil
	}
	var out []Check
	add := func(what string, v, target float64, atLeast bool, note string) {
		c := Check{What: what, Value: math.Round(v*1000) / 1000, Note: note}
		if atLeast {
			c.Target, c.Pass = fmt.Sprintf("≥ %g", target), v >= target
		} else {
			c.Target, c.Pass = fmt.Sprintf("≤ %g", target), v <= target
		}
		out = append(out, c)
	}
	size := func(what string, a, b *VariantReport, f func(*Summary) float64, target float64) {
		if a == nil || b == nil || f(&b.Median) == 0 {
			return
		}
		add(what, f(&a.Median)/f(&b.Median), target, false, "")
	}
	lastTenth := func(what string, a, b *VariantReport, target float64) {
		if a == nil || b == nil {
			return
		}
		byRep := make(map[int]float64)
		for _, r := range b.Runs {
			if r.Complete && r.RowsPerS[Tenths-1] > 0 {
				byRep[r.Rep] = r.RowsPerS[Tenths-1]
			}
		}
		var paired []float64
		for _, r := range a.Runs {
			if d, ok := byRep[r.Rep]; ok && r.Complete {
				paired = append(paired, r.RowsPerS[Tenths-1]/d)
			}
		}
		ofMedians := a.Median.RowsPerS[Tenths-1] / b.Median.RowsPerS[Tenths-1]
		if len(paired) == 0 {
			add(what, ofMedians, target, true, "no rep ran both: ratio of the medians")
			return
		}
		add(what, median(paired), target, true, fmt.Sprintf("median of %d per-rep ratios (%.3f–%.3f); ratio of the medians %.3f",
			len(paired), slices.Min(paired), slices.Max(paired), ofMedians))
	}
	primary := func(s *Summary) float64 { return s.Primary }
	secondary := func(s *Summary) float64 { return s.Secondary }
	auto, v4, v7 := get(VarAuto), get(VarUUIDv4), get(VarUUIDv7)
	// idforge's UUIDv7 keys are as local as the peer's: reported beside them.
	lastTenth(VarIDUUIDv7+" / uuidv7 rows/s, last tenth", get(VarIDUUIDv7), v7, 0.95)
	size(VarIDUUIDv7+" / uuidv7 primary index size", get(VarIDUUIDv7), v7, primary, 1.05)
	for _, name := range []string{VarSnowflake, VarChain, VarFleet} {
		v := get(name)
		lastTenth(name+" / auto rows/s, last tenth", v, auto, 0.95)
		lastTenth(name+" / uuidv4 rows/s, last tenth", v, v4, 2)
		size(name+" / auto primary index size", v, auto, primary, 1.1)
		size(name+" / uuidv7 secondary index size", v, v7, secondary, 0.7)
	}
	for i := range out {
		c := &out[i]
		var notes []string
		if c.Note != "" {
			notes = append(notes, c.Note)
		}
		if sr.Name == "postgres" && strings.HasSuffix(c.What, "secondary index size") {
			notes = append(notes, "not a target here: PostgreSQL's secondary entries point at the heap, not at the key")
		}
		if strings.HasPrefix(c.What, VarFleet+" ") {
			notes = append(notes, "reported, not a target: the targets are for one instance")
		}
		c.Note = strings.Join(notes, "; ")
	}
	return out
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

func fmtRates(v []float64) string {
	parts := make([]string, len(v))
	for i, x := range v {
		parts[i] = fmt.Sprintf("%.0f", x)
	}
	return strings.Join(parts, " ")
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
