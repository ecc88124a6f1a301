package flow_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// The escalated command must not lose its window's budget to the prefetch
// its own fast-path miss started: with Max 1, the fast path's prefetch
// takes the window's only unit into this instance's bucket, and the slow
// stage then spends that prefetched unit instead of refusing the command
// (a 1/60s route used to refuse every command).
func TestSlowUsesTheUnitItsOwnPrefetchTook(t *testing.T) {
	h := newSolo(t, nil)
	r := &flow.Route{RateLimit: flow.RateLimit{Max: 1, Interval: time.Minute}}
	ctx := context.Background()
	c := cmd("1", "acme/s", "tg", "c")
	if d := h.f.Fast(c, r); d.Action != flow.Escalate {
		t.Fatalf("fast with no token: %v, want escalate", d.Action)
	}
	h.q.run() // the prefetch lands first: it holds the window's only unit
	d, err := h.f.Slow(ctx, c, r)
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != flow.Proceed {
		t.Fatalf("first command of the window: %v (events %+v), want proceed", d.Action, h.sink.of(telemetry.NameFailed))
	}
	if err := h.f.Finish(ctx, c, r, d, true); err != nil {
		t.Fatal(err)
	}
	// The window is spent: the next command is refused with the hint.
	if act, _ := h.dispatch(t, cmd("2", "acme/s", "tg", "c"), r, always); act != flow.Reject {
		t.Fatalf("second command: %v, want reject", act)
	}
	h.q.run()
	if act, _ := h.dispatch(t, cmd("3", "acme/s", "tg", "c"), r, always); act != flow.Reject {
		t.Fatalf("third command: %v, want reject", act)
	}
	// The next window delivers again.
	h.clk.Advance(time.Minute)
	if act, ok := h.dispatch(t, cmd("4", "acme/s", "tg", "c"), r, always); act != flow.Proceed || !ok {
		t.Fatalf("next window: %v, want proceed", act)
	}
}

// gatedTake holds the first Take (the prefetch's) after it took its units
// and before it returns, until release is closed.
type gatedTake struct {
	flow.Store
	calls          atomic.Int32
	taken, release chan struct{}
}

func (g *gatedTake) Take(ctx context.Context, key string, n, limit int64, exp, now time.Time) (int64, error) {
	got, err := g.Store.Take(ctx, key, n, limit, exp, now)
	if g.calls.Add(1) == 1 {
		close(g.taken)
		<-g.release
	}
	return got, err
}

// The slow stage meets a prefetch that has taken the window's last unit
// but not yet put it in the bucket: it waits for the refill and spends
// the unit, instead of refusing.
func TestSlowWaitsForAPrefetchInFlight(t *testing.T) {
	store := &gatedTake{Store: newStore(), taken: make(chan struct{}), release: make(chan struct{})}
	h := newHarness(t, store, clk(), func(c *flow.Config) { c.Executor = func(f func()) { go f() } })
	r := &flow.Route{RateLimit: flow.RateLimit{Max: 1, Interval: time.Minute}}
	c := cmd("1", "acme/s", "tg", "c")
	if d := h.f.Fast(c, r); d.Action != flow.Escalate {
		t.Fatalf("fast with no token: %v, want escalate", d.Action)
	}
	<-store.taken // the prefetch holds the only unit, the bucket is still empty
	type result struct {
		d   flow.Decision
		err error
	}
	done := make(chan result, 1)
	go func() {
		d, err := h.f.Slow(context.Background(), c, r)
		done <- result{d, err}
	}()
	select {
	case res := <-done:
		t.Fatalf("slow decided (%v, %v) while the prefetch's units were in flight", res.d.Action, res.err)
	case <-time.After(50 * time.Millisecond): // waiting, as it should: nothing to advance
	}
	close(store.release)
	res := <-done
	if res.err != nil || res.d.Action != flow.Proceed {
		t.Fatalf("slow after the refill: %v, %v; want proceed", res.d.Action, res.err)
	}
}
