package uuidv7_test

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/internal/uuidv7"
)

// UUIDs drawn in one millisecond still increase; their time reads back.
func Example() {
	ctx := context.Background()
	g := uuidv7.New(clocktest.NewFake(time.Date(2026, 11, 25, 9, 30, 0, 0, time.UTC)))
	a, _ := g.NextUUID(ctx)
	b, _ := g.NextUUID(ctx)
	fmt.Println(uuid.UUID(a).String() < uuid.UUID(b).String(), uuid.UUID(a).Version() == 7)
	sec, nsec := uuid.UUID(b).Time().UnixTime() // the millisecond it was made
	fmt.Println(time.Unix(sec, nsec).UTC())
	// Output:
	// true true
	// 2026-11-25 09:30:00 +0000 UTC
}
