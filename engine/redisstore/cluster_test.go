package redisstore_test

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/internal/testdb"
)

// TestCluster runs the machine contract and a segment fetch on a Redis
// Cluster, where a script touching keys of different slots fails with
// CROSSSLOT: it proves the {namespace} hash tag. internal/testdb has no
// cluster, so it runs only when IDFORGE_REDIS_CLUSTER_ADDRS lists the seed
// nodes (comma-separated), for example 127.0.0.1:7001,127.0.0.1:7002.
func TestCluster(t *testing.T) {
	addrs := os.Getenv("IDFORGE_REDIS_CLUSTER_ADDRS")
	if addrs == "" {
		t.Skip("IDFORGE_REDIS_CLUSTER_ADDRS not set: no Redis Cluster to test against")
	}
	ctx := context.Background()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ",")})
	prefix := testdb.UniqueName("idf:") + ":"
	t.Cleanup(func() {
		_ = client.ForEachMaster(ctx, func(ctx context.Context, node *redis.Client) error {
			iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
		client.Close()
	})
	if err := client.Ping(ctx).Err(); err != nil {
		t.Fatalf("cluster at %s: %v", addrs, err)
	}

	machinetest.Run(t, func(t *testing.T, c clock.Clock) machine.Distributor {
		d, err := redisstore.NewMachineDistributor(client, redisstore.WithPrefix(prefix), redisstore.WithClock(c))
		if err != nil {
			t.Fatal(err)
		}
		return d
	})

	d, err := redisstore.NewSegmentDistributor(client, "order", redisstore.WithPrefix(prefix), redisstore.WithStart(100))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []int64{110, 120} {
		if got, err := d.NextMaxID(ctx, 10); err != nil || got != want {
			t.Fatalf("segment on the cluster: got %d, %v; want %d", got, err, want)
		}
	}
}
