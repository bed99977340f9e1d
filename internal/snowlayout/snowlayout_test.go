package snowlayout_test

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/snowlayout"
)

var presets = map[string]snowflake.Layout{
	"Default": snowflake.Default, "Seconds": snowflake.Seconds, "JSSafe": snowflake.JSSafe, "JSSafeSeconds": snowflake.JSSafeSeconds,
}

func unitDuration(l snowflake.Layout) time.Duration {
	if l.Unit == time.Second {
		return time.Second
	}
	return time.Millisecond
}

func TestComposeDecode(t *testing.T) {
	for name, l := range presets {
		t.Run(name, func(t *testing.T) {
			check := func(tick, machine, seq int64) bool {
				id, err := snowlayout.ComposeTick(l, tick, machine, seq)
				if err != nil {
					t.Errorf("ComposeTick(%d, %d, %d): %v", tick, machine, seq, err)
					return false
				}
				at, m, q, err := l.Decode(id)
				if err != nil || m != machine || q != seq || !at.Equal(l.Epoch.Add(time.Duration(tick)*unitDuration(l))) {
					t.Errorf("Decode(%d) = %v %d %d, %v; want tick %d machine %d seq %d", id, at, m, q, err, tick, machine, seq)
					return false
				}
				if got, err := snowlayout.Tick(l, at); err != nil || got != tick {
					t.Errorf("Tick(Decode(%d)) = %d, %v; want %d", id, got, err, tick)
					return false
				}
				back, err := snowlayout.Compose(l, at, m, q)
				if err != nil || back != id {
					t.Errorf("Compose(Decode(%d)) = %d, %v", id, back, err)
					return false
				}
				return true
			}
			for _, tick := range []int64{0, 1, snowlayout.MaxTick(l)} {
				for _, m := range []int64{0, snowlayout.MaxMachineID(l)} {
					for _, s := range []int64{0, snowlayout.MaxSequence(l)} {
						check(tick, m, s)
					}
				}
			}
			prop := func(a, b, c uint64) bool {
				return check(int64(a%uint64(snowlayout.MaxTick(l)+1)), int64(b%uint64(snowlayout.MaxMachineID(l)+1)), int64(c%uint64(snowlayout.MaxSequence(l)+1)))
			}
			if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestComposeAndDecodeReject(t *testing.T) {
	l := snowflake.Default // 63 bits: every non-negative int64 is a snowflake.Default ID
	for _, id := range []int64{-1, -1 << 63} {
		if _, _, _, err := l.Decode(id); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Decode(%d) = %v, want ErrInvalidID", id, err)
		}
		if s := snowlayout.Friendly(l, id); s != "" {
			t.Errorf("Friendly(%d) = %q, want empty", id, s)
		}
	}
	for _, id := range []int64{1 << 53, 1<<63 - 1, -5} {
		if _, _, _, err := snowflake.JSSafe.Decode(id); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("JSSafe.Decode(%d) = %v, want ErrInvalidID", id, err)
		}
		if s := snowlayout.Friendly(snowflake.JSSafe, id); s != "" {
			t.Errorf("snowlayout.Friendly(snowflake.JSSafe, %d) = %q, want empty", id, s)
		}
	}
	now := time.Now()
	if _, err := snowlayout.Compose(l, l.Epoch.Add(-time.Millisecond), 0, 0); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("before epoch: %v", err)
	}
	if _, err := snowlayout.Compose(l, snowlayout.Expiry(l), 0, 0); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("at expiry: %v", err)
	}
	if _, err := snowlayout.Compose(l, snowlayout.Expiry(l).Add(-time.Millisecond), 0, 0); err != nil {
		t.Errorf("last tick: %v", err)
	}
	if _, err := snowlayout.Compose(l, time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), 0, 0); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("far future: %v", err)
	}
	if _, err := snowlayout.Compose(l, now, 1024, 0); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "machine 1024") {
		t.Errorf("machine 1024: %v", err)
	}
	if _, err := snowlayout.Compose(l, now, 0, 4096); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "sequence 4096") {
		t.Errorf("sequence 4096: %v", err)
	}
	if _, err := snowlayout.ComposeTick(l, -1, 0, 0); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("tick -1: %v", err)
	}
	if _, _, _, err := (snowflake.Layout{}).Decode(1); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Decode on zero layout: %v", err)
	}
}

func TestTickWithOddEpoch(t *testing.T) {
	// An epoch that is a whole millisecond but not a whole second.
	l := snowflake.Default
	l.Epoch = snowflake.Default.Epoch.Add(500 * time.Millisecond)
	tick, err := snowlayout.Tick(l, snowflake.Default.Epoch.Add(1200*time.Millisecond))
	if err != nil || tick != 700 {
		t.Fatalf("Tick = %d, %v; want 700", tick, err)
	}
}

func TestFriendly(t *testing.T) {
	at := time.Date(2026, 6, 23, 13, 17, 30, 192e6, time.UTC)
	id, err := snowlayout.Compose(snowflake.Default, at, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := snowlayout.Friendly(snowflake.Default, id); got != "20260623131730192-1-0" {
		t.Fatalf("Friendly = %q, want 20260623131730192-1-0", got)
	}
	for name, l := range presets {
		r := rand.New(rand.NewPCG(1, 2))
		for range 1000 {
			id := r.Int64() & snowlayout.MaxID(l)
			s := snowlayout.Friendly(l, id)
			back, err := snowlayout.ParseFriendly(l, s)
			if err != nil || back != id {
				t.Fatalf("%s: ParseFriendly(Friendly(%d) = %q) = %d, %v", name, id, s, back, err)
			}
			if l.Unit == time.Second && !strings.HasSuffix(strings.SplitN(s, "-", 2)[0], "000") {
				t.Fatalf("%s: second layout friendly %q does not end in 000 ms", name, s)
			}
		}
	}
	bad := []string{
		"", "20260623131730192", "20260623131730192-1", "20260623131730192-1-0-0",
		"2026062313173019-1-0",   // 16 digits
		"20260623131730192-x-0",  // not a number
		"20260623131730192-+1-0", // sign
		"20260623131730192-01-0", // leading zero
		"20260623131730192-1-",   // empty sequence
		"20260231131730192-1-0",  // 31 February
		"20262323131730192-1-0",  // month 23
		"20260623251730192-1-0",  // hour 25
		"20260623131730192-1024-0",
		"20260623131730192-1-4096",
		"20190101000000000-1-0",  // before the epoch
		"21000101000000000-1-0",  // after the expiry
		"020260623131730192-1-0", // padded year
		"2026O623131730192-1-0",  // a letter O
	}
	for _, s := range bad {
		if id, err := snowlayout.ParseFriendly(snowflake.Default, s); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("ParseFriendly(%q) = %d, %v; want ErrInvalidID", s, id, err)
		}
	}
	if _, err := snowlayout.ParseFriendly(snowflake.Seconds, "20260623131730192-1-0"); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("second layout accepted milliseconds: %v", err)
	}
}

func FuzzParseFriendly(f *testing.F) {
	f.Add("20260623131730192-1-0")
	f.Add("20890907000000000-1023-4095")
	f.Add("99999999999999999999-1-1")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := snowlayout.ParseFriendly(snowflake.Default, s)
		if err != nil {
			return
		}
		if got := snowlayout.Friendly(snowflake.Default, id); got != s {
			t.Fatalf("ParseFriendly(%q) = %d, whose friendly form is %q", s, id, got)
		}
	})
}

func FuzzDecode(f *testing.F) {
	f.Add(int64(0))
	f.Add(int64(-1))
	f.Add(int64(1<<63 - 1))
	f.Add(int64(1<<53 - 1))
	f.Fuzz(func(t *testing.T, id int64) {
		for name, l := range presets {
			at, machine, seq, err := l.Decode(id)
			if (err == nil) != (id >= 0 && id <= snowlayout.MaxID(l)) {
				t.Fatalf("%s: Decode(%d) error = %v", name, id, err)
			}
			if err != nil {
				continue
			}
			back, err := snowlayout.Compose(l, at, machine, seq)
			if err != nil || back != id {
				t.Fatalf("%s: compose(decode(%d)) = %d, %v", name, id, back, err)
			}
		}
	})
}

func TestMaxIDAndDescribe(t *testing.T) {
	if snowlayout.MaxID(snowflake.Default) != 1<<63-1 || snowlayout.MaxID(snowflake.JSSafe) != 1<<53-1 {
		t.Errorf("MaxID: Default %d, JSSafe %d", snowlayout.MaxID(snowflake.Default), snowlayout.MaxID(snowflake.JSSafe))
	}
	if got := snowlayout.Describe(snowflake.Default); got != "41/10/12 ms since 2019-12-24T16:00:00Z" {
		t.Errorf("Describe(Default) = %q", got)
	}
	// The generator's own errors name a layout the same way.
	for name, l := range presets {
		_, _, _, err := l.Decode(-1)
		if err == nil || !strings.Contains(err.Error(), snowlayout.Describe(l)) {
			t.Errorf("%s: Decode(-1) = %v, want it to name %q", name, err, snowlayout.Describe(l))
		}
	}
}
