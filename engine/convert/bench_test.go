package convert_test

import (
	"testing"
	"time"

	"github.com/idforge/idforge/engine/convert"
)

func benchFormatters(b *testing.B) map[string]*convert.Formatter {
	r62 := mustFormat(b, "radix62", convert.Settings{})
	return map[string]*convert.Formatter{
		"radix62":        r62,
		"radix62-padded": mustFormat(b, "radix62", convert.Settings{Padded: true}),
		"radix36":        mustFormat(b, "radix36", convert.Settings{}),
		"decimal":        mustFormat(b, "decimal", convert.Settings{}),
		"prefix-radix62": mustFormat(b, "radix62", convert.Settings{Prefix: "ord_"}),
		"date-radix62":   mustFormat(b, "radix62", convert.Settings{Date: time.Now}),
	}
}

// A typical default-layout snowflake ID.
const benchID = 1453462497305210880

func BenchmarkFormat(b *testing.B) {
	for name, f := range benchFormatters(b) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = f.Format(benchID)
			}
		})
	}
}

func BenchmarkParse(b *testing.B) {
	for name, f := range benchFormatters(b) {
		s := f.Format(benchID)
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := f.Parse(s); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
