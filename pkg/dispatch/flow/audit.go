package flow

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// FlushRollups pushes this instance's per-source dispatch counts since the
// last flush to the rollup store, stamped with the minute of the flush.
// The dispatcher runs it every 60 s; counts are drained only once
// written, so a failed flush is retried with the next. A put replaces the
// window's rollup, so a second flush in the same window (a Lambda's at
// SIGTERM) writes the window's total.
func (f *Flow) FlushRollups(ctx context.Context, retain time.Duration) error {
	fl := &f.flushed
	fl.mu.Lock()
	defer fl.mu.Unlock()
	now := f.cfg.Clock.Now()
	start, _ := window(now, time.Minute)
	if !start.Equal(fl.window) {
		fl.window, fl.stored = start, map[rollupKey]int64{}
	}
	var rs []Rollup
	drained := map[RouteKey]map[string]int64{}
	for k, u := range f.usage.all() {
		counts := u.drainRollup()
		if len(counts) == 0 {
			continue
		}
		drained[k] = counts
		for src, n := range counts {
			rs = append(rs, Rollup{Instance: f.cfg.Instance, WindowStart: start, Source: src, Target: k.Target, Command: k.Command,
				Dispatches: n + fl.stored[rollupKey{k, src}]})
		}
	}
	if len(rs) == 0 {
		return nil
	}
	if err := f.store.PutRollups(ctx, rs, now.Add(retain)); err != nil {
		// Put the counts back so the next flush carries them.
		for k, counts := range drained {
			u := f.usage.get(k)
			u.mu.Lock()
			if u.rollup == nil {
				u.rollup = map[string]int64{}
			}
			for src, n := range counts {
				u.rollup[src] += n
			}
			u.mu.Unlock()
		}
		return fmt.Errorf("flow: flush rollups: %w", err)
	}
	for _, r := range rs {
		fl.stored[rollupKey{RouteKey{r.Target, r.Command}, r.Source}] = r.Dispatches
	}
	return nil
}

// rollupFlushes serializes FlushRollups and holds what it stored in the
// window of the last flush.
type rollupFlushes struct {
	mu     sync.Mutex
	window time.Time
	stored map[rollupKey]int64
}

type rollupKey struct {
	route  RouteKey
	source string
}

// AuditConfig configures the fairness auditor.
type AuditConfig struct {
	// Lookback is how much rollup history one run reads (default 2 min).
	Lookback time.Duration
	// SingleTargetShare (X, default 0.9): a source above this share of one
	// route's dispatches, while others are active, is abusive.
	SingleTargetShare float64
	// MultiTargetShare (Y, default 0.6): a source above this share on at
	// least MultiTargetCount routes (default 2) is abusive.
	MultiTargetShare float64
	MultiTargetCount int
	// MinVolume: routes with fewer dispatches in the lookback are not
	// judged (default 100).
	MinVolume int64
	// CompetingShare: the others must hold at least this share (default
	// 0.05) for a route to count: a lone sender is never abusive.
	CompetingShare float64
	// BanDuration of the global warm-path ban applied (default: the flow
	// config's GlobalBanDuration).
	BanDuration time.Duration
}

func (a AuditConfig) withDefaults(f *Flow) AuditConfig {
	if a.Lookback == 0 {
		a.Lookback = 2 * time.Minute
	}
	if a.SingleTargetShare == 0 {
		a.SingleTargetShare = 0.9
	}
	if a.MultiTargetShare == 0 {
		a.MultiTargetShare = 0.6
	}
	if a.MultiTargetCount == 0 {
		a.MultiTargetCount = 2
	}
	if a.MinVolume == 0 {
		a.MinVolume = 100
	}
	if a.CompetingShare == 0 {
		a.CompetingShare = 0.05
	}
	if a.BanDuration == 0 {
		a.BanDuration = f.cfg.GlobalBanDuration
	}
	return a
}

// Audit is one run of the centralized fairness auditor (every 1-2 min): it
// aggregates the fleet's rollups, flags sources that dominate one route
// beyond X or several routes beyond Y while others compete, stores a global
// warm-path ban for each and emits snavio.fairness.abuse_detected, once per
// ban window (a source already banned past this run's ban is skipped).
func (f *Flow) Audit(ctx context.Context, ac AuditConfig) ([]telemetry.AbuseDetected, error) {
	ac = ac.withDefaults(f)
	now := f.cfg.Clock.Now()
	rs, err := f.store.ReadRollups(ctx, now.Add(-ac.Lookback), now)
	if err != nil {
		return nil, fmt.Errorf("flow: audit: read rollups: %w", err)
	}
	type routeAgg struct {
		total    int64
		bySource map[string]int64
	}
	routes := map[RouteKey]*routeAgg{}
	for _, r := range rs {
		k := RouteKey{Target: r.Target, Command: r.Command}
		a := routes[k]
		if a == nil {
			a = &routeAgg{bySource: map[string]int64{}}
			routes[k] = a
		}
		a.total += r.Dispatches
		a.bySource[r.Source] += r.Dispatches
	}
	type finding struct {
		single  bool
		multi   []RouteKey
		targets map[string]bool
	}
	found := map[string]*finding{}
	for k, a := range routes {
		if a.total < ac.MinVolume || len(a.bySource) < 2 {
			continue
		}
		for src, n := range a.bySource {
			share := float64(n) / float64(a.total)
			if 1-share+eps < ac.CompetingShare {
				continue
			}
			fd := found[src]
			if fd == nil {
				fd = &finding{targets: map[string]bool{}}
				found[src] = fd
			}
			if share > ac.SingleTargetShare+eps {
				fd.single = true
				fd.targets[k.Target] = true
			}
			if share > ac.MultiTargetShare+eps {
				fd.multi = append(fd.multi, k)
			}
		}
	}
	var out []telemetry.AbuseDetected
	sources := make([]string, 0, len(found))
	for s := range found {
		sources = append(sources, s)
	}
	sort.Strings(sources)
	for _, src := range sources {
		fd := found[src]
		violations := 0
		if fd.single {
			violations = len(fd.targets)
		}
		if len(fd.multi) >= ac.MultiTargetCount {
			for _, k := range fd.multi {
				fd.targets[k.Target] = true
			}
			violations = max(violations, len(fd.multi))
		}
		if violations == 0 {
			continue
		}
		until := now.Add(ac.BanDuration)
		if b, ok := f.bans.lookup(src, now); ok && !b.Until.Before(until.Add(-ac.Lookback)) {
			continue // already banned for this window: once per ban window
		}
		b := Ban{Source: src, Until: until, Reason: BanReasonAbuse}
		if err := f.store.PutBan(ctx, b); err != nil {
			return out, fmt.Errorf("flow: audit: ban %s: %w", src, err)
		}
		f.bans.add(b)
		targets := make([]string, 0, len(fd.targets))
		for t := range fd.targets {
			targets = append(targets, t)
		}
		sort.Strings(targets)
		ev := telemetry.AbuseDetected{Source: src, AffectedTargets: targets, TotalViolations: int64(violations), BanAppliedUntil: until}
		f.sink.Emit(ev)
		out = append(out, ev)
	}
	return out, nil
}
