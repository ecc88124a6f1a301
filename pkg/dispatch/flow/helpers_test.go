package flow_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// queue is an Executor that holds background work until the test runs it,
// so background effects happen at a moment the test chooses.
type queue struct {
	mu    sync.Mutex
	tasks []func()
}

func (q *queue) add(f func()) {
	q.mu.Lock()
	q.tasks = append(q.tasks, f)
	q.mu.Unlock()
}

// run runs queued work, including work queued while running.
func (q *queue) run() {
	for {
		q.mu.Lock()
		tasks := q.tasks
		q.tasks = nil
		q.mu.Unlock()
		if len(tasks) == 0 {
			return
		}
		for _, t := range tasks {
			t()
		}
	}
}

// counts is a telemetry sink that counts events by name and keeps the
// non-escalation ones.
type counts struct {
	mu     sync.Mutex
	n      map[string]int
	events []telemetry.Event
}

func (c *counts) Emit(e telemetry.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[e.EventName()]++
	if e.EventName() != flow.EventNameEscalated {
		c.events = append(c.events, e)
	}
}

func (c *counts) count(name string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

func (c *counts) of(name string) []telemetry.Event {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []telemetry.Event
	for _, e := range c.events {
		if e.EventName() == name {
			out = append(out, e)
		}
	}
	return out
}

// metrics records counters and observations.
type metrics struct {
	mu  sync.Mutex
	n   map[string]int64
	obs map[string][]float64
}

func (m *metrics) Count(name string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.n == nil {
		m.n = map[string]int64{}
	}
	m.n[name] += n
}

func (m *metrics) Observe(name string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obs == nil {
		m.obs = map[string][]float64{}
	}
	m.obs[name] = append(m.obs[name], v)
}

func (m *metrics) get(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.n[name]
}

type harness struct {
	f     *flow.Flow
	store flow.Store
	clk   *clock.Fake
	q     *queue
	sink  *counts
	m     *metrics
}

var instances atomic.Int64

func newHarness(t testing.TB, store flow.Store, clk *clock.Fake, mod func(*flow.Config)) *harness {
	t.Helper()
	h := &harness{store: store, clk: clk, q: &queue{}, sink: &counts{}, m: &metrics{}}
	cfg := flow.Config{
		Instance: fmt.Sprintf("i%d", instances.Add(1)),
		Clock:    clk, Metrics: h.m, Executor: h.q.add,
	}
	if mod != nil {
		mod(&cfg)
	}
	f, err := flow.New(cfg, store, h.sink, nil)
	if err != nil {
		t.Fatal(err)
	}
	h.f = f
	return h
}

func newSolo(t testing.TB, mod func(*flow.Config)) *harness {
	return newHarness(t, memstore.NewFlow(), clock.NewFake(t0), mod)
}

// dispatch runs one command through fast and, if escalated, slow, the way
// the dispatcher composes them. deliver decides whether delivery succeeds.
// It returns the final action and whether the command was delivered.
func (h *harness) dispatch(t testing.TB, c *flow.Command, r *flow.Route, deliver func() bool) (flow.Action, bool) {
	t.Helper()
	ctx := context.Background()
	d := h.f.Fast(c, r)
	switch d.Action {
	case flow.Proceed:
		ok := deliver()
		if err := h.f.Finish(ctx, c, r, d, ok); err != nil {
			t.Fatal(err)
		}
		return flow.Proceed, ok
	case flow.Escalate:
	default:
		return d.Action, false
	}
	d, err := h.f.Slow(ctx, c, r)
	for errors.Is(err, flow.ErrClaimInProgress) {
		// The hand-off's redelivery: another attempt holds the claim and
		// is about to finish (in these tests it never dies).
		runtime.Gosched()
		d, err = h.f.Slow(ctx, c, r)
	}
	if err != nil {
		t.Fatal(err)
	}
	if d.Action != flow.Proceed {
		return d.Action, false
	}
	ok := deliver()
	if err := h.f.Finish(ctx, c, r, d, ok); err != nil {
		t.Fatal(err)
	}
	return flow.Proceed, ok
}

func always() bool { return true }

func cmd(id, source, target, name string) *flow.Command {
	return &flow.Command{ID: id, Source: source, Target: target, Name: name, Timestamp: "2026-11-21T12:00:00Z", PayloadHash: "h-" + id}
}

func newStore() flow.Store { return memstore.NewFlow() }

func clk() *clock.Fake { return clock.NewFake(t0) }
