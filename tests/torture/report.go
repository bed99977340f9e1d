package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idforge/idforge/engine/snowflake"
)

// report is the run's outcome; with -json it is printed as one object.
type report struct {
	Store          string  `json:"store"`
	Seed           uint64  `json:"seed"`
	Break          string  `json:"break,omitempty"`
	Workers        int     `json:"workers"`
	Duration       string  `json:"duration"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`

	IDsIssued    map[string]int64   `json:"ids_issued"`
	IDsPerSecond map[string]float64 `json:"ids_per_second"`

	// Duplicates are IDs the database's primary key found already inserted
	// by another batch (or twice in one); AckedTwice counts IDs the workers
	// acknowledged more than once. Both must be 0.
	Duplicates int64 `json:"duplicates"`
	AckedTwice int64 `json:"acked_twice"`

	RowsAcked         int64 `json:"rows_acked"`
	RowsFound         int64 `json:"rows_found"`
	RowsLost          int64 `json:"rows_lost"`
	RowsInFlight      int64 `json:"rows_in_flight"`
	RowsInFlightFound int64 `json:"rows_in_flight_found"`
	RowsUnexplained   int64 `json:"rows_unexplained"`

	// TickOverlaps counts pairs of processes that issued snowflake IDs in a
	// same millisecond under one machine ID: duplicates waiting to happen,
	// avoided only if their sequence numbers did not meet. Must be 0.
	TickOverlaps       int      `json:"tick_overlaps"`
	TickOverlapSamples []string `json:"tick_overlap_samples,omitempty"`

	Tables map[string]*tableReport `json:"tables"`

	Faults                        map[string]int              `json:"faults"`
	MaxUnavailableMS              map[string]int64            `json:"max_unavailable_ms"`
	MaxUnavailableByGenerator     map[string]map[string]int64 `json:"max_unavailable_ms_by_generator"`
	MaxUnavailableOutsideFaultsMS map[string]int64            `json:"max_unavailable_outside_faults_ms"`
	Refusals                      map[string]int64            `json:"refusals"`
	RefusalsByFault               map[string]map[string]int64 `json:"refusals_by_fault"`
	// IDsRefusedByFault counts, per fault kind and generator, the NextID
	// calls that returned an error; MaxPauseByFault is the longest time
	// between two successive IDs of a worker, per fault kind and generator.
	IDsRefusedByFault       map[string]map[string]int64 `json:"ids_refused_by_fault"`
	MaxPauseByFault         map[string]map[string]int64 `json:"max_pause_ms_by_fault"`
	MaxPauseOutsideFaultsMS map[string]int64            `json:"max_pause_outside_faults_ms"`
	Restarts                int                         `json:"restarts"`
	Reclaims                int                         `json:"reclaims"`
	Moves                   int                         `json:"moves"`
	Newcomers               int                         `json:"newcomers"`

	// PartitionOverlaps counts chain IDs that a worker cut off by
	// partition_wipe announced after the cut and that another process (the
	// newcomer on the wiped store, a worker still connected) announced too
	// while the fault lasted. Must be 0.
	PartitionOverlaps int64 `json:"partition_overlaps"`

	DuplicateSamples []dupSample `json:"duplicate_samples,omitempty"`
	Problems         []string    `json:"problems"`
	OK               bool        `json:"ok"`
}

// tableReport compares one table's rows with what the workers announced and
// acknowledged.
type tableReport struct {
	IDsIssued     int64 `json:"ids_issued"`
	Acked         int64 `json:"rows_acked"`
	Found         int64 `json:"rows_found"`
	Lost          int64 `json:"rows_lost"`            // acknowledged, not found
	InFlight      int64 `json:"rows_in_flight"`       // announced by a killed worker, never acknowledged
	InFlightFound int64 `json:"rows_in_flight_found"` // of those, committed before the kill
	Unexplained   int64 `json:"rows_unexplained"`     // found, never announced
	Duplicates    int64 `json:"duplicates"`
	AckedTwice    int64 `json:"acked_twice"`
}

// dupSample is one duplicate ID, for diagnosis.
type dupSample struct {
	Generator string `json:"generator"`
	ID        int64  `json:"id"`
	MachineID *int64 `json:"machine_id,omitempty"`
	By        string `json:"by"`
	Already   string `json:"already_inserted_by"`
}

func (s dupSample) String() string {
	m := ""
	if s.MachineID != nil {
		m = fmt.Sprintf(" (machine ID %d)", *s.MachineID)
	}
	return fmt.Sprintf("%s ID %d%s inserted by %s, already by %s", s.Generator, s.ID, m, s.By, s.Already)
}

// sample describes a duplicate event; callers hold mu.
func (d *driver) sample(p *proc, ev event) dupSample {
	s := dupSample{Generator: ev.gen, ID: ev.id, By: p.name, Already: fmt.Sprintf("proc %d batch %d", ev.proc, ev.seq)}
	for _, o := range d.procs {
		if o.id == ev.proc {
			s.Already = fmt.Sprintf("%s batch %d", o.name, ev.seq)
		}
	}
	if ev.gen == genSnowflake {
		if _, machine, _, err := snowflake.Default.Decode(ev.id); err == nil {
			s.MachineID = &machine
		}
	}
	return s
}

// report reads every row back, compares, and builds the report. It runs
// after every process exited.
func (d *driver) report(ctx context.Context, elapsed time.Duration) *report {
	d.mu.Lock()
	defer d.mu.Unlock()
	r := &report{
		Store: d.cfg.store, Seed: d.cfg.seed, Break: d.cfg.brk, Workers: d.cfg.workers,
		Duration: d.cfg.duration.String(), ElapsedSeconds: elapsed.Seconds(),
		IDsIssued: map[string]int64{}, IDsPerSecond: map[string]float64{}, Tables: map[string]*tableReport{},
		Restarts: d.restarts, Reclaims: d.reclaims, Moves: d.moves,
		Newcomers: d.newcomers, PartitionOverlaps: d.overlaps, DuplicateSamples: d.samples,
	}
	d.faultReport(r)
	var total int64
	for _, gen := range generators {
		gs := d.gens[gen]
		t, err := d.verify(ctx, gen, gs)
		if err != nil {
			d.problemLocked("read back %s: %v", tableOf(gen), err)
		}
		r.Tables[gen] = t
		r.IDsIssued[gen] = gs.issued
		r.IDsPerSecond[gen] = float64(gs.issued) / elapsed.Seconds()
		total += gs.issued
		r.Duplicates += t.Duplicates
		r.AckedTwice += t.AckedTwice
		r.RowsAcked += t.Acked
		r.RowsFound += t.Found
		r.RowsLost += t.Lost
		r.RowsInFlight += t.InFlight
		r.RowsInFlightFound += t.InFlightFound
		r.RowsUnexplained += t.Unexplained
	}
	r.IDsPerSecond["total"] = float64(total) / elapsed.Seconds()
	r.TickOverlaps, r.TickOverlapSamples = d.tickOverlaps()
	for _, gen := range generators {
		if r.Tables[gen].Acked == 0 {
			d.problemLocked("no %s row was acknowledged", gen)
		}
	}
	r.Problems = append([]string{}, d.problems...)
	r.OK = r.Duplicates == 0 && r.AckedTwice == 0 && r.TickOverlaps == 0 && r.RowsLost == 0 && r.RowsUnexplained == 0 &&
		r.PartitionOverlaps == 0 && len(r.Problems) == 0
	return r
}

// faultReport fills in what the faults did: injections, unavailability,
// refusals and pauses, each requested kind and generator present even at 0.
// A requested kind never injected is a problem. Callers hold mu.
func (d *driver) faultReport(r *report) {
	r.Faults, r.MaxUnavailableMS = map[string]int{}, map[string]int64{}
	r.MaxUnavailableByGenerator, r.MaxUnavailableOutsideFaultsMS = map[string]map[string]int64{}, map[string]int64{}
	r.Refusals, r.RefusalsByFault = d.refusals, d.refusalsBy
	r.IDsRefusedByFault, r.MaxPauseByFault, r.MaxPauseOutsideFaultsMS = map[string]map[string]int64{}, map[string]map[string]int64{}, map[string]int64{}
	for _, k := range d.cfg.faults {
		r.Faults[k] = d.faults[k]
		r.MaxUnavailableMS[k] = 0 // until a span says otherwise
		r.IDsRefusedByFault[k], r.MaxPauseByFault[k] = map[string]int64{}, map[string]int64{}
		for _, gen := range generators {
			r.IDsRefusedByFault[k][gen] = d.refusedBy[k][gen]
			r.MaxPauseByFault[k][gen] = d.pauses[k][gen].Milliseconds()
		}
		if d.faults[k] == 0 {
			d.problemLocked("fault kind %s was never injected", k)
		}
	}
	for kind, gens := range d.unavail {
		r.MaxUnavailableByGenerator[kind] = map[string]int64{}
		for gen, dur := range gens {
			r.MaxUnavailableByGenerator[kind][gen] = dur.Milliseconds()
			r.MaxUnavailableMS[kind] = max(r.MaxUnavailableMS[kind], dur.Milliseconds())
		}
	}
	for _, gen := range generators {
		r.MaxUnavailableOutsideFaultsMS[gen] = d.outside[gen].Milliseconds()
		r.MaxPauseOutsideFaultsMS[gen] = d.pausesOutside[gen].Milliseconds()
	}
}

// tickOverlaps finds machine IDs under which two processes issued in a same
// millisecond: sorted by first tick, a tenure must start after every earlier
// one of another process ended. Callers hold mu.
func (d *driver) tickOverlaps() (int, []string) {
	var all []tenure
	for _, p := range d.procs {
		all = append(all, p.tenures...)
	}
	slices.SortFunc(all, func(a, b tenure) int {
		return cmp.Or(cmp.Compare(a.machine, b.machine), cmp.Compare(a.firstTick, b.firstTick))
	})
	var n int
	var samples []string
	for i, t := range all {
		for _, e := range all[:i] {
			if e.machine != t.machine || e.proc == t.proc || e.lastTick < t.firstTick {
				continue
			}
			n++
			if len(samples) < 10 {
				samples = append(samples, fmt.Sprintf("machine ID %d: %s issued from %s on, %s until %s (%d ms together)",
					t.machine, t.proc.name, tickTime(t.firstTick), e.proc.name, tickTime(e.lastTick),
					min(e.lastTick, t.lastTick)-t.firstTick+1))
			}
		}
	}
	return n, samples
}

func tickTime(tick int64) string {
	return snowflake.Default.Epoch.Add(time.Duration(tick) * time.Millisecond).Format("15:04:05.000")
}

// verify reads gen's table back in ID order and merges it with the
// acknowledged and the in-flight IDs.
func (d *driver) verify(ctx context.Context, gen string, gs *genStats) (*tableReport, error) {
	t := &tableReport{IDsIssued: gs.issued, Duplicates: gs.dups}
	acked, repeated := union(gs.acked)
	t.AckedTwice = repeated
	t.Acked = countRuns(acked)
	inflight, _ := union(gs.inflight)
	t.InFlight = countRuns(inflight)

	db, err := d.be.rows.open()
	if err != nil {
		return t, err
	}
	defer db.Close()
	var count int64
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM "+tableOf(gen)).Scan(&count); err != nil {
		return t, err
	}
	rows, err := db.QueryContext(ctx, "SELECT id FROM "+tableOf(gen)+" ORDER BY id")
	if err != nil {
		return t, err
	}
	defer rows.Close()
	a, f := cursor{runs: acked}, cursor{runs: inflight}
	var matched int64
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			return t, err
		}
		t.Found++
		switch {
		case a.has(id):
			matched++
		case f.has(id):
			t.InFlightFound++
		default:
			t.Unexplained++
		}
	}
	if err := rows.Err(); err != nil {
		return t, err
	}
	t.Lost = t.Acked - matched
	if count != t.Found {
		d.problemLocked("%s: COUNT(*) says %d rows, reading them all gave %d", tableOf(gen), count, t.Found)
	}
	return t, nil
}

// union sorts runs and merges them into disjoint ones; repeated counts the
// IDs covered more than once.
func union(runs []idRun) (out []idRun, repeated int64) {
	slices.SortFunc(runs, func(a, b idRun) int { return cmp.Compare(a.first, b.first) })
	for _, r := range runs {
		k := len(out) - 1
		if k < 0 || r.first > out[k].end() {
			out = append(out, r)
			continue
		}
		repeated += max(0, min(out[k].end(), r.end())-r.first)
		if r.end() > out[k].end() {
			out[k].n = r.end() - out[k].first
		}
	}
	return out, repeated
}

// intersection counts the IDs that two lists of sorted disjoint runs share.
func intersection(a, b []idRun) int64 {
	var n int64
	for i, j := 0, 0; i < len(a) && j < len(b); {
		n += max(0, min(a[i].end(), b[j].end())-max(a[i].first, b[j].first))
		if a[i].end() < b[j].end() {
			i++
		} else {
			j++
		}
	}
	return n
}

// cursor answers membership for ascending IDs in sorted disjoint runs.
type cursor struct {
	runs []idRun
	i    int
}

func (c *cursor) has(id int64) bool {
	for c.i < len(c.runs) && c.runs[c.i].end() <= id {
		c.i++
	}
	return c.i < len(c.runs) && c.runs[c.i].first <= id
}

// print writes the report for humans.
func (r *report) print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 8, 2, ' ', 0)
	brk := r.Break
	if brk == "" {
		brk = "none"
	}
	fmt.Fprintf(tw, "idforge torture: store %s, %d workers, seed %d, duration %s (ran %.1fs), break %s\n\n",
		r.Store, r.Workers, r.Seed, r.Duration, r.ElapsedSeconds, brk)
	for _, gen := range generators {
		t := r.Tables[gen]
		fmt.Fprintf(tw, "%s\tissued %d (%.0f/s)\tacked %d\tfound %d\tlost %d\tin flight %d (%d committed)\tunexplained %d\tduplicates %d (acked twice %d)\n",
			gen, t.IDsIssued, r.IDsPerSecond[gen], t.Acked, t.Found, t.Lost, t.InFlight, t.InFlightFound, t.Unexplained, t.Duplicates, t.AckedTwice)
	}
	fmt.Fprintf(tw, "total\tissued %d (%.0f/s)\tacked %d\tfound %d\tlost %d\tin flight %d (%d committed)\tunexplained %d\tduplicates %d (acked twice %d)\n\n",
		r.IDsIssued[genSnowflake]+r.IDsIssued[genChain], r.IDsPerSecond["total"], r.RowsAcked, r.RowsFound, r.RowsLost,
		r.RowsInFlight, r.RowsInFlightFound, r.RowsUnexplained, r.Duplicates, r.AckedTwice)
	tw.Flush()

	fmt.Fprintf(tw, "fault\tinjected\tlongest unavailable: snowflake\tchain\tlongest pause: snowflake\tchain\tIDs refused: snowflake\tchain\trefusals\n")
	for _, k := range faultKinds {
		n, ok := r.Faults[k]
		if !ok {
			continue
		}
		u, p, x := r.MaxUnavailableByGenerator[k], r.MaxPauseByFault[k], r.IDsRefusedByFault[k]
		fmt.Fprintf(tw, "%s\t%d\t%d ms\t%d ms\t%d ms\t%d ms\t%d\t%d\t%s\n", k, n, u[genSnowflake], u[genChain],
			p[genSnowflake], p[genChain], x[genSnowflake], x[genChain], refusalList(r.RefusalsByFault[k]))
	}
	o, op := r.MaxUnavailableOutsideFaultsMS, r.MaxPauseOutsideFaultsMS
	fmt.Fprintf(tw, "(outside faults)\t\t%d ms\t%d ms\t%d ms\t%d ms\n", o[genSnowflake], o[genChain], op[genSnowflake], op[genChain])
	tw.Flush()

	fmt.Fprintf(w, "\nrefused NextID calls: %s\n", refusalList(r.Refusals))
	fmt.Fprintf(w, "machine IDs: %d restarts after kill -9, %d reclaimed by intruders, %d moves to a new ID\n",
		r.Restarts, r.Reclaims, r.Moves)
	if n := r.Faults["partition_wipe"]; n > 0 {
		fmt.Fprintf(w, "partition_wipe: %d newcomers on the wiped store, %d chain IDs announced by a cut-off worker and another process\n",
			r.Newcomers, r.PartitionOverlaps)
	}
	fmt.Fprintf(w, "tick overlaps (two processes, one machine ID, one millisecond): %d\n", r.TickOverlaps)
	for _, s := range r.TickOverlapSamples {
		fmt.Fprintf(w, "  %s\n", s)
	}
	for _, s := range r.DuplicateSamples {
		fmt.Fprintf(w, "duplicate %s\n", s)
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "problem: %s\n", p)
	}
	if r.OK {
		fmt.Fprintln(w, "RESULT: PASS")
	} else {
		fmt.Fprintln(w, "RESULT: FAIL")
	}
}

// refusalList renders refusal counts by class, "none" without any.
func refusalList(m map[string]int64) string {
	var out []string
	for _, c := range slices.Sorted(maps.Keys(m)) {
		out = append(out, fmt.Sprintf("%s %d", c, m[c]))
	}
	if len(out) == 0 {
		return "none"
	}
	return strings.Join(out, ", ")
}
