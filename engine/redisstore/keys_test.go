package redisstore

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

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

func TestMachineKeysShareOneSlot(t *testing.T) {
	client := redis.NewClient(&redis.Options{}) // never dialled: keys only
	defer client.Close()
	for _, prefix := range []string{DefaultPrefix, "", "{app}:", "a{b:", "x}y{:", "idf:3fa2:"} {
		s, err := New(client, WithPrefix(prefix))
		if err != nil {
			t.Fatalf("prefix %q: %v", prefix, err)
		}
		for _, ns := range []string{"svc", "order-service", "a:b", "mt-Race-17"} {
			keys, err := s.Machine().keys(machine.Instance{Namespace: ns, ID: "host:1"})
			if err != nil {
				t.Fatal(err)
			}
			tag := hashTag(keys[0])
			if tag == keys[0] {
				t.Errorf("prefix %q, namespace %q: key %q has no hash tag", prefix, ns, keys[0])
			}
			for _, k := range keys[1:] {
				if !strings.HasPrefix(k, prefix) || hashTag(k) != tag {
					t.Errorf("prefix %q, namespace %q: keys %q do not all start with the prefix and share tag %q", prefix, ns, keys, tag)
				}
			}
		}
	}
}
