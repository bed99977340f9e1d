package snowflake

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
	"testing/quick"
	"time"

	"github.com/idforge/idforge/engine"
)

var presets = map[string]Layout{
	"Default": Default, "Seconds": Seconds, "JSSafe": JSSafe, "JSSafeSeconds": JSSafeSeconds,
}

func TestPresets(t *testing.T) {
	for name, l := range presets {
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if got := Default.IDsPerSecond(); got != 4_096_000 {
		t.Errorf("Default IDs/s = %d, want 4096000", got)
	}
	if got := Default.Epoch.UnixMilli(); got != 1577203200000 {
		t.Errorf("Default epoch = %d ms, want 1577203200000", got)
	}
	if got, want := Default.Expiry(), DefaultEpoch.Add((1<<41)*time.Millisecond); !got.Equal(want) {
		t.Errorf("Default expiry = %v, want %v", got, want)
	}
	if got, want := Seconds.Expiry(), DefaultEpoch.Add((1<<31)*time.Second); !got.Equal(want) {
		t.Errorf("Seconds expiry = %v, want %v", got, want)
	}
	for _, l := range []Layout{JSSafe, JSSafeSeconds} {
		if l.MaxID() != 1<<53-1 {
			t.Errorf("%s: MaxID = %d, want 2^53-1", l, l.MaxID())
		}
		// The very last ID of the layout: last tick, last machine, last sequence.
		id, err := l.ComposeTick(l.MaxTick(), l.MaxMachineID(), l.MaxSequence())
		if err != nil || id != 1<<53-1 {
			t.Errorf("%s: last ID = %d, %v; want 2^53-1", l, id, err)
		}
	}
	if Default.ResetThreshold() != 2047 || JSSafe.ResetThreshold() != 255 || Seconds.ResetThreshold() != 1<<21-1 {
		t.Errorf("default thresholds: %d %d %d", Default.ResetThreshold(), JSSafe.ResetThreshold(), Seconds.ResetThreshold())
	}
	if s := Default.String(); s != "41/10/12 ms since 2019-12-24T16:00:00Z" {
		t.Errorf("String = %q", s)
	}
}

func TestValidateRejects(t *testing.T) {
	with := func(f func(*Layout)) Layout { l := Default; f(&l); return l }
	cases := []struct {
		name   string
		layout Layout
		want   string // a word the message must contain
	}{
		{"zero layout", Layout{}, "sequence bits"},
		{"too many bits", with(func(l *Layout) { l.SequenceBits = 13 }), "at most 63"},
		{"bits that overflow int", with(func(l *Layout) { l.TimestampBits = 1<<62 + 1<<61; l.MachineBits = 1 << 62 }), "at most 63"},
		{"negative machine bits", with(func(l *Layout) { l.MachineBits = -1 }), "negative"},
		{"negative timestamp bits", with(func(l *Layout) { l.TimestampBits = -41 }), "negative"},
		{"no sequence bits", with(func(l *Layout) { l.SequenceBits = 0 }), "sequence bits"},
		{"timestamp lasts months", with(func(l *Layout) { l.TimestampBits = 34 }), "less than a year"},
		{"no timestamp bits", with(func(l *Layout) { l.TimestampBits = 0 }), "less than a year"},
		{"seconds last months", with(func(l *Layout) { l.Unit = Second; l.TimestampBits = 24 }), "less than a year"},
		{"unknown unit", with(func(l *Layout) { l.Unit = 7 }), "unknown unit"},
		{"zero unit", with(func(l *Layout) { l.Unit = 0 }), "unknown unit"},
		{"zero epoch", with(func(l *Layout) { l.Epoch = time.Time{} }), "not set"},
		{"future epoch", with(func(l *Layout) { l.Epoch = time.Now().Add(time.Hour).Truncate(time.Second) }), "future"},
		{"epoch before 1970", with(func(l *Layout) { l.Epoch = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }), "1970"},
		{"epoch not a whole ms", with(func(l *Layout) { l.Epoch = DefaultEpoch.Add(time.Microsecond) }), "whole"},
		{"epoch not a whole second", with(func(l *Layout) { l.Unit = Second; l.Epoch = DefaultEpoch.Add(time.Millisecond) }), "whole"},
		{"threshold above max", with(func(l *Layout) { l.SequenceResetThreshold = 4096 }), "threshold"},
		{"threshold below -1", with(func(l *Layout) { l.SequenceResetThreshold = -2 }), "threshold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.layout.Validate()
			if !errors.Is(err, engine.ErrInvalidLayout) {
				t.Fatalf("Validate = %v, want ErrInvalidLayout", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("message %q does not say %q", err, c.want)
			}
			if c.layout == (Layout{}) {
				return // the zero Layout means Default to New
			}
			if _, err := New(0, WithLayout(c.layout)); !errors.Is(err, engine.ErrInvalidLayout) {
				t.Errorf("New = %v, want ErrInvalidLayout", err)
			}
		})
	}
	// The extremes that are allowed.
	for _, l := range []Layout{
		with(func(l *Layout) { l.SequenceResetThreshold = ResetEveryTick }),
		with(func(l *Layout) { l.SequenceResetThreshold = 4095 }),
		with(func(l *Layout) { l.SequenceResetThreshold = 1 }),
		with(func(l *Layout) { l.MachineBits = 0; l.SequenceBits = 22 }),
		with(func(l *Layout) { l.TimestampBits = 35 }),
		with(func(l *Layout) { l.TimestampBits = 50; l.MachineBits = 0; l.SequenceBits = 13 }),
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", l, err)
		}
	}
}

func TestComposeDecode(t *testing.T) {
	for name, l := range presets {
		t.Run(name, func(t *testing.T) {
			check := func(tick, machine, seq int64) bool {
				id, err := l.ComposeTick(tick, machine, seq)
				if err != nil {
					t.Errorf("ComposeTick(%d, %d, %d): %v", tick, machine, seq, err)
					return false
				}
				p, err := l.Decode(id)
				if err != nil || p.ID != id || p.Tick != tick || p.Machine != machine || p.Sequence != seq ||
					!p.Time.Equal(l.Epoch.Add(time.Duration(tick)*l.Unit.Duration())) {
					t.Errorf("Decode(%d) = %+v, %v; want tick %d machine %d seq %d", id, p, err, tick, machine, seq)
					return false
				}
				back, err := l.Compose(p.Time, p.Machine, p.Sequence)
				if err != nil || back != id {
					t.Errorf("Compose(Decode(%d)) = %d, %v", id, back, err)
					return false
				}
				return true
			}
			for _, tick := range []int64{0, 1, l.MaxTick()} {
				for _, m := range []int64{0, l.MaxMachineID()} {
					for _, s := range []int64{0, l.MaxSequence()} {
						check(tick, m, s)
					}
				}
			}
			prop := func(a, b, c uint64) bool {
				return check(int64(a%uint64(l.MaxTick()+1)), int64(b%uint64(l.MaxMachineID()+1)), int64(c%uint64(l.MaxSequence()+1)))
			}
			if err := quick.Check(prop, &quick.Config{MaxCount: 2000}); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestComposeAndDecodeReject(t *testing.T) {
	l := Default // 63 bits: every non-negative int64 is a Default ID
	for _, id := range []int64{-1, -1 << 63} {
		if _, err := l.Decode(id); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("Decode(%d) = %v, want ErrInvalidID", id, err)
		}
		if s := l.Friendly(id); s != "" {
			t.Errorf("Friendly(%d) = %q, want empty", id, s)
		}
	}
	for _, id := range []int64{1 << 53, 1<<63 - 1, -5} {
		if _, err := JSSafe.Decode(id); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("JSSafe.Decode(%d) = %v, want ErrInvalidID", id, err)
		}
		if s := JSSafe.Friendly(id); s != "" {
			t.Errorf("JSSafe.Friendly(%d) = %q, want empty", id, s)
		}
	}
	now := time.Now()
	if _, err := l.Compose(l.Epoch.Add(-time.Millisecond), 0, 0); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("before epoch: %v", err)
	}
	if _, err := l.Compose(l.Expiry(), 0, 0); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("at expiry: %v", err)
	}
	if _, err := l.Compose(l.Expiry().Add(-time.Millisecond), 0, 0); err != nil {
		t.Errorf("last tick: %v", err)
	}
	if _, err := l.Compose(time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC), 0, 0); !errors.Is(err, engine.ErrTimestampOverflow) {
		t.Errorf("far future: %v", err)
	}
	if _, err := l.Compose(now, 1024, 0); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "machine 1024") {
		t.Errorf("machine 1024: %v", err)
	}
	if _, err := l.Compose(now, 0, 4096); !errors.Is(err, engine.ErrInvalidID) || !strings.Contains(err.Error(), "sequence 4096") {
		t.Errorf("sequence 4096: %v", err)
	}
	if _, err := l.ComposeTick(-1, 0, 0); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("tick -1: %v", err)
	}
	if _, err := (Layout{}).Decode(1); !errors.Is(err, engine.ErrInvalidLayout) {
		t.Errorf("Decode on zero layout: %v", err)
	}
}

func TestTickWithOddEpoch(t *testing.T) {
	// An epoch that is a whole millisecond but not a whole second.
	l := Default
	l.Epoch = DefaultEpoch.Add(500 * time.Millisecond)
	tick, err := l.Tick(DefaultEpoch.Add(1200 * time.Millisecond))
	if err != nil || tick != 700 {
		t.Fatalf("Tick = %d, %v; want 700", tick, err)
	}
}

func TestFriendly(t *testing.T) {
	at := time.Date(2026, 6, 23, 13, 17, 30, 192e6, time.UTC)
	id, err := Default.Compose(at, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	if got := Default.Friendly(id); got != "20260623131730192-1-0" {
		t.Fatalf("Friendly = %q, want 20260623131730192-1-0", got)
	}
	for name, l := range presets {
		r := rand.New(rand.NewPCG(1, 2))
		for range 1000 {
			id := r.Int64() & l.MaxID()
			s := l.Friendly(id)
			back, err := l.ParseFriendly(s)
			if err != nil || back != id {
				t.Fatalf("%s: ParseFriendly(Friendly(%d) = %q) = %d, %v", name, id, s, back, err)
			}
			if l.Unit == Second && !strings.HasSuffix(strings.SplitN(s, "-", 2)[0], "000") {
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
		if id, err := Default.ParseFriendly(s); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("ParseFriendly(%q) = %d, %v; want ErrInvalidID", s, id, err)
		}
	}
	if _, err := Seconds.ParseFriendly("20260623131730192-1-0"); !errors.Is(err, engine.ErrInvalidID) {
		t.Errorf("second layout accepted milliseconds: %v", err)
	}
}

func FuzzParseFriendly(f *testing.F) {
	f.Add("20260623131730192-1-0")
	f.Add("20890907000000000-1023-4095")
	f.Add("99999999999999999999-1-1")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Default.ParseFriendly(s)
		if err != nil {
			return
		}
		if got := Default.Friendly(id); got != s {
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
			p, err := l.Decode(id)
			if (err == nil) != (id >= 0 && id <= l.MaxID()) {
				t.Fatalf("%s: Decode(%d) error = %v", name, id, err)
			}
			if err != nil {
				continue
			}
			back, err := l.ComposeTick(p.Tick, p.Machine, p.Sequence)
			if err != nil || back != id {
				t.Fatalf("%s: compose(decode(%d)) = %d, %v", name, id, back, err)
			}
		}
	})
}
