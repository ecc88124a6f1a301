// Package cache holds the dispatcher's stale-tolerant caches of the
// registry: routes, ACLs, HMAC keys and bans.
// docs/registry/cache.md describes the model and its TTL table.
//
// Each cache type is a Table: an immutable generation (a map built once per
// refresh) behind an atomic.Pointer, so that lookups take no lock, do not
// allocate and scale with cores. A lookup reports the entry's state:
//
//   - Fresh (age < fresh_ttl): use it.
//   - Stale (fresh_ttl <= age < stale_ttl): use it; the lookup also starts
//     a background refresh of the type, single-flight (at most one refresh
//     per type at a time, no dogpile), run by the injected executor so
//     the dispatch never waits for it. Refresh failures are logged and
//     retried no sooner than RetryBackoff later; they never fail a
//     dispatch.
//   - Expired (age >= stale_ttl, or never loaded): the fast stage
//     escalates; the slow stage calls Refresh, which joins an in-flight
//     refresh or runs one, and decides afterwards.
//
// TTLs are per type and, for ACLs, per sensitivity profile or per entry
// override. Every refresh scales the TTLs of the generation it installs by
// a random factor in [1-Jitter, 1], so that a fleet of containers does
// not refresh in step; TTLs are never lengthened.
//
// A refresh loads the type from a registry.Reader and validates it with
// registry.Validate (the same validation as registration and snapshot
// generation); data that fails validation is refused and the previous
// generation stays in use.
package cache

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Type is a cache type, as named in metric names.
type Type string

// Cache types. Routing, ACL and HMAC are the spec's; Bans is the ban list
// (global warm-path bans and the cold-only denylist); Quotas the
// per-source quotas the slow stage reads.
const (
	Routing Type = Type(telemetry.CacheRouting)
	ACL     Type = Type(telemetry.CacheACL)
	HMAC    Type = Type(telemetry.CacheHMAC)
	Bans    Type = "Bans"
	Quotas  Type = "Quotas"
)

// Metric names beyond the catalog of package telemetry.
const (
	// MetricRefreshFailure counts failed refreshes, per type:
	// Snavio.Cache.<Type>.RefreshFailure.
	MetricRefreshFailureFormat = "Snavio.Cache.%s.RefreshFailure"
)

// State is the freshness of a cache entry at a given time.
type State uint8

// States.
const (
	Fresh State = iota
	Stale
	Expired
)

func (s State) String() string {
	switch s {
	case Fresh:
		return "fresh"
	case Stale:
		return "stale"
	}
	return "expired"
}

// TTL is a pair of cache lifetimes. Valid when 0 < Fresh < Stale.
type TTL struct {
	Fresh time.Duration
	Stale time.Duration
}

func (t TTL) valid() bool { return t.Fresh > 0 && t.Stale > t.Fresh }

// Refreshed is the internal telemetry record of every cache refresh (spec
// section C.2, "Cache Usage Telemetry"). It goes to the platform's
// telemetry, not to tenants.
type Refreshed struct {
	CacheType string `json:"cache_type"`
	// AgeSeconds is the age of the replaced data when the refresh
	// completed; 0 when there was none.
	AgeSeconds float64 `json:"age_seconds"`
	// FreshTTL and StaleTTL are the configured TTLs in seconds (for ACLs,
	// the tightest in the generation).
	FreshTTL float64 `json:"fresh_ttl"`
	StaleTTL float64 `json:"stale_ttl"`
}

// EventNameRefreshed is Refreshed's event name.
const EventNameRefreshed = "snavio.cache.refreshed"

// EventName implements telemetry.Event.
func (Refreshed) EventName() string { return EventNameRefreshed }

// Alert implements telemetry.Event.
func (Refreshed) Alert() bool { return false }

// entry is one cached value with its own deadlines (unix nanoseconds).
type entry[V any] struct {
	v          V
	freshUntil int64
	staleUntil int64
	expiresAt  int64 // record expiry, unix ns; 0 = none
	// lastUse is the unix millisecond of the latest lookup that used the
	// entry, kept only by tables that track use (ACLs).
	lastUse atomic.Int64
}

// generation is one immutable load of a table.
type generation[K comparable, V any] struct {
	idx        map[K]int32
	ents       []entry[V]
	loadedAt   int64 // unix ns; when the data was read
	freshUntil int64 // table-level: the tightest deadlines, for misses
	staleUntil int64
	ttl        TTL // tightest TTLs before jitter, for telemetry
}

// counter is an atomic counter alone on its cache line.
type counter struct {
	n atomic.Int64
	_ [56]byte
}

type flight struct {
	done chan struct{}
	err  error
}

// Table is one cache type. Lookups are safe for concurrent use with each
// other and with refreshes.
type Table[K comparable, V any] struct {
	typ   Type
	env   *env
	fetch func(ctx context.Context, now time.Time) ([]K, []V, error)
	// ttl is the type's TTLs; ttlOf, if set, a value's own (ACLs); expOf
	// its record expiry (epoch s).
	ttl      TTL
	ttlOf    func(V) TTL
	expOf    func(V) int64
	trackUse bool
	onSwap   func(old, cur *generation[K, V], now time.Time)

	cur atomic.Pointer[generation[K, V]]

	mu       sync.Mutex
	fl       *flight
	inflight atomic.Bool
	retryAt  atomic.Int64 // unix ns before which no background refresh starts

	usage [3]counter // by State, not yet published
}

// Lookup returns the value cached for k at now and its state. found is
// false if k is not in the cache; st is then the state of the table as a
// whole (Expired if it was never loaded), which tells whether the miss is
// authoritative enough. A Stale result starts a background refresh. The
// value is shared and immutable: callers must not modify what it points
// to. Lookup neither locks nor allocates.
func (t *Table[K, V]) Lookup(k K, now time.Time) (v V, st State, found bool) {
	g := t.cur.Load()
	if g == nil {
		t.usage[Expired].n.Add(1)
		return v, Expired, false
	}
	ns := now.UnixNano()
	i, ok := g.idx[k]
	if !ok {
		st = state(ns, g.freshUntil, g.staleUntil)
		t.count(st, ns)
		return v, st, false
	}
	e := &g.ents[i]
	if e.expiresAt != 0 && ns >= e.expiresAt {
		st = state(ns, g.freshUntil, g.staleUntil)
		t.count(st, ns)
		return v, st, false
	}
	st = state(ns, e.freshUntil, e.staleUntil)
	t.count(st, ns)
	if t.trackUse && st != Expired {
		ms := ns / int64(time.Millisecond)
		if e.lastUse.Load() < ms {
			e.lastUse.Store(ms)
		}
	}
	return e.v, st, true
}

func state(ns, freshUntil, staleUntil int64) State {
	switch {
	case ns < freshUntil:
		return Fresh
	case ns < staleUntil:
		return Stale
	}
	return Expired
}

func (t *Table[K, V]) count(st State, ns int64) {
	t.usage[st].n.Add(1)
	if st == Stale {
		t.refreshAsync(ns)
	}
}

// Type returns the table's cache type.
func (t *Table[K, V]) Type() Type { return t.typ }

// Len returns the number of cached entries (0 if never loaded).
func (t *Table[K, V]) Len() int {
	if g := t.cur.Load(); g != nil {
		return len(g.ents)
	}
	return 0
}

// LoadedAt returns when the cached data was read, and false if the table
// was never loaded.
func (t *Table[K, V]) LoadedAt() (time.Time, bool) {
	if g := t.cur.Load(); g != nil {
		return time.Unix(0, g.loadedAt).UTC(), true
	}
	return time.Time{}, false
}

// State returns the state of the table as a whole at now: the state a
// miss reports.
func (t *Table[K, V]) State(now time.Time) State {
	g := t.cur.Load()
	if g == nil {
		return Expired
	}
	return state(now.UnixNano(), g.freshUntil, g.staleUntil)
}

// Refresh loads the type now, synchronously. If a refresh is already in
// flight it waits for that one instead of starting another (single
// flight). It returns the refresh's error, or ctx's if ctx ends first; on
// error the previous generation stays in use.
func (t *Table[K, V]) Refresh(ctx context.Context) error {
	t.mu.Lock()
	if f := t.fl; f != nil {
		t.mu.Unlock()
		select {
		case <-f.done:
			return f.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	f := t.start()
	t.mu.Unlock()
	t.run(ctx, f)
	return f.err
}

// refreshAsync starts a background refresh unless one is in flight or a
// failed one asked to back off.
func (t *Table[K, V]) refreshAsync(ns int64) {
	if t.inflight.Load() || ns < t.retryAt.Load() {
		return
	}
	t.mu.Lock()
	if t.fl != nil {
		t.mu.Unlock()
		return
	}
	f := t.start()
	t.mu.Unlock()
	t.env.executor(func() {
		ctx, cancel := context.WithTimeout(context.Background(), t.env.cfg.RefreshTimeout)
		defer cancel()
		t.run(ctx, f)
	})
}

// start registers a new flight; t.mu must be held.
func (t *Table[K, V]) start() *flight {
	f := &flight{done: make(chan struct{})}
	t.fl = f
	t.inflight.Store(true)
	return f
}

func (t *Table[K, V]) run(ctx context.Context, f *flight) {
	defer func() {
		if r := recover(); r != nil {
			f.err = fmt.Errorf("cache: %s refresh panicked: %v", t.typ, r)
			t.failed(f.err)
		}
		t.mu.Lock()
		t.fl = nil
		t.inflight.Store(false)
		t.mu.Unlock()
		close(f.done)
	}()
	start := t.env.clock.Now()
	ks, vs, err := t.fetch(ctx, start)
	if err != nil {
		f.err = fmt.Errorf("cache: refresh %s: %w", t.typ, err)
		t.failed(f.err)
		return
	}
	t.install(ks, vs, start, false)
	t.env.metrics.Observe(telemetry.CacheType(t.typ).RefreshDurationMetric(), t.env.clock.Now().Sub(start).Seconds())
}

func (t *Table[K, V]) failed(err error) {
	now := t.env.clock.Now()
	t.retryAt.Store(now.Add(t.env.cfg.RetryBackoff).UnixNano())
	t.env.metrics.Count(fmt.Sprintf(MetricRefreshFailureFormat, t.typ), 1)
	t.env.logger.Error("cache refresh failed; serving the previous data", "cache_type", string(t.typ), "err", err)
}

// install builds and publishes a generation of ks[i] -> vs[i] read at
// asOf. A snapshot's data (fromSnapshot) counts as fresh until asOf plus
// each entry's stale TTL, then is stale for the usual stale window.
func (t *Table[K, V]) install(ks []K, vs []V, asOf time.Time, fromSnapshot bool) {
	j := t.env.jitter()
	base := asOf.UnixNano()
	g := &generation[K, V]{idx: make(map[K]int32, len(ks)), ents: make([]entry[V], len(ks)), loadedAt: base}
	tight := t.ttl
	if len(vs) > 0 && t.ttlOf != nil {
		tight = TTL{}
	}
	for i := range ks {
		ttl := t.ttl
		if t.ttlOf != nil {
			ttl = t.ttlOf(vs[i])
		}
		if tight.Fresh == 0 || ttl.Fresh < tight.Fresh {
			tight.Fresh = ttl.Fresh
		}
		if tight.Stale == 0 || ttl.Stale < tight.Stale {
			tight.Stale = ttl.Stale
		}
		e := &g.ents[i]
		e.v = vs[i]
		e.freshUntil, e.staleUntil = deadlines(base, ttl, j, fromSnapshot)
		if x := t.expOf(vs[i]); x > 0 {
			e.expiresAt = x * int64(time.Second)
		}
		g.idx[ks[i]] = int32(i)
	}
	g.ttl = tight
	g.freshUntil, g.staleUntil = deadlines(base, tight, j, fromSnapshot)
	now := t.env.clock.Now()
	old := t.cur.Swap(g)
	t.retryAt.Store(0)
	rec := Refreshed{CacheType: string(t.typ), FreshTTL: tight.Fresh.Seconds(), StaleTTL: tight.Stale.Seconds()}
	if old != nil {
		rec.AgeSeconds = max(0, time.Duration(now.UnixNano()-old.loadedAt).Seconds())
		if over := now.UnixNano() - old.freshUntil; over > 0 {
			width := old.staleUntil - old.freshUntil
			t.env.metrics.Observe(telemetry.CacheType(t.typ).StaleWindowSecondsMetric(), time.Duration(min(over, width)).Seconds())
		}
		if t.onSwap != nil {
			t.onSwap(old, g, now)
		}
	}
	t.env.tel.Emit(rec)
	t.publish()
}

func deadlines(base int64, ttl TTL, j float64, fromSnapshot bool) (fresh, stale int64) {
	f := int64(float64(ttl.Fresh) * j)
	s := int64(float64(ttl.Stale) * j)
	if fromSnapshot {
		return base + s, base + 2*s - f
	}
	return base + f, base + s
}

// publish sends the usage counted since the last publish to the metrics.
func (t *Table[K, V]) publish() {
	fresh := t.usage[Fresh].n.Swap(0)
	stale := t.usage[Stale].n.Swap(0)
	expired := t.usage[Expired].n.Swap(0)
	m := t.env.metrics
	if fresh > 0 {
		m.Count(telemetry.MetricCacheUsageFresh, fresh)
	}
	if stale > 0 {
		m.Count(telemetry.MetricCacheUsageStale, stale)
		m.Count(telemetry.CacheType(t.typ).UsageStaleMetric(), stale)
	}
	if expired > 0 {
		m.Count(telemetry.MetricCacheUsageExpired, expired)
	}
}

// waitIdle blocks until no refresh of t is in flight.
func (t *Table[K, V]) waitIdle() {
	for {
		t.mu.Lock()
		f := t.fl
		t.mu.Unlock()
		if f == nil {
			return
		}
		<-f.done
	}
}
