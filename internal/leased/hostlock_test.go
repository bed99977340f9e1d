package leased_test

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/internal/leased"
)

// lockHolderEnv names the state directory a re-executed test binary locks
// machine ID 3 of namespace "orders" in (TestLockHolderProcess).
const lockHolderEnv = "IDFORGE_TEST_LOCK_HOLDER"

// TestLockHolderProcess is the other process of TestHostLockOtherProcess:
// it holds machine ID 3 until its stdin closes or it is killed.
func TestLockHolderProcess(t *testing.T) {
	dir := os.Getenv(lockHolderEnv)
	if dir == "" {
		t.Skip("only run as the lock holder of TestHostLockOtherProcess")
	}
	d := leased.LocalState(dir, machine.Manual(3), discard)
	if _, err := d.Distribute(t.Context(), machine.Instance{Namespace: "orders", ID: "holder"}, 10, leased.DefaultSafeGuard); err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	fmt.Println("locked")
	_, _ = bufio.NewReader(os.Stdin).ReadString('\n')
	os.Exit(0)
}

// TestHostLockOtherProcess: a machine ID whose lock file another process
// holds is refused with ErrInstanceInUse naming the ID, the lock file, the
// holder's PID and what to do; once that process is killed with kill -9,
// the system has released its lock and the ID is taken at once.
func TestHostLockOtherProcess(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLockHolderProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+dir)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if strings.TrimSpace(line) != "locked" {
		t.Fatalf("the lock holder said %q, %v", line, err)
	}

	d := leased.LocalState(dir, machine.Manual(3), discard)
	st, err := d.Distribute(t.Context(), instA, 10, leased.DefaultSafeGuard)
	lock := filepath.Join(dir, "orders#3.lock")
	pid := strconv.Itoa(cmd.Process.Pid)
	if !errors.Is(err, engine.ErrInstanceInUse) {
		t.Fatalf("Distribute while another process holds machine ID 3 = %+v, %v; want ErrInstanceInUse", st, err)
	}
	for _, want := range []string{"machine ID 3", lock, "process " + pid, "IDFORGE_MACHINE_ID", "shared store"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	if data, _ := os.ReadFile(lock); strings.TrimSpace(string(data)) != pid {
		t.Errorf("lock file holds %q, want the holder's PID %s", data, pid)
	}
	// The refusal is the lease's too, unwrapped by a store's remedy.
	if _, err := leased.Acquire(t.Context(), d, instA, leased.LeaseSettings{Logger: discard}); !errors.Is(err, engine.ErrInstanceInUse) ||
		!strings.Contains(err.Error(), "process "+pid) || strings.Contains(err.Error(), "pod name") {
		t.Fatalf("Acquire while another process holds machine ID 3: %v", err)
	}

	if err := cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait() // the process is gone, and its lock with it
	if st, err := d.Distribute(t.Context(), instA, 10, leased.DefaultSafeGuard); err != nil || st.MachineID != 3 {
		t.Fatalf("Distribute after the holder was killed = %+v, %v", st, err)
	}
	if data, _ := os.ReadFile(lock); strings.TrimSpace(string(data)) != strconv.Itoa(os.Getpid()) {
		t.Errorf("lock file holds %q, want this process's PID %d", data, os.Getpid())
	}
}

// TestHostLockInProcess: within one process the lock is held per instance.
// The instance holding it may ask again; another instance is refused as a
// second lease is (ErrInvalidConfig), also through another path to the
// directory, where the system's lock refuses it (naming this process);
// Revert releases the lock and Guard keeps it.
func TestHostLockInProcess(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	d := leased.LocalState(dir, machine.Manual(3), discard)
	instB := machine.Instance{Namespace: "orders", ID: "b"}
	st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard); err != nil {
		t.Fatalf("the holder asking again: %v", err)
	}
	if _, err := d.Distribute(ctx, instB, 10, leased.DefaultSafeGuard); !errors.Is(err, engine.ErrInvalidConfig) ||
		!strings.Contains(err.Error(), `instance "a" of this process`) || !strings.Contains(err.Error(), "orders#3.lock") {
		t.Fatalf("another instance of this process: %v; want ErrInvalidConfig naming instance a and the lock file", err)
	}
	viaLink := leased.LocalState(link, machine.Manual(3), discard)
	if _, err := viaLink.Distribute(ctx, instB, 10, leased.DefaultSafeGuard); !errors.Is(err, engine.ErrInstanceInUse) ||
		!strings.Contains(err.Error(), fmt.Sprintf("this process (PID %d", os.Getpid())) {
		t.Fatalf("another instance through a link to the directory: %v; want ErrInstanceInUse naming this process", err)
	}
	if err := d.Guard(ctx, instA, machine.State{MachineID: 3, LastTimestamp: 10}); err != nil {
		t.Fatal(err)
	}
	if err := d.Guard(ctx, instB, machine.State{MachineID: 3, LastTimestamp: 10}); !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("Guard of an instance that does not hold the lock: %v; want ErrMachineIDLost", err)
	}
	if err := d.Revert(ctx, instA, st); err != nil {
		t.Fatal(err)
	}
	if _, err := viaLink.Distribute(ctx, instB, 10, leased.DefaultSafeGuard); err != nil {
		t.Fatalf("after Revert: %v", err)
	}
}

// TestHostLockFileDeleted: a lock file deleted under a live holder no
// longer keeps anyone out. The holder's next Guard sees it: it takes the
// new file, or, if a newcomer locked that first, reports the ID lost.
func TestHostLockFileDeleted(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(dir, link); err != nil {
		t.Skip("no symbolic links here:", err)
	}
	d := leased.LocalState(dir, machine.Manual(3), discard)
	st, err := d.Distribute(ctx, instA, 10, leased.DefaultSafeGuard)
	if err != nil {
		t.Fatal(err)
	}
	lock := filepath.Join(dir, "orders#3.lock")
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	if err := d.Guard(ctx, instA, st); err != nil {
		t.Fatalf("Guard after the lock file was deleted: %v", err)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("Guard did not take a new lock file: %v", err)
	}
	if err := os.Remove(lock); err != nil {
		t.Fatal(err)
	}
	newcomer := machine.Instance{Namespace: "orders", ID: "newcomer"}
	if _, err := leased.LocalState(link, machine.Manual(3), discard).Distribute(ctx, newcomer, 10, leased.DefaultSafeGuard); err != nil {
		t.Fatalf("the newcomer after the deletion: %v", err)
	}
	if err := d.Guard(ctx, instA, st); !errors.Is(err, engine.ErrMachineIDLost) || !strings.Contains(err.Error(), lock) {
		t.Fatalf("Guard after a newcomer locked the new file: %v; want ErrMachineIDLost naming the lock file", err)
	}
}

// TestHostLockUnconfigured: machine.Default() with nothing configured takes
// the lowest machine ID no other holder has, and logs which; a released one
// is taken again; with every ID held it says so.
func TestHostLockUnconfigured(t *testing.T) {
	t.Setenv("IDFORGE_MACHINE_ID", "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	ctx := t.Context()
	dir := t.TempDir()
	var logs bytes.Buffer
	d := leased.LocalState(dir, machine.Default(), slog.New(slog.NewTextHandler(&logs, nil)))
	var held []machine.State
	for i, want := range []int64{0, 1, 2} {
		inst := machine.Instance{Namespace: "orders", ID: strconv.Itoa(i)}
		logs.Reset()
		st, err := d.Distribute(ctx, inst, 10, leased.DefaultSafeGuard)
		if err != nil || st.MachineID != want {
			t.Fatalf("instance %d: %+v, %v; want machine ID %d", i, st, err, want)
		}
		if err := d.Guard(ctx, inst, st); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(logs.String(), "\n"); n != 1 || !strings.Contains(logs.String(), "level=WARN") ||
			!strings.Contains(logs.String(), fmt.Sprintf("took machine ID %d,", want)) || !strings.Contains(logs.String(), "another host") {
			t.Fatalf("instance %d logged %q; want one warning naming machine ID %d and the other hosts", i, logs.String(), want)
		}
		held = append(held, st)
	}
	one := machine.Instance{Namespace: "orders", ID: "1"}
	if err := d.Revert(ctx, one, held[1]); err != nil {
		t.Fatal(err)
	}
	if st, err := d.Distribute(ctx, machine.Instance{Namespace: "orders", ID: "late"}, 10, leased.DefaultSafeGuard); err != nil || st.MachineID != 1 {
		t.Fatalf("after machine ID 1 was released: %+v, %v; want 1", st, err)
	}
	// Another namespace has machine IDs of its own.
	if st, err := d.Distribute(ctx, machine.Instance{Namespace: "billing", ID: "0"}, 10, leased.DefaultSafeGuard); err != nil || st.MachineID != 0 {
		t.Fatalf("another namespace: %+v, %v; want 0", st, err)
	}
	// Two machine bits: four IDs, all held now.
	for i := range 2 {
		if _, err := d.Distribute(ctx, machine.Instance{Namespace: "orders", ID: "more" + strconv.Itoa(i)}, 2, leased.DefaultSafeGuard); err != nil && i == 0 {
			t.Fatal(err)
		} else if i == 1 && (!errors.Is(err, engine.ErrMachineIDOverflow) || !strings.Contains(err.Error(), "this host")) {
			t.Fatalf("every machine ID held: %v; want ErrMachineIDOverflow saying where", err)
		}
	}
}
