package main

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Workers talk to the driver in lines on stdout, one event per line, flushed
// at once so a kill -9 loses at most the line being written (the driver
// ignores a last line without its newline):
//
//	M <machine ID> <unix ms>                    machine ID in use (at start and after a move)
//	S <gen> <unix ms>                           first ID of a generator in this process
//	B <seq> <gen> <start unix ms> <run>...      a batch about to be inserted, its IDs as runs:
//	                                            "<id>" or "<first id>:<length>" of consecutive IDs
//	C <seq> <duplicates>                        batch seq committed (acknowledged)
//	D <gen> <id> <other proc> <other batch>     a duplicate: id was already inserted by that batch
//	U <gen> <start unix ms> <µs> <gap µs> <class>=<n>,…
//	                                            NextID was unavailable that long, the ID came that long after
//	                                            the previous one (rate-limit idling left out), refusals by class (or -)
//	R <gen> <unix ms>                           NextID refused, the first time in a call (a U line follows)
//
// The driver writes commands to a worker's stdin:
//
//	clock <offset ns>   from the next snowflake ID on, the worker's clock reads the system clock plus the offset
//	quit                finish the current batch, give the machine ID back, exit
const (
	evMachine   = 'M'
	evStart     = 'S'
	evBatch     = 'B'
	evCommit    = 'C'
	evDuplicate = 'D'
	evUnavail   = 'U'
	evRefused   = 'R'
)

// Generators under test and the table each one's rows go to.
const (
	genSnowflake = "snowflake"
	genChain     = "chain"
)

var generators = []string{genSnowflake, genChain}

func tableOf(gen string) string { return "t_" + gen }

// emitter writes events; safe for concurrent use.
type emitter struct {
	mu sync.Mutex
	w  *bufio.Writer
}

func newEmitter(w io.Writer) *emitter { return &emitter{w: bufio.NewWriterSize(w, 64<<10)} }

func (e *emitter) line(format string, args ...any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	fmt.Fprintf(e.w, format, args...)
	e.w.WriteByte('\n')
	e.w.Flush() // an error means the driver is gone; the worker notices on stdin
}

func (e *emitter) machine(id int64) {
	e.line("%c %d %d", evMachine, id, time.Now().UnixMilli())
}

func (e *emitter) start(gen string, t time.Time) { e.line("%c %s %d", evStart, gen, t.UnixMilli()) }

func (e *emitter) batch(seq int64, gen string, start time.Time, ids []int64) {
	b := make([]byte, 0, 64)
	b = fmt.Appendf(b, "%c %d %s %d", evBatch, seq, gen, start.UnixMilli())
	for _, r := range toRuns(ids) {
		b = append(b, ' ')
		b = strconv.AppendInt(b, r.first, 10)
		if r.n > 1 {
			b = append(b, ':')
			b = strconv.AppendInt(b, r.n, 10)
		}
	}
	e.line("%s", b)
}

// idRun is n consecutive IDs from first on. A batch's IDs travel and are
// kept as runs: a segment chain hands out consecutive IDs, and a snowflake
// generator does within a millisecond, so a batch is one run or a few.
type idRun struct{ first, n int64 }

func (r idRun) end() int64 { return r.first + r.n }

// toRuns encodes ids, in their order, as runs.
func toRuns(ids []int64) []idRun {
	var out []idRun
	for _, id := range ids {
		if k := len(out) - 1; k >= 0 && out[k].end() == id {
			out[k].n++
			continue
		}
		out = append(out, idRun{first: id, n: 1})
	}
	return out
}

// countRuns returns how many IDs runs hold.
func countRuns(runs []idRun) int64 {
	var n int64
	for _, r := range runs {
		n += r.n
	}
	return n
}

func (e *emitter) commit(seq int64, dups int) { e.line("%c %d %d", evCommit, seq, dups) }

func (e *emitter) duplicate(gen string, id int64, proc, batch int64) {
	e.line("%c %s %d %d %d", evDuplicate, gen, id, proc, batch)
}

func (e *emitter) unavailable(gen string, start time.Time, d, gap time.Duration, refusals map[string]int) {
	classes := "-"
	if len(refusals) > 0 {
		var parts []string
		for _, c := range slices.Sorted(maps.Keys(refusals)) {
			parts = append(parts, c+"="+strconv.Itoa(refusals[c]))
		}
		classes = strings.Join(parts, ",")
	}
	e.line("%c %s %d %d %d %s", evUnavail, gen, start.UnixMilli(), d.Microseconds(), gap.Microseconds(), classes)
}

func (e *emitter) refused(gen string, t time.Time) { e.line("%c %s %d", evRefused, gen, t.UnixMilli()) }

// event is one parsed worker line.
type event struct {
	kind     byte
	gen      string
	id       int64 // M: machine ID; D: the duplicate ID
	seq      int64 // B, C: batch number; D: the other batch
	proc     int64 // D: the other process
	n        int64 // C: duplicates
	at       time.Time
	dur      time.Duration
	gap      time.Duration // U: since the previous ID
	runs     []idRun
	refusals map[string]int
}

// parseEvent parses one line without its newline.
func parseEvent(line string) (event, error) {
	f := strings.Fields(line)
	bad := func(err error) (event, error) { return event{}, fmt.Errorf("bad worker line %.80q: %w", line, err) }
	if len(f) == 0 || len(f[0]) != 1 {
		return bad(fmt.Errorf("no event letter"))
	}
	ev := event{kind: f[0][0]}
	args := f[1:]
	want := map[byte]int{evMachine: 2, evStart: 2, evCommit: 2, evDuplicate: 4, evUnavail: 5, evRefused: 2}[ev.kind]
	if ev.kind == evBatch {
		want = 3 // and the IDs
	}
	if want == 0 || len(args) < want || (ev.kind != evBatch && len(args) != want) {
		return bad(fmt.Errorf("unknown event or wrong field count"))
	}
	ints := func(ss ...string) ([]int64, error) {
		out := make([]int64, len(ss))
		for i, s := range ss {
			v, err := strconv.ParseInt(s, 10, 64)
			if err != nil {
				return nil, err
			}
			out[i] = v
		}
		return out, nil
	}
	var v []int64
	var err error
	switch ev.kind {
	case evMachine:
		if v, err = ints(args...); err == nil {
			ev.id, ev.at = v[0], time.UnixMilli(v[1])
		}
	case evStart:
		ev.gen = args[0]
		if v, err = ints(args[1]); err == nil {
			ev.at = time.UnixMilli(v[0])
		}
	case evBatch:
		ev.gen = args[1]
		if v, err = ints(args[0], args[2]); err == nil {
			ev.seq, ev.at = v[0], time.UnixMilli(v[1])
			ev.runs, err = parseRuns(args[3:])
		}
	case evCommit:
		if v, err = ints(args...); err == nil {
			ev.seq, ev.n = v[0], v[1]
		}
	case evDuplicate:
		ev.gen = args[0]
		if v, err = ints(args[1:]...); err == nil {
			ev.id, ev.proc, ev.seq = v[0], v[1], v[2]
		}
	case evRefused:
		ev.gen = args[0]
		if v, err = ints(args[1]); err == nil {
			ev.at = time.UnixMilli(v[0])
		}
	case evUnavail:
		ev.gen = args[0]
		if v, err = ints(args[1], args[2], args[3]); err == nil {
			ev.at, ev.dur, ev.gap = time.UnixMilli(v[0]), time.Duration(v[1])*time.Microsecond, time.Duration(v[2])*time.Microsecond
			ev.refusals, err = parseRefusals(args[4])
		}
	}
	if err == nil && ev.gen != "" && !slices.Contains(generators, ev.gen) {
		err = fmt.Errorf("unknown generator %q", ev.gen)
	}
	if err != nil {
		return bad(err)
	}
	return ev, nil
}

func parseRefusals(s string) (map[string]int, error) {
	if s == "-" {
		return nil, nil
	}
	out := map[string]int{}
	for part := range strings.SplitSeq(s, ",") {
		class, n, ok := strings.Cut(part, "=")
		v, err := strconv.Atoi(n)
		if !ok || err != nil {
			return nil, fmt.Errorf("refusal count %q", part)
		}
		out[class] += v
	}
	return out, nil
}

func parseRuns(tokens []string) ([]idRun, error) {
	out := make([]idRun, len(tokens))
	for i, t := range tokens {
		first, n, hasLen := strings.Cut(t, ":")
		r := idRun{n: 1}
		var err error
		if r.first, err = strconv.ParseInt(first, 10, 64); err != nil {
			return nil, err
		}
		if hasLen {
			if r.n, err = strconv.ParseInt(n, 10, 64); err != nil || r.n < 1 {
				return nil, fmt.Errorf("run %q", t)
			}
		}
		out[i] = r
	}
	return out, nil
}
