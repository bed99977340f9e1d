package redisstore

import (
	"strings"
	"testing"

	"github.com/idforge/idforge/engine/machine"
)

// hashTag is the part of key Redis Cluster hashes to pick a slot: the text
// between the first '{' and the next '}', or the whole key when there is no
// such pair or it is empty.
func hashTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// TestKeysShareOneSlot: every key of a store (epoch, segments, restore
// marks, machine keys of any namespace) starts with the prefix and has one
// hash tag, so one script may touch the epoch with any of them on Redis
// Cluster.
func TestKeysShareOneSlot(t *testing.T) {
	for _, prefix := range []string{DefaultPrefix, "idforge:", "{app}:", "a{b:", "x}y{:", "idf:3fa2:"} {
		s := &Store{base: keyBase(prefix)}
		tag := hashTag(s.EpochKey())
		if tag == s.EpochKey() {
			t.Errorf("prefix %q: epoch key %q has no hash tag", prefix, s.EpochKey())
		}
		keys := append(s.segmentKeys("order"), s.SegmentKey(""), s.SegmentKey("{x}"))
		for _, ns := range []string{"svc", "order-service", "a:b", "mt-Race-17", "{br}ace"} {
			keys = append(keys, s.machineKeys(machine.Instance{Namespace: ns, ID: "host:1"})...)
		}
		for _, k := range keys {
			if !strings.HasPrefix(k, prefix) || hashTag(k) != tag {
				t.Errorf("prefix %q: key %q does not start with the prefix or lacks tag %q", prefix, k, tag)
			}
		}
	}
}
