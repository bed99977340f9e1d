package main

import (
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
)

// `idforge decode 1` decodes, and warns that 1 cannot be a snowflake ID;
// so does an ID from the future. The JSON is /v1/decode's, friendly form
// included.
func TestDecodeWarns(t *testing.T) {
	for id, warning := range map[string]string{
		"1":                   "1 cannot be a snowflake ID of layout default: it is too small: its time would be 2019-12-24T16:00:00.000Z",
		"123456789":           "within an hour of the layout's epoch",
		"9147830622591672320": "is in the future",
		"914783062259167232":  "", // 2026-11-21
	} {
		out, errOut, code := runArgs(t, "decode", id)
		var v struct{ ID, Friendly string }
		if code != 0 || json.Unmarshal([]byte(out), &v) != nil || v.ID != id || v.Friendly == "" {
			t.Errorf("decode %s: exit %d, %q", id, code, out)
		}
		if warning == "" && errOut != "" || !strings.Contains(errOut, warning) {
			t.Errorf("decode %s: stderr %q, want %q", id, errOut, warning)
		}
	}
	// A jssafe ID of today is plausible under jssafe.
	out, errOut, code := runArgs(t, "gen", "-layout", "jssafe")
	if _, errOut2, _ := runArgs(t, "decode", "-layout", "jssafe", strings.TrimSpace(out)); code != 0 || errOut2 != "" {
		t.Errorf("a new jssafe ID: %q %q", errOut, errOut2)
	}
}

// gen -kind uuidv7 prints increasing version 7 UUIDs, and decode tells
// their time.
func TestGenAndDecodeUUIDs(t *testing.T) {
	out, errOut, code := runArgs(t, "gen", "-kind", "uuidv7", "-n", "1000")
	ids := lines(out)
	if code != 0 || len(ids) != 1000 || errOut != "" {
		t.Fatalf("exit %d, %d lines, stderr %q", code, len(ids), errOut)
	}
	for i, s := range ids {
		u, err := uuid.Parse(s)
		if err != nil || u.Version() != 7 || i > 0 && s <= ids[i-1] {
			t.Fatalf("line %d %q: want increasing version 7 UUIDs", i, s)
		}
	}
	out, _, code = runArgs(t, "decode", ids[0])
	var v struct{ ID, Kind, Timestamp string }
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || v.Kind != "uuidv7" || v.ID != ids[0] {
		t.Fatalf("decode %s: %d %q", ids[0], code, out)
	}
	if at, err := time.Parse(time.RFC3339, v.Timestamp); err != nil || time.Since(at) > time.Minute {
		t.Errorf("timestamp %q, want about now", v.Timestamp)
	}
	if _, errOut, code := runArgs(t, "decode", uuid.NewString()); code != 2 || !strings.Contains(errOut, "version 4 UUID carries no time") {
		t.Errorf("a version 4 UUID: exit %d, %q", code, errOut)
	}
}

// gen says which machine ID it used and that it holds no lease; with
// -store it leases one, and draws chains and dated numbers.
func TestGenMachineAndStore(t *testing.T) {
	_, errOut, code := runArgs(t, "gen", "-machine", "9")
	if code != 0 || !strings.Contains(errOut, "machine ID 9 (-machine), no lease") {
		t.Errorf("without -store: exit %d, stderr %q", code, errOut)
	}
	store := "sqlite:" + filepath.Join(t.TempDir(), "ids.db") // a new file: brand-new
	out, errOut, code := runArgs(t, "gen", "-store", store, "-n", "2")
	if code != 0 || len(lines(out)) != 2 || !strings.Contains(errOut, "machine ID 0 leased from sqlite") {
		t.Errorf("with -store: exit %d, %q, stderr %q", code, out, errOut)
	}
	out, errOut, code = runArgs(t, "gen", "-store", store, "-kind", "chain", "-name", "invoice", "-n", "2", "-format", "INV-{yyyy}{MM}{dd}-{seq:6}")
	if got := lines(out); code != 0 || !firstTwo(got, time.UTC) {
		t.Errorf("dated: exit %d, %q, stderr %q", code, out, errOut)
	}
	out, _, code = runArgs(t, "gen", "-store", store, "-kind", "chain", "-name", "order", "-n", "3")
	if code != 0 || strings.Join(lines(out), " ") != "1 2 3" {
		t.Errorf("chain: exit %d, %q", code, out)
	}
	for _, c := range []struct {
		args []string
		why  string
	}{
		{[]string{"gen", "-kind", "chain", "-name", "x"}, "needs -store and -name"},
		{[]string{"gen", "-store", store, "-machine", "3"}, "-machine with -store"},
		{[]string{"gen", "-kind", "uuidv7", "-format", "radix62"}, "takes no -format"},
		{[]string{"gen", "-format", "INV-{yyyy}-{seq:4}"}, "dated -format is for -kind chain"},
		{[]string{"gen", "-format", "INV-{seq:4}"}, "{yyyy} is missing"},
		{[]string{"gen", "-zone", "Mars/Olympus"}, "want a time zone"},
	} {
		if _, errOut, code := runArgs(t, c.args...); code != 2 || !strings.Contains(errOut, c.why) {
			t.Errorf("%q: exit %d, stderr %q; want 2 saying %q", c.args, code, errOut, c.why)
		}
	}
}

// version prints the module version; in a test binary Go stamps no VCS
// revision, which it says.
func TestVersion(t *testing.T) {
	out, errOut, code := runArgs(t, "version")
	l := lines(out)
	if code != 0 || errOut != "" || len(l) != 3 || !strings.HasPrefix(l[0], "idforge ") || !strings.HasPrefix(l[1], "revision ") || !strings.HasPrefix(l[2], "go1.") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errOut)
	}
}

// serve draws UUIDv7s and dated numbers: a chain of -dated without
// ?format=, others with a URL-encoded one, in the -zone's days.
func TestServeUUIDsAndDated(t *testing.T) {
	base, stop := startServe(t, t.TempDir(), "-dated", "invoice=INV-{yyyy}{MM}{dd}-{seq:6}", "-zone", "Asia/Tokyo")
	defer stop()
	get := func(path string) []string {
		t.Helper()
		res, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var v struct{ IDs []string }
		if err := json.NewDecoder(res.Body).Decode(&v); err != nil || res.StatusCode != 200 {
			t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
		return v.IDs
	}
	tokyo, _ := time.LoadLocation("Asia/Tokyo")
	if got := get("/v1/ids/invoice?count=2"); !firstTwo(got, tokyo) {
		t.Errorf("configured: %q, want the first two of the day in Tokyo", got)
	}
	if got := get("/v1/ids/order?format=" + url.QueryEscape("O{yyyy}-{seq:3}")); len(got) != 1 || !strings.HasSuffix(got[0], "-001") {
		t.Errorf("given: %q", got)
	}
	if got := get("/v1/ids?kind=uuidv7&count=2"); len(got) != 2 || uuid.MustParse(got[0]).Version() != 7 {
		t.Errorf("uuidv7: %q", got)
	}
}

// firstTwo reports whether got are the first two invoice numbers of a day
// in loc, today's or, if the clock passed midnight between them, the first
// of each day.
func firstTwo(got []string, loc *time.Location) bool {
	if len(got) != 2 {
		return false
	}
	day := func(d int) string { return "INV-" + time.Now().In(loc).AddDate(0, 0, d).Format("20060102") }
	for _, d := range []int{-1, 0} {
		if got[0] == day(d)+"-000001" && (got[1] == day(d)+"-000002" || got[1] == day(d+1)+"-000001") {
			return true
		}
	}
	return false
}
