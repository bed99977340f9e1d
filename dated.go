package idforge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/internal/chain"
	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
)

// Dated returns the dated chain name in format: business numbers such as
// INV-20261125-000123 whose counter restarts at 1 every day, month or year.
// The format is literal text (ASCII letters, digits and - _ . / : #) and
// the fields
//
//	{yyyy}    the year, 4 digits
//	{MM}      the month, 2 digits
//	{dd}      the day of the month, 2 digits
//	{seq:N}   the counter, N digits (1 to 18), zero-padded
//
// in that order; {yyyy} and {seq:N} are required and {dd} needs {MM}, so
// that the strings, all of one length, sort by period and then by counter.
// The finest date field names the period, which starts and ends in
// Settings.Zone (UTC by default) by Settings.Snowflake.Clock.
//
// Each period counts in a store sequence of its own, "<name>:<period>"
// (invoice:20261125, invoice:202611, invoice:2026), drawn through a chain
// like any other: within a period the numbers of one process strictly
// increase, and several processes share the counter without handing out a
// number twice. Like every chain's, the numbers have gaps: a restart skips
// what the previous process had fetched, and several processes take turns
// by ranges. Gapless numbering, which needs a transaction per number, is
// not what this is for. A counter past the N digits of {seq:N} is an
// error wrapping engine.ErrIDOverflow until the next period starts, never
// a number of the wrong width.
//
// The new sequence of each period needs a Floor on a store that was not
// declared brand-new (see [Registry.AddFloor] and engine.ErrNoFloor): the
// GORM plugin derives one from the tagged column, the largest counter
// among the values of the period; elsewhere add one under "<name>:*".
//
// A process draws from the newest two periods it has seen and closes the
// chain of an older one, giving up what it had fetched of it. A format
// the grammar refuses wraps engine.ErrInvalidConfig; a registry without a
// store has no chains, which wraps engine.ErrUnknownGenerator.
func (r *Registry) Dated(name, format string) (func(ctx context.Context) (string, error), error) {
	f, err := dated.Parse(format)
	if err != nil {
		return nil, err
	}
	switch {
	case name == "":
		return nil, fmt.Errorf("%w: dated format %q needs a chain name", engine.ErrInvalidConfig, format)
	case r.store == nil:
		return nil, fmt.Errorf("%w: dated chain %q: kind %q needs a registry built with a store (idforge.New(ctx, idforge.Settings{Store: st}))",
			engine.ErrUnknownGenerator, name, genreg.Chain)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w: dated chain %q", engine.ErrClosed, name)
	}
	key := name + " " + f.Period()
	s := r.series[key]
	if s == nil {
		if r.series == nil {
			r.series = map[string]*series{}
		}
		s = &series{r: r, name: name}
		r.series[key] = s
	}
	return datedChain{s: s, f: f}.NextString, nil
}

// datedChain is one format of a series.
type datedChain struct {
	s *series
	f *dated.Format
}

// NextString draws the next number of the current period.
func (d datedChain) NextString(ctx context.Context) (string, error) {
	for {
		now := d.s.r.clock.Now().In(d.s.r.zone)
		key := d.f.Key(now)
		c, err := d.s.chain(key)
		if err != nil {
			return "", err
		}
		n, err := c.NextID(ctx)
		if errors.Is(err, engine.ErrClosed) && d.s.retired(c) {
			continue // a newer period closed it meanwhile: read the clock again
		}
		if err != nil {
			return "", fmt.Errorf("dated chain %q, %s %s: %w", d.s.name, d.f.Period(), key, err)
		}
		out, err := d.f.Format(now, n)
		if err != nil {
			return "", fmt.Errorf("dated chain %q: %w", d.s.name, err)
		}
		return out, nil
	}
}

// series is the chains of one dated name and period length: the newest two
// periods drawn from.
type series struct {
	r    *Registry
	name string

	mu      sync.Mutex
	periods [2]period // newest first
	closed  bool
}

type period struct {
	key   string
	chain *chain.Chain
}

// chain returns the chain of the period key, building it if the series has
// none, and closing the oldest of the two it held.
func (s *series) chain(key string) (*chain.Chain, error) {
	s.mu.Lock()
	for _, p := range s.periods {
		if p.chain != nil && p.key == key {
			s.mu.Unlock()
			return p.chain, nil
		}
	}
	if s.closed {
		s.mu.Unlock()
		return nil, fmt.Errorf("%w: dated chain %q", engine.ErrClosed, s.name)
	}
	c, err := s.r.newChain(s.r.store, s.r.chain, s.name+":"+key)
	if err != nil {
		s.mu.Unlock()
		return nil, fmt.Errorf("dated chain %q, period %s: %w", s.name, key, err)
	}
	old := s.periods[1].chain
	s.periods[1], s.periods[0] = s.periods[0], period{key: key, chain: c}
	s.mu.Unlock()
	if old != nil {
		s.r.release(old)
	}
	return c, nil
}

// retired reports whether c is no longer one of the series' chains.
func (s *series) retired(c *chain.Chain) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return !s.closed && s.periods[0].chain != c && s.periods[1].chain != c
}

// close closes the series' chains; it draws no more.
func (s *series) close() error {
	s.mu.Lock()
	s.closed = true
	ps := s.periods
	s.periods = [2]period{}
	s.mu.Unlock()
	var errs []error
	for _, p := range ps {
		if p.chain != nil {
			errs = append(errs, s.r.release(p.chain))
		}
	}
	return errors.Join(errs...)
}

// release stops holding c and closes it.
func (r *Registry) release(c *chain.Chain) error {
	r.mu.Lock()
	r.chains = slices.DeleteFunc(r.chains, func(g *chain.Chain) bool { return g == c })
	r.mu.Unlock()
	return c.Close()
}

// Close closes the dated chains, then every generator of the registry: the
// chains stop their prefetch workers and the machine ID is given back.
// Lookups fail with engine.ErrClosed afterwards.
func (r *Registry) Close() error {
	r.mu.Lock()
	r.closed = true
	series := r.series
	r.series = nil
	r.mu.Unlock()
	var errs []error
	for _, s := range series {
		errs = append(errs, s.close())
	}
	return errors.Join(append(errs, r.gens.Close())...)
}
