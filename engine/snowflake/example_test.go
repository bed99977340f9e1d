package snowflake_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/snowflake"
)

func Example() {
	// A fake clock makes the output repeatable; production code omits WithClock.
	clk := clock.NewFake(time.Date(2026, 6, 23, 13, 17, 30, 192e6, time.UTC))
	gen, err := snowflake.New(1, snowflake.WithClock(clk))
	if err != nil {
		fmt.Println(err)
		return
	}
	layout := gen.Layout()
	for range 3 {
		id, err := gen.NextID(context.Background())
		if err != nil {
			fmt.Println(err)
			return
		}
		// One ID per millisecond: the sequence keeps counting instead of
		// restarting at 0, so id % 4 visits every shard.
		fmt.Println(id, layout.Friendly(id), id%4)
		clk.Advance(time.Millisecond)
	}
	// Output:
	// 859905511410110464 20260623131730192-1-0 0
	// 859905511414304769 20260623131730193-1-1 1
	// 859905511418499074 20260623131730194-1-2 2
}

func ExampleLayout_Decode() {
	p, err := snowflake.Default.Decode(859905511414304769)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(p.Time.Format(time.RFC3339Nano), p.Machine, p.Sequence)
	fmt.Println(snowflake.Default.Expiry().Format(time.RFC3339Nano))
	// Output:
	// 2026-06-23T13:17:30.193Z 1 1
	// 2089-08-30T07:47:35.552Z
}

func ExampleLayout_ParseFriendly() {
	id, err := snowflake.JSSafe.ParseFriendly("20260623131730192-1-0")
	fmt.Println(id, err, id <= 1<<53-1)
	// Output:
	// 839751475986944 <nil> true
}
