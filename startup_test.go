package idforge_test

import (
	"context"
	"database/sql"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/sqlstore"
	"github.com/idforge/idforge/internal/leased"
)

// TestStableInstanceInTwoProcesses: two processes (two store values on one
// database) started with one stable instance ID. The second New is refused
// with ErrInstanceInUse, naming the instance and what to do; once the first
// closed, the instance starts at once on its machine ID.
func TestStableInstanceInTwoProcesses(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "ids.db")
	open := func() *sqlstore.Store {
		db, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		st, err := sqlstore.Open(ctx, db, sqlstore.Settings{CreateTables: true, ResetGrace: -1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	set := idforge.Settings{Namespace: "orders", Instance: machine.Instance{ID: "orders-0", Stable: true}}
	first, second := set, set
	first.Store, second.Store = open(), open()
	reg := newReg(t, first)
	id := reg.Stats().MachineID

	again, err := idforge.New(ctx, second)
	if err == nil {
		again.Close()
	}
	if !errors.Is(err, engine.ErrInstanceInUse) || !strings.Contains(err.Error(), `orders-0`) || !strings.Contains(err.Error(), "instance ID of its own") {
		t.Fatalf("second process on the instance: New = %v; want ErrInstanceInUse naming orders-0 and what to do", err)
	}
	t.Logf("refusal: %v", err)
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if got := newReg(t, second).Stats().MachineID; got != id {
		t.Fatalf("after the first closed, the instance got machine ID %d, want its own %d", got, id)
	}
}

// TestStateDirOff: StateDir "off", or IDFORGE_STATE_DIR=off where the
// default directory would be used, runs without a state file.
func TestStateDirOff(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir) // a relative "off" directory would land here
	t.Setenv(leased.StateDirEnv, "off")
	newReg(t, idforge.Settings{Machine: machine.Manual(7)})
	newReg(t, idforge.Settings{Machine: machine.Manual(8), StateDir: "off"})
	if entries, err := os.ReadDir(dir); err != nil || len(entries) != 0 {
		t.Fatalf("with the state file off, %s holds %v (%v)", dir, entries, err)
	}
}

// TestUnwritableStateDir: a state directory that cannot be created, or
// created but not written (as root too), fails New with an error naming the
// path and the remedy.
func TestUnwritableStateDir(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	below := filepath.Join(file, "state")
	reg, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(9), StateDir: below})
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), below) || !strings.Contains(err.Error(), `"off"`) {
		t.Fatalf("StateDir below a file: New = %v; want ErrInvalidConfig naming %s and the \"off\" remedy", err, below)
	}
	t.Logf("refusal: %v", err)
	if runtime.GOOS != "linux" {
		return
	}
	// procfs refuses new files to root as well.
	reg, err = idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(9), StateDir: "/proc"})
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, engine.ErrStoreUnavailable) || !strings.Contains(err.Error(), "/proc/") || !strings.Contains(err.Error(), `"off"`) ||
		!strings.Contains(err.Error(), leased.StateDirEnv) {
		t.Fatalf("StateDir /proc: New = %v; want ErrStoreUnavailable naming the file, %s and the \"off\" remedy", err, leased.StateDirEnv)
	}
	t.Logf("refusal: %v", err)
}

// TestUnwritableHomeStateDir: the default registry's settings (no StateDir,
// no store) with a home directory that cannot hold the default state
// directory fail New with an error that says how to set IDFORGE_STATE_DIR.
func TestUnwritableHomeStateDir(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the user cache directory comes from $HOME on Linux only")
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(file, "home") // below a file: unwritable to root too
	t.Setenv("HOME", home)
	t.Setenv("XDG_CACHE_HOME", "")
	t.Setenv(leased.StateDirEnv, "")
	t.Setenv("IDFORGE_MACHINE_ID", "9")
	reg, err := idforge.New(context.Background(), idforge.Settings{}) // what idforge.Default builds
	if err == nil {
		reg.Close()
	}
	if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), home) ||
		!strings.Contains(err.Error(), leased.StateDirEnv+"=/path/to/dir") || !strings.Contains(err.Error(), leased.StateDirEnv+"=off") {
		t.Fatalf("HOME below a file: New = %v; want ErrInvalidConfig naming the directory and how to set %s", err, leased.StateDirEnv)
	}
	t.Logf("refusal: %v", err)
}
