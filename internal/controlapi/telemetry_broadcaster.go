package controlapi

import "sync"

// Broadcaster wakes every long-poll waiting for telemetry: Changed returns
// a channel that the next Notify closes. A waiter takes the channel
// before it reads the store, so an append between the read and the wait
// still wakes it. The zero value is not ready; use NewBroadcaster. It is
// safe for concurrent use; Notify never blocks.
type Broadcaster struct {
	mu sync.Mutex
	ch chan struct{}
}

// NewBroadcaster returns a broadcaster with no waiters.
func NewBroadcaster() *Broadcaster { return &Broadcaster{ch: make(chan struct{})} }

// Changed returns a channel closed at the next Notify.
func (b *Broadcaster) Changed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ch
}

// Notify wakes everyone holding a channel from Changed. Call it after a
// telemetry append is durable.
func (b *Broadcaster) Notify() {
	b.mu.Lock()
	defer b.mu.Unlock()
	close(b.ch)
	b.ch = make(chan struct{})
}
