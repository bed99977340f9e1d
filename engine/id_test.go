package engine_test

import (
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
)

// Above 2^53 a float64 (a JavaScript number) can no longer hold every integer.
const above53 = 1<<53 + 1

func TestIDMarshalJSONIsString(t *testing.T) {
	for _, id := range []engine.ID{0, 1, -1, above53, math.MaxInt64, math.MinInt64} {
		b, err := json.Marshal(id)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Quote(strconv.FormatInt(int64(id), 10)); string(b) != want {
			t.Errorf("json.Marshal(%d) = %s, want %s", int64(id), b, want)
		}
		var back engine.ID
		if err := json.Unmarshal(b, &back); err != nil || back != id {
			t.Errorf("json.Unmarshal(%s) = %d, %v; want %d", b, back, err, id)
		}
	}
}

func TestIDUnmarshalJSON(t *testing.T) {
	for in, want := range map[string]engine.ID{
		`"42"`:                  42,
		`42`:                    42,
		`"-7"`:                  -7,
		`9007199254740993`:      above53, // a number above 2^53 is read exactly, not through float64
		`"9007199254740993"`:    above53,
		`"9223372036854775807"`: math.MaxInt64,
		`-9223372036854775808`:  math.MinInt64,
		`  "12"  `:              12, // json trims the surrounding whitespace
	} {
		var id engine.ID
		if err := json.Unmarshal([]byte(in), &id); err != nil || id != want {
			t.Errorf("json.Unmarshal(%s) = %d, %v; want %d", in, id, err, want)
		}
	}
}

func TestIDUnmarshalJSONNullKeepsValue(t *testing.T) {
	id := engine.ID(5)
	if err := json.Unmarshal([]byte(`null`), &id); err != nil || id != 5 {
		t.Fatalf("json.Unmarshal(null) = %d, %v; want the ID unchanged (5)", id, err)
	}
}

func TestIDUnmarshalJSONBadInput(t *testing.T) {
	for _, in := range []string{
		`""`, `"abc"`, `"1.5"`, `1.5`, `1e3`, `true`, `"null"`, `" 42"`, `"0x10"`,
		`"9223372036854775808"`, `9223372036854775808`, `-9223372036854775809`,
	} {
		id := engine.ID(5)
		err := json.Unmarshal([]byte(in), &id)
		if !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("json.Unmarshal(%s) error %v; want ErrInvalidID", in, err)
			continue
		}
		if id != 5 {
			t.Errorf("json.Unmarshal(%s) failed but changed the ID to %d", in, id)
		}
	}
	// Not a JSON value at all: the decoder rejects it before the ID sees it.
	var id engine.ID
	if err := json.Unmarshal([]byte(`{`), &id); err == nil {
		t.Error(`json.Unmarshal("{") succeeded`)
	}
}

func TestIDInStruct(t *testing.T) {
	type order struct {
		ID      engine.ID   `json:"id"`
		Parent  engine.ID   `json:"parent,omitempty"`
		Related []engine.ID `json:"related"`
		Ptr     *engine.ID  `json:"ptr"`
	}
	p := engine.ID(math.MaxInt64)
	in := order{ID: above53, Related: []engine.ID{1, above53}, Ptr: &p}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"id":"9007199254740993","related":["1","9007199254740993"],"ptr":"9223372036854775807"}`
	if string(b) != want {
		t.Fatalf("json.Marshal = %s\nwant          %s", b, want)
	}
	var back order
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if back.ID != in.ID || back.Parent != 0 || len(back.Related) != 2 || back.Related[1] != above53 || back.Ptr == nil || *back.Ptr != p {
		t.Fatalf("round trip = %+v, want %+v", back, in)
	}

	// A client that sends numbers and nulls is understood too.
	var mixed order
	if err := json.Unmarshal([]byte(`{"id":9007199254740993,"related":[2,"3"],"ptr":null}`), &mixed); err != nil {
		t.Fatal(err)
	}
	if mixed.ID != above53 || len(mixed.Related) != 2 || mixed.Related[0] != 2 || mixed.Related[1] != 3 || mixed.Ptr != nil {
		t.Fatalf("mixed input = %+v", mixed)
	}

	err = json.Unmarshal([]byte(`{"id":"x1"}`), &mixed)
	if !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), `"x1"`) {
		t.Fatalf("bad id in a struct: error %v; want ErrInvalidID naming \"x1\"", err)
	}
}

// As a map key an ID goes through MarshalText/UnmarshalText.
func TestIDAsMapKey(t *testing.T) {
	m := map[engine.ID]string{above53: "a"}
	b, err := json.Marshal(m)
	if err != nil || string(b) != `{"9007199254740993":"a"}` {
		t.Fatalf("json.Marshal(map) = %s, %v", b, err)
	}
	var back map[engine.ID]string
	if err := json.Unmarshal(b, &back); err != nil || back[above53] != "a" {
		t.Fatalf("json.Unmarshal(map) = %v, %v", back, err)
	}
}

func TestIDStringAndParse(t *testing.T) {
	for _, id := range []engine.ID{0, above53, math.MinInt64} {
		var back engine.ID
		err := back.UnmarshalText([]byte(id.String()))
		if err != nil || back != id {
			t.Errorf("UnmarshalText(%q) = %d, %v", id.String(), back, err)
		}
	}
	var id engine.ID
	if err := id.UnmarshalText([]byte("12a")); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), `"12a"`) {
		t.Errorf("UnmarshalText(12a) error %v; want ErrInvalidID naming the input", err)
	}
}

func TestIDValuerScannerRoundTrip(t *testing.T) {
	var _ driver.Valuer = engine.ID(0)
	var _ sql.Scanner = (*engine.ID)(nil)
	for _, id := range []engine.ID{0, 1, above53, math.MaxInt64, math.MinInt64} {
		v, err := id.Value()
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := v.(int64); !ok || !driver.IsValue(v) {
			t.Fatalf("Value() = %T %v, want an int64 driver value", v, v)
		}
		var back engine.ID
		if err := back.Scan(v); err != nil || back != id {
			t.Errorf("Scan(Value(%d)) = %d, %v", id, back, err)
		}
	}
}

func TestIDScan(t *testing.T) {
	for _, tt := range []struct {
		src  any
		want engine.ID
	}{
		{int64(above53), above53},
		{[]byte("9007199254740993"), above53}, // MySQL text protocol
		{"-12", -12},
		{nil, 0}, // NULL
	} {
		id := engine.ID(99)
		if err := id.Scan(tt.src); err != nil || id != tt.want {
			t.Errorf("Scan(%T %v) = %d, %v; want %d", tt.src, tt.src, id, err, tt.want)
		}
	}
	for _, src := range []any{float64(1), true, []byte("1.0"), "", "abc", int32(1)} {
		id := engine.ID(99)
		err := id.Scan(src)
		if !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Scan(%T %v) error %v; want ErrInvalidID", src, src, err)
		}
		if id != 99 {
			t.Errorf("Scan(%T %v) failed but changed the ID to %d", src, src, id)
		}
	}
}

func TestIDUnmarshalJSONEscapedString(t *testing.T) {
	var id engine.ID
	if err := json.Unmarshal([]byte(`"\u0031\u0032"`), &id); err != nil || id != 12 {
		t.Fatalf(`"\u0031\u0032" = %d, %v; want 12`, id, err)
	}
}

// A layout takes an ID apart.
func TestIDDecode(t *testing.T) {
	at := time.Date(2026, 11, 25, 9, 30, 0, 123e6, time.UTC)
	n, err := snowlayout.Compose(snowflake.Default, at, 7, 42)
	if err != nil {
		t.Fatal(err)
	}
	tm, machine, seq, err := snowflake.Default.Decode(n)
	if err != nil || !tm.Equal(at) || machine != 7 || seq != 42 {
		t.Errorf("Decode = %v %d %d, %v; want %s, machine 7, sequence 42", tm, machine, seq, err, at)
	}
	if _, _, _, err := snowflake.Default.Decode(-1); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Decode(-1): err = %v, want ErrInvalidID", err)
	}
}
