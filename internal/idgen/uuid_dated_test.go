package idgen

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/uuidv7"
)

type withUUIDs struct {
	ID     uuid.UUID  `idgen:"uuidv7"`
	Text   string     `idgen:"uuidv7"`
	Ptr    *uuid.UUID `idgen:"uuidv7"`
	Raw    [16]byte   `idgen:"uuidv7"`
	Pinned uuid.UUID  `idgen:"uuidv7"`
}

// datedProvider is a registry with kind "uuidv7" and dated chains that
// count per format from 1, as a registry on a store would in its first
// period.
type datedProvider struct {
	*genreg.Registry
	n atomic.Int64
}

func (p *datedProvider) Dated(name, format string) (func(context.Context) (string, error), error) {
	f, err := dated.Parse(format)
	if err != nil {
		return nil, err
	}
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	return func(context.Context) (string, error) { return f.Format(at, p.n.Add(1)) }, nil
}

func newDatedProvider(t *testing.T) *datedProvider {
	reg, _ := counterRegistry(t)
	if err := reg.Register(KindUUIDv7, "", uuidv7.New(clocktest.NewFake(time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)))); err != nil {
		t.Fatal(err)
	}
	return &datedProvider{Registry: reg}
}

// uuid.UUID, [16]byte, pointer and string fields of kind uuidv7 get
// increasing UUIDs (strings in canonical form) by the direct and the
// reflective paths; a set UUID is kept.
func TestUUIDFields(t *testing.T) {
	prov := newDatedProvider(t)
	p, err := NewPlan(reflect.TypeFor[withUUIDs]())
	if err != nil {
		t.Fatal(err)
	}
	fl, err := p.Bind(t.Context(), prov)
	if err != nil {
		t.Fatal(err)
	}
	pinned := uuid.MustParse("00000000-0000-7000-8000-000000000001")
	rows := []withUUIDs{{Pinned: pinned}, {Pinned: pinned}}
	if err := fl.Fill(t.Context(), reflect.ValueOf(rows)); err != nil {
		t.Fatal(err)
	}
	var prev []byte
	for _, r := range rows {
		text, err := uuid.Parse(r.Text)
		if err != nil || r.Text != text.String() || r.Ptr == nil || r.Pinned != pinned {
			t.Fatalf("row %+v: text %q (%v), want canonical; a pointer set; Pinned kept", r, r.Text, err)
		}
		for _, u := range [][16]byte{r.ID, text, *r.Ptr, r.Raw} {
			if uuid.UUID(u).Version() != 7 || bytes.Compare(u[:], prev) <= 0 {
				t.Fatalf("%s after %x: want increasing version 7 UUIDs", uuid.UUID(u), prev)
			}
			prev = bytes.Clone(u[:])
		}
	}
	// The reflective path: a row in an interface, not addressable as is.
	var one withUUIDs
	if err := fl.Fill(t.Context(), reflect.ValueOf([]any{&one})); err != nil || one.ID == uuid.Nil || one.Text == "" {
		t.Fatalf("row through an interface: %+v, %v", one, err)
	}
}

type withDated struct {
	ID     int64   `idgen:"snowflake"`
	Number string  `idgen:"chain,name=invoice,format=INV-{yyyy}{MM}{dd}-{seq:6}"`
	Ptr    *string `idgen:"chain,name=invoice,format=INV-{yyyy}{MM}{dd}-{seq:6}"`
}

func TestDatedFields(t *testing.T) {
	prov := newDatedProvider(t)
	p, err := NewPlan(reflect.TypeFor[withDated]())
	if err != nil {
		t.Fatal(err)
	}
	fl, err := p.Bind(t.Context(), prov)
	if err != nil {
		t.Fatal(err)
	}
	rows := []withDated{{}, {Number: "INV-20260101-000099"}}
	if err := fl.Fill(t.Context(), reflect.ValueOf(rows)); err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(rows[0].Number, " ", *rows[0].Ptr, " ", rows[1].Number, " ", *rows[1].Ptr)
	if want := "INV-20261125-000001 INV-20261125-000002 INV-20260101-000099 INV-20261125-000003"; got != want {
		t.Errorf("numbers %s, want %s", got, want)
	}
	// A provider without dated chains (genreg.Registry) is refused at Bind.
	reg, _ := counterRegistry(t)
	if _, err := p.Bind(t.Context(), reg); !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), "field Number") {
		t.Errorf("Bind to an genreg.Registry: %v; want ErrUnknownGenerator naming the field", err)
	}
}

func TestUUIDAndDatedFieldErrors(t *testing.T) {
	cases := []struct {
		value any
		field string
		why   string
	}{
		{struct {
			ID int64 `idgen:"uuidv7"`
		}{}, "field ID", "cannot hold a UUID"},
		{struct {
			ID [8]byte `idgen:"uuidv7"`
		}{}, "field ID", "cannot hold a UUID"},
		{struct {
			ID uuid.UUID `idgen:"snowflake"`
		}{}, "field ID", `uuid.UUID with kind "uuidv7"`},
		{struct {
			ID string `idgen:"uuidv7,format=radix62"`
		}{}, "field ID", "takes no format"},
		{struct {
			N string `idgen:"snowflake,format=INV-{yyyy}-{seq:4}"`
		}{}, "field N", `for kind "chain"`},
		{struct {
			N string `idgen:"chain,format=INV-{yyyy}-{seq:4}"`
		}{}, "field N", "needs the chain's name"},
		{struct {
			N string `idgen:"chain,name=inv,format=INV-{dd}{MM}{yyyy}-{seq:4}"`
		}{}, "field N", "finer field"},
		{struct {
			N int64 `idgen:"chain,name=inv,format=INV-{yyyy}-{seq:4}"`
		}{}, "field N", "string fields only"},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.value)
		_, err := NewPlan(typ)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "model "+typ.String()+" "+c.field) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: got %v; want ErrInvalidConfig naming %q and saying %q", typ, err, c.field, c.why)
		}
	}
	// An int64 field of a kind whose generator makes UUIDs.
	prov := newDatedProvider(t)
	if err := prov.Register("other", "", uuidv7.New(nil)); err != nil {
		t.Fatal(err)
	}
	p, err := NewPlan(reflect.TypeFor[struct {
		ID int64 `idgen:"other"`
	}]())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Bind(t.Context(), prov); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "gives UUIDs") {
		t.Errorf("int64 field of a UUID kind: %v", err)
	}
}

// A dated field's Floor, asked for a period, reads the largest value of
// that period with a LIKE pattern and answers its counter; a period of
// another length has none.
func TestDatedFloor(t *testing.T) {
	p, err := NewPlan(reflect.TypeFor[withDated]())
	if err != nil {
		t.Fatal(err)
	}
	f := p.Fields[1].Field
	var stmts []string
	name := f.FloorName()
	floor := f.Floor("mysql", "`invoices`", "`number`", func(_ context.Context, q string, dest *sql.NullString) error {
		stmts = append(stmts, q)
		*dest = sql.NullString{String: "INV-20261125-000123", Valid: true}
		return nil
	})
	if name != "invoice:*" {
		t.Errorf("floor name %q, want invoice:*", name)
	}
	n, err := floor(t.Context(), "invoice:20261125")
	if err != nil || n != 123 {
		t.Errorf("floor = %d, %v; want 123", n, err)
	}
	want := "SELECT MAX(CAST(`number` AS BINARY)) FROM `invoices` WHERE `number` LIKE 'INV-20261125-______' ESCAPE '!'"
	if len(stmts) != 1 || stmts[0] != want {
		t.Errorf("statements %q, want %q", stmts, want)
	}
	if n, err := floor(t.Context(), "invoice:202611"); err != nil || n != 0 || len(stmts) != 1 {
		t.Errorf("a month's sequence: %d, %v after %d statements; want 0 and no query", n, err, len(stmts))
	}
}
