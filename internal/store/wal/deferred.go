package wal

import (
	"context"
	"sync"
)

// Deferred collects the log groups of the writes made with a context
// from DeferSync: those writes return once their frames are queued, and
// Wait returns once all of them are durable. A PutEvents request's
// archive, deliveries and hand-offs are queued together this way and
// meet in one or two group commits, instead of each waiting for its own
// in turn. Until Wait returns nothing may be acknowledged to anyone.
type Deferred struct {
	mu     sync.Mutex
	groups []waiter
}

// waiter is a group of any log's frames.
type waiter interface{ Wait() error }

type deferredKey struct{}

// DeferSync returns a context whose log writes do not wait, and the
// Deferred to wait on for them.
func DeferSync(ctx context.Context) (context.Context, *Deferred) {
	d := &Deferred{}
	return context.WithValue(ctx, deferredKey{}, d), d
}

// Wait returns once every write deferred so far is durable, with the
// first failure.
func (d *Deferred) Wait() error {
	d.mu.Lock()
	gs := d.groups
	d.groups = nil
	d.mu.Unlock()
	var first error
	for _, g := range gs {
		if err := g.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Settle waits for g (Wait) unless ctx is from DeferSync, which then
// waits for it.
func (g *Group[M]) Settle(ctx context.Context) error {
	if d, ok := ctx.Value(deferredKey{}).(*Deferred); ok {
		d.mu.Lock()
		if n := len(d.groups); n == 0 || d.groups[n-1] != waiter(g) {
			d.groups = append(d.groups, g)
		}
		d.mu.Unlock()
		return nil
	}
	return g.Wait()
}
