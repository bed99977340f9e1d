package server_test

import (
	"fmt"
	"io"
	"net/http/httptest"

	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/internal/genreg"
	"github.com/idforge/idforge/server"
)

// The server draws from any engine.Provider; `idforge serve` gives it the
// registry built on the configured store.
func Example() {
	reg := genreg.New()
	g, _ := snowflake.New(7)
	reg.Register(server.KindSnowflake, "", g)
	s, _ := server.New(server.Config{Provider: reg, Layout: snowflake.Default})

	// Without tokens, the server answers requests that name a loopback host.
	rec := httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost:8080/v1/ids?count=0", nil))
	body, _ := io.ReadAll(rec.Body)
	fmt.Print(rec.Code, " ", string(body))

	rec = httptest.NewRecorder()
	s.ServeHTTP(rec, httptest.NewRequest("GET", "http://localhost:8080/v1/decode/20261121232714123-7-2", nil))
	body, _ = io.ReadAll(rec.Body)
	fmt.Print(rec.Code, " ", string(body))
	// Output:
	// 400 {"error":"count=\"0\": want a whole number from 1 to 10000","code":"bad_count"}
	// 200 {"id":"914779523243864066","timestamp":"2026-11-21T23:27:14.123Z","machine":7,"sequence":2,"friendly":"20261121232714123-7-2"}
}
