package uuidv7

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestTimeOrdered(t *testing.T) {
	t0 := time.Date(2026, 11, 25, 1, 2, 3, 456_000_000, time.UTC)
	var prev string
	for i := range 5 {
		now := t0.Add(time.Duration(i) * time.Millisecond)
		id := String(now)
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: %v, version %d, variant %v", id, err, u.Version(), u.Variant())
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != now.UnixMilli() {
			t.Fatalf("%s carries %v, want %v", id, time.Unix(sec, nsec), now)
		}
		if ms := fmt.Sprintf("%012x", now.UnixMilli()); id[:8]+id[9:13] != ms {
			t.Fatalf("%s does not start with the milliseconds %s", id, ms)
		}
		if id <= prev {
			t.Fatalf("%s after %s: ids out of order", id, prev)
		}
		prev = id
	}
}

func TestRandomWithinAMillisecond(t *testing.T) {
	now := time.Date(2026, 11, 25, 0, 0, 0, 0, time.UTC)
	seen := make(map[uuid.UUID]bool)
	for range 1000 {
		u := New(now)
		if seen[u] {
			t.Fatalf("%s made twice in the same millisecond", u)
		}
		seen[u] = true
	}
}
