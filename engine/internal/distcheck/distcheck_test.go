package distcheck

import (
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/idforge/idforge/engine"
)

// Names with a NUL, another control byte or broken UTF-8 are refused,
// naming what was wrong and where, with a bounded quote of the name.
func TestTextRefusesControlBytes(t *testing.T) {
	for _, name := range []string{"a\x00b", "\x00", "line\nbreak", "tab\there", "del\x7f", "\xff", "ok" + strings.Repeat("x", 1<<20) + "\x00"} {
		err := Text("sqlstore", "segment name", name)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "segment name") || len(err.Error()) > 512 {
			t.Errorf("Text(%.20q) = %.300v; want a bounded ErrInvalidConfig naming the segment name", name, err)
		}
		if err := Instance(name, "a"); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "namespace") {
			t.Errorf("Instance(namespace %.20q) = %.300v; want ErrInvalidConfig naming the namespace", name, err)
		}
		if err := Instance("ns", name); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "instance ID") {
			t.Errorf("Instance(ID %.20q) = %.300v; want ErrInvalidConfig naming the instance ID", name, err)
		}
	}
	for _, name := range []string{"", "order", "orders:2026-11", "café", "pod-0.svc/ns", "注文"} {
		if err := Text("sqlstore", "segment name", name); err != nil {
			t.Errorf("Text(%q) = %v", name, err)
		}
	}
}

func TestDistributeBoundsSafeGuard(t *testing.T) {
	for _, sg := range []time.Duration{0, -1, MaxSafeGuard + 1, 1<<63 - 1} {
		if err := Distribute("ns", "a", 10, sg); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "safe-guard") {
			t.Errorf("Distribute with safe-guard %v = %v; want ErrInvalidConfig naming it", sg, err)
		}
	}
	if err := Distribute("ns", "a", 10, MaxSafeGuard); err != nil {
		t.Errorf("Distribute with the largest safe-guard: %v", err)
	}
}

// FuzzText: a name Text accepts is valid UTF-8 without control
// characters; one it refuses gets a bounded error wrapping
// engine.ErrInvalidConfig.
func FuzzText(f *testing.F) {
	for _, s := range []string{"", "order", "a\x00b", "id\x00%2", "\n", "\x7f", "\xff", "\xc3", "café", strings.Repeat("\x00", 1<<20)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, name string) {
		err := Text("store", "name", name)
		if err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) || len(err.Error()) > 512 {
				t.Fatalf("Text(%.40q) = %.300v; want a bounded ErrInvalidConfig", name, err)
			}
			return
		}
		if !utf8.ValidString(name) {
			t.Fatalf("Text accepted broken UTF-8 %q", name)
		}
		for _, r := range name {
			if r < 0x20 || r == 0x7f {
				t.Fatalf("Text accepted %q holding control character %U", name, r)
			}
		}
	})
}
