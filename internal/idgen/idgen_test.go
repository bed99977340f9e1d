package idgen

import (
	"context"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/idforge/idforge/tests/testreg"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
	"github.com/idforge/idforge/internal/genreg"
)

func TestParseTag(t *testing.T) {
	good := []struct {
		tag  string
		want Spec
	}{
		{"snowflake", Spec{Kind: "snowflake"}},
		{"chain,name=order", Spec{Kind: "chain", Name: "order"}},
		{"snowflake,format=radix62", Spec{Kind: "snowflake", Format: "radix62"}},
		{" chain , format=radix36 , name=order ", Spec{Kind: "chain", Name: "order", Format: "radix36"}},
	}
	for _, c := range good {
		got, err := ParseTag(c.tag)
		if err != nil || got != c.want {
			t.Errorf("ParseTag(%q) = %+v, %v; want %+v", c.tag, got, err, c.want)
		}
	}
	bad := []struct{ tag, why string }{
		{"", "kind is missing"},
		{",name=order", "kind is missing"},
		{"name=order", "not a generator kind"},
		{"chain,nmae=order", `unknown option "nmae"`},
		{"chain,order", `"order" is not key=value`},
		{"chain,name=", `"name" has no value`},
		{"chain,name=a,name=b", "given twice"},
		{"snow flake", "not a generator kind"},
	}
	for _, c := range bad {
		_, err := ParseTag(c.tag)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("ParseTag(%q) = %v; want ErrInvalidConfig saying %q", c.tag, err, c.why)
		}
	}
}

type Base struct {
	ID int64 `idgen:"snowflake"`
}

type inner struct {
	Code string `idgen:"snowflake,format=radix62"`
}

type Good struct {
	*Base
	inner
	U      uint64     `idgen:"chain,name=u"`
	I      int        `idgen:"snowflake"`
	E      engine.ID  `idgen:"snowflake"`
	PI     *int64     `idgen:"snowflake"`
	PS     *string    `idgen:"snowflake"`
	PE     *engine.ID `idgen:"snowflake"`
	Dec    string     `idgen:"snowflake"`
	Pinned int64      `idgen:"snowflake"`
	Other  int64
}

func counterRegistry(t testing.TB) (*genreg.Registry, *atomic.Int64) {
	t.Helper()
	var n atomic.Int64
	n.Store(1_000_000)
	g := testreg.Func(func(context.Context) (int64, error) { return n.Add(1), nil })
	reg := genreg.New()
	if err := reg.Register("snowflake", "", g); err != nil {
		t.Fatal(err)
	}
	if err := reg.RegisterFactory("chain", func(context.Context, string) (engine.Generator, error) { return g, nil }); err != nil {
		t.Fatal(err)
	}
	return reg, &n
}

func TestPlanFillsZeroFieldsOnly(t *testing.T) {
	p, err := NewPlan(reflect.TypeFor[Good]())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, f := range p.Fields {
		names = append(names, f.Name)
	}
	want := "Base.ID inner.Code U I E PI PS PE Dec Pinned"
	if got := strings.Join(names, " "); got != want {
		t.Fatalf("fields %q, want %q", got, want)
	}
	reg, _ := counterRegistry(t)
	fl, err := p.Bind(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	zero := int64(0)
	g := Good{Pinned: 7, PI: &zero}
	keep := g.PI
	if err := fl.Fill(context.Background(), reflect.ValueOf(&g)); err != nil {
		t.Fatal(err)
	}
	r62, _ := convert.New("radix62", convert.Settings{Padded: true})
	seen := map[int64]string{}
	add := func(name string, id int64) {
		if id <= 1_000_000 {
			t.Errorf("%s = %d, not drawn from the generator", name, id)
		}
		if prev, dup := seen[id]; dup {
			t.Errorf("%s and %s share id %d", prev, name, id)
		}
		seen[id] = name
	}
	if g.Base == nil {
		t.Fatal("nil embedded *Base was not allocated")
	}
	add("Base.ID", g.ID)
	code, err := r62.Parse(g.Code)
	if err != nil {
		t.Fatalf("Code %q is not radix62: %v", g.Code, err)
	}
	add("Code", code)
	add("U", int64(g.U))
	add("I", int64(g.I))
	add("E", int64(g.E))
	if g.PI != keep {
		t.Error("PI pointed at 0 and was replaced instead of filled in place")
	}
	add("PI", *g.PI)
	ps, err := strconv.ParseInt(*g.PS, 10, 64)
	if err != nil {
		t.Fatalf("PS %q: %v", *g.PS, err)
	}
	add("PS", ps)
	add("PE", int64(*g.PE))
	dec, err := strconv.ParseInt(g.Dec, 10, 64)
	if err != nil {
		t.Fatalf("Dec %q: %v", g.Dec, err)
	}
	add("Dec", dec)
	if g.Pinned != 7 {
		t.Errorf("pinned id overwritten: %d", g.Pinned)
	}
	if g.Other != 0 {
		t.Errorf("untagged field written: %d", g.Other)
	}

	before := g
	if err := fl.Fill(context.Background(), reflect.ValueOf(&g).Elem()); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(before, g) {
		t.Errorf("second fill changed set ids: %+v -> %+v", before, g)
	}
}

func TestFieldErrorsNameModelAndField(t *testing.T) {
	cases := []struct {
		value any
		is    error
		field string
		why   string
	}{
		{struct {
			A int32 `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field A", "type int32"},
		{struct {
			F float64 `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field F", "type float64"},
		{struct {
			S struct{ X int64 } `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field S", "cannot hold a 64-bit ID"},
		{struct {
			B []byte `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field B", "type []uint8"},
		{struct {
			PP **int64 `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field PP", "type **int64"},
		{struct {
			N int64 `idgen:"snowflake,fromat=radix62"`
		}{}, engine.ErrInvalidConfig, "field N", `unknown option "fromat"`},
		{struct {
			N int64 `idgen:"snowflake,format=radix62"`
		}{}, engine.ErrInvalidConfig, "field N", "string fields only"},
		{struct {
			S string `idgen:"snowflake,format=radix63"`
		}{}, engine.ErrInvalidConfig, "field S", `"radix63"`},
		{struct {
			n int64 `idgen:"snowflake"`
		}{}, engine.ErrInvalidConfig, "field n", "unexported"},
	}
	for _, c := range cases {
		typ := reflect.TypeOf(c.value)
		_, err := NewPlan(typ)
		if !errors.Is(err, c.is) || !strings.Contains(err.Error(), "model "+typ.String()+" "+c.field) || !strings.Contains(err.Error(), c.why) {
			t.Errorf("%s: got %v; want %v naming %q and saying %q", typ, err, c.is, c.field, c.why)
		}
	}
}

type Order struct {
	ID int64 `idgen:"chian"`
}

func TestUnknownKindNamesModelAndField(t *testing.T) {
	p, err := NewPlan(reflect.TypeFor[Order]())
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := counterRegistry(t)
	_, err = p.Bind(context.Background(), reg)
	if !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), "model Order field ID") || !strings.Contains(err.Error(), `"chian"`) {
		t.Fatalf("got %v", err)
	}
	if strings.Contains(err.Error(), "store") {
		t.Fatalf("the store hint is for segment kinds only: %v", err)
	}
	// A segment kind the registry lacks says where chains come from.
	type Invoice struct {
		No int64 `idgen:"chain,name=invoice"`
	}
	snowOnly := genreg.New()
	if err := snowOnly.Register("snowflake", "", testreg.Func(func(context.Context) (int64, error) { return 1, nil })); err != nil {
		t.Fatal(err)
	}
	ip, err := NewPlan(reflect.TypeFor[Invoice]())
	if err != nil {
		t.Fatal(err)
	}
	_, err = ip.Bind(context.Background(), snowOnly)
	if !errors.Is(err, engine.ErrUnknownGenerator) || !strings.Contains(err.Error(), "needs a registry built with a store") || !strings.Contains(err.Error(), "model Invoice field No") {
		t.Fatalf("chain on a snowflake-only registry: %v", err)
	}
	if _, err := p.Bind(context.Background(), nil); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Fatalf("nil registry: %v", err)
	}
}

func TestGeneratorErrorAndNegativeUnsigned(t *testing.T) {
	boom := errors.New("store down")
	f, err := NewField("M", "U", reflect.TypeFor[uint64](), Spec{Kind: "k"})
	if err != nil {
		t.Fatal(err)
	}
	var u uint64
	v := reflect.ValueOf(&u).Elem()
	s := slot{Target: Target{Field: f}, kind: f.kind, gen: testreg.Func(func(context.Context) (int64, error) { return 0, boom })}
	err = s.fill(context.Background(), v)
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "model M field U") {
		t.Errorf("generator error: %v", err)
	}
	if err := f.Set(v, -5); !errors.Is(err, engine.ErrInvalidID) || u != 0 {
		t.Errorf("negative id into uint64: %v, u=%d", err, u)
	}
}

func TestNotSettable(t *testing.T) {
	p, err := NewPlan(reflect.TypeFor[Base]())
	if err != nil {
		t.Fatal(err)
	}
	reg, _ := counterRegistry(t)
	fl, _ := p.Bind(context.Background(), reg)
	for _, v := range []any{Base{}, [2]Base{{ID: 1}, {}}} {
		err = fl.Fill(context.Background(), reflect.ValueOf(v))
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "pass a pointer") {
			t.Fatalf("%T: got %v", v, err)
		}
	}
	// A set id in an unaddressable struct needs no write and is fine.
	if err := fl.Fill(context.Background(), reflect.ValueOf(Base{ID: 3})); err != nil {
		t.Fatal(err)
	}
}

func TestWalker(t *testing.T) {
	p, err := NewPlan(reflect.TypeFor[Base]())
	if err != nil {
		t.Fatal(err)
	}
	reg, n := counterRegistry(t)
	fl, err := p.Bind(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	one, arr, ptrs := Base{}, [2]*Base{{}, {ID: 5}}, []*Base{{}}
	var anys []any = []any{&Base{}, &Base{}}
	for _, c := range []struct {
		v    any
		rows int64
	}{{&one, 1}, {[]Base{{}, {}}, 2}, {arr, 1}, {&arr, 0}, {ptrs, 1}, {[]Base{}, 0}, {[]*Base(nil), 0}, {&[]Base{{}, {}, {}}, 3}, {anys, 2}} {
		before := n.Load()
		if err := fl.Fill(context.Background(), reflect.ValueOf(c.v)); err != nil || n.Load()-before != c.rows {
			t.Errorf("%T: %d rows filled, %v; want %d", c.v, n.Load()-before, err, c.rows)
		}
	}
	if one.ID == 0 || arr[0].ID == 0 || arr[1].ID != 5 || ptrs[0].ID == 0 || anys[1].(*Base).ID == 0 {
		t.Errorf("rows not filled: %+v %+v %+v %+v", one, arr, ptrs[0], anys[1])
	}
	for _, v := range []any{[]*Base{{}, nil}, (*Base)(nil), []any{&Base{}, nil}, []any{&Base{}, &Good{}}, nil} {
		if err := fl.Fill(context.Background(), reflect.ValueOf(v)); !errors.Is(err, ErrInvalidData) || errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%T: %v, want ErrInvalidData", v, err)
		}
	}
	if err := fl.Fill(context.Background(), reflect.ValueOf([]*Base{{}, nil})); err == nil || !strings.Contains(err.Error(), "element 1 of []*idgen.Base is nil") {
		t.Errorf("nil element: %v", err)
	}
	for _, v := range []any{[]int{1}, 5, map[string]any{}, &Good{}, []Good{{}}} {
		if err := fl.Fill(context.Background(), reflect.ValueOf(v)); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%T: %v", v, err)
		}
	}
	for _, c := range []struct {
		v    any
		want reflect.Type
	}{{Base{}, reflect.TypeFor[Base]()}, {&[]*Base{}, reflect.TypeFor[Base]()}, {[2]Good{}, reflect.TypeFor[Good]()}, {[]any{&Base{}}, reflect.TypeFor[Base]()}} {
		if got, err := RowType(reflect.ValueOf(c.v)); got != c.want || err != nil {
			t.Errorf("RowType(%T) = %v, %v", c.v, got, err)
		}
	}
	for _, v := range []any{nil, 5, []int{}, map[string]any{}} {
		if _, err := RowType(reflect.ValueOf(v)); err == nil {
			t.Errorf("RowType(%T) succeeded", v)
		}
	}
}

type Wide struct {
	ID   int64     `idgen:"snowflake"`
	U    uint64    `idgen:"snowflake"`
	E    engine.ID `idgen:"snowflake"`
	Code string    `idgen:"snowflake,format=radix62"`
}

func TestAllocations(t *testing.T) {
	reg, _ := counterRegistry(t)
	p, _ := NewPlan(reflect.TypeFor[Wide]())
	fl, err := p.Bind(context.Background(), reg)
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]Wide, 1001) // AllocsPerRun adds a warm-up run
	i := 0
	allocs := testing.AllocsPerRun(len(rows)-1, func() {
		row := &rows[i]
		i++
		if err := fl.Fill(context.Background(), reflect.ValueOf(row)); err != nil {
			t.Fatal(err)
		}
	})
	// The radix-62 string is the only allocation: numbers are set in place.
	if allocs > 1 {
		t.Errorf("%.1f allocations per row, want at most 1", allocs)
	}
}

func TestMisspeltTagKey(t *testing.T) {
	for _, tag := range []string{`idgne:"snowflake"`, `idgn:"snowflake"`, `IDGEN:"snowflake"`, `igden:"snowflake"`, `json:"id" idgen2:"snowflake"`, `idgex:"x"`} {
		typ := reflect.StructOf([]reflect.StructField{{Name: "ID", Type: reflect.TypeFor[int64](), Tag: reflect.StructTag(tag)}})
		_, err := NewPlan(typ)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "field ID: tag key") || !strings.Contains(err.Error(), "misspelt") {
			t.Errorf("%s: %v", tag, err)
		}
	}
	for _, tag := range []string{`gen:"x"`, `index:"x"`, `edge:"x"`, `json:"idgen" db:"idgne"`, `id:"x"`, `idgen:"snowflake" idgne:"x"`, `bad tag idgne:"x`} {
		typ := reflect.StructOf([]reflect.StructField{{Name: "ID", Type: reflect.TypeFor[int64](), Tag: reflect.StructTag(tag)}})
		if _, err := NewPlan(typ); err != nil {
			t.Errorf("%s: %v", tag, err)
		}
	}
}

// A Filler with no targets walks the rows and fills nothing; the zero
// Filler refuses every value. Neither panics.
func TestEmptyFiller(t *testing.T) {
	type untagged struct {
		ID   int64
		Name string
	}
	ctx := context.Background()
	p, err := NewPlan(reflect.TypeFor[untagged]())
	if err != nil {
		t.Fatal(err)
	}
	reg, n := counterRegistry(t)
	fl, err := p.Bind(ctx, reg)
	if err != nil || fl.Len() != 0 {
		t.Fatalf("Bind = %d targets, %v; want 0", fl.Len(), err)
	}
	rows := []untagged{{}, {ID: 4}}
	arr := [2]untagged{}
	for _, v := range []any{rows, &rows, &arr, &untagged{}, []*untagged{{}}, []any{&untagged{}}} {
		if err := fl.Fill(ctx, reflect.ValueOf(v)); err != nil {
			t.Errorf("%T: %v", v, err)
		}
	}
	if n.Load() != 1_000_000 || rows[0].ID != 0 || rows[1].ID != 4 {
		t.Errorf("an empty filler drew %d IDs, rows %+v", n.Load()-1_000_000, rows)
	}
	if err := fl.Fill(ctx, reflect.ValueOf([]*untagged{nil})); !errors.Is(err, ErrInvalidData) {
		t.Errorf("nil row: %v, want ErrInvalidData", err)
	}
	if err := fl.Fill(ctx, reflect.ValueOf([]Base{{}})); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("rows of another type: %v, want ErrInvalidConfig", err)
	}
	var id int64
	if err := fl.FillField(ctx, 0, reflect.ValueOf(&id).Elem()); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "no target 0") {
		t.Errorf("FillField(0) of no targets: %v", err)
	}

	var zero Filler
	if err := zero.Fill(ctx, reflect.ValueOf(&Base{})); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "zero Filler") {
		t.Errorf("zero Filler: %v", err)
	}
	if err := zero.FillField(ctx, 0, reflect.ValueOf(&id).Elem()); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("zero Filler's FillField: %v", err)
	}
}

// Walk hands over the rows in order, addressable when the caller's value
// lets writes reach it, which the sharding repositories rely on.
func TestWalkAddressable(t *testing.T) {
	arr := [2]Base{{ID: 1}, {ID: 2}}
	for _, c := range []struct {
		v    any
		ids  string
		addr bool
	}{
		{&arr, "1 2", true}, {arr, "1 2", false}, {[]Base{{ID: 3}}, "3", true}, {[]*Base{{ID: 4}, {ID: 5}}, "4 5", true},
		{[]any{&Base{ID: 6}, Base{ID: 7}}, "6 7", false}, {Base{ID: 8}, "8", false}, {&Base{ID: 9}, "9", true},
	} {
		var ids []string
		addr := true
		err := Walk(reflect.ValueOf(c.v), reflect.TypeFor[Base](), func(row reflect.Value) error {
			ids = append(ids, strconv.FormatInt(row.Interface().(Base).ID, 10))
			addr = addr && row.CanAddr()
			return nil
		})
		if got := strings.Join(ids, " "); err != nil || got != c.ids || addr != c.addr {
			t.Errorf("%T: rows %q, all addressable %v, %v; want %q, %v", c.v, got, addr, err, c.ids, c.addr)
		}
	}
	stop := errors.New("stop")
	calls := 0
	err := Walk(reflect.ValueOf([]Base{{}, {}}), reflect.TypeFor[Base](), func(reflect.Value) error { calls++; return stop })
	if err != stop || calls != 1 {
		t.Errorf("fn's error: %v after %d calls, want it as is after 1", err, calls)
	}
}
