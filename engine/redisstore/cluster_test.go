package redisstore_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idforge/idforge/engine/clock"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/engine/redisstore"
	"github.com/idforge/idforge/engine/segment"
	"github.com/idforge/idforge/engine/segment/segmenttest"
	"github.com/idforge/idforge/internal/chain/chaintest"
	"github.com/idforge/idforge/internal/leased/leasetest"
	"github.com/idforge/idforge/tests/testdb"
)

// clusterEnv names the seed nodes of a Redis Cluster to test against,
// comma-separated; .ci/run starts three masters on 127.0.0.1:7000-7002.
const clusterEnv = "IDFORGE_REDIS_CLUSTER"

// clusterClient connects to the cluster of IDFORGE_REDIS_CLUSTER, skipping
// the test without one (failing it when IDFORGE_REQUIRE_SERVERS=1), and
// returns a prefix of the test's own (with a hash tag of its own) whose keys
// are deleted when the test ends.
func clusterClient(t *testing.T) (*redis.ClusterClient, string) {
	t.Helper()
	addrs := os.Getenv(clusterEnv)
	if addrs == "" {
		if testdb.Required() {
			t.Fatalf("%s is required (IDFORGE_REQUIRE_SERVERS=1) but not set: no Redis Cluster to test against", clusterEnv)
		}
		t.Skipf("%s not set: no Redis Cluster to test against", clusterEnv)
	}
	ctx := context.Background()
	client := redis.NewClusterClient(&redis.ClusterOptions{Addrs: strings.Split(addrs, ","), MaxRedirects: 16})
	name := testdb.UniqueName("idf")
	prefix := name + ":{" + name + "}:"
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
	return client, prefix
}

// TestCluster runs the machine and segment contracts on a Redis Cluster,
// where a script touching keys of different slots fails with CROSSSLOT: it
// proves that every key of a store, the epoch included, shares one hash tag.
func TestCluster(t *testing.T) {
	client, prefix := clusterClient(t)
	open := func(t *testing.T, opts ...redisstore.Settings) *redisstore.Store {
		s, err := redisstore.Open(t.Context(), client, with(redisstore.Settings{Prefix: prefix, ResetGrace: -1, Init: true}, opts...))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	t.Run("Machine", func(t *testing.T) {
		distributors := func(t *testing.T, c clock.Clock) machine.Distributor {
			return open(t, redisstore.Settings{Clock: c})
		}
		machinetest.Run(t, distributors)
		leasetest.Run(t, distributors)
	})
	t.Run("Segment", func(t *testing.T) {
		s := open(t, redisstore.Settings{Start: 100})
		segments := func(t *testing.T, name string) segment.Distributor { return segmentOf(t, s, name) }
		segmenttest.Run(t, segmenttest.Suite{Segments: segments, Start: 100})
		chaintest.Run(t, segments, 100)
	})
	t.Run("Admin", func(t *testing.T) {
		s := open(t)
		ctx := t.Context()
		in := machine.Instance{Namespace: "adm", ID: "web-0"}
		st, err := s.Distribute(ctx, in, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if as, err := redisstore.AdminOf(s).Machines(ctx, "adm"); err != nil || len(as) != 1 || as[0].Instance != in {
			t.Fatalf("Machines = %+v, %v", as, err)
		}
		if err := redisstore.AdminOf(s).Release(ctx, "adm", st.MachineID, true); err != nil {
			t.Fatal(err)
		}
		if c, err := redisstore.AdminOf(s).RaiseCounter(ctx, "adm", 42); err != nil || c != 42 {
			t.Fatalf("RaiseCounter = %d, %v", c, err)
		}
		if c, found, err := redisstore.AdminOf(s).Counter(ctx, "adm"); err != nil || !found || c != 42 {
			t.Fatalf("Counter = %d, %t, %v", c, found, err)
		}
	})
	t.Run("Floor", func(t *testing.T) {
		prefix := prefix + "floor:" // the Floor part wants an empty store
		segmenttest.Run(t, segmenttest.Suite{
			Open: openWithFloor(client, redisstore.Settings{Prefix: prefix, ResetGrace: -1}),
			Wipe: func(t *testing.T, _ bool) { // the Floor part wipes whole stores only
				var deleted atomic.Int64
				err := client.ForEachMaster(t.Context(), func(ctx context.Context, node *redis.Client) error {
					n, err := testdb.DeleteRedisKeys(ctx, node, prefix)
					deleted.Add(n)
					return err
				})
				if err != nil || deleted.Load() == 0 {
					t.Fatalf("wipe: %d keys deleted, %v", deleted.Load(), err)
				}
			},
		})
	})
}

// TestClusterPrimaryRestart kills with SIGKILL the primary that holds the
// store's slot and starts it again from its AOF (the cluster of .ci/run runs
// appendonly yes, appendfsync always): the store keeps its epoch, its machine
// ID and its counters; nothing is a reset.
func TestClusterPrimaryRestart(t *testing.T) {
	client, prefix := clusterClient(t)
	ctx := t.Context()
	s, err := redisstore.Open(ctx, client, redisstore.Settings{Prefix: prefix, ResetGrace: -1, Init: true})
	if err != nil {
		t.Fatal(err)
	}
	inst := machine.Instance{Namespace: "restart", ID: "a"}
	st, err := s.Distribute(ctx, inst, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	order := segmentOf(t, s, "order")
	before, err := order.NextMaxID(ctx, 10)
	if err != nil {
		t.Fatal(err)
	}

	primary, err := client.MasterForKey(ctx, s.EpochKey())
	if err != nil {
		t.Fatal(err)
	}
	restartPrimary(t, primary)
	waitClusterOK(t, client, s.EpochKey())

	epoch, err := client.Get(ctx, s.EpochKey()).Result()
	if err != nil || epoch != s.Epoch() {
		t.Fatalf("epoch after the restart: %q, %v; want %q", epoch, err, s.Epoch())
	}
	if err := s.Guard(ctx, inst, st); err != nil {
		t.Fatalf("heartbeat after the restart: %v", err)
	}
	again, err := s.Distribute(ctx, inst, 10, time.Minute)
	if err != nil || again.MachineID != st.MachineID {
		t.Fatalf("Distribute after the restart: %v, %v; want machine ID %d", again, err, st.MachineID)
	}
	after, err := order.NextMaxID(ctx, 10)
	if err != nil || after != before+10 {
		t.Fatalf("segment after the restart: %d, %v; want %d", after, err, before+10)
	}
	// A second store value, as a process started after the restart, sees
	// the same epoch: no grace, no reset.
	fresh, err := redisstore.Open(ctx, client, redisstore.Settings{Prefix: prefix})
	if err != nil || fresh.Epoch() != s.Epoch() {
		t.Fatalf("fresh store after the restart: epoch %q, %v; want %q", fresh.Epoch(), err, s.Epoch())
	}
}

// restartPrimary kills node with SIGKILL and starts it again with the
// configuration it ran with (it must run on this machine).
func restartPrimary(t *testing.T, node *redis.Client) {
	t.Helper()
	ctx := t.Context()
	cfg := map[string]string{}
	for _, name := range []string{"port", "bind", "dir", "cluster-config-file", "appendonly", "appendfsync", "appenddirname", "appendfilename", "save", "cluster-node-timeout"} {
		m, err := node.ConfigGet(ctx, name).Result()
		if err != nil {
			t.Fatalf("CONFIG GET %s: %v", name, err)
		}
		if v, ok := m[name]; ok {
			cfg[name] = v
		}
	}
	if cfg["appendonly"] != "yes" || cfg["appendfsync"] != "always" {
		t.Fatalf("the cluster's primary runs appendonly %s, appendfsync %s: start it with appendonly yes, appendfsync always (as .ci/run does)",
			cfg["appendonly"], cfg["appendfsync"])
	}
	info, err := node.Info(ctx, "server").Result()
	if err != nil {
		t.Fatal(err)
	}
	pid := 0
	for line := range strings.Lines(info) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "process_id:"); ok {
			pid, _ = strconv.Atoi(v)
		}
	}
	if pid <= 0 {
		t.Fatalf("no process_id in INFO server")
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		t.Fatalf("kill -9 %d (the primary must run on this machine): %v", pid, err)
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("process %d still alive after SIGKILL", pid)
		}
		time.Sleep(20 * time.Millisecond)
	}
	args := []string{"--cluster-enabled", "yes", "--daemonize", "yes", "--logfile", cfg["dir"] + "/restart.log"}
	for _, name := range []string{"port", "bind", "dir", "cluster-config-file", "appendonly", "appendfsync", "appenddirname", "appendfilename", "save", "cluster-node-timeout"} {
		if v, ok := cfg[name]; ok {
			if name == "bind" {
				args = append(args, "--bind")
				args = append(args, strings.Fields(v)...)
				continue
			}
			args = append(args, "--"+name, v)
		}
	}
	if out, err := exec.Command("redis-server", args...).CombinedOutput(); err != nil {
		t.Fatalf("restarting the primary: redis-server %v: %v\n%s", args, err, out)
	}
}

// waitClusterOK waits until key's slot answers again.
func waitClusterOK(t *testing.T, client *redis.ClusterClient, key string) {
	t.Helper()
	var err error
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		ctx, cancel := context.WithTimeout(t.Context(), time.Second)
		err = client.Get(ctx, key).Err()
		cancel()
		if err == nil || errors.Is(err, redis.Nil) {
			return
		}
	}
	t.Fatal(fmt.Errorf("the cluster did not serve %s again: %w", key, err))
}
