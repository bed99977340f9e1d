package convert_test

import (
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/convert"
)

func benchFormatters(b *testing.B) map[string]engine.Formatter {
	r62 := mustRadix(b, convert.NewRadix62)
	return map[string]engine.Formatter{
		"radix62":        r62,
		"radix62-padded": mustRadix(b, convert.NewRadix62, convert.Padded()),
		"radix36":        mustRadix(b, convert.NewRadix36),
		"decimal":        engine.Decimal{},
		"prefix-radix62": convert.WithPrefix("ord_", r62),
		"date-radix62":   convert.WithDatePrefix(nil, r62),
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
