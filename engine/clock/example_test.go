package clock_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine/clock"
)

// Any value with Now and Sleep is a Clock; System is the one generators use
// unless told otherwise. Sleep gives up when the context ends.
func Example() {
	var c clock.Clock = clock.System
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	fmt.Println(c.Sleep(ctx, time.Hour))
	// Output:
	// context canceled
}
