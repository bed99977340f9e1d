package redisstore

import (
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock"
)

// DefaultPrefix starts every key unless [WithPrefix] says otherwise.
const DefaultPrefix = "idforge:"

type config struct {
	prefix string
	start  int64
	clock  clock.Clock
}

// Option configures a [Store] or a distributor.
type Option func(*config)

// WithPrefix puts every key under prefix instead of [DefaultPrefix], so
// several applications or environments can share one Redis. The prefix may
// carry a hash tag ("{idforge}:") to put every key in one cluster slot.
func WithPrefix(prefix string) Option { return func(c *config) { c.prefix = prefix } }

// WithStart makes segment names seen for the first time start at start: the
// first range is (start, start+step]. It has no effect on names that already
// exist. The default is 0; a negative start is an error.
func WithStart(start int64) Option { return func(c *config) { c.start = start } }

// WithClock sets the clock that tells machine distribution what "now" is
// (default clock.System). Tests pass a clock.Fake to expire leases at will.
func WithClock(c clock.Clock) Option { return func(cfg *config) { cfg.clock = c } }

// Store builds the distributors of one Redis: segments by name and the
// machine-ID distributor. It holds no state besides its configuration.
type Store struct {
	client redis.Cmdable
	cfg    config
}

// New checks the options and returns a store on client, which the caller
// keeps and closes.
func New(client redis.Cmdable, opts ...Option) (*Store, error) {
	if client == nil {
		return nil, fmt.Errorf("%w: redisstore: nil Redis client", engine.ErrInvalidConfig)
	}
	cfg := config{prefix: DefaultPrefix, clock: clock.System}
	for _, o := range opts {
		o(&cfg)
	}
	switch {
	case cfg.start < 0:
		return nil, fmt.Errorf("%w: redisstore: negative segment start %d", engine.ErrInvalidConfig, cfg.start)
	case cfg.clock == nil:
		return nil, fmt.Errorf("%w: redisstore: nil clock", engine.ErrInvalidConfig)
	case strings.Contains(cfg.prefix, "{}"):
		// An empty hash tag makes Redis Cluster hash whole keys, scattering a
		// namespace's keys over slots where one script cannot reach them all.
		return nil, fmt.Errorf("%w: redisstore: prefix %q contains an empty hash tag {}", engine.ErrInvalidConfig, cfg.prefix)
	}
	return &Store{client: client, cfg: cfg}, nil
}

// Segment returns the distributor of the named sequence, stored at
// <prefix>segment:<name>. Any name is valid, the empty one included.
func (s *Store) Segment(name string) *SegmentDistributor {
	return &SegmentDistributor{client: s.client, key: s.cfg.prefix + "segment:" + name, start: s.cfg.start}
}

// Machine returns the machine-ID distributor.
func (s *Store) Machine() *MachineDistributor {
	return &MachineDistributor{client: s.client, prefix: s.cfg.prefix, clock: s.cfg.clock}
}

// unavailable wraps a failed command as engine.ErrStoreUnavailable, keeping
// err (a context error, a network error, a Redis reply) reachable by errors.Is.
func unavailable(what string, err error) error {
	return fmt.Errorf("%w: redis %s: %w", engine.ErrStoreUnavailable, what, err)
}
