package machine_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/internal/distcheck"
	"github.com/idforge/idforge/engine/machine"
)

const safeGuard = 5 * time.Minute

var instA = machine.Instance{Namespace: "orders", ID: "a"}

func wantLost(t *testing.T, err error, what string) {
	t.Helper()
	if !errors.Is(err, engine.ErrMachineIDLost) {
		t.Fatalf("%s = %v, want an error wrapping ErrMachineIDLost", what, err)
	}
}

func TestInstanceCheck(t *testing.T) {
	if err := distcheck.Instance("n", "i"); err != nil {
		t.Fatal(err)
	}
	for _, inst := range []machine.Instance{{}, {Namespace: "n"}, {ID: "i"}} {
		if err := distcheck.Instance(inst.Namespace, inst.ID); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("distcheck.Instance(%+v) = %v, want ErrInvalidConfig", inst, err)
		}
	}
	if got := distcheck.Name("n", "i", true); got != "n/i (stable)" {
		t.Errorf("String = %q", got)
	}
}

func TestManual(t *testing.T) {
	ctx := t.Context()
	d := machine.Manual(5)
	st, err := d.Distribute(ctx, instA, 3, safeGuard)
	if err != nil || st != (machine.State{MachineID: 5}) {
		t.Fatalf("Distribute = %+v, %v; want machine ID 5", st, err)
	}
	if _, err := d.Distribute(ctx, instA, 2, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Errorf("Manual(5) with 2 bits: %v, want ErrMachineIDOverflow", err)
	}
	if _, err := machine.Manual(-1).Distribute(ctx, instA, 10, safeGuard); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Manual(-1): %v, want ErrInvalidConfig", err)
	}
	if _, err := d.Distribute(ctx, machine.Instance{ID: "a"}, 10, safeGuard); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Manual with an invalid instance: %v, want ErrInvalidConfig", err)
	}
	if err := d.Guard(ctx, instA, machine.State{MachineID: 5, LastTimestamp: 1}); err != nil {
		t.Errorf("Guard(5): %v", err)
	}
	if err := d.Revert(ctx, instA, machine.State{MachineID: 5, LastTimestamp: 1}); err != nil {
		t.Errorf("Revert(5): %v", err)
	}
	wantLost(t, d.Guard(ctx, instA, machine.State{MachineID: 6}), "Manual(5).Guard(6)")
}

func TestStatefulSet(t *testing.T) {
	ctx := t.Context()
	const env = "HOSTNAME"
	d := machine.StatefulSet()

	t.Setenv(env, "orders-7")
	st, err := d.Distribute(ctx, instA, 10, safeGuard)
	if err != nil || st != (machine.State{MachineID: 7}) {
		t.Fatalf("Distribute with %s=orders-7: %+v, %v", env, st, err)
	}
	if err := d.Guard(ctx, instA, st); err != nil {
		t.Errorf("Guard(7): %v", err)
	}
	if err := d.Revert(ctx, instA, st); err != nil {
		t.Errorf("Revert(7): %v", err)
	}
	wantLost(t, d.Guard(ctx, instA, machine.State{MachineID: 8}), "Guard(8)")
	if _, err := d.Distribute(ctx, instA, 2, safeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Errorf("ordinal 7 with 2 bits: %v, want ErrMachineIDOverflow", err)
	}

	for _, host := range []string{"orders", ""} {
		t.Setenv(env, host)
		_, err := d.Distribute(ctx, instA, 10, safeGuard)
		if !errors.Is(err, engine.ErrInvalidConfig) || !strings.Contains(err.Error(), env) {
			t.Errorf("%s=%q: %v, want ErrInvalidConfig naming the variable", env, host, err)
		}
	}
}

func TestDefault(t *testing.T) {
	for _, c := range []struct {
		name           string
		machineID, k8s string
		hostname       string
		want           int64
		wantErr        error
	}{
		{"env wins", "7", "10.0.0.1", "orders-3", 7, nil},
		{"env zero", " 0 ", "", "", 0, nil},
		{"StatefulSet pod", "", "10.0.0.1", "orders-3", 3, nil},
		{"ordinal outside Kubernetes", "", "", "web-3", 0, nil},
		{"Deployment pod", "", "10.0.0.1", "orders-5d8f7c9b4-x2x7z", 0, nil},
		{"nothing", "", "", "", 0, nil},
		{"env not a number", "seven", "", "", 0, engine.ErrInvalidConfig},
		{"env negative", "-2", "", "", 0, engine.ErrInvalidConfig},
		{"env too wide", "1024", "", "", 0, engine.ErrMachineIDOverflow},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv("IDFORGE_MACHINE_ID", c.machineID)
			t.Setenv("KUBERNETES_SERVICE_HOST", c.k8s)
			t.Setenv("HOSTNAME", c.hostname)
			st, err := machine.Default().Distribute(t.Context(), instA, 10, safeGuard)
			if c.wantErr != nil {
				if !errors.Is(err, c.wantErr) {
					t.Fatalf("Distribute = %+v, %v; want an error wrapping %v", st, err, c.wantErr)
				}
				return
			}
			if err != nil || st.MachineID != c.want {
				t.Fatalf("Distribute = %+v, %v; want machine ID %d", st, err, c.want)
			}
		})
	}
}
