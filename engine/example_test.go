package engine_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// An ID travels through JSON as a string, so a JavaScript client keeps every
// digit, and reads numbers and strings alike.
func ExampleID_json() {
	type Order struct {
		ID   engine.ID `json:"id"`
		Item string    `json:"item"`
	}
	b, _ := json.Marshal(Order{ID: 1<<53 + 1, Item: "book"})
	fmt.Println(string(b))

	var o Order
	err := json.Unmarshal([]byte(`{"id":9007199254740993,"item":"pen"}`), &o)
	fmt.Println(int64(o.ID), o.Item, err)

	err = json.Unmarshal([]byte(`{"id":"12ab"}`), &o)
	fmt.Println(err)
	// Output:
	// {"id":"9007199254740993","item":"book"}
	// 9007199254740993 pen <nil>
	// idforge: invalid id: "12ab": not a decimal number
}

// A registry holds a shared default per kind, fixed names, and factories that
// create a generator per name on first use, as struct tags such as
// `idgen:"chain,name=order"` ask for them.
func ExampleRegistry() {
	ctx := context.Background()
	reg := engine.NewRegistry()
	defer reg.Close()

	var seq atomic.Int64
	_ = reg.Register("snowflake", "", engine.GeneratorFunc(func(context.Context) (int64, error) {
		return seq.Add(1), nil
	}))
	_ = reg.RegisterFactory("chain", func(_ context.Context, name string) (engine.Generator, error) {
		base := int64(len(name)) * 1000 // stands for a per-name segment store
		var n atomic.Int64
		return engine.GeneratorFunc(func(context.Context) (int64, error) { return base + n.Add(1), nil }), nil
	})

	a, _ := reg.NextID(ctx, "snowflake", "")
	b, _ := reg.NextID(ctx, "chain", "order")
	c, _ := reg.NextID(ctx, "chain", "order")
	fmt.Println(a, b, c)

	_, err := reg.NextID(ctx, "segment", "")
	fmt.Println(err)
	// Output:
	// 1 5001 5002
	// idforge: unknown generator: "segment" (registered kinds: [chain snowflake])
}

// An ID explains itself under its layout, and has the radix forms idforge
// writes (padded base 62 and 36, which sort like the IDs) and
// bwmarrin/snowflake's base 58.
func ExampleID_Decompose() {
	id := engine.ID(916018378039128106)
	p, err := id.Decompose(snowflake.Default)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Time.Format(time.RFC3339Nano), "machine", p.Machine, "sequence", p.Sequence)
	fmt.Println(id.Base62(), id.Base36(), id.Base58())
	back, _ := engine.ParseBase58(id.Base58())
	fmt.Println(back == id)
	// Output:
	// 2026-11-25T09:30:00.123Z machine 7 sequence 42
	// 15fNBENQBFy 06yjhexhauh4a 38jSnuRKmw7
	// true
}
