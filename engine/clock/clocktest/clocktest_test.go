package clocktest_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/idforge/idforge/engine/clock/clocktest"
)

var start = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func TestFakeMovesOnlyWhenTold(t *testing.T) {
	f := clocktest.NewFake(start)
	if !f.Now().Equal(start) {
		t.Fatalf("Now = %v", f.Now())
	}
	f.Advance(time.Second)
	f.Advance(-3 * time.Second)
	if want := start.Add(-2 * time.Second); !f.Now().Equal(want) {
		t.Fatalf("after +1s -3s: %v, want %v", f.Now(), want)
	}
	if err := f.Sleep(context.Background(), 5*time.Millisecond); err != nil || !f.Now().Equal(start.Add(-2*time.Second+5*time.Millisecond)) {
		t.Fatalf("Sleep did not advance the clock by its duration: %v, %v", f.Now(), err)
	}
	if f.Sleeps() != 1 {
		t.Fatalf("Sleeps = %d", f.Sleeps())
	}
}

func TestFakeManualSleepWaitsForAdvance(t *testing.T) {
	f := clocktest.NewFake(start)
	f.ManualSleep = true
	done := make(chan error, 1)
	go func() { done <- f.Sleep(context.Background(), time.Second) }()
	for f.Sleeps() == 0 {
		time.Sleep(time.Millisecond)
	}
	f.Advance(500 * time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("Sleep returned (%v) before the clock passed the wake-up time", err)
	case <-time.After(20 * time.Millisecond):
	}
	f.Advance(500 * time.Millisecond)
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { done <- f.Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled Sleep: %v", err)
	}
}

// A fake clock stands still until moved; Sleep moves it by the time slept.
func Example() {
	f := clocktest.NewFake(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))
	f.Advance(time.Second)
	_ = f.Sleep(context.Background(), time.Minute)
	fmt.Println(f.Now().Format(time.TimeOnly), f.Sleeps())
	// Output:
	// 12:01:01 1
}
