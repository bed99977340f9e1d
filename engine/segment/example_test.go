package segment_test

import (
	"context"
	"fmt"

	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
)

func ExampleNewChain() {
	// In production the distributor is engine/sqlstore's or engine/redisstore's.
	store := segmenttest.NewFake()
	chain, err := segment.NewChain(store, segment.Settings{Step: 100})
	if err != nil {
		panic(err)
	}
	defer chain.Close()
	ctx := context.Background()
	for range 3 {
		id, err := chain.NextID(ctx)
		if err != nil {
			panic(err)
		}
		fmt.Println(id)
	}
	// Output:
	// 1
	// 2
	// 3
}

func ExampleChain_Stats() {
	chain, err := segment.NewChain(segmenttest.NewFake())
	if err != nil {
		panic(err)
	}
	defer chain.Close()
	if _, err := chain.NextID(context.Background()); err != nil {
		panic(err)
	}
	s := chain.Stats()
	// Waiting for the very first fetch is not hunger that widens the distance.
	fmt.Println("step", s.Step, "distance", s.PrefetchDistance, "issued", s.Issued)
	// Output: step 1000 distance 2 issued 1
}
