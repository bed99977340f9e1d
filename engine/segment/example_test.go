package segment_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
)

func ExampleNewChain() {
	// In production the distributor is engine/sqlstore's or engine/redisstore's.
	store := segmenttest.NewFake()
	chain, err := segment.NewChain(store, segment.WithName("order"), segment.WithStep(100))
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

func ExampleNew() {
	store := segmenttest.NewFake(segmenttest.FakeStart(41))
	gen, err := segment.New(store, segment.WithName("invoice"), segment.WithStep(2))
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	for range 4 {
		id, _ := gen.NextID(ctx)
		fmt.Println(id)
	}
	// The segment (43, 45] is used up; the next ID needs the store.
	store.SetDown(true)
	_, err = gen.NextID(ctx)
	fmt.Println(errors.Is(err, engine.ErrSegmentExhausted), errors.Is(err, engine.ErrStoreUnavailable))
	fmt.Println(err)
	// Output:
	// 42
	// 43
	// 44
	// 45
	// true true
	// idforge: segment exhausted ("invoice"): refill failed: fetch of 2 IDs: idforge: store unavailable: segmenttest: fake store is down
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
