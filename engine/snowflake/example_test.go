package snowflake_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/snowflake"
)

func Example() {
	// A fake clock makes the output repeatable; production code omits Clock.
	clk := clocktest.NewFake(time.Date(2026, 6, 23, 13, 17, 30, 192e6, time.UTC))
	gen, err := snowflake.New(1, snowflake.Settings{Clock: clk})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 3 {
		id, err := gen.NextID(context.Background())
		if err != nil {
			fmt.Println(err)
			return
		}
		// One ID per millisecond: the sequence keeps counting instead of
		// restarting at 0, so id % 4 visits every shard.
		t, machine, seq, _ := snowflake.Default.Decode(id)
		fmt.Println(id, t.Format("15:04:05.000"), machine, seq, id%4)
		clk.Advance(time.Millisecond)
	}
	// Output:
	// 859905511410110464 13:17:30.192 1 0 0
	// 859905511414304769 13:17:30.193 1 1 1
	// 859905511418499074 13:17:30.194 1 2 2
}

func ExampleLayout_Decode() {
	t, machine, seq, err := snowflake.Default.Decode(859905511414304769)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(t.Format(time.RFC3339Nano), machine, seq)
	// JSSafe IDs stop at 2^53-1, the largest integer a JavaScript Number holds exactly.
	_, _, _, err = snowflake.JSSafe.Decode(1 << 53)
	fmt.Println(errors.Is(err, engine.ErrInvalidID))
	// Output:
	// 2026-06-23T13:17:30.193Z 1 1
	// true
}
