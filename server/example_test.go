package server_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"net/http/httptest"

	"github.com/idforge/idforge"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/snowflake"
	"github.com/idforge/idforge/server"
)

// The server draws from a registry; `idforge serve` gives it the one built
// on the configured store.
func Example() {
	reg, err := idforge.New(context.Background(), idforge.Settings{Machine: machine.Manual(7), StateDir: "off"})
	if err != nil {
		log.Fatal(err)
	}
	defer reg.Close()
	s, err := server.New(server.Settings{Registry: reg, Layout: snowflake.Default})
	if err != nil {
		log.Fatal(err)
	}

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
