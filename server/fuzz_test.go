package server

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzHandlers sends arbitrary methods, paths, queries and Accept headers:
// the server never panics, never answers 500, and every refusal is JSON.
func FuzzHandlers(f *testing.F) {
	for _, seed := range [][3]string{
		{"GET", "/v1/ids?count=3&format=radix62", "text/plain"},
		{"GET", "/v1/ids/order?count=0", ""},
		{"GET", "/v1/decode/20261121232714123-7-2", ""},
		{"POST", "/v1/ids", "application/json"},
		{"GET", "/v1/decode/zzzz?format=radix36", "*/*"},
		{"GET", "/v1/layout?x", "text/plain;q=0"},
		{"PATCH", "/v1/ids/a..b?count=1e3", ""},
		{"GET", "/v1/ids?count=99999999999999999999", ""},
	} {
		f.Add(seed[0], seed[1], seed[2])
	}
	s := newTestServer(f, func(c *Settings) { c.Chains = []string{"order", "a..b"} })
	f.Fuzz(func(t *testing.T, method, target, accept string) {
		if method == "" || strings.ContainsAny(method, " \t\r\n()<>@,;:\\\"/[]?={}") || !utf8.ValidString(method) {
			return
		}
		if !strings.HasPrefix(target, "/") || strings.ContainsAny(target, " \t\r\n#") || len(target) > 2048 {
			return
		}
		req, err := newRequest(method, target)
		if err != nil {
			return
		}
		req.Header.Set("Accept", accept)
		rec := httptest.NewRecorder()
		s.ServeHTTP(rec, req)
		code := rec.Code
		if code >= 500 {
			t.Fatalf("%s %q: status %d: %s", method, target, code, rec.Body.String())
		}
		if code >= 400 && rec.Header().Get("Content-Type") != "application/json" {
			t.Fatalf("%s %q: %d with Content-Type %q", method, target, code, rec.Header().Get("Content-Type"))
		}
	})
}

// newRequest is httptest.NewRequest without its panic on a bad target.
func newRequest(method, target string) (req *http.Request, err error) {
	defer func() {
		if recover() != nil {
			req, err = nil, errBadTarget
		}
	}()
	req = httptest.NewRequest(method, target, nil)
	req.Host = "localhost"
	return req, nil
}

var errBadTarget = errors.New("bad target")
