package localqueue

import (
	"context"
	"testing"
	"time"
)

// QueueRoom counts every message in the queue, never received or in
// flight: the slow stage's admission relies on it.
func TestQueueRoomCountsEveryMessage(t *testing.T) {
	s, _ := fakeStore(t)
	ctx := context.Background()
	if _, err := s.CreateQueue(ctx, QueueConfig{Name: "q", MaxDepth: 10}); err != nil {
		t.Fatal(err)
	}
	room := func(want int, when string) {
		t.Helper()
		if got, err := s.QueueRoom("q"); err != nil || got != want {
			t.Fatalf("%s: room %d (%v), want %d", when, got, err, want)
		}
	}
	room(10, "empty")
	for range 3 {
		if _, err := s.Send(ctx, "q", []byte(`{}`), nil); err != nil {
			t.Fatal(err)
		}
	}
	room(7, "three sent, none received")
	if _, err := s.Receive(ctx, "q", 1, time.Minute); err != nil {
		t.Fatal(err)
	}
	room(7, "one of them in flight")
}
