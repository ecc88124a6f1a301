// Package clock is the time source of the dispatcher. Nothing in pkg/dispatch
// reads the wall clock directly: every component takes a Clock, production
// code passes System(), and tests pass a *Fake they move by hand, so no test
// ever sleeps to wait for logic.
package clock

import (
	"sync"
	"time"
)

// Clock tells the current time. Implementations must be safe for concurrent use.
type Clock interface {
	Now() time.Time
}

// Func adapts a function to Clock.
type Func func() time.Time

// Now calls f.
func (f Func) Now() time.Time { return f() }

// System returns the wall clock.
func System() Clock { return Func(time.Now) }

// Fake is a Clock that moves only when told to. The zero value is not useful;
// build one with NewFake. It is safe for concurrent use.
type Fake struct {
	mu  sync.Mutex
	now time.Time
}

// NewFake returns a fake clock set to t.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake's current time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Advance moves the clock forward by d (backwards if d is negative) and
// returns the new time.
func (f *Fake) Advance(d time.Duration) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = f.now.Add(d)
	return f.now
}

// Set moves the clock to t.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.now = t
}
