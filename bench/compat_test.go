package bench

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	bwmarrin "github.com/bwmarrin/snowflake"

	"github.com/idforge/idforge/engine/convert"
)

// convert's padded radix 36, stripped of its padding, is bwmarrin's Base36.
func TestRadix36LikeBwmarrin(t *testing.T) {
	r36, err := convert.New("radix36", convert.Settings{Padded: true})
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	ids := []int64{0, 1, 57, 58, 3363, 3364, math.MaxInt64}
	for range 1000 {
		ids = append(ids, rng.Int64()>>rng.IntN(63))
	}
	for _, n := range ids {
		if got, want := strings.TrimLeft(r36.Format(n), "0"), bwmarrin.ID(n).Base36(); got != want && n != 0 {
			t.Fatalf("radix 36 of %d unpadded = %q, bwmarrin's %q", n, got, want)
		}
	}
}
