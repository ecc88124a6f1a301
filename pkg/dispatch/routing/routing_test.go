package routing_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/routing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type queue struct {
	mu sync.Mutex
	fs []func()
}

func (q *queue) exec(f func()) { q.mu.Lock(); q.fs = append(q.fs, f); q.mu.Unlock() }
func (q *queue) n() int        { q.mu.Lock(); defer q.mu.Unlock(); return len(q.fs) }
func (q *queue) run() {
	q.mu.Lock()
	fs := q.fs
	q.fs = nil
	q.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

type failing struct {
	registry.Store
	fail bool
}

func (f *failing) Load(ctx context.Context, now time.Time, k ...registry.Kind) (registry.Data, error) {
	if f.fail {
		return registry.Data{}, errors.New("unavailable")
	}
	return f.Store.Load(ctx, now, k...)
}

func (f *failing) Get(ctx context.Context, id registry.ID, now time.Time) (registry.Item, error) {
	if f.fail {
		return registry.Item{}, errors.New("unavailable")
	}
	return f.Store.Get(ctx, id, now)
}

type env struct {
	clk *clock.Fake
	st  *failing
	q   *queue
	c   *cache.Caches
	r   *routing.Router
}

func newEnv(t *testing.T) *env {
	t.Helper()
	e := &env{clk: clock.NewFake(t0), st: &failing{Store: memstore.NewRegistry()}, q: &queue{}}
	c, err := cache.New(cache.Config{Jitter: -1}, cache.Deps{Reader: e.st, Clock: e.clk, Executor: e.q.exec})
	if err != nil {
		t.Fatal(err)
	}
	e.c = c
	if e.r, err = routing.New(c, e.st, e.clk); err != nil {
		t.Fatal(err)
	}
	return e
}

func (e *env) put(t *testing.T, it registry.Item) {
	t.Helper()
	if _, err := e.st.Put(context.Background(), registry.Actor{Who: "t", At: e.clk.Now()}, it); err != nil {
		t.Fatal(err)
	}
}

const src, tgt, cmd = "shop/web", "billing", "charge"

func seeded(t *testing.T) *env {
	e := newEnv(t)
	r := dispatchtest.RegistryRoute(tgt, cmd)
	r.DedupeMode = registry.DedupeStrict
	r.RateLimit = registry.RateLimit{Max: 100, IntervalSeconds: 60, Burst: 10, CooldownSeconds: 5}
	r.Fairness = registry.Fairness{DominantShare: 0.7, WindowSeconds: 10}
	r.PrefetchLeases = 3
	a := dispatchtest.RegistryACL(src, tgt, cmd) // critical: 2 s / 4 s
	e.put(t, registry.Item{Route: &r})
	e.put(t, registry.Item{ACL: &a})
	revoked := registry.Revoke(dispatchtest.RegistryACL("evil/bot", tgt, cmd), t0, time.Hour)
	e.put(t, registry.Item{ACL: &revoked})
	if err := e.c.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return e
}

func TestFast(t *testing.T) {
	cold := newEnv(t)
	if d := cold.r.Fast(src, tgt, cmd); d.Deliver || d.Escalate != routing.CacheCold {
		t.Fatalf("cold cache: %+v; want cache_cold", d)
	}
	e := seeded(t)
	for _, tc := range []struct {
		name           string
		at             time.Duration
		source, target string
		command        string
		want           routing.Reason // "" = deliver
		routeSt, aclSt cache.State
	}{
		{"fresh", 0, src, tgt, cmd, "", cache.Fresh, cache.Fresh},
		{"acl stale is used", 3 * time.Second, src, tgt, cmd, "", cache.Fresh, cache.Stale},
		{"acl expired", 4 * time.Second, src, tgt, cmd, routing.ACLExpired, cache.Fresh, cache.Expired},
		{"route missing", 0, src, tgt, "refund", routing.CacheMiss, cache.Fresh, cache.Fresh},
		{"acl missing", 0, "other/svc", tgt, cmd, routing.ACLMissing, cache.Fresh, cache.Fresh},
		{"acl revoked", 0, "evil/bot", tgt, cmd, routing.ACLDenied, cache.Fresh, cache.Fresh},
		{"routing stale is used", 61 * time.Second, src, tgt, cmd, routing.ACLExpired, cache.Stale, cache.Expired},
		{"routing expired", 180 * time.Second, src, tgt, cmd, routing.RoutingStale, cache.Expired, cache.Fresh},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := e.r.FastAt(tc.source, tc.target, tc.command, t0.Add(tc.at))
			if tc.want == "" {
				if !d.Deliver || d.Route == nil || d.QueueARN() != "arn:aws:sqs:eu-west-1:123456789012:billing-commands" || d.ACLState != tc.aclSt || d.RouteState != tc.routeSt {
					t.Fatalf("%+v; want delivery (route %v, acl %v)", d, tc.routeSt, tc.aclSt)
				}
				return
			}
			if d.Deliver || d.Escalate != tc.want || d.Fail != "" || d.Route != nil || d.QueueARN() != "" {
				t.Fatalf("%+v; want escalation %s", d, tc.want)
			}
		})
	}
}

func TestFlowRoute(t *testing.T) {
	e := seeded(t)
	d := e.r.FastAt(src, tgt, cmd, t0)
	want := flow.Route{Strict: true,
		RateLimit: flow.RateLimit{Max: 100, Interval: time.Minute, Burst: 10, Cooldown: 5 * time.Second, PrefetchLeases: 3},
		Fairness:  flow.FairnessParams{DominantShare: 0.7, Window: 10 * time.Second},
	}
	if d.Flow != want {
		t.Fatalf("Flow = %+v; want %+v", d.Flow, want)
	}
}

func TestSlow(t *testing.T) {
	ctx := context.Background()
	e := seeded(t)
	d, err := e.r.Slow(ctx, src, tgt, cmd)
	if err != nil || !d.Deliver || d.Fail != "" {
		t.Fatalf("fresh: %+v, %v", d, err)
	}
	if d, err := e.r.Slow(ctx, src, tgt, "refund"); err != nil || d.Deliver || d.Fail != telemetry.FailRouteMissing {
		t.Fatalf("no route: %+v, %v; want route-missing", d, err)
	}
	if d, err := e.r.Slow(ctx, "other/svc", tgt, cmd); err != nil || d.Fail != telemetry.FailACLDeny {
		t.Fatalf("no ACL: %+v, %v; want acl-deny", d, err)
	}
	if d, err := e.r.Slow(ctx, "evil/bot", tgt, cmd); err != nil || d.Fail != telemetry.FailACLDeny {
		t.Fatalf("revoked ACL: %+v, %v; want acl-deny", d, err)
	}

	// Registered after the cache was loaded: the point read finds them,
	// and background refreshes are queued for the fast stage.
	r2 := dispatchtest.RegistryRoute(tgt, "refund")
	e.put(t, registry.Item{Route: &r2})
	a2 := dispatchtest.RegistryACL(src, tgt, "refund")
	e.put(t, registry.Item{ACL: &a2})
	if d, err := e.r.Slow(ctx, src, tgt, "refund"); err != nil || !d.Deliver || d.Route.Command != "refund" {
		t.Fatalf("new route: %+v, %v; want delivery", d, err)
	}
	if e.q.n() != 2 {
		t.Fatalf("%d background refreshes queued; want routing and ACL", e.q.n())
	}
	e.q.run()
	if d := e.r.FastAt(src, tgt, "refund", e.clk.Now()); !d.Deliver {
		t.Fatalf("fast after the refresh: %+v", d)
	}

	// Expired ACLs: Slow refreshes synchronously, then decides.
	e.clk.Set(t0.Add(5 * time.Second))
	if d := e.r.Fast(src, tgt, cmd); d.Escalate != routing.ACLExpired {
		t.Fatalf("fast at 5 s: %+v", d)
	}
	if d, err := e.r.Slow(ctx, src, tgt, cmd); err != nil || !d.Deliver || d.ACLState != cache.Fresh {
		t.Fatalf("slow at 5 s: %+v, %v; want a fresh delivery", d, err)
	}
	// Expired routes and an unavailable registry: an error, no decision.
	e.clk.Set(t0.Add(10 * time.Minute))
	e.st.fail = true
	if _, err := e.r.Slow(ctx, src, tgt, cmd); err == nil {
		t.Fatal("slow with an unavailable registry and expired caches decided")
	}
	e.st.fail = false
	if d, err := e.r.Slow(ctx, src, tgt, cmd); err != nil || !d.Deliver || d.RouteState != cache.Fresh {
		t.Fatalf("slow after recovery: %+v, %v", d, err)
	}
}

func TestSlowPointReadFailure(t *testing.T) {
	e := seeded(t)
	e.st.fail = true
	if _, err := e.r.Slow(context.Background(), src, tgt, "unknown"); err == nil {
		t.Fatal("a miss with an unavailable registry refused instead of erring")
	}
	if _, err := e.r.Slow(context.Background(), "other/svc", tgt, cmd); err == nil {
		t.Fatal("an ACL miss with an unavailable registry refused instead of erring")
	}
}

func TestFailedEvent(t *testing.T) {
	e := seeded(t)
	d, _ := e.r.Slow(context.Background(), src, tgt, "refund")
	ev := routing.FailedEvent(d, routing.Command{ID: "0b9f3f3a-8f5e-4d2a-9a51-1c2d3e4f5a6b", Source: src, Target: tgt, Name: "refund",
		Timestamp: "2026-11-21T12:00:00Z", Replay: telemetry.Replay{Replay: true, ReplayReason: "incident", ReplayID: "r1"}})
	b, err := telemetry.Marshal(ev)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"event":"snavio.command.failed","command_id":"0b9f3f3a-8f5e-4d2a-9a51-1c2d3e4f5a6b","source":"shop/web","target":"billing","command_name":"refund","timestamp":"2026-11-21T12:00:00Z","reason":"route-missing","replay":true,"replay_reason":"incident","replay_id":"r1"}`
	if string(b) != want {
		t.Fatalf("event\n got %s\nwant %s", b, want)
	}
}

func TestNew(t *testing.T) {
	if _, err := routing.New(nil, nil, nil); err == nil {
		t.Fatal("New without caches succeeded")
	}
}

func TestQuotas(t *testing.T) {
	e := newEnv(t)
	e.put(t, registry.Item{Quota: &registry.Quota{Source: src, Target: tgt, Command: cmd, Limit: registry.RateLimit{Max: 5, IntervalSeconds: 60, CooldownSeconds: 10}}})
	q := routing.NewQuotas(e.c, e.clk)
	if _, ok := q.SourceQuota(src, tgt, cmd); ok {
		t.Fatal("quota from an empty cache")
	}
	if e.q.n() != 1 {
		t.Fatalf("expired quota cache queued %d refreshes; want 1", e.q.n())
	}
	e.q.run()
	got, ok := q.SourceQuota(src, tgt, cmd)
	if !ok || got != (flow.RateLimit{Max: 5, Interval: time.Minute, Cooldown: 10 * time.Second}) {
		t.Fatalf("SourceQuota = %+v %v", got, ok)
	}
	if _, ok := q.SourceQuota("other/svc", tgt, cmd); ok {
		t.Fatal("quota for a source without one")
	}
}
