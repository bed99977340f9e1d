package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/idforge/idforge/internal/testdb"
)

// chromiumPath finds Debian's Chromium; without it the browser test skips,
// or fails when servers are required (CI installs it).
func chromiumPath(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("IDFORGE_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := exec.LookPath(p); err == nil {
			return p
		}
	}
	if testdb.Required() {
		t.Fatal("no Chromium (apt-get install chromium), and IDFORGE_REQUIRE_SERVERS=1")
	}
	t.Skip("no Chromium: apt-get install chromium")
	return ""
}

// TestStatePageInChromium runs `idforge serve` on its default SQLite store,
// draws IDs from a chain, and loads / in a real headless Chromium: the page
// shows the live machine ID and the chain. With IDFORGE_UPDATE_SCREENSHOT=1
// it writes the screenshot to docs/serve-page.png.
func TestStatePageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	docs, err := filepath.Abs(filepath.Join("..", "..", "docs")) // before startServe changes directory
	if err != nil {
		t.Fatal(err)
	}
	base, _ := startServe(t, t.TempDir(), "-namespace", "orders")
	for _, path := range []string{"/v1/ids?count=3", "/v1/ids/order?count=1500", "/v1/ids/invoice?count=40"} {
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, res.Body)
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("GET %s: %d", path, res.StatusCode)
		}
	}

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(actx)
	defer cancel()
	ctx, cancelTimeout := context.WithTimeout(ctx, 60*time.Second)
	defer cancelTimeout()

	if err := chromedp.Do(ctx, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#machine-id"))); err != nil {
		t.Fatalf("chromium: %v", err)
	}
	read := func(a chromedp.Action[string]) string {
		t.Helper()
		v, err := chromedp.Run(ctx, a)
		if err != nil {
			t.Fatalf("chromium: %v", err)
		}
		return v
	}
	title := read(chromedp.Title())
	machineID := read(chromedp.Text(chromedp.CSS("#machine-id")))
	lease := read(chromedp.Text(chromedp.CSS("#lease-state")))
	chainRow := read(chromedp.Text(chromedp.CSS(`tr[data-chain="order"]`)))
	shot, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	var ready struct {
		MachineID int64 `json:"machine_id"`
	}
	getJSON(t, base+"/readyz", &ready)
	if strings.TrimSpace(machineID) != "0" || ready.MachineID != 0 {
		t.Errorf("page shows machine ID %q, serve holds %d", machineID, ready.MachineID)
	}
	if !strings.HasPrefix(lease, "held") {
		t.Errorf("lease state %q", lease)
	}
	if !strings.Contains(chainRow, "order") || !strings.Contains(chainRow, "1500") {
		t.Errorf("chain row %q: want the chain and its 1500 IDs", chainRow)
	}
	if !strings.Contains(title, "machine 0") {
		t.Errorf("title %q", title)
	}
	if len(shot) < 1000 || string(shot[1:4]) != "PNG" {
		t.Fatalf("screenshot of %d bytes is not a PNG", len(shot))
	}
	if os.Getenv("IDFORGE_UPDATE_SCREENSHOT") == "1" {
		out := filepath.Join(docs, "serve-page.png")
		if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
}
