package snowflake_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/snowflake"
)

// A MaxBackwards past its bound (a minute) is refused naming the field:
// every caller would wait it out on a clock step, a hang rather than a wait.
func TestMaxBackwardsBounded(t *testing.T) {
	for _, d := range []time.Duration{time.Minute + 1, math.MaxInt64} {
		if _, err := snowflake.New(1, snowflake.Settings{MaxBackwards: d}); !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "MaxBackwards") {
			t.Errorf("MaxBackwards %v: %v; want ErrInvalidConfig naming MaxBackwards", d, err)
		}
	}
	for _, d := range []time.Duration{time.Minute, math.MinInt64} {
		if _, err := snowflake.New(1, snowflake.Settings{MaxBackwards: d}); err != nil {
			t.Errorf("MaxBackwards %v: %v", d, err)
		}
	}
}
