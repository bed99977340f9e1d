package proxystore_test

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/idforge/idforge/engine"
	"github.com/idforge/idforge/engine/machine"
	"github.com/idforge/idforge/engine/proxystore"
	"github.com/idforge/idforge/internal/wire"
)

// A server reporting a reset grace or a ride-through window past what any
// store accepts is refused: converted to a Duration the value would wrap,
// and a negative grace turns the lease's check against it off.
func TestDistributeRefusesOutOfBoundWindows(t *testing.T) {
	for _, out := range []wire.MachineState{
		{MachineID: 1, ResetGraceMillis: math.MaxInt64, RideThroughMillis: 1000},
		{MachineID: 1, ResetGraceMillis: 2000, RideThroughMillis: math.MaxInt64},
	} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_ = json.NewEncoder(w).Encode(out)
		}))
		st, err := proxystore.New(proxystore.Settings{URL: srv.URL})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.Distribute(t.Context(), machine.Instance{Namespace: "ns", ID: "a"}, 10, time.Minute); !errors.Is(err, engine.ErrInvalidConfig) {
			t.Errorf("Distribute answered %+v: %v; want ErrInvalidConfig", out, err)
		}
		if tm := st.Terms(); tm.ResetGrace < 0 || tm.RideThrough < 0 {
			t.Errorf("after a refused answer: ResetGrace %v, RideThrough %v", tm.ResetGrace, tm.RideThrough)
		}
		srv.Close()
	}
}
