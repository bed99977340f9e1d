package convert

import (
	"fmt"

	"github.com/idforge/idforge/engine"
)

// Names returns the formats [ByName] knows, as struct tags spell them
// (`idgen:"snowflake,format=radix62"`).
func Names() []string { return []string{"decimal", "radix36", "radix62"} }

// ByName returns the formatter for a format name: "radix62" and "radix36"
// take the radix options, "decimal" is [engine.Decimal] and takes none. An
// unknown name or a bad option wraps [engine.ErrInvalidConfig].
func ByName(name string, opts ...Option) (engine.Formatter, error) {
	var (
		r   *Radix
		err error
	)
	switch name {
	case "radix62":
		r, err = NewRadix62(opts...)
	case "radix36":
		r, err = NewRadix36(opts...)
	case "decimal":
		if len(opts) > 0 {
			return nil, fmt.Errorf("%w: format \"decimal\" takes no options", engine.ErrInvalidConfig)
		}
		return engine.Decimal{}, nil
	default:
		return nil, fmt.Errorf("%w: unknown format %q (known: %v)", engine.ErrInvalidConfig, name, Names())
	}
	if err != nil {
		return nil, err // not r: a nil *Radix in a non-nil interface
	}
	return r, nil
}
