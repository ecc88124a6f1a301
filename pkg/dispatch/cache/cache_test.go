package cache_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type metrics struct {
	mu     sync.Mutex
	counts map[string]int64
	obs    map[string][]float64
}

func (m *metrics) Count(name string, n int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int64{}
	}
	m.counts[name] += n
}

func (m *metrics) Observe(name string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obs == nil {
		m.obs = map[string][]float64{}
	}
	m.obs[name] = append(m.obs[name], v)
}

func (m *metrics) count(name string) int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.counts[name]
}

func (m *metrics) observed(name string) []float64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]float64(nil), m.obs[name]...)
}

// queue is an executor that runs background work only when told to.
type queue struct {
	mu sync.Mutex
	fs []func()
}

func (q *queue) exec(f func()) {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.fs = append(q.fs, f)
}

func (q *queue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.fs)
}

func (q *queue) run() {
	q.mu.Lock()
	fs := q.fs
	q.fs = nil
	q.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// reader wraps a store to count loads, fail or block them.
type reader struct {
	registry.Store
	loads atomic.Int64
	fail  atomic.Bool
	gate  chan struct{} // if not nil, Load waits for it
	// entered, if not nil, is closed when the first Load starts.
	entered chan struct{}
	once    sync.Once
}

func (r *reader) Load(ctx context.Context, now time.Time, kinds ...registry.Kind) (registry.Data, error) {
	r.loads.Add(1)
	if r.entered != nil {
		r.once.Do(func() { close(r.entered) })
	}
	if r.gate != nil {
		<-r.gate
	}
	if r.fail.Load() {
		return registry.Data{}, errors.New("dynamodb: throttled")
	}
	return r.Store.Load(ctx, now, kinds...)
}

type fixture struct {
	clk  *clock.Fake
	st   *memstore.Registry
	rd   *reader
	q    *queue
	m    *metrics
	tel  *telemetry.Memory
	logs *bytes.Buffer
	c    *cache.Caches
}

func newFixture(t *testing.T, cfg cache.Config) *fixture {
	t.Helper()
	f := &fixture{clk: clock.NewFake(t0), st: memstore.NewRegistry(), q: &queue{}, m: &metrics{}, tel: &telemetry.Memory{}, logs: &bytes.Buffer{}}
	f.rd = &reader{Store: f.st}
	if cfg.Jitter == 0 {
		cfg.Jitter = -1
	}
	c, err := cache.New(cfg, cache.Deps{Reader: f.rd, Clock: f.clk, Metrics: f.m, Telemetry: f.tel,
		Logger: slog.New(slog.NewTextHandler(f.logs, nil)), Executor: f.q.exec})
	if err != nil {
		t.Fatal(err)
	}
	f.c = c
	return f
}

func (f *fixture) put(t *testing.T, it registry.Item) {
	t.Helper()
	if _, err := f.st.Put(context.Background(), registry.Actor{Who: "test", At: f.clk.Now()}, it); err != nil {
		t.Fatal(err)
	}
}

func (f *fixture) get(t *testing.T, id registry.ID) registry.Item {
	t.Helper()
	it, err := f.st.Get(context.Background(), id, f.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	return it
}

var rk = registry.RouteKey{Target: "billing", Command: "charge"}

func TestLifecycle(t *testing.T) {
	f := newFixture(t, cache.Config{Routing: cache.TTL{Fresh: 60 * time.Second, Stale: 180 * time.Second}})
	ctx := context.Background()
	if _, st, ok := f.c.Routes.Lookup(rk, f.clk.Now()); ok || st != cache.Expired {
		t.Fatalf("never loaded: state %v found %v; want expired miss", st, ok)
	}
	r := dispatchtest.RegistryRoute("billing", "charge")
	f.put(t, registry.Item{Route: &r})
	if err := f.c.LoadAll(ctx); err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		at    time.Duration
		want  cache.State
		queue int
	}{
		{0, cache.Fresh, 0},
		{59 * time.Second, cache.Fresh, 0},
		{60 * time.Second, cache.Stale, 1},
		{179 * time.Second, cache.Stale, 1}, // single flight: still one queued
		{180 * time.Second, cache.Expired, 1},
	}
	for _, s := range steps {
		f.clk.Set(t0.Add(s.at))
		got, st, ok := f.c.Routes.Lookup(rk, f.clk.Now())
		if !ok || st != s.want || got.QueueARN != r.QueueARN {
			t.Fatalf("at %v: %v %v %v; want %v", s.at, got, st, ok, s.want)
		}
		if f.q.len() != s.queue {
			t.Fatalf("at %v: %d background refreshes queued; want %d", s.at, f.q.len(), s.queue)
		}
	}
	f.q.run()
	f.c.WaitIdle()
	if _, st, _ := f.c.Routes.Lookup(rk, f.clk.Now()); st != cache.Fresh {
		t.Fatalf("after the background refresh: %v; want fresh", st)
	}
	if got := f.rd.loads.Load(); got != 2 {
		t.Fatalf("%d loads; want the cold load and one refresh", got)
	}
	// Telemetry: the refresh record, its duration, the stale window, usage.
	var rec *cache.Refreshed
	for _, e := range f.tel.Events() {
		if r, ok := e.(cache.Refreshed); ok && r.CacheType == "Routing" && r.AgeSeconds > 0 {
			rec = &r
		}
	}
	if rec == nil || rec.AgeSeconds != 180 || rec.FreshTTL != 60 || rec.StaleTTL != 180 {
		t.Fatalf("refresh record = %+v; want Routing age 180 fresh 60 stale 180", rec)
	}
	if len(f.m.observed("Snavio.Cache.Routing.RefreshDuration")) != 1 {
		t.Errorf("RefreshDuration not observed once: %v", f.m.obs)
	}
	if w := f.m.observed("Snavio.Cache.Routing.StaleWindowSeconds"); len(w) != 1 || w[0] != 120 {
		t.Errorf("StaleWindowSeconds = %v; want [120]", w)
	}
	if f.m.count("Snavio.Cache.Usage.Fresh") != 2 || f.m.count("Snavio.Cache.Usage.Stale") != 2 ||
		f.m.count("Snavio.Cache.Routing.Usage.Stale") != 2 || f.m.count("Snavio.Cache.Usage.Expired") != 2 {
		t.Errorf("usage counts = %v; want fresh 2, stale 2 (and per type), expired 2", f.m.counts)
	}
}

func TestBackgroundFailureKeepsServing(t *testing.T) {
	f := newFixture(t, cache.Config{Routing: cache.TTL{Fresh: 10 * time.Second, Stale: 20 * time.Second}, RetryBackoff: 5 * time.Second})
	r := dispatchtest.RegistryRoute("billing", "charge")
	f.put(t, registry.Item{Route: &r})
	if err := f.c.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.rd.fail.Store(true)
	f.clk.Set(t0.Add(11 * time.Second))
	if _, st, ok := f.c.Routes.Lookup(rk, f.clk.Now()); !ok || st != cache.Stale {
		t.Fatalf("stale lookup: %v %v", st, ok)
	}
	f.q.run()
	if !strings.Contains(f.logs.String(), "cache refresh failed") || f.m.count("Snavio.Cache.Routing.RefreshFailure") != 1 {
		t.Fatalf("failure not logged and counted: %q %v", f.logs.String(), f.m.counts)
	}
	if _, st, ok := f.c.Routes.Lookup(rk, f.clk.Now()); !ok || st != cache.Stale || f.q.len() != 0 {
		t.Fatalf("after a failed refresh: %v %v, %d queued; want stale data and no retry inside the backoff", st, ok, f.q.len())
	}
	f.clk.Set(t0.Add(16 * time.Second))
	f.c.Routes.Lookup(rk, f.clk.Now())
	if f.q.len() != 1 {
		t.Fatalf("%d refreshes queued after the backoff; want 1", f.q.len())
	}
	f.rd.fail.Store(false)
	f.q.run()
	if _, st, _ := f.c.Routes.Lookup(rk, f.clk.Now()); st != cache.Fresh {
		t.Fatalf("after recovery: %v", st)
	}
}

func TestRefreshIsSingleFlight(t *testing.T) {
	f := newFixture(t, cache.Config{})
	f.rd.gate = make(chan struct{})
	f.rd.entered = make(chan struct{})
	leader := make(chan error)
	go func() { leader <- f.c.Refresh(context.Background(), cache.ACL) }()
	<-f.rd.entered // the leader's load is in flight and held at the gate
	// A second Refresh joins the flight instead of loading: with its
	// context already ended it returns at once. Had it started a load of
	// its own, that load would wait at the closed gate forever.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := f.c.Refresh(ctx, cache.ACL); !errors.Is(err, context.Canceled) {
		t.Fatalf("joiner with an ended context: %v; want context.Canceled", err)
	}
	close(f.rd.gate)
	if err := <-leader; err != nil {
		t.Fatal(err)
	}
	if n := f.rd.loads.Load(); n != 1 {
		t.Fatalf("%d loads; want 1", n)
	}
	f.c.WaitIdle()
}

func TestACLProfilesAndOverride(t *testing.T) {
	f := newFixture(t, cache.Config{})
	crit := dispatchtest.RegistryACL("shop/web", "billing", "delete-user")
	low := dispatchtest.RegistryACL("shop/web", "metrics", "upload")
	low.Profile = registry.ProfileLow
	over := dispatchtest.RegistryACL("shop/web", "billing", "custom")
	over.FreshTTLSeconds, over.StaleTTLSeconds = 100, 200
	for _, a := range []registry.ACL{crit, low, over} {
		f.put(t, registry.Item{ACL: &a})
	}
	if err := f.c.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	check := func(k registry.ACLKey, at time.Duration, want cache.State) {
		t.Helper()
		if _, st, ok := f.c.ACLs.Lookup(k, t0.Add(at)); !ok || st != want {
			t.Fatalf("%v at %v: %v %v; want %v", k, at, st, ok, want)
		}
	}
	check(crit.Key(), 1999*time.Millisecond, cache.Fresh)
	check(crit.Key(), 2*time.Second, cache.Stale)
	check(crit.Key(), 4*time.Second, cache.Expired)
	check(low.Key(), 29*time.Second, cache.Fresh)
	check(low.Key(), 89*time.Second, cache.Stale)
	check(over.Key(), 99*time.Second, cache.Fresh)
	check(over.Key(), 199*time.Second, cache.Stale)
	// A miss reports the tightest deadlines of the table.
	if _, st, ok := f.c.ACLs.Lookup(registry.ACLKey{Source: "x/y", Target: "a", Command: "b"}, t0.Add(3*time.Second)); ok || st != cache.Stale {
		t.Fatalf("miss at 3s: %v %v; want a stale miss (critical entries present)", st, ok)
	}
}

func TestConfiguredProfiles(t *testing.T) {
	f := newFixture(t, cache.Config{Profiles: map[registry.Profile]cache.TTL{registry.ProfileCritical: {Fresh: time.Second, Stale: 3 * time.Second}}})
	a := dispatchtest.RegistryACL("shop/web", "billing", "x")
	f.put(t, registry.Item{ACL: &a})
	if err := f.c.Refresh(context.Background(), cache.ACL); err != nil {
		t.Fatal(err)
	}
	if _, st, _ := f.c.ACLs.Lookup(a.Key(), t0.Add(time.Second)); st != cache.Stale {
		t.Fatalf("configured critical fresh 1s: %v at 1s", st)
	}
}

func TestJitterShortensOnly(t *testing.T) {
	for _, tc := range []struct {
		rand float64
		at   time.Duration
		want cache.State
	}{
		{0, 59 * time.Second, cache.Fresh},
		{0.999, 55 * time.Second, cache.Stale}, // 60 s * (1 - 0.1*0.999) ≈ 54.006 s
		{0.999, 54 * time.Second, cache.Fresh},
		{0.5, 57 * time.Second, cache.Stale}, // 57 s
	} {
		clk := clock.NewFake(t0)
		st := memstore.NewRegistry()
		r := dispatchtest.RegistryRoute("billing", "charge")
		if _, err := st.Put(context.Background(), registry.Actor{Who: "t", At: t0}, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
		c, err := cache.New(cache.Config{Jitter: 0.1}, cache.Deps{Reader: st, Clock: clk, Executor: func(func()) {}, Rand: func() float64 { return tc.rand }})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.LoadAll(context.Background()); err != nil {
			t.Fatal(err)
		}
		if _, got, _ := c.Routes.Lookup(rk, t0.Add(tc.at)); got != tc.want {
			t.Errorf("rand %v at %v: %v; want %v", tc.rand, tc.at, got, tc.want)
		}
	}
}

func TestExpiresAtHonoured(t *testing.T) {
	f := newFixture(t, cache.Config{})
	r := dispatchtest.RegistryRoute("promo", "flash")
	r.ExpiresAt = t0.Add(5 * time.Second).Unix()
	f.put(t, registry.Item{Route: &r})
	if err := f.c.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	k := r.Key()
	if _, _, ok := f.c.Routes.Lookup(k, t0.Add(4*time.Second)); !ok {
		t.Fatal("ephemeral route missing before its expiry")
	}
	if _, st, ok := f.c.Routes.Lookup(k, t0.Add(5*time.Second)); ok || st != cache.Fresh {
		t.Fatalf("at expires_at: %v %v; want a fresh miss", st, ok)
	}
}

func TestInvalidDataRefused(t *testing.T) {
	bad := &badReader{}
	c, err := cache.New(cache.Config{}, cache.Deps{Reader: bad, Executor: func(func()) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.LoadAll(context.Background()); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("cold load of a FIFO route: %v; want ErrInvalid", err)
	}
	if err := c.Refresh(context.Background(), cache.Routing); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("refresh of a FIFO route: %v; want ErrInvalid", err)
	}
	if c.Routes.Len() != 0 {
		t.Fatal("invalid data installed")
	}
}

type badReader struct{ registry.Store }

func (badReader) Load(context.Context, time.Time, ...registry.Kind) (registry.Data, error) {
	r := dispatchtest.RegistryRoute("billing", "charge")
	r.QueueARN += ".fifo"
	return registry.Data{Routes: []registry.Route{r}}, nil
}

func TestSeedFromSnapshot(t *testing.T) {
	f := newFixture(t, cache.Config{Routing: cache.TTL{Fresh: 60 * time.Second, Stale: 180 * time.Second}})
	r := dispatchtest.RegistryRoute("billing", "charge")
	gen := t0.Add(-100 * time.Second)
	if err := f.c.Seed(&registry.Data{Routes: []registry.Route{r}}, gen); err != nil {
		t.Fatal(err)
	}
	for _, s := range []struct {
		at   time.Duration // after generated_at
		want cache.State
	}{{179 * time.Second, cache.Fresh}, {180 * time.Second, cache.Stale}, {299 * time.Second, cache.Stale}, {300 * time.Second, cache.Expired}} {
		if _, st, _ := f.c.Routes.Lookup(rk, gen.Add(s.at)); st != s.want {
			t.Errorf("%v after generation: %v; want %v", s.at, st, s.want)
		}
	}
}

func TestKeysAndBans(t *testing.T) {
	f := newFixture(t, cache.Config{})
	secret := bytes.Repeat([]byte{7}, 32)
	f.put(t, registry.Item{Key: &registry.ServiceKey{Source: "shop/web", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}}}})
	f.put(t, registry.Item{Ban: &registry.Ban{Source: "spam/bot", Kind: registry.BanGlobal, ExpiresAt: t0.Add(time.Minute).Unix()}})
	f.put(t, registry.Item{Ban: &registry.Ban{Source: "slow/one", Kind: registry.BanColdOnly}})
	// Never loaded: unknown source, and an expired lookup queues a refresh.
	if _, err := f.c.Keys.Resolve("shop/web", "hmac-v1", t0); err == nil {
		t.Fatal("resolved from an empty cache")
	}
	if f.q.len() != 1 {
		t.Fatalf("expired key cache queued %d refreshes; want 1", f.q.len())
	}
	f.q.run()
	m, err := f.c.Keys.Resolve("shop/web", "hmac-v1", t0)
	if err != nil || m.Key == nil {
		t.Fatalf("Resolve after refresh: %v", err)
	}
	if _, err := f.c.Keys.Resolve("shop/web", "hmac-v2", t0); err == nil {
		t.Fatal("unknown version resolved")
	}
	if err := f.c.Refresh(context.Background(), cache.Bans); err != nil {
		t.Fatal(err)
	}
	for src, want := range map[string]shield.Ban{"spam/bot": shield.ColdOnly, "slow/one": shield.ColdOnly, "shop/web": shield.NotBanned} {
		if got := f.c.Bans.Ban(src, "billing", "charge", t0); got != want {
			t.Errorf("Ban(%s) = %v; want %v", src, got, want)
		}
	}
	if got := f.c.Bans.Ban("spam/bot", "billing", "charge", t0.Add(time.Minute)); got != shield.NotBanned {
		t.Errorf("global ban after its expiry: %v", got)
	}
}

func TestRevocationAudit(t *testing.T) {
	f := newFixture(t, cache.Config{})
	used := dispatchtest.RegistryACL("shop/web", "billing", "delete-user")      // used after revocation
	early := dispatchtest.RegistryACL("shop/web", "billing", "refund")          // used only before
	deleted := dispatchtest.RegistryACL("shop/web", "billing", "close-account") // deleted outright
	expiring := dispatchtest.RegistryACL("shop/web", "billing", "flash")        // expired
	unused := dispatchtest.RegistryACL("shop/web", "billing", "never-used")     // revoked, never used
	expiring.ExpiresAt = t0.Add(3 * time.Second).Unix()
	for _, a := range []registry.ACL{used, early, deleted, expiring, unused} {
		f.put(t, registry.Item{ACL: &a})
	}
	if err := f.c.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	f.c.ACLs.Lookup(early.Key(), t0.Add(500*time.Millisecond))
	f.c.ACLs.Lookup(expiring.Key(), t0.Add(time.Second))
	// Revocations at t0+1s.
	f.clk.Set(t0.Add(time.Second))
	for _, a := range []registry.ACL{used, early, unused} {
		cur := f.get(t, aclKey(a.Key()).id())
		rev := registry.Revoke(*cur.ACL, f.clk.Now(), time.Hour)
		f.put(t, registry.Item{ACL: &rev})
	}
	if _, err := f.st.Delete(context.Background(), registry.Actor{Who: "t", At: f.clk.Now()}, aclKey(deleted.Key()).id(), 1); err != nil {
		t.Fatal(err)
	}
	// Stale uses at 2.5 s and 3.5 s (critical: stale from 2 s to 4 s).
	for _, at := range []time.Duration{2500 * time.Millisecond, 3500 * time.Millisecond} {
		if _, st, ok := f.c.ACLs.Lookup(used.Key(), t0.Add(at)); !ok || st != cache.Stale {
			t.Fatalf("use at %v: %v %v", at, st, ok)
		}
	}
	f.c.ACLs.Lookup(deleted.Key(), t0.Add(2500*time.Millisecond))
	f.clk.Set(t0.Add(3500 * time.Millisecond))
	f.q.run() // the background refresh started by the stale use
	got := map[string]telemetry.ExecutedAfterACLRevoked{}
	for _, e := range f.tel.Events() {
		if ev, ok := e.(telemetry.ExecutedAfterACLRevoked); ok {
			got[ev.CommandName] = ev
		}
	}
	if len(got) != 2 {
		t.Fatalf("audit events = %+v; want delete-user and close-account only", got)
	}
	if ev := got["delete-user"]; ev.StaleDurationSeconds != 2.5 || !ev.ACLRevocationTimestamp.Equal(t0.Add(time.Second)) || ev.Source != "shop/web" || ev.Target != "billing" {
		t.Errorf("delete-user event = %+v; want 2.5 s after the revocation at t0+1s", ev)
	}
	if ev := got["close-account"]; !ev.ACLRevocationTimestamp.Equal(t0) || ev.StaleDurationSeconds != 2.5 {
		t.Errorf("close-account event = %+v; want revocation bounded by the load at t0", ev)
	}
	// The revoked entry is now cached as a revocation; no second event.
	f.tel.Reset()
	if err := f.c.Refresh(context.Background(), cache.ACL); err != nil {
		t.Fatal(err)
	}
	for _, e := range f.tel.Events() {
		if _, ok := e.(telemetry.ExecutedAfterACLRevoked); ok {
			t.Fatalf("audit repeated: %+v", e)
		}
	}
	if a, _, ok := f.c.ACLs.Lookup(used.Key(), f.clk.Now()); !ok || a.Allow {
		t.Fatalf("after refresh the entry is %+v; want the revocation", a)
	}
}

func TestConfigValidate(t *testing.T) {
	for name, c := range map[string]cache.Config{
		"inverted":        {Routing: cache.TTL{Fresh: 2 * time.Second, Stale: time.Second}},
		"unknown profile": {Profiles: map[registry.Profile]cache.TTL{"paranoid": {Fresh: 1, Stale: 2}}},
		"bad profile ttl": {Profiles: map[registry.Profile]cache.TTL{registry.ProfileLow: {Fresh: 2, Stale: 2}}},
		"jitter":          {Jitter: 0.9},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%s: Validate accepted %+v", name, c)
		}
	}
	if _, err := cache.New(cache.Config{}, cache.Deps{}); err == nil {
		t.Error("New without a reader succeeded")
	}
	if err := (cache.Config{}).Validate(); err != nil {
		t.Errorf("defaults: %v", err)
	}
}
