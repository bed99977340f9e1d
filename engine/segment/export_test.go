package segment

import "github.com/idforge/idforge/internal/segmenthook"

// What the external tests reach: the error type and sentinel they inspect,
// the single-segment generator, the settings check, and chains with the
// fields the registry owns.
type ExhaustedError = exhaustedError

var ErrInvalidRange = errInvalidRange

type Generator = single

// Owned is what the runner of a chain sets: name, logger, clock, and the
// test-only tuning of the values fixed for users.
type Owned = segmenthook.Owned

func New(d Distributor, s ...Settings) (*Generator, error) {
	set, err := oneSettings(s)
	if err != nil {
		return nil, err
	}
	return newSingle(d, set, owned{})
}

func NewOwned(d Distributor, s Settings, o Owned) (*Generator, error) {
	return newSingle(d, s, o)
}

func NewOwnedChain(d Distributor, s Settings, o Owned) (*Chain, error) {
	return newChain(d, s, o)
}

func (s Settings) Validate() error { return s.validate() }

// Stats and Discard as the registry reaches them through segmenthook.
type Stats = segmenthook.Stats

func (c *Chain) Stats() Stats        { return c.stats() }
func (c *Chain) Discard(cause error) { c.discard(cause) }

// Chain is the chain the registry runs, for the package's own tests.
type Chain = chain

// NewChain starts a chain drawing from d, configured by at most one
// Settings, with nothing a runner owns.
func NewChain(d Distributor, s ...Settings) (*Chain, error) {
	set, err := oneSettings(s)
	if err != nil {
		return nil, err
	}
	return newChain(d, set, owned{})
}
