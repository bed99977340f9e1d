package server

import (
	"context"
	"encoding/json"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/idforge/idforge/internal/dated"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/internal/uuidv7"
)

// datedRegistry is testRegistry with kind uuidv7 and dated chains that
// count from 1 per name, on 2026-11-25.
type datedRegistry struct {
	*genreg.Registry
	mu     sync.Mutex
	counts map[string]*atomic.Int64
}

func (d *datedRegistry) Dated(name, format string) (func(context.Context) (string, error), error) {
	f, err := dated.Parse(format)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	n := d.counts[name]
	if n == nil {
		n = new(atomic.Int64)
		d.counts[name] = n
	}
	d.mu.Unlock()
	at := time.Date(2026, 11, 25, 9, 0, 0, 0, time.UTC)
	return func(context.Context) (string, error) { return f.Format(at, n.Add(1)) }, nil
}

func newKindsServer(t *testing.T, conf map[string]string) *Server {
	reg := testRegistry(t)
	if err := reg.Register("uuidv7", "", uuidv7.New(nil)); err != nil {
		t.Fatal(err)
	}
	d := &datedRegistry{Registry: reg, counts: map[string]*atomic.Int64{}}
	return newTestServer(t, func(c *Settings) { c.Registry, c.Dated = d, conf })
}

// /v1/ids?kind=uuidv7 gives increasing version 7 UUIDs, as JSON strings or
// text, and /v1/decode tells a UUIDv7's time.
func TestUUIDs(t *testing.T) {
	s := newKindsServer(t, nil)
	res, body := do(t, s, "GET", "/v1/ids?kind=uuidv7&count=3")
	ids := decodeIDs(t, body)
	if res.StatusCode != 200 || len(ids) != 3 {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.String() != id || i > 0 && id <= ids[i-1] {
			t.Errorf("UUID %d %q: want increasing canonical version 7 UUIDs (%v)", i, id, err)
		}
	}
	if _, body := do(t, s, "GET", "/v1/ids?kind=uuidv7&count=2", "Accept", "text/plain"); len(strings.Fields(body)) != 2 || len(strings.Fields(body)[0]) != 36 {
		t.Errorf("text: %q", body)
	}
	res, body = do(t, s, "GET", "/v1/decode/"+ids[0])
	var v decodedUUID
	if err := json.Unmarshal([]byte(body), &v); err != nil || res.StatusCode != 200 || v.Kind != "uuidv7" || v.ID != ids[0] {
		t.Fatalf("decode: %d %s", res.StatusCode, body)
	}
	if at, err := time.Parse(timestampLayout, v.Timestamp); err != nil || time.Since(at) > time.Minute || time.Since(at) < -time.Minute {
		t.Errorf("decoded timestamp %q, want about now", v.Timestamp)
	}
	for target, code := range map[string]string{
		"/v1/ids?kind=uuidv7&format=radix62": "bad_format",
		"/v1/ids?kind=uuidv8":                "bad_kind",
		"/v1/ids?kind=uuidv7&kind=uuidv7":    "bad_parameter",
		"/v1/ids/order?kind=uuidv7":          "bad_parameter",
		"/v1/decode/" + uuid.NewString():     "bad_id", // version 4: no time
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Code != code {
			t.Errorf("GET %s: %d %s, want 400 %s", target, res.StatusCode, body, code)
		}
	}
}

// A chain takes a dated format in ?format=, URL-encoded or not; a chain
// given one by Config.Dated serves it without ?format= and no other.
func TestDatedChains(t *testing.T) {
	s := newKindsServer(t, map[string]string{"invoice": "INV-{yyyy}{MM}{dd}-{seq:6}"})
	_, body := do(t, s, "GET", "/v1/ids/invoice?count=2")
	if got := strings.Join(decodeIDs(t, body), " "); got != "INV-20261125-000001 INV-20261125-000002" {
		t.Errorf("configured: %s", body)
	}
	_, body = do(t, s, "GET", "/v1/ids/invoice?format="+url.QueryEscape("INV-{yyyy}{MM}{dd}-{seq:6}"), "Accept", "text/plain")
	if body != "INV-20261125-000003\n" {
		t.Errorf("configured, the same format given: %q", body)
	}
	_, body = do(t, s, "GET", "/v1/ids/order?format=O{yyyy}{MM}-{seq:4}")
	if got := strings.Join(decodeIDs(t, body), " "); got != "O202611-0001" {
		t.Errorf("given unencoded: %s", body)
	}
	for target, code := range map[string]string{
		"/v1/ids/invoice?format=radix62":                                   "bad_format", // configured: that format only
		"/v1/ids/invoice?format=" + url.QueryEscape("{yyyy}{seq:4}"):       "bad_format",
		"/v1/ids/order?format=" + url.QueryEscape("{dd}{MM}{yyyy}{seq:4}"): "bad_format",
		"/v1/ids?format=" + url.QueryEscape("{yyyy}{seq:4}"):               "bad_format", // snowflake IDs
		"/v1/ids/order?format=%zz":                                         "bad_format",
	} {
		res, body := do(t, s, "GET", target)
		var e errorBody
		if res.StatusCode != 400 || json.Unmarshal([]byte(body), &e) != nil || e.Code != code {
			t.Errorf("GET %s: %d %s, want 400 %s", target, res.StatusCode, body, code)
		}
	}
	// Without dated chains in the Provider the refusal says what is needed.
	plain := newTestServer(t, nil)
	res, body := do(t, plain, "GET", "/v1/ids/order?format=O{yyyy}-{seq:4}")
	if res.StatusCode != 404 || !strings.Contains(body, "makes no dated chains") {
		t.Errorf("a Provider without dated chains: %d %s", res.StatusCode, body)
	}
	if _, err := New(Settings{Registry: testRegistry(t), Layout: s.cfg.Layout, Dated: map[string]string{"x": "{seq:4}"}}); err == nil {
		t.Error("New took a Config.Dated format without {yyyy}")
	}
}
