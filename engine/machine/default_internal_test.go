package machine

import (
	"bytes"
	"log/slog"
	"strings"
	"sync"
	"testing"
)

func TestDefaultWarnsOnce(t *testing.T) {
	var buf bytes.Buffer
	prev := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	t.Cleanup(func() { slog.SetDefault(prev) })
	fallbackOnce = sync.Once{}
	t.Setenv(MachineIDEnv, "")
	t.Setenv("KUBERNETES_SERVICE_HOST", "")

	Default()
	Default()
	if n := strings.Count(buf.String(), "level=WARN"); n != 1 || !strings.Contains(buf.String(), "single instance") {
		t.Fatalf("falling back twice logged %d warnings: %q; want one saying it is safe only for a single instance", n, buf.String())
	}
	buf.Reset()
	fallbackOnce = sync.Once{}
	t.Setenv(MachineIDEnv, "4")
	Default()
	if buf.Len() != 0 {
		t.Fatalf("a configured machine ID logged %q", buf.String())
	}
}
