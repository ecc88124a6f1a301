package flow

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// RouteKey names a route: rate limits, tokens, fairness and leases are all
// per (target, command).
type RouteKey struct {
	Target, Command string
}

// RateLimit is a route's rate limit: at most Max deliveries per aligned
// Interval window (windows start at multiples of Interval since the Unix
// epoch). Max 0 means the route is not rate limited.
type RateLimit struct {
	Max      int64
	Interval time.Duration
	// Burst is how many units one instance takes from the window's budget
	// per prefetch: it bounds how much of a window one instance can hold.
	// 0 means max(1, Max/10).
	Burst int64
	// Cooldown extends an instance's local denylist (and the retry hints)
	// past the end of an exhausted window. It is per instance, not a global
	// lock-out: the window's counter alone decides what is allowed.
	Cooldown time.Duration
	// PrefetchLeases overrides, for this route, how many instances may
	// prefetch per 1-second slot. 0 means the dispatcher's default.
	PrefetchLeases int
}

// Limited reports whether the route has a rate limit.
func (r RateLimit) Limited() bool { return r.Max > 0 }

func (r RateLimit) burst() int64 {
	if r.Burst > 0 {
		return min(r.Burst, r.Max)
	}
	return max(1, r.Max/10)
}

// window returns the aligned window containing now.
func window(now time.Time, interval time.Duration) (start, end time.Time) {
	ns := now.UnixNano()
	s := ns - ns%int64(interval)
	return time.Unix(0, s).UTC(), time.Unix(0, s+int64(interval)).UTC()
}

// Key layout: fields joined by the ASCII unit separator, which route and
// source names cannot contain.
const sep = "\x1f"

func counterKey(k RouteKey, start time.Time) string {
	return "rl" + sep + k.Target + sep + k.Command + sep + strconv.FormatInt(start.UnixMilli(), 10)
}

func quotaKey(source string, k RouteKey, start time.Time) string {
	return "sq" + sep + source + sep + k.Target + sep + k.Command + sep + strconv.FormatInt(start.UnixMilli(), 10)
}

func leaseKey(k RouteKey, slot int64) string {
	return "pl" + sep + k.Target + sep + k.Command + sep + strconv.FormatInt(slot, 10)
}

// Throttle tells a producer when to retry. It is informational: the
// dispatcher does not enforce it (spec, "Backoff Hints").
type Throttle struct {
	RetryAfter time.Duration
	Until      time.Time
}

// bucket is one instance's state for one route: prefetched tokens usable
// until expiry (never past the end of the window they were taken from), and
// the local denylist. All fields are atomics so the fast path takes a token
// without a lock.
type bucket struct {
	tokens    atomic.Int64
	window    atomic.Int64 // start (unix ns) of the window the tokens came from
	expiry    atomic.Int64 // unix ns; tokens are usable while now < expiry
	denyUntil atomic.Int64 // unix ns; the window's budget is known exhausted until then
	refilling atomic.Bool
	// mu is held by a prefetch from its store take to its refill, and by
	// the slow path's fallback to the bucket, so that the slow path sees
	// units a prefetch has taken from the window (never the fast path,
	// which stays lock-free).
	mu sync.Mutex
}

// take consumes one token if one is usable at now.
func (b *bucket) take(now int64) bool {
	if now >= b.expiry.Load() {
		return false
	}
	for {
		n := b.tokens.Load()
		if n <= 0 {
			return false
		}
		if b.tokens.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// refill adds g tokens taken from the window starting at start, usable
// until expiry. Tokens left from an older window are dropped: they were
// budget of that window only.
func (b *bucket) refill(g int64, start, expiry int64) {
	if b.window.Load() == start && b.expiry.Load() > 0 {
		b.tokens.Add(g)
		if expiry > b.expiry.Load() {
			b.expiry.Store(expiry)
		}
		return
	}
	// Invalidate first so no taker pairs the new count with the old expiry.
	b.expiry.Store(0)
	b.tokens.Store(g)
	b.window.Store(start)
	b.expiry.Store(expiry)
}

// buckets is a copy-on-write map: lookups are one atomic load and a map
// read (no lock, no allocation); inserts, once per route per instance, copy.
type buckets struct {
	m  atomic.Pointer[map[RouteKey]*bucket]
	mu sync.Mutex
}

// peek returns the route's bucket without creating it.
func (bs *buckets) peek(k RouteKey) *bucket {
	if m := bs.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

func (bs *buckets) get(k RouteKey) *bucket {
	if m := bs.m.Load(); m != nil {
		if b, ok := (*m)[k]; ok {
			return b
		}
	}
	bs.mu.Lock()
	defer bs.mu.Unlock()
	old := bs.m.Load()
	if old != nil {
		if b, ok := (*old)[k]; ok {
			return b
		}
	}
	next := make(map[RouteKey]*bucket, 1+lenOf(old))
	if old != nil {
		for kk, v := range *old {
			next[kk] = v
		}
	}
	b := &bucket{}
	next[k] = b
	bs.m.Store(&next)
	return b
}

func lenOf(m *map[RouteKey]*bucket) int {
	if m == nil {
		return 0
	}
	return len(*m)
}

// limiter enforces rate limits for one instance. See docs/flow/design.md.
type limiter struct {
	cfg     *Config
	store   Store
	buckets buckets
}

// fastTake is the fast path's rate check. It dispatches only with a token
// in hand; with none it starts a prefetch and escalates. ok is true when a
// token was taken (dry: would be), with tokens in hand before it;
// throttled is set when the route's window is known exhausted (the local
// denylist). A dry take takes no token and starts no prefetch.
func (l *limiter) fastTake(k RouteKey, rl RateLimit, now time.Time, dry bool) (ok bool, throttled *Throttle, tokens int64) {
	var b *bucket
	if dry {
		if b = l.buckets.peek(k); b == nil {
			return false, nil, 0
		}
	} else {
		b = l.buckets.get(k)
	}
	ns := now.UnixNano()
	if until := b.denyUntil.Load(); ns < until {
		return false, &Throttle{RetryAfter: time.Duration(until - ns), Until: time.Unix(0, until).UTC()}, 0
	}
	tokens = b.tokens.Load()
	if dry {
		return ns < b.expiry.Load() && tokens > 0, nil, tokens
	}
	if b.take(ns) {
		if b.tokens.Load() <= rl.burst()/4 {
			l.prefetch(k, rl, b) // top up before running dry
		}
		return true, nil, tokens
	}
	l.prefetch(k, rl, b)
	return false, nil, tokens
}

// prefetch takes a batch of units for the instance in the background,
// single-flight per route, gated by a lease: at most N instances per route
// per 1-second slot prefetch.
func (l *limiter) prefetch(k RouteKey, rl RateLimit, b *bucket) {
	if !b.refilling.CompareAndSwap(false, true) {
		return
	}
	l.cfg.Executor(func() {
		defer b.refilling.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), l.cfg.StoreTimeout)
		defer cancel()
		now := l.cfg.Clock.Now()
		slot := now.Unix()
		leases := rl.PrefetchLeases
		if leases <= 0 {
			leases = l.cfg.PrefetchLeases
		}
		got, err := l.store.Acquire(ctx, leaseKey(k, slot), l.cfg.Instance, leases, time.Unix(slot+2, 0), now)
		if err != nil {
			l.cfg.Logger.Warn("token prefetch lease failed", "target", k.Target, "command", k.Command, "err", err)
			return
		}
		if !got {
			l.cfg.Metrics.Count(MetricPrefetchLeaseDenied, 1)
			return
		}
		start, end := window(now, rl.Interval)
		b.mu.Lock()
		defer b.mu.Unlock()
		g, err := l.store.Take(ctx, counterKey(k, start), rl.burst(), rl.Max, end.Add(rl.Interval), now)
		if err != nil {
			l.cfg.Logger.Warn("token prefetch failed", "target", k.Target, "command", k.Command, "err", err)
			return
		}
		if g == 0 {
			l.deny(b, end, rl)
			return
		}
		l.cfg.Metrics.Count(MetricTokensPrefetched, g)
		after := l.cfg.Clock.Now()
		if !after.Before(end) {
			return // the window ended while we waited: its units are spent
		}
		b.refill(g, start.UnixNano(), min(end.UnixNano(), now.Add(l.cfg.TokenTTL).UnixNano()))
	})
}

// deny records that the route's window is exhausted: until its end plus the
// cooldown, this instance refuses without asking the store.
func (l *limiter) deny(b *bucket, end time.Time, rl RateLimit) Throttle {
	until := end.Add(rl.Cooldown)
	for {
		cur := b.denyUntil.Load()
		if cur >= until.UnixNano() || b.denyUntil.CompareAndSwap(cur, until.UnixNano()) {
			break
		}
	}
	return Throttle{Until: until}
}

// slowTake is the authoritative check: one conditional counter take before
// dispatch. It never prefetches. When the window's counter is spent, it
// falls back to a unit this instance prefetched from the same window (the
// counter counted it already): the escalated command's own fast-path miss
// starts a prefetch, which could otherwise take the last units of the
// window and leave the command refused while they sit unused in the
// bucket (with Max 1, every command). A source under a warm-path ban does
// not get the fallback: prefetched units are warm budget, kept from it.
func (l *limiter) slowTake(ctx context.Context, k RouteKey, rl RateLimit, now time.Time, useLocal bool) (bool, Throttle, error) {
	start, end := window(now, rl.Interval)
	g, err := l.store.Take(ctx, counterKey(k, start), 1, rl.Max, end.Add(rl.Interval), now)
	if err != nil {
		return false, Throttle{}, err
	}
	if g == 1 {
		return true, Throttle{}, nil
	}
	b := l.buckets.get(k)
	if useLocal {
		b.mu.Lock() // waits for a prefetch between its take and its refill
		ok := b.take(now.UnixNano())
		b.mu.Unlock()
		if ok {
			return true, Throttle{}, nil
		}
	}
	t := l.deny(b, end, rl)
	t.RetryAfter = t.Until.Sub(now)
	return false, t, nil
}

// quotaTake applies a per-source quota (slow path, banned sources only).
func (l *limiter) quotaTake(ctx context.Context, source string, k RouteKey, q RateLimit, now time.Time) (bool, Throttle, error) {
	start, end := window(now, q.Interval)
	g, err := l.store.Take(ctx, quotaKey(source, k, start), 1, q.Max, end.Add(q.Interval), now)
	if err != nil {
		return false, Throttle{}, err
	}
	if g == 1 {
		return true, Throttle{}, nil
	}
	until := end.Add(q.Cooldown)
	return false, Throttle{RetryAfter: until.Sub(now), Until: until}, nil
}
