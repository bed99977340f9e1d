package machine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestDefaultWarnsOnce: the last fallback of Default, used undecorated,
// warns once per process when it hands out machine ID 0.
func TestDefaultWarnsOnce(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	fallbackOnce = sync.Once{}
	t.Setenv(machineIDEnv, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	inst := Instance{Namespace: "orders", ID: "a"}
	// Nothing decorates it here (idforge.New with StateDir "off"): every
	// process would be machine 0, and it says so.
	for range 2 {
		if st, err := Default().Distribute(t.Context(), inst, 10, time.Minute); err != nil || st.MachineID != 0 {
			t.Fatalf("Distribute = %+v, %v; want machine ID 0", st, err)
		}
	}
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 || !strings.Contains(buf.String(), "single instance") {
		t.Fatalf("falling back twice logged %d warnings: %q; want one saying it is safe only for a single instance", n, buf.String())
	}
	buf.Reset()
	fallbackOnce = sync.Once{}
	t.Setenv(machineIDEnv, "4")
	if _, err := Default().Distribute(t.Context(), inst, 10, time.Minute); err != nil {
		t.Fatal(err)
	}
	if buf.Len() != 0 {
		t.Fatalf("a configured machine ID logged %q", buf.String())
	}
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
		got, err := podOrdinal(c.host)
		if c.ok && (err != nil || got != c.want) {
			t.Errorf("PodOrdinal(%q) = %d, %v; want %d", c.host, got, err, c.want)
		}
		if !c.ok && err == nil {
			t.Errorf("PodOrdinal(%q) = %d, want an error", c.host, got)
		}
	}
}
