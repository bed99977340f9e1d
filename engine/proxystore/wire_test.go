package proxystore

import (
	"errors"
	"reflect"
	"testing"

	"github.com/idforge/idforge/internal/reason"
	"github.com/idforge/idforge/internal/wire"
)

// The client's declarations of the proxy protocol match the server's: the
// same JSON fields in each message, the same codes, the same sentinel for
// every reason.
func TestWireMatchesServer(t *testing.T) {
	for _, c := range []struct{ client, server any }{
		{machineRequest{}, wire.MachineRequest{}},
		{machineState{}, wire.MachineState{}},
		{segmentRequest{}, wire.SegmentRequest{}},
		{segmentRange{}, wire.SegmentRange{}},
	} {
		ct, st := reflect.TypeOf(c.client), reflect.TypeOf(c.server)
		if ct.NumField() != st.NumField() {
			t.Errorf("%s has %d fields, the server's %s %d", ct.Name(), ct.NumField(), st.Name(), st.NumField())
			continue
		}
		for i := range ct.NumField() {
			cf, sf := ct.Field(i), st.Field(i)
			if cf.Name != sf.Name || cf.Type != sf.Type || cf.Tag != sf.Tag {
				t.Errorf("%s.%s %v `%s`, the server's %s.%s %v `%s`", ct.Name(), cf.Name, cf.Type, cf.Tag, st.Name(), sf.Name, sf.Type, sf.Tag)
			}
		}
	}
	for client, server := range map[string]string{
		codeTimeout: wire.CodeTimeout, codeForbidden: wire.CodeForbidden, codeQuota: wire.CodeQuota,
		codeUnknownChain: wire.CodeUnknownChain, codeTooManyChains: wire.CodeTooManyChains,
	} {
		if client != server {
			t.Errorf("code %q, the server's %q", client, server)
		}
	}
	for code, err := range reasons {
		if want := reason.Err(code); want == nil || !errors.Is(err, want) || reason.Of(err) != code {
			t.Errorf("reason %q: client's %v, the server's %v", code, err, want)
		}
	}
	for _, code := range []string{reason.StoreReset, reason.NoFloor, reason.ClockBackwards, reason.MachineIDLost, reason.StoreUnavailable,
		reason.SegmentExhausted, reason.TimestampOverflow, reason.IDOverflow, reason.MachineIDOverflow, reason.InstanceInUse,
		reason.ClockSkew, reason.UnknownGenerator, reason.Closed, reason.Canceled, reason.Deadline, reason.InvalidConfig, reason.InvalidID} {
		if reasons[code] == nil {
			t.Errorf("the server's reason %q is not mapped back", code)
		}
	}
}
