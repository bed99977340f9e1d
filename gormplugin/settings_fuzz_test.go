package idplugin

import (
	"context"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/idgen"
)

// noProvider is a registry the settings check never draws from.
type noProvider struct{}

func (noProvider) Generator(context.Context, string, string) (engine.Generator, error) {
	return nil, engine.ErrUnknownGenerator
}

// FuzzDefaultGenerator: a DefaultGenerator is refused with
// engine.ErrInvalidConfig naming the field, or it is one the plugin can
// give to the untagged 64-bit integer keys it fills. Seeds: formats and the
// uuidv7 kind, once accepted and then silently left to auto-increment.
func FuzzDefaultGenerator(f *testing.F) {
	for _, s := range []string{"snowflake", "chain,name=order", "snowflake,format=hex", "snowflake,format=radix62",
		"uuidv7", "chain,name=invoice,format=INV{yyyy}{seq:6}", ",name=x", "snowflake,format=", "snowflake,,", "a\x00b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, def string) {
		if def == "" {
			return // the default, snowflake
		}
		p := &plugin{set: []Settings{{Registry: noProvider{}, DefaultGenerator: def}}}
		if err := p.resolve(); err != nil {
			if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), "idplugin.Settings.DefaultGenerator") {
				t.Fatalf("DefaultGenerator %q: %v; want ErrInvalidConfig naming the field", def, err)
			}
			return
		}
		for _, typ := range []reflect.Type{reflect.TypeFor[int64](), reflect.TypeFor[uint64](), reflect.TypeFor[engine.ID]()} {
			if _, err := idgen.NewField("M", "ID", typ, p.cfg.cols.Default); err != nil {
				t.Fatalf("DefaultGenerator %q accepted, but a %s key cannot take it: %v", def, typ, err)
			}
		}
	})
}
