package chain

import (
	"fmt"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/segment"
)

// What the external tests reach: the error type and sentinel they inspect,
// and chains and single-segment generators with nothing a runner owns.
type ExhaustedError = exhaustedError

var ErrInvalidRange = errInvalidRange

// Generator is the single-segment generator, by the name the tests use.
type Generator = Single

// NewPlain starts a chain drawing from d, configured by at most one
// Settings, with nothing a runner owns.
func NewPlain(d segment.Distributor, s ...segment.Settings) (*Chain, error) {
	set, err := oneSettings(s)
	if err != nil {
		return nil, err
	}
	return New(d, set, Owned{})
}

// NewPlainSingle is NewPlain's single-segment generator.
func NewPlainSingle(d segment.Distributor, s ...segment.Settings) (*Single, error) {
	set, err := oneSettings(s)
	if err != nil {
		return nil, err
	}
	return NewSingle(d, set, Owned{})
}

// oneSettings returns the one Settings of a variadic argument.
func oneSettings(set []segment.Settings) (segment.Settings, error) {
	switch len(set) {
	case 0:
		return segment.Settings{}, nil
	case 1:
		return set[0], nil
	}
	return segment.Settings{}, fmt.Errorf("%w: segment: at most one Settings, got %d", engine.ErrInvalidConfig, len(set))
}
