package server

import (
	"net/http/httptest"
	"testing"
)

// BenchmarkHandler is the handlers' own cost per request, without the network.
func BenchmarkHandler(b *testing.B) {
	s := newTestServer(b, nil)
	for _, target := range []string{"/v1/ids", "/v1/ids/order", "/v1/ids?count=1000", "/v1/ids/order?count=1000"} {
		b.Run(target, func(b *testing.B) {
			req := httptest.NewRequest("GET", target, nil)
			b.ReportAllocs()
			for b.Loop() {
				rec := httptest.NewRecorder()
				s.ServeHTTP(rec, req)
				if rec.Code != 200 {
					b.Fatal(rec.Code)
				}
			}
		})
	}
}
