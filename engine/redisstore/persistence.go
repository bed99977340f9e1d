package redisstore

import (
	"context"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine"
)

// persistence is what one Redis node keeps across a restart, and whether
// it may drop keys while it runs.
type persistence struct {
	aof   bool
	fsync string // appendfsync; "" when unknown
	save  string // RDB snapshot rules; "" none, "?" unknown
	// evicts is the maxmemory-policy when it may evict keys without a TTL
	// (allkeys-*) and a maxmemory is set, as idforge's keys have none.
	evicts string
}

// readPersistence asks CONFIG GET, falling back to INFO persistence where
// CONFIG is disabled (managed services rename it).
func readPersistence(ctx context.Context, node redis.Cmdable) (persistence, error) {
	names := []string{"appendonly", "appendfsync", "save", "maxmemory", "maxmemory-policy"}
	conf := make(map[string]string, len(names))
	var err error
	for _, name := range names {
		var m map[string]string
		if m, err = node.ConfigGet(ctx, name).Result(); err != nil {
			break
		}
		v, ok := m[name]
		if !ok {
			err = fmt.Errorf("CONFIG GET %s: no such parameter", name)
			break
		}
		conf[name] = v
	}
	if err == nil {
		return persistence{aof: conf["appendonly"] == "yes", fsync: conf["appendfsync"], save: conf["save"],
			evicts: evicting(conf["maxmemory"], conf["maxmemory-policy"])}, nil
	}
	info, ierr := node.Info(ctx, "persistence", "memory").Result()
	if ierr != nil {
		return persistence{}, fmt.Errorf("CONFIG GET: %w; INFO persistence: %w", err, ierr)
	}
	p := persistence{save: "?"}
	var maxmemory, policy string
	for line := range strings.Lines(info) {
		k, v, _ := strings.Cut(strings.TrimSpace(line), ":")
		switch k {
		case "aof_enabled":
			p.aof = v == "1"
		case "maxmemory":
			maxmemory = v
		case "maxmemory_policy":
			policy = v
		}
	}
	p.evicts = evicting(maxmemory, policy)
	return p, nil
}

// evicting returns policy if, with maxmemory (bytes, "0" or "" for no
// limit), Redis may evict keys that have no TTL; "" otherwise.
func evicting(maxmemory, policy string) string {
	if maxmemory == "" || maxmemory == "0" || !strings.HasPrefix(policy, "allkeys-") {
		return ""
	}
	return policy
}

// ErrVolatile is wrapped by Open's error for a Redis without persistence
// (no AOF, no RDB) when Settings.AllowVolatile is not set, so that a program
// exposing the setting under another name can say how to set it. It wraps
// engine.ErrInvalidConfig.
var ErrVolatile = fmt.Errorf("%w: Redis without persistence", engine.ErrInvalidConfig)

// checkPersistence reads the persistence of every node that holds data
// (every master of a cluster, every shard of a ring): no AOF and no RDB is an
// error unless AllowVolatile; a window in which acknowledged writes can be
// lost without the epoch noticing is a warning.
func (s *Store) checkPersistence(ctx context.Context) error {
	check := func(ctx context.Context, node redis.Cmdable) error {
		addr := clientAddr(node)
		p, err := readPersistence(ctx, node)
		if err != nil {
			s.cfg.Logger.Warn("idforge: cannot tell whether Redis persists the store; a crash may lose acknowledged writes",
				"store", s.name, "node", addr, "error", err)
			return nil
		}
		return s.judge(addr, p)
	}
	switch c := s.client.(type) {
	case *redis.ClusterClient:
		return c.ForEachMaster(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n) })
	case *redis.Ring:
		return c.ForEachShard(ctx, func(ctx context.Context, n *redis.Client) error { return check(ctx, n) })
	}
	return check(ctx, s.client)
}

func (s *Store) judge(node string, p persistence) error {
	log := s.cfg.Logger
	if p.evicts != "" {
		// Not even AllowVolatile: an evicted machine ID or counter is
		// forgotten while the epoch stays, so nobody sees a reset.
		return fmt.Errorf("%w: %s: node %s (maxmemory-policy %s, with a maxmemory set) may evict idforge's keys under memory pressure:"+
			" a machine ID or counter it forgets is handed out again, and no epoch check can tell; use noeviction or a volatile-* policy"+
			" (idforge's keys have no TTL)",
			engine.ErrInvalidConfig, s.name, node, p.evicts)
	}
	switch {
	case p.aof && p.fsync == "always":
		return nil
	case p.aof:
		setting, window := "appendfsync "+p.fsync, "the writes the operating system had not flushed yet (up to about 30 s)"
		switch p.fsync {
		case "everysec":
			window = "about the last second (up to 2 s) of acknowledged writes"
		case "":
			setting, window = "AOF, appendfsync unreadable (CONFIG disabled)", "an unknown window of acknowledged writes"
		}
		log.Warn("idforge: Redis runs with "+setting+": a crash (kill -9, power loss) may lose "+window+
			", and the epoch cannot tell: a segment range or machine ID handed out in that window can be handed out again"+
			" to a process that did not hold it. Set appendfsync always.",
			"store", s.name, "node", node)
	case p.save == "?":
		log.Warn("idforge: Redis has no AOF and its RDB snapshots cannot be read (CONFIG disabled): a crash may roll the store back"+
			" to its last snapshot, which the epoch cannot tell. Set appendonly yes, appendfsync always.",
			"store", s.name, "node", node)
	case p.save != "":
		log.Warn("idforge: Redis keeps RDB snapshots only (save "+p.save+"): a crash rolls the store back to the last snapshot,"+
			" which the epoch cannot tell; only the floors of live processes protect their segments. Set appendonly yes, appendfsync always.",
			"store", s.name, "node", node)
	case !s.cfg.AllowVolatile:
		return fmt.Errorf("%w: %s: node %s (appendonly no, no save rules): a restart forgets every machine ID"+
			" and segment handed out; run it with appendonly yes and appendfsync always, or set Settings.AllowVolatile to accept that",
			ErrVolatile, s.name, node)
	default:
		log.Info("idforge: Redis has no persistence (AllowVolatile): a restart is a store reset; IDs already written by processes that are gone may repeat",
			"store", s.name, "node", node)
	}
	return nil
}
