package convert_test

import (
	"context"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
)

// Prefixed, sortable radix-62 order numbers: a Formatter from this package
// writes what any Generator draws.
func Example() {
	var next int64 = 1_234_567_890
	gen := genFunc(func(context.Context) (int64, error) { next++; return next, nil })
	f, err := convert.New("radix62", convert.Settings{Padded: true, Prefix: "ord_"})
	if err != nil {
		fmt.Println(err)
		return
	}
	for range 2 {
		id, _ := gen.NextID(context.Background())
		fmt.Println(f.Format(id))
	}
	// Output:
	// ord_000001LY7VL
	// ord_000001LY7VM
}

// Padding makes the strings sort like the numbers; Parse accepts only the
// form Format writes.
func ExampleNew() {
	plain, _ := convert.New("radix62")
	padded, _ := convert.New("radix62", convert.Settings{Padded: true})
	for _, id := range []int64{61, 62} {
		fmt.Println(plain.Format(id), padded.Format(id))
	}
	id, err := padded.Parse("0000000001z")
	fmt.Println(id, err)
	_, err = padded.Parse("1z") // too short for the padded form
	fmt.Println(err)
	// Output:
	// z 0000000000z
	// 10 00000000010
	// 123 <nil>
	// idforge: invalid id: radix62 "1z": 2 digits, want 11
}

// The format names are the ones struct tags such as
// `idgen:"snowflake,format=radix62"` use.
func ExampleNew_names() {
	for _, name := range []string{"decimal", "radix36", "radix62", "base64"} {
		f, err := convert.New(name)
		if err != nil {
			fmt.Println(err)
			continue
		}
		fmt.Println(name, f.Format(1<<53))
	}
	// Output:
	// decimal 9007199254740992
	// radix36 2gosa7pa2gw
	// radix62 fFgnDxSe8
	// idforge: invalid configuration: unknown format "base64" (known: [decimal radix36 radix62])
}

// A prefix and the date of formatting; Parse checks and strips both.
func ExampleSettings() {
	now := func() time.Time { return time.Date(2026, 11, 21, 23, 27, 14, 0, time.UTC) }
	f, _ := convert.New("radix36", convert.Settings{Prefix: "ord_", Date: now})
	fmt.Println(f.Format(1_000_000))
	fmt.Println(f.Parse("ord_20261121lfls"))
	fmt.Println(f.Parse("ord_19991231lfls")) // any date: it is not part of the ID
	fmt.Println(f.Parse("usr_20261121lfls"))
	// Output:
	// ord_20261121lfls
	// 1000000 <nil>
	// 1000000 <nil>
	// 0 idforge: invalid id: "usr_20261121lfls": want prefix "ord_"
}

// genFunc adapts a function to engine.Generator: a stand-in for any
// generator.
type genFunc func(ctx context.Context) (int64, error)

// NextID calls f(ctx).
func (f genFunc) NextID(ctx context.Context) (int64, error) { return f(ctx) }

var _ engine.Generator = genFunc(nil)
