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
// Redis it prints:
//
//	order IDs (1000, 1100]
//	machine ID 0, wait until 0
func Example() {
	ctx := context.Background()
	client := redis.NewClient(&redis.Options{Addr: "localhost:6379"})
	defer client.Close()

	store, err := redisstore.New(client, redisstore.WithPrefix("shop:"), redisstore.WithStart(1000))
	if err != nil {
		log.Fatal(err)
	}

	// Segments: one INCRBY per range; this process owns (max-100, max].
	maxID, err := store.Segment("order").NextMaxID(ctx, 100)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("order IDs (%d, %d]\n", maxID-100, maxID)

	// Machine IDs: 10 bits, reclaimable after 5 minutes of silence.
	inst := machine.Instance{Namespace: "shop", ID: "10.0.0.7:8080"}
	machines := store.Machine()
	st, err := machines.Distribute(ctx, inst, 10, 5*time.Minute)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("machine ID %d, wait until %d\n", st.MachineID, st.LastTimestamp)
	// In a service a machine.Lease heartbeats with Guard and reverts on Close.
	if err := machines.Revert(ctx, inst, st); err != nil {
		log.Fatal(err)
	}
}
