package snowflake

import (
	"errors"
	"strings"
	"testing"
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
	if got := (Default.maxSequence() + 1) * 1000; got != 4_096_000 {
		t.Errorf("Default IDs/s = %d, want 4096000", got)
	}
	if got := Default.Epoch.UnixMilli(); got != 1577203200000 {
		t.Errorf("Default epoch = %d ms, want 1577203200000", got)
	}
	if got, want := Default.expiry(), defaultEpoch.Add((1<<41)*time.Millisecond); !got.Equal(want) {
		t.Errorf("Default expiry = %v, want %v", got, want)
	}
	if got, want := Seconds.expiry(), defaultEpoch.Add((1<<31)*time.Second); !got.Equal(want) {
		t.Errorf("Seconds expiry = %v, want %v", got, want)
	}
	for _, l := range []Layout{JSSafe, JSSafeSeconds} {
		if l.maxID() != 1<<53-1 {
			t.Errorf("%s: maxID = %d, want 2^53-1", l.String(), l.maxID())
		}
		// The very last ID of the layout: last tick, last machine, last sequence.
		tm, machine, seq, err := l.Decode(1<<53 - 1)
		if err != nil || !tm.Equal(l.tickTime(l.maxTick())) || machine != l.maxMachineID() || seq != l.maxSequence() {
			t.Errorf("%s: 2^53-1 decodes to %v %d %d, %v; want the last tick, machine and sequence", l.String(), tm, machine, seq, err)
		}
		if _, _, _, err := l.Decode(1 << 53); !errors.Is(err, engine.ErrInvalidID) {
			t.Errorf("%s: 2^53 decodes with %v, want ErrInvalidID", l.String(), err)
		}
	}
	if Default.resetThreshold() != 2047 || JSSafe.resetThreshold() != 255 || Seconds.resetThreshold() != 1<<21-1 {
		t.Errorf("default thresholds: %d %d %d", Default.resetThreshold(), JSSafe.resetThreshold(), Seconds.resetThreshold())
	}
	if s := Default.String(); s != "41/10/12 ms since 2019-12-24T16:00:00Z" {
		t.Errorf("describe = %q", s)
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
		{"seconds last months", with(func(l *Layout) { l.Unit = time.Second; l.TimestampBits = 24 }), "less than a year"},
		{"unknown unit", with(func(l *Layout) { l.Unit = 7 }), "unit 7ns"},
		{"minute unit", with(func(l *Layout) { l.Unit = time.Minute }), "neither"},
		{"zero epoch", with(func(l *Layout) { l.Epoch = time.Time{} }), "not set"},
		{"future epoch", with(func(l *Layout) { l.Epoch = time.Now().Add(time.Hour).Truncate(time.Second) }), "future"},
		{"epoch before 1970", with(func(l *Layout) { l.Epoch = time.Date(1969, 1, 1, 0, 0, 0, 0, time.UTC) }), "1970"},
		{"epoch not a whole ms", with(func(l *Layout) { l.Epoch = defaultEpoch.Add(time.Microsecond) }), "whole"},
		{"epoch not a whole second", with(func(l *Layout) { l.Unit = time.Second; l.Epoch = defaultEpoch.Add(time.Millisecond) }), "whole"},
		{"threshold above max", with(func(l *Layout) { l.SequenceResetThreshold = 4096 }), "threshold"},
		{"threshold below -1", with(func(l *Layout) { l.SequenceResetThreshold = -2 }), "threshold"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.layout.Validate()
			if !errors.Is(err, engine.ErrInvalidConfig) {
				t.Fatalf("Validate = %v, want ErrInvalidConfig", err)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("message %q does not say %q", err, c.want)
			}
			if c.layout == (Layout{}) {
				return // the zero Layout means Default to New
			}
			if _, err := New(0, Settings{Layout: c.layout}); !errors.Is(err, engine.ErrInvalidConfig) {
				t.Errorf("New = %v, want ErrInvalidConfig", err)
			}
		})
	}
	// The extremes that are allowed.
	for _, l := range []Layout{
		with(func(l *Layout) { l.SequenceResetThreshold = resetEveryTick }),
		with(func(l *Layout) { l.SequenceResetThreshold = 4095 }),
		with(func(l *Layout) { l.SequenceResetThreshold = 1 }),
		with(func(l *Layout) { l.MachineBits = 0; l.SequenceBits = 22 }),
		with(func(l *Layout) { l.TimestampBits = 35 }),
		with(func(l *Layout) { l.TimestampBits = 50; l.MachineBits = 0; l.SequenceBits = 13 }),
	} {
		if err := l.Validate(); err != nil {
			t.Errorf("%s: %v", l.String(), err)
		}
	} // A zero Unit is a millisecond: the same IDs as Default.
	zero := with(func(l *Layout) { l.Unit = 0 })
	if err := zero.Validate(); err != nil {
		t.Errorf("zero unit: %v", err)
	}
	t1, _, _, err1 := zero.Decode(859905511414304769)
	t2, _, _, err2 := Default.Decode(859905511414304769)
	if err1 != nil || err2 != nil || !t1.Equal(t2) {
		t.Errorf("zero unit decodes to %v, %v; Default to %v, %v", t1, err1, t2, err2)
	}
}
