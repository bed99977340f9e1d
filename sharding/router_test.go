package sharding

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
)

func mustRule(t *testing.T, src string) *rule {
	t.Helper()
	r, err := parseRule(src)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestRuleString(t *testing.T) {
	cases := []struct {
		src, want string
	}{
		{"id", "id"},
		{"id % 2", "id%2"},
		{"(id+1)%4/2", "(id+1)%4/2"},
		{"((id+1)%4)/2+1", "(id+1)%4/2+1"},
		{"(id+1)*3", "(id+1)*3"},
		{"((id+1)%4/2+1)*3", "((id+1)%4/2+1)*3"},
		{"id/2%2", "id/2%2"},
		{"id-3+2", "id-3+2"},
		{"id-(3+2)", "id-(3+2)"},
		{"1+id/2%4", "1+id/2%4"},
	}
	for _, c := range cases {
		if got := mustRule(t, c.src).String(); got != c.want {
			t.Errorf("parse(%q).String() = %q, want %q", c.src, got, c.want)
		}
	}
}

func TestRuleEval(t *testing.T) {
	ss := mustRule(t, "(id+1)%4/2")
	for id, want := range []int64{0, 1, 1, 0, 0, 1, 1, 0} {
		got, ok := ss.eval(int64(id))
		if !ok || got != want {
			t.Errorf("(id+1)%%4/2 at %d = %d, %v; want %d", id, got, ok, want)
		}
	}
	for _, src := range []string{"id+1", "id*2", "id+9223372036854775807-1", "id-(0-9223372036854775807)"} {
		if _, ok := mustRule(t, src).eval(math.MaxInt64); ok {
			t.Errorf("%s at MaxInt64: evaluated, want overflow", src)
		}
	}
	if v, ok := mustRule(t, "id*-1").eval(5); !ok || v != -5 {
		t.Errorf("id*-1 at 5 = %d, %v", v, ok)
	}
	if _, ok := mustRule(t, "id%(id-5)").eval(5); ok {
		t.Error("id%(id-5) at 5: evaluated, want a division by 0 refused")
	}
	for _, src := range []string{"", "id%0", "id/-2", "id+", "(id", "id)", "x", "id%2 id", "99999999999999999999"} {
		if _, err := parseRule(src); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("parse(%q): err = %v, want ErrInvalidConfig", src, err)
		}
	}
}

func mustMod(t *testing.T, cfg Mod) *Router {
	t.Helper()
	r, err := NewMod(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func courseRouter(t *testing.T) *Router {
	return mustMod(t, Mod{Databases: "m{0..1}", Tables: "course_{1..2}", TableRule: "(id+1)%4/2+1"})
}

func TestModShardingSphereRule(t *testing.T) {
	r := courseRouter(t)
	// db = id % 2, table = ((id+1) % 4)/2 + 1, straight from the seed.
	for id := int64(0); id < 64; id++ {
		s, err := r.Route(id)
		if err != nil {
			t.Fatal(err)
		}
		wantDB, wantTable := id%2, ((id+1)%4)/2+1
		want := fmt.Sprintf("m%d.course_%d", wantDB, wantTable)
		if s.String() != want || s.Database != int(wantDB) || s.TableName != fmt.Sprintf("course_%d", wantTable) {
			t.Fatalf("Route(%d) = %+v (%s), want %s", id, s, s, want)
		}
	}
	// The seed's skew: IDs whose low two bits never change land in one shard.
	for _, id := range []int64{4 << 22, 8 << 22, 12 << 22} {
		if s, _ := r.Route(id); s.String() != "m0.course_1" {
			t.Errorf("id %d (sequence 0) routed to %s, want m0.course_1", id, s)
		}
		if s, _ := r.Route(id + 1); s.String() != "m1.course_2" {
			t.Errorf("id %d (sequence 1) routed to %s, want m1.course_2", id+1, s)
		}
	}
	if got, want := r.String(), "m{id%2}.course_{(id+1)%4/2+1}"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
}

func TestModDefaultRuleUsesEveryShard(t *testing.T) {
	for _, dt := range [][2]int{{1, 1}, {2, 2}, {2, 3}, {3, 4}, {4, 4}, {1, 8}, {8, 1}} {
		d, tb := dt[0], dt[1]
		r := mustMod(t, Mod{Databases: fmt.Sprintf("ds_{0..%d}", d-1), Tables: fmt.Sprintf("t_{0..%d}", tb-1)})
		shards, _ := r.Shards()
		if len(shards) != d*tb {
			t.Fatalf("%d×%d: %d shards", d, tb, len(shards))
		}
		// D×T consecutive IDs hit every shard exactly once: the shard is a
		// bijection of id % (D×T).
		seen := map[string]int{}
		for id := int64(1000); id < 1000+int64(d*tb); id++ {
			s, err := r.Route(id)
			if err != nil {
				t.Fatal(err)
			}
			if s.Database != int(id)%d || s.TableName != fmt.Sprintf("t_%d", int(id)/d%tb) {
				t.Fatalf("%d×%d: Route(%d) = %+v", d, tb, id, s)
			}
			seen[s.String()]++
		}
		for _, s := range shards {
			if seen[s.String()] != 1 {
				t.Errorf("%d×%d: shard %s got %d of %d consecutive IDs", d, tb, s, seen[s.String()], d*tb)
			}
		}
	}
}

func TestModNames(t *testing.T) {
	r := mustMod(t, Mod{Databases: "ds_{0..1}", Tables: "order_{01..03}"})
	shards, _ := r.Shards()
	var got []string
	for _, s := range shards {
		got = append(got, s.String())
	}
	want := "ds_0.order_01 ds_0.order_02 ds_0.order_03 ds_1.order_01 ds_1.order_02 ds_1.order_03"
	if strings.Join(got, " ") != want {
		t.Errorf("shards = %v, want %s", got, want)
	}
	for i, s := range shards {
		if s.Database != i/3 || s.DatabaseName != fmt.Sprint("ds_", i/3) {
			t.Errorf("shard %d = %+v", i, s)
		}
	}
	if s, _ := r.Route(7); s.String() != "ds_1.order_01" { // 7%2 = 1, 1+7/2%3 = 1
		t.Errorf("Route(7) = %s, want ds_1.order_01", s)
	}
	one := mustMod(t, Mod{Databases: "shard{0..3}", Tables: "users"})
	if s, _ := one.Route(7); s.String() != "shard3.users" {
		t.Errorf("Route(7) = %s, want shard3.users", s)
	}
	if got := one.String(); got != "shard{id%4}.users" {
		t.Errorf("String() = %q", got)
	}
	single := mustMod(t, Mod{Tables: "t{1..2}", TableRule: "id%2+1"})
	if got := single.String(); got != "t{id%2+1}" {
		t.Errorf("String() = %q", got)
	}
	if s, _ := single.Route(3); s.String() != "t2" || s.Database != 0 {
		t.Errorf("Route(3) = %+v", s)
	}
}

func TestModInvalidConfig(t *testing.T) {
	cases := map[string]Mod{
		"no tables":         {Databases: "m{0..1}"},
		"empty range":       {Tables: "t_{}"},
		"inverted range":    {Tables: "t_{2..1}"},
		"negative range":    {Tables: "t_{-1..1}"},
		"no range dots":     {Tables: "t_{1,2}"},
		"two ranges":        {Tables: "t_{0..1}_{0..1}"},
		"open brace":        {Tables: "t_{0..1"},
		"unsafe name":       {Tables: "course-{0..1}"},
		"unsafe plain name": {Tables: "a b"},
		"mod by zero":       {Tables: "t_{0..1}", TableRule: "id%0"},
		"div by negative":   {Databases: "m{0..1}", Tables: "t_{0..1}", DatabaseRule: "id/-2"},
		"bad rule":          {Tables: "t_{0..1}", TableRule: "id %% 2"},
	}
	for name, cfg := range cases {
		if r, err := NewMod(cfg); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%s: NewMod = %v, %v; want ErrInvalidConfig", name, r, err)
		}
	}
}

func TestModRouteErrors(t *testing.T) {
	r := courseRouter(t)
	if _, err := r.Route(-1); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("Route(-1): err = %v, want ErrInvalidID", err)
	}
	if _, err := r.Route(math.MaxInt64); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "overflow") {
		t.Errorf("Route(MaxInt64) with (id+1): err = %v, want overflow error", err)
	}
	bad := mustMod(t, Mod{Databases: "m{0..1}", Tables: "course_{0..1}", TableRule: "id%4"}) // 0..3 for 2 tables
	if _, err := bad.Route(1); err != nil {
		t.Errorf("Route(1) = %v, want ok", err)
	}
	_, err := bad.Route(3)
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "table rule id%4 gave 3 for id 3, want 0..1") {
		t.Errorf("Route(3) with out-of-range rule: err = %v", err)
	}
	neg := mustMod(t, Mod{Databases: "m{0..1}", Tables: "t", DatabaseRule: "id-10"})
	if _, err := neg.Route(3); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "database rule id-10 gave -7") {
		t.Errorf("Route(3) with negative index: err = %v", err)
	}
	var zero Router
	if _, err := zero.Route(1); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("zero Router: err = %v, want ErrInvalidConfig", err)
	}
	if _, err := r.Tables(time.Time{}, time.Now()); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Tables of a mod router: err = %v, want ErrInvalidConfig", err)
	}
}
