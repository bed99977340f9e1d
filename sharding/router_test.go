package sharding

import (
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
)

func TestExprString(t *testing.T) {
	cases := []struct {
		e    Expr
		want string
	}{
		{ID(), "id"},
		{ID().Mod(2), "id%2"},
		{ID().Add(1).Mod(4).Div(2), "(id+1)%4/2"},
		{ID().Add(1).Mod(4).Div(2).Add(1), "(id+1)%4/2+1"},
		{ID().Add(1).Mul(3), "(id+1)*3"},
		{ID().Add(1).Mod(4).Div(2).Add(1).Mul(3), "((id+1)%4/2+1)*3"},
		{ID().Div(2).Mod(2), "id/2%2"},
		{ID().Add(-3).Add(2), "id-3+2"},
	}
	for _, c := range cases {
		if got := c.e.String(); got != c.want {
			t.Errorf("String() = %q, want %q", got, c.want)
		}
	}
}

func TestExprIndex(t *testing.T) {
	ss := ID().Add(1).Mod(4).Div(2)
	for id, want := range []int64{0, 1, 1, 0, 0, 1, 1, 0} {
		got, err := ss.Index(int64(id))
		if err != nil || got != want {
			t.Errorf("(id+1)%%4/2 at %d = %d, %v; want %d", id, got, err, want)
		}
	}
	// Two expressions built from one prefix must not share steps.
	base := ID().Add(1)
	a, b := base.Mod(2), base.Mod(3)
	if a.String() != "(id+1)%2" || b.String() != "(id+1)%3" {
		t.Errorf("shared prefix leaked: %s, %s", a, b)
	}
	for _, e := range []Expr{ID().Add(1), ID().Mul(2), ID().Add(math.MaxInt64).Add(-1)} {
		if _, err := e.Index(math.MaxInt64); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "overflow") {
			t.Errorf("%s at MaxInt64: err = %v, want overflow error", e, err)
		}
	}
	if v, err := ID().Mul(-1).Index(5); err != nil || v != -5 {
		t.Errorf("id*-1 at 5 = %d, %v", v, err)
	}
	if _, err := ID().Mod(0).Index(5); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("id%%0: err = %v, want ErrInvalidConfig", err)
	}
}

func mustMod(t *testing.T, cfg Mod) *ModRouter {
	t.Helper()
	r, err := NewMod(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func courseRouter(t *testing.T) *ModRouter {
	return mustMod(t, Mod{
		Databases: 2, DatabasePattern: "m%d",
		Tables: 2, TablePattern: "course_%d", TableBase: 1,
		TableRule: ID().Add(1).Mod(4).Div(2),
	})
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
		if s.String() != want || s.Database != int(wantDB) || s.Table != int(wantTable-1) {
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
		r := mustMod(t, Mod{Databases: d, Tables: tb, TablePattern: "t_%d"})
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
			if s.Database != int(id)%d || s.Table != int(id)/d%tb {
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
	r := mustMod(t, Mod{Databases: 2, Tables: 3, TablePattern: "order_%02d", TableBase: 1})
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
		if s.Database != i/3 || s.Table != i%3 {
			t.Errorf("shard %d = %+v", i, s)
		}
	}
	one := mustMod(t, Mod{Databases: 4, DatabasePattern: "shard%d", Tables: 1, TablePattern: "users"})
	if s, _ := one.Route(7); s.String() != "shard3.users" {
		t.Errorf("Route(7) = %s, want shard3.users", s)
	}
	if got := one.String(); got != "shard{id%4}.users" {
		t.Errorf("String() = %q", got)
	}
	custom := mustMod(t, Mod{Databases: 1, Tables: 2, TablePattern: "t%d", TableBase: 1,
		TableRule: RuleFunc(func(id int64) int64 { return id & 1 })})
	if got := custom.String(); got != "ds_0.t{func(id)+1}" {
		t.Errorf("String() = %q", got)
	}
}

func TestModInvalidConfig(t *testing.T) {
	cases := map[string]Mod{
		"no databases":      {Databases: 0, Tables: 2, TablePattern: "t_%d"},
		"no tables":         {Databases: 2, Tables: 0, TablePattern: "t_%d"},
		"negative tables":   {Databases: 2, Tables: -1, TablePattern: "t_%d"},
		"negative base":     {Databases: 2, Tables: 2, TablePattern: "t_%d", TableBase: -1},
		"no table pattern":  {Databases: 2, Tables: 2},
		"pattern no verb":   {Databases: 2, Tables: 2, TablePattern: "course"},
		"db pattern static": {Databases: 2, Tables: 1, DatabasePattern: "main", TablePattern: "t"},
		"pattern %s":        {Databases: 1, Tables: 2, TablePattern: "t_%s"},
		"two verbs":         {Databases: 1, Tables: 2, TablePattern: "t_%d_%d"},
		"unsafe name":       {Databases: 1, Tables: 2, TablePattern: "course-%d"},
		"unsafe plain name": {Databases: 1, Tables: 1, TablePattern: "a b"},
		"mod by zero":       {Databases: 2, Tables: 2, TablePattern: "t_%d", TableRule: ID().Mod(0)},
		"div by negative":   {Databases: 2, Tables: 2, TablePattern: "t_%d", DatabaseRule: ID().Div(-2)},
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
	if _, err := r.Route(math.MaxInt64); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Route(MaxInt64) with (id+1): err = %v, want overflow error", err)
	}
	bad := mustMod(t, Mod{Databases: 2, Tables: 2, TablePattern: "course_%d",
		TableRule: RuleFunc(func(id int64) int64 { return id % 4 })}) // 0..3 for 2 tables
	if _, err := bad.Route(1); err != nil {
		t.Errorf("Route(1) = %v, want ok", err)
	}
	_, err := bad.Route(3)
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "gave index 3 for id 3, want 0..1") {
		t.Errorf("Route(3) with out-of-range rule: err = %v", err)
	}
	neg := mustMod(t, Mod{Databases: 2, Tables: 1, TablePattern: "t", DatabaseRule: ID().Add(-10)})
	if _, err := neg.Route(3); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "database rule id-10 gave index -7") {
		t.Errorf("Route(3) with negative index: err = %v", err)
	}
}
