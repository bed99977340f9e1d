package uuidv7

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/idforge/idforge/engine"
)

// Time returns the millisecond in which u was made (its unix_ts_ms), UTC. A
// UUID of another version or variant is an error wrapping
// engine.ErrInvalidID.
func Time(u [16]byte) (time.Time, error) {
	if v, variant := u[6]>>4, u[8]>>6; v != 7 || variant != 2 {
		return time.Time{}, fmt.Errorf("%w: %x-%x-%x-%x-%x is a version %d UUID of variant %b, not a version 7 UUID of RFC 9562",
			engine.ErrInvalidID, u[0:4], u[4:6], u[6:8], u[8:10], u[10:], v, variant)
	}
	return time.UnixMilli(int64(binary.BigEndian.Uint64(u[:8]) >> 16)).UTC(), nil
}
