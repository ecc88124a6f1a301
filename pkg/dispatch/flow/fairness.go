package flow

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// usage is one instance's per-route view of who dispatches: the fairness
// window (warm dispatches per source, reset every window), local warm-path
// bans, and the rollup counts pushed to the store every minute.
type usage struct {
	mu          sync.Mutex
	windowStart int64
	total       int64
	bySource    map[string]int64
	banned      map[string]int64 // source -> ban end (unix ns)
	rollup      map[string]int64 // source -> dispatches since the last flush
}

// Dominance describes a source's share of a route's warm dispatches.
type Dominance struct {
	SourceShare    float64
	CompetingShare float64
	Volume         int64
}

// fairCheck is the outcome of checking a source before a warm dispatch.
type fairCheck struct {
	banned   bool
	until    time.Time
	newBan   bool // this check created the ban
	dominace Dominance
	// What the check saw, for a trace: the source's and all warm
	// dispatches of the window, whether it was empty, and a dominant
	// source left alone for want of competition.
	mine, total  int64
	empty, alone bool
}

const eps = 1e-9

// check decides whether source may use the warm path now. A source is
// banned when it holds more than DominantShare of the window's warm
// dispatches while the others hold at least CompetingShare or number at
// least CompetingSources, once the window has MinVolume dispatches. A dry
// check decides the same and changes nothing: it neither rolls the window
// nor makes or clears a ban (newBan then says it would make one).
func (u *usage) check(source string, p FairnessParams, now time.Time, dry bool) fairCheck {
	ns := now.UnixNano()
	u.mu.Lock()
	defer u.mu.Unlock()
	ended := ns-u.windowStart >= int64(p.Window) || u.bySource == nil
	if !dry {
		u.roll(ns, p)
	}
	if until, ok := u.banned[source]; ok {
		if ns < until {
			return fairCheck{banned: true, until: time.Unix(0, until).UTC()}
		}
		if !dry {
			delete(u.banned, source)
		}
	}
	if ended && dry {
		return fairCheck{empty: true} // the window a real check would roll to
	}
	fc := fairCheck{mine: u.bySource[source], total: u.total}
	if u.total < p.MinVolume {
		return fc
	}
	share := float64(fc.mine) / float64(u.total)
	if share <= p.DominantShare+eps {
		return fc
	}
	others := u.total - fc.mine
	othersShare := float64(others) / float64(u.total)
	competitors := len(u.bySource)
	if fc.mine > 0 {
		competitors--
	}
	if othersShare+eps < p.CompetingShare && competitors < p.CompetingSources {
		fc.alone = true
		return fc
	}
	until := ns + int64(p.BanDuration)
	if !dry {
		if u.banned == nil {
			u.banned = map[string]int64{}
		}
		u.banned[source] = until
	}
	fc.banned, fc.newBan, fc.until = true, true, time.Unix(0, until).UTC()
	fc.dominace = Dominance{SourceShare: share, CompetingShare: othersShare, Volume: u.total}
	return fc
}

// describe says what a check saw, for a trace.
func (fc fairCheck) describe(source string, p FairnessParams) string {
	switch {
	case fc.banned && !fc.newBan:
		return "warm-path ban of " + source + " until " + fc.until.Format(time.RFC3339Nano)
	case fc.empty:
		return "the fairness window is empty"
	}
	d := fmt.Sprintf("%d of %d warm dispatches in the window (dominant share %.2f, min volume %d)", fc.mine, fc.total, p.DominantShare, p.MinVolume)
	switch {
	case fc.newBan:
		d += "; a warm dispatch now bans it from the warm path"
	case fc.alone:
		d += "; dominant, but without competition"
	}
	return d
}

// dominance reports source's current share, for hard-rejection
// diagnostics.
func (u *usage) dominance(source string, p FairnessParams, now time.Time) (Dominance, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.roll(now.UnixNano(), p)
	_, banned := u.banned[source]
	if u.total == 0 {
		return Dominance{}, banned
	}
	mine := u.bySource[source]
	return Dominance{
		SourceShare:    float64(mine) / float64(u.total),
		CompetingShare: float64(u.total-mine) / float64(u.total),
		Volume:         u.total,
	}, banned
}

// bannedUntil reports a live local ban of source.
func (u *usage) bannedUntil(source string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if until, ok := u.banned[source]; ok && now.UnixNano() < until {
		return time.Unix(0, until).UTC(), true
	}
	return time.Time{}, false
}

// roll resets the window when it has ended. Bans outlive windows.
func (u *usage) roll(ns int64, p FairnessParams) {
	if ns-u.windowStart >= int64(p.Window) || u.bySource == nil {
		u.windowStart = ns
		u.total = 0
		u.bySource = map[string]int64{}
	}
}

// record counts one dispatch by source. warm says it used the warm path
// (only warm dispatches count toward fairness; every dispatch counts toward
// the rollups).
func (u *usage) record(source string, warm bool, p FairnessParams, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if warm {
		u.roll(now.UnixNano(), p)
		u.total++
		u.bySource[source]++
	}
	if u.rollup == nil {
		u.rollup = map[string]int64{}
	}
	u.rollup[source]++
}

// drainRollup returns and resets the dispatch counts since the last flush.
func (u *usage) drainRollup() map[string]int64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	r := u.rollup
	u.rollup = nil
	return r
}

// usages is a copy-on-write map of per-route usage, like buckets.
type usages struct {
	m  atomic.Pointer[map[RouteKey]*usage]
	mu sync.Mutex
}

// peek returns the route's usage without creating it.
func (us *usages) peek(k RouteKey) *usage {
	if m := us.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

func (us *usages) get(k RouteKey) *usage {
	if m := us.m.Load(); m != nil {
		if u, ok := (*m)[k]; ok {
			return u
		}
	}
	us.mu.Lock()
	defer us.mu.Unlock()
	old := us.m.Load()
	if old != nil {
		if u, ok := (*old)[k]; ok {
			return u
		}
	}
	n := 1
	if old != nil {
		n += len(*old)
	}
	next := make(map[RouteKey]*usage, n)
	if old != nil {
		for kk, v := range *old {
			next[kk] = v
		}
	}
	u := &usage{}
	next[k] = u
	us.m.Store(&next)
	return u
}

func (us *usages) all() map[RouteKey]*usage {
	if m := us.m.Load(); m != nil {
		return *m
	}
	return nil
}

// banView is the cached global ban list: read on every warm dispatch,
// refreshed in the background, never queried live.
type banView struct {
	m          atomic.Pointer[map[string]Ban]
	loadedAt   atomic.Int64
	refreshing atomic.Bool
}

func (v *banView) lookup(source string, now time.Time) (Ban, bool) {
	m := v.m.Load()
	if m == nil {
		return Ban{}, false
	}
	b, ok := (*m)[source]
	if !ok || !b.Until.After(now) {
		return Ban{}, false
	}
	return b, true
}

func (v *banView) store(bans []Ban, now time.Time) {
	m := make(map[string]Ban, len(bans))
	for _, b := range bans {
		m[b.Source] = b
	}
	v.m.Store(&m)
	v.loadedAt.Store(now.UnixNano())
}

// add puts one ban into the view at once (the instance that created it
// need not wait for the next refresh).
func (v *banView) add(b Ban) {
	for {
		old := v.m.Load()
		next := map[string]Ban{}
		if old != nil {
			for k, x := range *old {
				next[k] = x
			}
		}
		if cur, ok := next[b.Source]; ok && cur.Until.After(b.Until) {
			return
		}
		next[b.Source] = b
		if v.m.CompareAndSwap(old, &next) {
			return
		}
	}
}

// escalateBan records a warm-path ban in the durable ledger and, at the
// threshold, stores a global ban. Runs in the background.
func (f *Flow) escalateBan(key BanKey, at time.Time) {
	f.cfg.Executor(func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
		defer cancel()
		n, err := f.store.RecordBan(ctx, key, at, f.cfg.GlobalBanWindow)
		if err != nil {
			f.cfg.Logger.Warn("recording warm-path ban failed", "source", key.Source, "err", err)
			return
		}
		if n < f.cfg.GlobalBanAfter {
			return
		}
		b := Ban{Source: key.Source, Until: at.Add(f.cfg.GlobalBanDuration), Reason: BanReasonRepeat}
		if err := f.store.PutBan(ctx, b); err != nil {
			f.cfg.Logger.Warn("storing global ban failed", "source", key.Source, "err", err)
			return
		}
		f.bans.add(b)
		f.cfg.Metrics.Count(MetricGlobalBans, 1)
		f.cfg.Logger.Info("global warm-path ban", "source", key.Source, "bans", n, "until", b.Until)
	})
}

// BanRepeatInvalid bans source from the warm path for GlobalBanDuration:
// its invalid traffic stayed over the shield's budget for several
// intervals in a row (shield.Deps.BanRepeatInvalid; invalid is its count in
// the current one). The ban is stored on the executor, so this never
// blocks; snavio.fairness.abuse_detected tells the tenant. A source already
// banned past the new ban's end is left alone.
func (f *Flow) BanRepeatInvalid(source string, invalid int64, at time.Time) {
	until := at.Add(f.cfg.GlobalBanDuration)
	if b, ok := f.bans.lookup(source, at); ok && !b.Until.Before(until) {
		return
	}
	f.cfg.Executor(func() {
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
		defer cancel()
		b := Ban{Source: source, Until: until, Reason: BanReasonInvalid}
		if err := f.store.PutBan(ctx, b); err != nil {
			f.cfg.Logger.Warn("storing a ban for repeated invalid traffic failed", "source", source, "err", err)
			return
		}
		f.bans.add(b)
		f.cfg.Metrics.Count(MetricGlobalBans, 1)
		f.sink.Emit(telemetry.AbuseDetected{Source: source, AffectedTargets: []string{}, TotalViolations: invalid, BanAppliedUntil: until})
		f.cfg.Logger.Info("global warm-path ban for repeated invalid traffic", "source", source, "invalid", invalid, "until", until)
	})
}

// Ban reasons.
const (
	BanReasonRepeat   = "repeat-warm-path-bans"
	BanReasonAbuse    = "abuse-detected"
	BanReasonColdOnly = "cold-only"
	BanReasonInvalid  = "repeat-invalid"
)

// RefreshBans reloads the global ban list from the store now.
func (f *Flow) RefreshBans(ctx context.Context) error {
	now := f.cfg.Clock.Now()
	bans, err := f.store.Bans(ctx, now)
	if err != nil {
		return err
	}
	f.bans.store(bans, now)
	return nil
}

// maybeRefreshBans starts a background refresh when the cached list is
// older than BanCacheTTL (single-flight).
func (f *Flow) maybeRefreshBans(now time.Time) {
	if now.UnixNano()-f.bans.loadedAt.Load() < int64(f.cfg.BanCacheTTL) {
		return
	}
	if !f.bans.refreshing.CompareAndSwap(false, true) {
		return
	}
	f.cfg.Executor(func() {
		defer f.bans.refreshing.Store(false)
		ctx, cancel := context.WithTimeout(context.Background(), f.cfg.StoreTimeout)
		defer cancel()
		if err := f.RefreshBans(ctx); err != nil {
			f.cfg.Logger.Warn("refreshing global bans failed; using the cached list", "err", err)
		}
	})
}

func warmPathBanEvent(source string, k RouteKey, c fairCheck, now time.Time) telemetry.WarmPathBan {
	return telemetry.WarmPathBan{
		Source: source, Target: k.Target, CommandName: k.Command,
		SourceShare: c.dominace.SourceShare, CompetingShare: c.dominace.CompetingShare,
		RetryAfterMS: c.until.Sub(now).Milliseconds(), ThrottleUntil: c.until,
	}
}
