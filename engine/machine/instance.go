package machine

import (
	"github.com/idforge/idforge/internal/distcheck"
)

// Validate reports an empty namespace or instance ID, with an error wrapping
// engine.ErrInvalidConfig.
func (i Instance) Validate() error { return distcheck.Instance(i.Namespace, i.ID) }

// String returns "namespace/id", marked "(stable)" for stable instances.
func (i Instance) String() string {
	if i.Stable {
		return i.Namespace + "/" + i.ID + " (stable)"
	}
	return i.Namespace + "/" + i.ID
}
