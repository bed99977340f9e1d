package server

import (
	"fmt"
	"strings"

	"github.com/idforge/idforge/internal/reason"
)

// reservedRule says in words which names derived reserves.
const reservedRule = "names <chain>:<yyyy>, <chain>:<yyyyMM> and <chain>:<yyyyMMdd> are the sequences of dated chains' periods, " +
	"which the server derives; draw a dated chain by its own name"

// derived reports whether name has the form of a sequence the server
// derives for a period of a dated chain (idforge.Registry.Dated): a chain
// name, a colon and 4, 6 or 8 digits. No caller may draw such a sequence
// as a plain chain or fetch it through the proxy: either would use up the
// period's counter, which its format bounds ({seq:6} holds 999,999), and
// the dated chain would refuse every draw until the period ends.
func derived(name string) bool {
	i := strings.LastIndexByte(name, ':')
	if i < 1 {
		return false
	}
	switch digits := name[i+1:]; len(digits) {
	case 4, 6, 8:
		return strings.Trim(digits, "0123456789") == ""
	}
	return false
}

// publicMessage says in the server's words what an engine error of reason
// r means for name (a chain or a namespace, "" for none). The error's own
// text may name the store's address, its key prefix or its tables, which
// no caller should see: that goes to the log.
func publicMessage(r, name string) string {
	what := ""
	if name != "" {
		what = fmt.Sprintf("%q: ", name)
	}
	switch r {
	case reason.StoreUnavailable:
		return what + "the store does not answer; retry"
	case reason.StoreReset:
		return what + "the store was reset; the server waits out its reset grace before it issues again; retry"
	case reason.Canceled, reason.Deadline:
		return what + "the request ended before the store answered"
	case reason.MachineIDLost:
		return what + "the server lost its machine ID and issues none until it has a new one; retry"
	case reason.ClockBackwards:
		return what + "the server's clock moved backwards; it issues again once the clock has caught up; retry"
	case reason.Closed:
		return what + "the server is shutting down"
	case reason.IDOverflow:
		return what + "the sequence is used up: its format or the 64-bit range holds no more numbers (a dated chain's counter starts again with the next period)"
	case reason.SegmentExhausted:
		return what + "the chain has no IDs ready and could not fetch more in time; retry"
	case reason.TimestampOverflow:
		return what + "the snowflake layout's time range is used up"
	case reason.NoFloor:
		return what + "the store has no counter for this sequence and no floor to start it from; the operator sets one (idforge store)"
	case reason.UnknownGenerator:
		return what + "not served here"
	case reason.InvalidConfig:
		return what + "the request or the server's configuration is not valid for this; the server's log has the details"
	}
	return what + "the server could not answer (" + r + "); the server's log has the details"
}

// pageError is a recorded error's text as the state page shows it: the
// engine's words for what happened, found in it, and nothing of the store
// it came from.
func pageError(text string) string {
	if text == "" {
		return ""
	}
	for _, r := range []string{reason.StoreReset, reason.NoFloor, reason.ClockBackwards, reason.MachineIDLost, reason.StoreUnavailable,
		reason.SegmentExhausted, reason.TimestampOverflow, reason.IDOverflow, reason.MachineIDOverflow, reason.InstanceInUse,
		reason.ClockSkew, reason.UnknownGenerator, reason.Closed, reason.InvalidConfig} {
		if err := reason.Err(r); err != nil && strings.Contains(text, err.Error()) {
			return err.Error() + " (the server's log has the details)"
		}
	}
	for _, r := range []string{reason.Deadline, reason.Canceled} {
		if err := reason.Err(r); err != nil && strings.Contains(text, err.Error()) {
			return "the store did not answer in time (the server's log has the details)"
		}
	}
	return "failed (the server's log has the details)"
}
