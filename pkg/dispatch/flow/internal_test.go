package flow

import (
	"fmt"
	"testing"
	"time"
)

func TestSeenSetIsBoundedAndExpires(t *testing.T) {
	s := newSeenSet(64)
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	for i := range 1000 {
		s.add("acme", fmt.Sprintf("id-%d", i), "h", now.Add(time.Minute))
	}
	if n := s.size(); n > 64 {
		t.Fatalf("seen-set holds %d ids, bound 64", n)
	}
	if h, ok := s.delivered("acme", "id-999", now); !ok || h != "h" {
		t.Fatal("the newest id was evicted")
	}
	if _, ok := s.delivered("acme", "id-0", now); ok {
		t.Fatal("the oldest id survived eviction")
	}
	if _, ok := s.delivered("acme", "id-999", now.Add(time.Minute)); ok {
		t.Fatal("an id is still delivered at its expiry")
	}
	if _, ok := s.delivered("globex", "id-999", now); ok {
		t.Fatal("another tenant's delivered id counts as delivered")
	}
}

func TestBucketTokensDieWithTheirWindow(t *testing.T) {
	var b bucket
	w0, w1 := int64(0), int64(time.Second)
	b.refill(3, w0, w1) // window [0,1s), usable until 1s
	if !b.take(int64(500 * time.Millisecond)) {
		t.Fatal("token not usable inside its window")
	}
	if b.take(w1) {
		t.Fatal("a token was used after its window ended")
	}
	b.refill(2, w0, w1) // top-up within the same window adds
	if got := b.tokens.Load(); got != 4 {
		t.Fatalf("tokens after top-up = %d, want 4", got)
	}
	b.refill(1, w1, 2*w1) // a new window replaces leftovers
	if got := b.tokens.Load(); got != 1 {
		t.Fatalf("tokens after a new window = %d, want 1 (old-window tokens dropped)", got)
	}
}

func TestWindowAlignment(t *testing.T) {
	at := time.Date(2026, 11, 21, 12, 0, 7, 500, time.UTC)
	s, e := window(at, 5*time.Second)
	if !s.Equal(time.Date(2026, 11, 21, 12, 0, 5, 0, time.UTC)) || e.Sub(s) != 5*time.Second {
		t.Fatalf("window = [%v, %v)", s, e)
	}
}
