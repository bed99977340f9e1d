package machine_test

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
)

func TestHostInstance(t *testing.T) {
	host, err := os.Hostname()
	if err != nil {
		t.Skip("no hostname:", err)
	}
	inst, err := machine.HostInstance("orders", 8080)
	if err != nil || inst != (machine.Instance{Namespace: "orders", ID: host + ":8080"}) {
		t.Fatalf("HostInstance(orders, 8080) = %+v, %v", inst, err)
	}
	inst, err = machine.HostInstance("orders", 0)
	if want := host + ":" + strconv.Itoa(os.Getpid()); err != nil || inst.ID != want {
		t.Fatalf("HostInstance(orders, 0) = %+v, %v; want ID %q", inst, err, want)
	}
	for _, c := range []struct {
		ns   string
		port int
	}{{"", 80}, {"orders", -1}, {"orders", 65536}} {
		if _, err := machine.HostInstance(c.ns, c.port); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("HostInstance(%q, %d) = %v, want ErrInvalidConfig", c.ns, c.port, err)
		}
	}
}

func TestInstanceValidate(t *testing.T) {
	if err := (machine.Instance{Namespace: "n", ID: "i"}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, inst := range []machine.Instance{{}, {Namespace: "n"}, {ID: "i"}} {
		if err := inst.Validate(); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("%+v.Validate() = %v, want ErrInvalidConfig", inst, err)
		}
	}
	if got := (machine.Instance{Namespace: "n", ID: "i", Stable: true}).String(); got != "n/i (stable)" {
		t.Errorf("String = %q", got)
	}
}

func TestManual(t *testing.T) {
	ctx := t.Context()
	d := machine.Manual(5)
	st, err := d.Distribute(ctx, instA, 3, machine.DefaultSafeGuard)
	if err != nil || st != (machine.State{MachineID: 5}) {
		t.Fatalf("Distribute = %+v, %v; want machine ID 5", st, err)
	}
	if _, err := d.Distribute(ctx, instA, 2, machine.DefaultSafeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Errorf("Manual(5) with 2 bits: %v, want ErrMachineIDOverflow", err)
	}
	if _, err := machine.Manual(-1).Distribute(ctx, instA, 10, machine.DefaultSafeGuard); !errors.Is(err, engine.ErrInvalidConfig) {
		t.Errorf("Manual(-1): %v, want ErrInvalidConfig", err)
	}
	if _, err := d.Distribute(ctx, machine.Instance{ID: "a"}, 10, machine.DefaultSafeGuard); !errors.Is(err, engine.ErrInvalidConfig) {
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

func TestPodOrdinal(t *testing.T) {
	for _, c := range []struct {
		host string
		want int64
		ok   bool
	}{
		{"svc-3", 3, true},
		{"svc-0", 0, true},
		{"my-svc-12", 12, true},
		{"orders-1023", 1023, true},
		{"svc", 0, false},
		{"svc-", 0, false},
		{"", 0, false},
		{"3", 0, false},
		{"svc-03", 0, false},
		{"svc-3a", 0, false},
		{"svc-x", 0, false},
		{"svc-+3", 0, false},
		{"svc-99999999999999999999", 0, false},
		{"orders-5d8f7c9b4-x2x7z", 0, false}, // a Deployment pod
	} {
		got, err := machine.PodOrdinal(c.host)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("PodOrdinal(%q) = %d, %v; want %d", c.host, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("PodOrdinal(%q) = %d, want an error", c.host, got)
		}
	}
}

func TestStatefulSet(t *testing.T) {
	ctx := t.Context()
	const env = "IDFORGE_TEST_POD_NAME"
	d := machine.StatefulSet(machine.HostnameEnv(env))

	t.Setenv(env, "orders-7")
	st, err := d.Distribute(ctx, instA, 10, machine.DefaultSafeGuard)
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
	if _, err := d.Distribute(ctx, instA, 2, machine.DefaultSafeGuard); !errors.Is(err, engine.ErrMachineIDOverflow) {
		t.Errorf("ordinal 7 with 2 bits: %v, want ErrMachineIDOverflow", err)
	}

	for _, host := range []string{"orders", ""} {
		t.Setenv(env, host)
		_, err := d.Distribute(ctx, instA, 10, machine.DefaultSafeGuard)
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
			t.Setenv(machine.MachineIDEnv, c.machineID)
			t.Setenv("KUBERNETES_SERVICE_HOST", c.k8s)
			t.Setenv("HOSTNAME", c.hostname)
			st, err := machine.Default().Distribute(t.Context(), instA, 10, machine.DefaultSafeGuard)
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

// Manual and StatefulSet hand every instance the same number, so within one
// process Acquire lets one lease at a time hold it.
func TestFixedIDOneLeaseAtATime(t *testing.T) {
	ctx := context.Background()
	t.Setenv("FIXED_TEST_HOST", "web-7")
	for name, d := range map[string]machine.Distributor{
		"Manual":                 machine.Manual(7),
		"StatefulSet":            machine.StatefulSet(machine.HostnameEnv("FIXED_TEST_HOST")),
		"LocalState over Manual": machine.LocalState(t.TempDir(), machine.Manual(7)),
	} {
		t.Run(name, func(t *testing.T) {
			ns := "fixed-" + name
			a := machine.Instance{Namespace: ns, ID: "a"}
			b := machine.Instance{Namespace: ns, ID: "b"}
			la, err := machine.Acquire(ctx, d, a)
			if err != nil {
				t.Fatal(err)
			}
			for _, in := range []machine.Instance{a, b} {
				if l, err := machine.Acquire(ctx, d, in); !errors.Is(err, engine.ErrInvalidConfig) ||
					!strings.Contains(err.Error(), `instance "a"`) {
					if l != nil {
						l.Close()
					}
					t.Fatalf("%s got machine ID 7 while a holds it: %v", in, err)
				}
			}
			other, err := machine.Acquire(ctx, d, machine.Instance{Namespace: ns + "-other", ID: "b"})
			if err != nil {
				t.Fatal(err)
			}
			other.Close()
			if err := la.Close(); err != nil {
				t.Fatal(err)
			}
			lb, err := machine.Acquire(ctx, d, b)
			if err != nil || lb.MachineID() != 7 {
				t.Fatalf("after a closed, b got %v, %v", lb, err)
			}
			lb.Close()
		})
	}
}
