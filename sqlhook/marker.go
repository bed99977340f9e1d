package sqlhook

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/genreg"
)

// ErrNotHooked is the error of a marker that reached a driver without the
// plugin: the database was not opened through [Open] or [Wrap], or a helper
// converted the marker itself before the statement ran.
var ErrNotHooked = errors.New("sqlhook: a marker reached the driver without the plugin")

// Marker stands for an ID in a statement's arguments; make one with [Next].
// Through the plugin each execution of a statement replaces it with an ID
// drawn for that execution, and the marker then reports that ID. It is
// safe for concurrent use, but a marker shared by statements running at the
// same time reports only one of their IDs: give each its own.
type Marker struct {
	kind, name string
	format     string // a dated format, for NextDated

	id   atomic.Int64
	u    atomic.Pointer[uuid.UUID]
	text atomic.Pointer[string]

	// spare is an ID (as the driver takes it, boxed once) drawn for an attempt the
	// driver did not run (driver.ErrSkip, driver.ErrBadConn): the next
	// execution through the same hook takes it instead of drawing, so a
	// retry draws nothing. hasSpare lets the usual draw skip the lock.
	hasSpare  atomic.Bool
	mu        sync.Mutex
	spare     driver.Value
	spareFrom *hook
}

// Next returns a marker for an ID of kind and name ("" for the kind's
// shared default), usable as any argument of any statement run through the
// plugin:
//
//	id := sqlhook.Next("snowflake", "")
//	res, err := db.ExecContext(ctx, "INSERT INTO orders (id, customer) VALUES (?, ?)", id, "ada")
//	n, _ := res.LastInsertId() // == id.ID(), on every driver
//
// Every execution draws a new ID; one marker given twice to one statement
// stands for one ID in both places.
//
// A kind whose generator gives UUIDs, such as "uuidv7", draws a UUID
// instead, sent in the form the column of that database takes: 16 bytes
// (a BINARY(16) column) through github.com/go-sql-driver/mysql, the
// canonical 36-character string elsewhere (a native uuid column on
// PostgreSQL, TEXT on SQLite). The plugin tells the drivers apart by the
// package of the base driver, so a MySQL driver wrapped by another plugin
// first gets strings. [Marker.UUID] reports the UUID; LastInsertId cannot
// carry one, so a statement whose only markers are UUIDs keeps the base
// driver's LastInsertId.
func Next(kind, name string) *Marker { return &Marker{kind: kind, name: name} }

// NextDated returns a marker for the next number of the dated chain name
// in format, sent as the formatted string (INV-20261125-000123), which
// [Marker.Text] then reports:
//
//	inv := sqlhook.NextDated("invoice", "INV-{yyyy}{MM}{dd}-{seq:6}")
//
// See idforge's Registry.Dated for the formats. Settings.Registry must be
// an *idforge.Registry built with a store; LastInsertId is left to the
// base driver, as for UUIDs.
func NextDated(name, format string) *Marker {
	return &Marker{kind: genreg.Chain, name: name, format: format}
}

// ID returns the int64 ID drawn for the marker's latest execution, 0
// before the first and for markers of UUIDs and dated numbers.
func (m *Marker) ID() int64 { return m.id.Load() }

// UUID returns the UUID drawn for the marker's latest execution: zero
// before the first and for markers of int64 IDs and dated numbers.
func (m *Marker) UUID() uuid.UUID {
	if u := m.u.Load(); u != nil {
		return *u
	}
	return uuid.UUID{}
}

// Text returns the number a [NextDated] marker drew for its latest
// execution, "" before the first and for other markers.
func (m *Marker) Text() string {
	if s := m.text.Load(); s != nil {
		return *s
	}
	return ""
}

// record keeps v, the value sent for m, for ID, UUID or Text.
func (m *Marker) record(v driver.Value) {
	switch v := v.(type) {
	case int64:
		m.id.Store(v)
	case []byte:
		u := uuid.UUID(v)
		m.u.Store(&u)
	case string:
		if m.format != "" {
			m.text.Store(&v)
			return
		}
		u, _ := uuid.Parse(v)
		m.u.Store(&u)
	}
}

// Value implements driver.Valuer so that a marker that reaches a driver
// without the plugin fails the statement, with an error wrapping
// [ErrNotHooked], instead of inserting a zero or an ID from a registry
// nobody chose. Through the plugin it is never called.
func (m *Marker) Value() (driver.Value, error) {
	return nil, fmt.Errorf("%w: %s was converted outside sqlhook: open the database with sqlhook.Open or sql.OpenDB(sqlhook.Wrap(...)); "+
		"helpers that convert arguments themselves (sqlx.In) cannot take a marker", ErrNotHooked, m)
}

// String names what the marker draws from, for loggers that print
// arguments.
func (m *Marker) String() string {
	if m == nil {
		return "sqlhook.Next(nil)"
	}
	if m.format != "" {
		return fmt.Sprintf("sqlhook.NextDated(%q, %q)", m.name, m.format)
	}
	return fmt.Sprintf("sqlhook.Next(%q, %q)", m.kind, m.name)
}

// take returns the ID of m for one execution, as a driver takes it (an
// int64, a UUID's string or bytes, a dated number): the spare an attempt
// that did not run left for h, else a new one.
func (h *hook) take(ctx context.Context, m *Marker) (driver.Value, error) {
	if m.hasSpare.Load() {
		m.mu.Lock()
		if m.spareFrom == h {
			v := m.spare
			m.spare, m.spareFrom = nil, nil
			m.hasSpare.Store(false)
			m.record(v)
			m.mu.Unlock()
			return v, nil
		}
		m.mu.Unlock()
	}
	p, err := h.provider()
	if err != nil {
		return nil, err
	}
	v, err := h.draw(ctx, p, m)
	if err != nil {
		return nil, err
	}
	m.record(v)
	return v, nil
}

// datedProvider is the part of *idforge.Registry that NextDated needs.
type datedProvider interface {
	Dated(name, format string) (func(context.Context) (string, error), error)
}

// draw draws a new value for m from p.
func (h *hook) draw(ctx context.Context, p engine.Provider, m *Marker) (driver.Value, error) {
	if m.format != "" {
		dp, ok := p.(datedProvider)
		if !ok {
			return nil, fmt.Errorf("sqlhook: %s: %w: dated chains need an *idforge.Registry built with a store in sqlhook.Settings.Registry", m, engine.ErrUnknownGenerator)
		}
		g, err := dp.Dated(m.name, m.format)
		if err != nil {
			return nil, fmt.Errorf("sqlhook: %s: %w", m, err)
		}
		s, err := g(ctx)
		if err != nil {
			return nil, fmt.Errorf("sqlhook: %s: %w", m, err)
		}
		return s, nil
	}
	g, err := p.Generator(ctx, m.kind, m.name)
	if err != nil {
		return nil, fmt.Errorf("sqlhook: %s: %w%s", m, err, storeHint(m.kind, err))
	}
	if ug, ok := g.(engine.UUIDGenerator); ok {
		u, err := ug.NextUUID(ctx)
		if err != nil {
			return nil, fmt.Errorf("sqlhook: %s: %w", m, err)
		}
		if h.binaryUUID {
			return u[:], nil
		}
		return uuid.UUID(u).String(), nil
	}
	id, err := g.NextID(ctx)
	if err != nil {
		return nil, fmt.Errorf("sqlhook: %s: %w", m, err)
	}
	return id, nil
}

// giveBack keeps v, an ID no statement used, for m's next execution
// through h.
func (h *hook) giveBack(m *Marker, v driver.Value) {
	m.mu.Lock()
	if m.spareFrom == nil {
		m.spare, m.spareFrom = v, h
		m.hasSpare.Store(true)
	}
	m.mu.Unlock()
}

func storeHint(kind string, err error) string {
	if !errors.Is(err, engine.ErrUnknownGenerator) || (kind != genreg.Chain && kind != genreg.Segment) {
		return ""
	}
	return fmt.Sprintf("; kind %q needs a registry built with a store (idforge.New(ctx, idforge.Settings{Store: st})) in sqlhook.Settings.Registry: "+
		"the default registry, used when none is given, has only \"snowflake\"", kind)
}

// drawn is one marker of an execution and the ID it got, as sent.
type drawn struct {
	m *Marker
	v driver.Value
}

// draws are the IDs one execution drew, first the first marker's. The
// first few live in buf, so that draws stays on the stack.
type draws struct {
	h    *hook
	n    int
	buf  [4]drawn
	more []drawn
}

func (d *draws) at(i int) *drawn {
	if i < len(d.buf) {
		return &d.buf[i]
	}
	return &d.more[i-len(d.buf)]
}

func (d *draws) add(g drawn) {
	if d.n < len(d.buf) {
		d.buf[d.n] = g
	} else {
		d.more = append(d.more, g)
	}
	d.n++
}

// hasMarker reports whether args hold a marker: statements without one
// pass through untouched.
func hasMarker(args []driver.NamedValue) bool {
	for i := range args {
		if _, ok := args[i].Value.(*Marker); ok {
			return true
		}
	}
	return false
}

// replace puts an ID in place of every marker in args (a slice database/sql
// builds for each attempt, so it is ours to change), one per marker.
func (d *draws) replace(ctx context.Context, args []driver.NamedValue) error {
	for i := range args {
		m, ok := args[i].Value.(*Marker)
		if !ok {
			continue
		}
		if m == nil {
			d.undo()
			return fmt.Errorf("%w: argument %d is a nil *sqlhook.Marker: make markers with sqlhook.Next", engine.ErrInvalidConfig, args[i].Ordinal)
		}
		var v driver.Value
		for j := range d.n {
			if g := d.at(j); g.m == m {
				v = g.v
				break
			}
		}
		if v == nil {
			var err error
			if v, err = d.h.take(ctx, m); err != nil {
				d.undo()
				return err
			}
			d.add(drawn{m, v})
		}
		args[i].Value = v
	}
	return nil
}

// undo gives back every ID drawn: the statement was not run.
func (d *draws) undo() {
	for j := range d.n {
		g := d.at(j)
		d.h.giveBack(g.m, g.v)
	}
	d.n, d.more = 0, nil
}

// settle gives the IDs back when the driver says the attempt did not run
// (database/sql then retries it, through Prepare or on another
// connection), and otherwise answers LastInsertId with the first int64
// ID; an execution that drew none (only UUIDs or dated numbers) keeps the
// base driver's result.
func (d *draws) settle(res driver.Result, err error) (driver.Result, error) {
	if err != nil {
		if notRun(err) {
			d.undo()
		}
		return res, err
	}
	for j := range d.n {
		if id, ok := d.at(j).v.(int64); ok {
			return result{Result: res, id: id}, nil
		}
	}
	if res == nil { // a driver that answered neither a result nor an error
		return result{}, nil
	}
	return res, nil
}

// notRun reports whether err says the driver did not send the statement.
func notRun(err error) bool {
	return errors.Is(err, driver.ErrSkip) || errors.Is(err, driver.ErrBadConn)
}

// result answers LastInsertId with the ID drawn for the execution's first
// marker, on drivers that have no LastInsertId of their own too.
type result struct {
	driver.Result
	id int64
}

func (r result) LastInsertId() (int64, error) { return r.id, nil }

func (r result) RowsAffected() (int64, error) {
	if r.Result == nil { // a driver that answered neither a result nor an error
		return 0, errors.New("sqlhook: the driver returned no result")
	}
	return r.Result.RowsAffected()
}
