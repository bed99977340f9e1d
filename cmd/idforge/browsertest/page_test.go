package browsertest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// root is the idforge module, two directories up.
var root, _ = filepath.Abs(filepath.Join("..", "..", ".."))

// chromiumPath finds Debian's Chromium; without it the test skips, or fails
// when servers are required (IDFORGE_REQUIRE_SERVERS=1, as in CI).
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
	if os.Getenv("IDFORGE_REQUIRE_SERVERS") == "1" {
		t.Fatal("no Chromium (apt-get install chromium), and IDFORGE_REQUIRE_SERVERS=1")
	}
	t.Skip("no Chromium: apt-get install chromium")
	return ""
}

var listening = regexp.MustCompile(`listening on (http://\S+) \(machine ID (\d+)`)

// startServe builds idforge and runs `idforge serve` on loopback with its
// default SQLite store in a fresh directory; it returns the base URL.
func startServe(t *testing.T, args ...string) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "idforge")
	build := exec.Command("go", "build", "-o", bin, "./cmd/idforge")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	cmd := exec.Command(bin, append([]string{"serve", "-addr", "127.0.0.1:0"}, args...)...)
	cmd.Dir = t.TempDir()
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Signal(os.Interrupt)
		cmd.Wait()
	})
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if m := listening.FindStringSubmatch(sc.Text()); m != nil {
			go io.Copy(io.Discard, out)
			return m[1]
		}
	}
	t.Fatal("idforge serve printed no address")
	return ""
}

// TestStatePageInChromium runs `idforge serve`, draws IDs from two chains,
// and loads / in a real headless Chromium: the page shows the live machine
// ID and the chains. With IDFORGE_UPDATE_SCREENSHOT=1 it writes the
// screenshot to docs/serve-page.png.
func TestStatePageInChromium(t *testing.T) {
	bin := chromiumPath(t)
	base := startServe(t, "-namespace", "orders")
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

	res, err := http.Get(base + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	var ready struct {
		MachineID int64 `json:"machine_id"`
	}
	json.NewDecoder(res.Body).Decode(&ready)
	res.Body.Close()
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
		out := filepath.Join(root, "docs", "serve-page.png")
		if err := os.WriteFile(out, shot, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", out)
	}
}
