package redisstore_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/redisstore"
)

// Example draws a segment and a machine ID from a Redis at localhost:6379.
// It has no Output line because it needs a running server, so `go test` only
// compiles it; the values depend on what the server already holds. On an empty
// Redis run as recommended (appendonly yes, appendfsync always) it waits the
// reset grace of the new epoch (2 s) and prints:
//
//	order IDs (1000, 1100]
//	machine ID 0, wait until 0
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()

	store, err := redisstore.Open(ctx, client, redisstore.Settings{Prefix: "{shop}:", Start: 1000, Init: true})
	if err != nil {
		log.Fatal(err)
	}

	// Segments: one script per range; this process owns (max-100, max].
	order, err := store.Segment("order")
	if err != nil {
		log.Fatal(err)
	}
	maxID, err := order.NextMaxID(ctx, 100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order IDs (%d, %d]\n", maxID-100, maxID)

	// Machine IDs: 10 bits, reclaimable after 5 minutes of silence. In a
	// service a leased.Lease heartbeats with Guard and reverts on Close.
	inst := machine.Instance{Namespace: "shop", ID: "10.0.0.7:8080"}
	st, err := store.Distribute(ctx, inst, 10, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("machine ID %d, wait until %d\n", st.MachineID, st.LastTimestamp)
	if err := store.Revert(ctx, inst, st); err != nil {
		log.Fatal(err)
	}
}
