package leased_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/clock/clocktest"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/machine/machinetest"
	"github.com/idforge/idforge/internal/leased"
)

// stateFile returns the only file in dir but lock files, failing on
// temporary leftovers.
func stateFile(t *testing.T, dir string) (path, content string) {
	t.Helper()
	all, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var entries []os.DirEntry
	for _, e := range all {
		if !strings.HasSuffix(e.Name(), ".lock") {
			entries = append(entries, e)
		}
	}
	if len(entries) != 1 || !strings.HasSuffix(entries[0].Name(), ".state") {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("%s holds %v, want one .state file", dir, names)
	}
	path = filepath.Join(dir, entries[0].Name())
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, string(data)
}

func TestLocalStateRoundTrip(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	d := leased.LocalState(dir, machine.Manual(3), nil)
	st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || st != (machine.State{MachineID: 3}) {
		t.Fatalf("first Distribute = %+v, %v", st, err)
	}
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 1000}); err != nil {
		t.Fatal(err)
	}
	if _, content := stateFile(t, dir); content != "3|1000" {
		t.Fatalf("state file holds %q, want 3|1000", content)
	}
	// An older timestamp for the same ID does not go back.
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 500}); err != nil {
		t.Fatal(err)
	}
	if _, content := stateFile(t, dir); content != "3|1000" {
		t.Fatalf("state file holds %q after an older Guard, want 3|1000", content)
	}
	if err := d.Revert(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 2000}); err != nil {
		t.Fatal(err)
	}
	// A restart: a new decorator over the same directory.
	st, err = leased.LocalState(dir, machine.Manual(3), nil).Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || st != (machine.State{MachineID: 3, LastTimestamp: 2000}) {
		t.Fatalf("Distribute after restart = %+v, %v; want machine ID 3 with the saved timestamp 2000", st, err)
	}
	// A file for another machine ID tells nothing about this one.
	st, err = leased.LocalState(dir, machine.Manual(4), nil).Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || st != (machine.State{MachineID: 4}) {
		t.Fatalf("Distribute of another ID = %+v, %v; want machine ID 4 with no timestamp", st, err)
	}
}

func TestLocalStateTakesTheLaterTimestamp(t *testing.T) {
	ctx := t.Context()
	clk := newTestClock()
	mem := machinetest.NewMemory(clk)
	dir := t.TempDir()
	d := leased.LocalState(dir, mem, nil)
	st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	t0 := clk.ms()
	st.LastTimestamp = t0 + 5000
	if err := d.Revert(ctx, instA, st); err != nil {
		t.Fatal(err)
	}
	// The file knows of IDs issued later than the store (a Guard that never
	// reached it): the file wins.
	if err := leased.LocalState(dir, machine.Manual(st.MachineID), nil).Guard(ctx, instA, machine.State{MachineID: st.MachineID, LastTimestamp: t0 + 9000}); err != nil {
		t.Fatal(err)
	}
	clk.Advance(10 * time.Second) // a free ID stamped ahead of the clock would go out last
	got, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || got.MachineID != st.MachineID || got.LastTimestamp != t0+9000 {
		t.Fatalf("file ahead: Distribute = %+v, %v; want LastTimestamp %d", got, err, t0+9000)
	}
	// The store knows better: it wins.
	if err := mem.Guard(ctx, instA, machine.State{MachineID: st.MachineID, LastTimestamp: t0 + 20000, Holder: got.Holder}); err != nil {
		t.Fatal(err)
	}
	got, err = d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || got.LastTimestamp != t0+20000 {
		t.Fatalf("store ahead: Distribute = %+v, %v; want LastTimestamp %d", got, err, t0+20000)
	}
}

func TestLocalStateReportsInnerAndFileErrors(t *testing.T) {
	ctx := t.Context()
	clk := newTestClock()
	dir := t.TempDir()
	d := leased.LocalState(dir, machinetest.NewMemory(clk), nil)
	// The inner store says the ID is not ours; the file is still written.
	wantLost(t, d.Guard(ctx, instA, machine.State{MachineID: 9, LastTimestamp: 77}), "Guard of an ID never handed out")
	if _, content := stateFile(t, dir); content != "9|77" {
		t.Fatalf("state file holds %q, want 9|77", content)
	}

	notDir := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	bad := leased.LocalState(notDir, machine.Manual(1), nil)
	if err := bad.Guard(ctx, instA, machine.State{MachineID: 1, LastTimestamp: 1}); !errors.Is(err, engine.ErrStoreUnavailable) {
		t.Errorf("Guard into a directory that is a file = %v, want ErrStoreUnavailable", err)
	}
	for _, d := range []machine.Distributor{leased.LocalState("", machine.Manual(1), nil), leased.LocalState(dir, nil, nil)} {
		if _, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("misconfigured LocalState: %v, want ErrInvalidConfig", err)
		}
	}
}

func TestLocalStateCorruptFile(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	d := leased.LocalState(dir, machine.Manual(3), nil)
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 1000}); err != nil {
		t.Fatal(err)
	}
	path, _ := stateFile(t, dir)
	for _, junk := range []string{"", "3", "3|x", "x|3", "-1|3", "3|1000|2"} {
		if err := os.WriteFile(path, []byte(junk), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
		if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), path) {
			t.Errorf("state file %q: Distribute = %v, want ErrStoreUnavailable naming the file", junk, err)
		}
	}
	// A Guard replaces the corrupt file.
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 1500}); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard); err != nil || st.LastTimestamp != 1500 {
		t.Fatalf("after rewrite: %+v, %v", st, err)
	}
}

func TestLocalStateFileNames(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	d := leased.LocalState(dir, machine.Manual(1), nil)
	insts := []machine.Instance{
		{Namespace: "orders", ID: "host:8080"},
		{Namespace: "orders:8080", ID: "a"},
		{Namespace: "orders%3A8080", ID: "a"},
		{Namespace: "orders_8080", ID: "a"},
		{Namespace: "../up", ID: "../../etc/passwd"},
		{Namespace: "orders/x", ID: "a b\\c"},
		{Namespace: "orders#1", ID: "a"},
	}
	for _, inst := range insts {
		if err := d.Guard(ctx, inst, machine.State{MachineID: 1, LastTimestamp: 1}); err != nil {
			t.Fatalf("Guard(%v): %v", inst, err)
		}
	}
	// The file follows the machine ID: another instance of a namespace
	// writes the same file, once the first let go of the ID.
	if err := d.Revert(ctx, insts[0], machine.State{MachineID: 1, LastTimestamp: 1}); err != nil {
		t.Fatal(err)
	}
	if err := d.Guard(ctx, machine.Instance{Namespace: "orders", ID: "other"}, machine.State{MachineID: 1, LastTimestamp: 2}); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var states, locks int
	for _, e := range entries {
		switch filepath.Ext(e.Name()) {
		case ".state":
			states++
		case ".lock":
			locks++
		}
	}
	if states != len(insts) || locks != len(insts) || len(entries) != 2*len(insts) {
		t.Fatalf("%d namespaces wrote %d files (%d state files, %d lock files), want a state file and a lock file each", len(insts), len(entries), states, locks)
	}
	for _, e := range entries {
		if e.IsDir() || strings.ContainsAny(e.Name(), `/\:`) {
			t.Errorf("unsafe state file name %q", e.Name())
		}
	}
	if parent, _ := os.ReadDir(filepath.Dir(dir)); len(parent) != 1 {
		t.Errorf("state files escaped %s", dir)
	}
}

// A lease closed before its generator issued anything (say the clock was
// too far behind the state file to start) must not lower the file: the next
// start still has to wait out the predecessor.
func TestCloseBeforeIssuingKeepsThePredecessorsTimestamp(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	d := leased.LocalState(dir, machine.Manual(3), nil)
	inst := machine.Instance{Namespace: "orders", ID: "a"}
	ahead := time.Now().Add(10 * time.Second).UnixMilli() // what the predecessor used
	if err := d.Guard(ctx, inst, machine.State{MachineID: 3, LastTimestamp: ahead}); err != nil {
		t.Fatal(err)
	}
	l, err := leased.Acquire(ctx, d, inst, leased.LeaseSettings{TimestampSource: func() int64 { return 0 }})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	st, err := d.Distribute(ctx, inst, 10, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastTimestamp < ahead {
		t.Fatalf("after Close the state file says %d, below the predecessor's %d", st.LastTimestamp, ahead)
	}
}

// Every state-file write syncs the directory after the rename (a power loss
// could otherwise undo the rename), and a failing sync fails the write.
func TestLocalStateSyncsTheDirectory(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	var synced []string
	fail := false
	leased.SetSyncDir(t, func(d string) error {
		synced = append(synced, d)
		if fail {
			return errors.New("sync failed")
		}
		return nil
	})
	d := leased.LocalState(dir, machine.Manual(3), nil)
	if _, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard); err != nil {
		t.Fatal(err)
	}
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 1000}); err != nil {
		t.Fatal(err)
	}
	if err := d.Revert(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 2000}); err != nil {
		t.Fatal(err)
	}
	if len(synced) != 3 || synced[0] != dir || synced[1] != dir || synced[2] != dir {
		t.Fatalf("Distribute, Guard and Revert synced %q, want %s three times", synced, dir)
	}
	fail = true
	err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 3000})
	if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "sync failed") {
		t.Fatalf("Guard with a failing directory sync = %v; want ErrStoreUnavailable naming the file", err)
	}
}

// A directory that cannot take the state file fails Distribute, not a
// heartbeat later, naming the file and the remedy, and gives the machine
// ID back. procfs refuses new files to root as well.
func TestLocalStateUnwritableDirectory(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("procfs")
	}
	ctx := t.Context()
	mem := machinetest.NewMemory(newTestClock())
	d := leased.LocalState("/proc", mem, nil)
	_, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "/proc/orders#") || !strings.Contains(err.Error(), `"off"`) {
		t.Fatalf("Distribute into /proc = %v; want ErrStoreUnavailable naming the file and the remedy", err)
	}
	// The ID went back: another instance gets it.
	if st, err := mem.Distribute(ctx, machine.Instance{Namespace: "orders", ID: "b"}, 10, leased.DefaultSafeGuard); err != nil || st.MachineID != 0 {
		t.Fatalf("after the failed Distribute, b got %+v, %v; want the machine ID given back, 0", st, err)
	}
}

// LocalState passes the holder secret and the server clock through.
func TestLocalStatePassesHolderAndServerClock(t *testing.T) {
	ctx := t.Context()
	clk := clocktest.NewFake(time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC))
	inner := serverClock{Distributor: machinetest.NewMemory(clk), clk: clk, skew: time.Second, calls: new(atomic.Int64)}
	at := clk.Now().Add(time.Second)
	d := leased.LocalState(t.TempDir(), inner, nil)
	st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil || st.Holder == "" {
		t.Fatalf("Distribute = %+v, %v; want the inner store's holder", st, err)
	}
	if err := d.Guard(ctx, instA, st); err != nil {
		t.Fatalf("Guard with the holder: %v", err)
	}
	if got, err := d.ServerTime(ctx); err != nil || !got.Equal(at) {
		t.Fatalf("ServerTime of LocalState = %v, %v; want the inner store's %v", got, err, at)
	}
	if got, err := leased.LocalState(t.TempDir(), machine.Manual(1), nil).ServerTime(ctx); err != nil || !got.IsZero() {
		t.Fatalf("ServerTime of LocalState over Manual = %v, %v; want the zero time", got, err)
	}
}

func TestHostInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname:", err)
	}
	inst, err := leased.HostInstance("orders", 8080)
	if err != nil || inst != (machine.Instance{Namespace: "orders", ID: host + ":8080"}) {
		t.Fatalf("HostInstance(orders, 8080) = %+v, %v", inst, err)
	}
	inst, err = leased.HostInstance("orders", 0)
	if want := host + ":" + strconv.Itoa(os.Getpid()); err != nil || inst.ID != want {
		t.Fatalf("HostInstance(orders, 0) = %+v, %v; want ID %q", inst, err, want)
	}
	for _, c := range []struct {
		ns   string
		port int
	}{{"", 80}, {"orders", -1}, {"orders", 65536}} {
		if _, err := leased.HostInstance(c.ns, c.port); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("HostInstance(%q, %d) = %v, want ErrInvalidConfig", c.ns, c.port, err)
		}
	}
}
