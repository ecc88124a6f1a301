package pipeline

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// escalating adds route mailer/notify after the caches loaded, so its
// commands escalate (cache_miss) and wait in the hand-off; mod sets the
// node's admission options.
func escalating(t *testing.T, mod func(*Options)) *env {
	t.Helper()
	e := newEnv(t)
	route := dispatchtest.RegistryRoute("mailer", "notify")
	acl := dispatchtest.RegistryACL(source, "mailer", "notify")
	for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
		if _, err := e.reg.Put(context.Background(), registry.Actor{Who: "t", At: t0}, it); err != nil {
			t.Fatal(err)
		}
	}
	o := e.node.o
	mod(&o)
	n, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	e.node = n
	return e
}

// ingestN sends commands first..first+n-1 one request each and returns
// how many were accepted and the last refusal.
func (e *env) ingestN(t *testing.T, first, n int) (accepted int, last server.EntryResult) {
	t.Helper()
	for i := first; i < first+n; i++ {
		r := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, i, "mailer", "notify")})[0]
		if r.EventID != "" {
			accepted++
		} else {
			last = r
		}
	}
	return accepted, last
}

func TestAdmissionBoundsATenant(t *testing.T) {
	e := escalating(t, func(o *Options) { o.TenantWaiting = 3 })
	acc, last := e.ingestN(t, 1, 5)
	if acc != 3 || last.ErrorCode != server.EntryErrThrottling || !strings.Contains(last.ErrorMessage, "tenant acme") || !strings.Contains(last.ErrorMessage, "retry after 1s") {
		t.Fatalf("accepted %d of 5, last refusal %+v: want 3, then ThrottlingException naming the tenant with a retry hint", acc, last)
	}
	if st := e.node.Stats(); st.Throttled != 2 || st.Refused != 2 {
		t.Fatalf("stats %+v", st)
	}
	// The slow stage works the hand-offs off: the tenant has room again.
	if n, err := e.node.SlowOnce(context.Background()); n != 3 || err != nil {
		t.Fatalf("SlowOnce = %d %v", n, err)
	}
	if total, mine := e.node.Waiting("acme"); total != 0 || mine != 0 {
		t.Fatalf("waiting %d (acme %d) after the slow stage", total, mine)
	}
	if acc, _ := e.ingestN(t, 6, 3); acc != 3 {
		t.Fatalf("accepted %d of 3 after the slow stage ran", acc)
	}
}

func TestAdmissionLeavesRoomForOthers(t *testing.T) {
	// Alone, a tenant takes at most half the hand-off.
	e := escalating(t, func(o *Options) { o.HandoffCapacity = 10 })
	if acc, last := e.ingestN(t, 1, 8); acc != 5 || last.ErrorCode != server.EntryErrThrottling {
		t.Fatalf("accepted %d of 8 into a hand-off of 10, last %+v: want 5", acc, last)
	}
}

func TestAdmissionBoundsARoute(t *testing.T) {
	e := escalating(t, func(o *Options) { o.RouteWaiting = 2 })
	if acc, last := e.ingestN(t, 1, 4); acc != 2 || !strings.Contains(last.ErrorMessage, "route mailer/notify") {
		t.Fatalf("accepted %d of 4, last %+v: want 2, then the route's bound", acc, last)
	}
}

func TestAdmissionRefusesAFullTargetQueue(t *testing.T) {
	room := 2
	var asked []string
	e := escalating(t, func(o *Options) {
		o.Room = func(queueARN string) (int, bool) { asked = append(asked, queueARN); return room, true }
	})
	// Unrouted (cache_miss), the queue is not known: admitted on the
	// tenant's and route's bounds alone. The slow stage then routes it
	// and the cache learns the route.
	if acc, _ := e.ingestN(t, 1, 1); acc != 1 || len(asked) != 0 {
		t.Fatalf("accepted %d, room asked for %v", acc, asked)
	}
	if _, err := e.node.SlowOnce(context.Background()); err != nil {
		t.Fatal(err)
	}
	// Routed now, its fast delivery finds the queue full: the escalation
	// is admitted while the queue has room (2), then refused at once,
	// without an escalated event.
	e.out.fail = fmt.Errorf("queue demo: %w", dispatch.ErrTargetFull)
	escalated := names(e.tel, flow.EventNameEscalated)
	acc, last := e.ingestN(t, 2, 4)
	if acc != 2 || !strings.Contains(last.ErrorMessage, "is full") || last.ErrorCode != server.EntryErrThrottling {
		t.Fatalf("accepted %d of 4 into a queue with room for 2, last %+v", acc, last)
	}
	if want := dispatchtest.RegistryRoute("mailer", "notify").QueueARN; len(asked) != 4 || asked[0] != want {
		t.Fatalf("room asked for %v, want the route's queue %s each time", asked, want)
	}
	if n := names(e.tel, flow.EventNameEscalated); n != escalated || escalated == 0 {
		t.Fatalf("%d escalated events for commands escalated target_full (before: %d)", n-escalated, escalated)
	}
	room = 0
	if acc, _ := e.ingestN(t, 6, 1); acc != 0 {
		t.Fatal("admitted a command to a full queue")
	}
}

func TestSlowFailsAtOnceOnAFullTargetQueue(t *testing.T) {
	e := escalating(t, func(*Options) {})
	if acc, _ := e.ingestN(t, 1, 1); acc != 1 {
		t.Fatal("not admitted")
	}
	e.out.fail = fmt.Errorf("queue demo: %w", dispatch.ErrTargetFull)
	if n, err := e.node.SlowOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("SlowOnce = %d %v", n, err)
	}
	st := e.node.Stats()
	if st.TargetFull != 1 || st.GaveUp != 1 || st.SlowRetries != 0 || e.ho.len() != 0 {
		t.Fatalf("stats %+v, hand-offs %d: want failed at once, not retried", st, e.ho.len())
	}
	var f telemetry.Failed
	for _, ev := range e.tel.Events() {
		if x, ok := ev.(telemetry.Failed); ok {
			f = x
		}
	}
	if f.Reason != telemetry.FailDeliveryFailure || f.RetryAfterMS != 1000 || !f.ThrottleUntil.Equal(e.clk.Now().Add(DefaultRetryAfter)) {
		t.Fatalf("failed event %+v: want delivery-failure with retry_after_ms 1000 and throttle_until", f)
	}
}

func TestLightTenantsHaveTheirOwnHandoff(t *testing.T) {
	var light *handoff
	e := escalating(t, func(o *Options) {
		light = &handoff{clk: o.Clock.(*clock.Fake), items: map[string]*held{}}
		o.Light, o.LightWaiting = light, 2
	})
	if acc, _ := e.ingestN(t, 1, 3); acc != 3 {
		t.Fatalf("accepted %d of 3", acc)
	}
	// The tenant's first two waited in the light hand-off, the third, over
	// LightWaiting, in the shared one.
	if light.len() != 2 || e.ho.len() != 1 {
		t.Fatalf("light %d shared %d, want 2 and 1", light.len(), e.ho.len())
	}
	if n, err := e.node.SlowOnce(context.Background()); n != 3 || err != nil {
		t.Fatalf("SlowOnce = %d %v", n, err)
	}
	if light.len() != 0 || e.ho.len() != 0 || e.node.Stats().SlowDone != 3 {
		t.Fatalf("after the slow stage: light %d shared %d stats %+v", light.len(), e.ho.len(), e.node.Stats())
	}
}
