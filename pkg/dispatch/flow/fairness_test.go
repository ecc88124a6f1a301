package flow_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// plenty is a route whose budget never runs out in these tests, so only
// fairness decides.
var plenty = &flow.Route{RateLimit: flow.RateLimit{Max: 1_000_000, Interval: time.Second, Burst: 1000}}

// warm sends one command from source through the fast path (running the
// background prefetch first so a token is there) and reports the action.
func (h *harness) warm(t *testing.T, source string, r *flow.Route) flow.Decision {
	t.Helper()
	h.q.run()
	d := h.f.Fast(cmd("", source, "tg", "c"), r)
	if d.Action == flow.Escalate && d.Escalation == flow.EscalateTokenRequired {
		h.q.run()
		d = h.f.Fast(cmd("", source, "tg", "c"), r)
	}
	return d
}

// TestFairnessProof: two sources, one at 90% of the traffic: the dominant
// one gets a warm-path ban (once per ban window), the other never; a lone
// source at 100% never does.
func TestFairnessProof(t *testing.T) {
	t.Run("TwoSources90-10", func(t *testing.T) {
		h := newSolo(t, nil)
		bannedA, bannedB := 0, 0
		for i := range 300 {
			src := "acme/a"
			if i%10 == 9 {
				src = "acme/b"
			}
			d := h.warm(t, src, plenty)
			if d.Action == flow.Escalate && d.Escalation == flow.EscalateWarmPathBanned {
				if src == "acme/a" {
					bannedA++
				} else {
					bannedB++
				}
			}
			h.clk.Advance(50 * time.Millisecond) // 300 commands over 15 s
		}
		if bannedA == 0 || bannedB != 0 {
			t.Fatalf("warm-path refusals: dominant %d, minority %d; want >0 and 0", bannedA, bannedB)
		}
		bans := h.sink.of(telemetry.NameWarmPathBan)
		if len(bans) != 1 {
			t.Fatalf("%d warm-path-ban events in one ban window, want 1", len(bans))
		}
		b := bans[0].(telemetry.WarmPathBan)
		if b.Source != "acme/a" || b.Target != "tg" || b.CommandName != "c" || b.SourceShare <= 0.8 || b.CompetingShare < 0.1 || b.RetryAfterMS != 30000 {
			t.Fatalf("warm-path-ban = %+v", b)
		}
	})
	t.Run("LoneSourceNeverBanned", func(t *testing.T) {
		h := newSolo(t, nil)
		for range 1000 {
			if d := h.warm(t, "acme/solo", plenty); d.Action != flow.Proceed {
				t.Fatalf("lone source: %v %v", d.Action, d.Escalation)
			}
			h.clk.Advance(10 * time.Millisecond)
		}
		if n := h.sink.count(telemetry.NameWarmPathBan); n != 0 {
			t.Fatalf("%d bans of a lone source", n)
		}
	})
	t.Run("ManyCompetingSourcesCountEvenWhenSmall", func(t *testing.T) {
		h := newSolo(t, nil)
		// a holds 85%; three others 5% each: others' share 15% >= 10%.
		for i := range 200 {
			src := "acme/a"
			if r := i % 20; r >= 17 {
				src = fmt.Sprintf("acme/o%d", r)
			}
			h.warm(t, src, plenty)
		}
		if n := h.sink.count(telemetry.NameWarmPathBan); n != 1 {
			t.Fatalf("bans = %d, want 1", n)
		}
	})
	t.Run("QuietWindowBelowMinVolume", func(t *testing.T) {
		h := newSolo(t, nil)
		for i := range 19 { // under MinVolume 20
			src := "acme/a"
			if i == 0 {
				src = "acme/b"
			}
			h.warm(t, src, plenty)
		}
		if n := h.sink.count(telemetry.NameWarmPathBan); n != 0 {
			t.Fatalf("ban below minimum volume")
		}
	})
}

// TestRepeatedBansEscalateToGlobalBan: 3 warm-path bans within 10 minutes
// become a global warm-path ban of 10 minutes, stored durably, checked from
// the cached list before the warm path, and expiring on time.
func TestRepeatedBansEscalateToGlobalBan(t *testing.T) {
	h := newSolo(t, nil)
	// Each round: 30 s of 90/10 traffic, then the ban window runs out.
	for round := range 3 {
		for i := range 100 {
			src := "acme/a"
			if i%10 == 9 {
				src = "acme/b"
			}
			h.warm(t, src, plenty)
			h.clk.Advance(300 * time.Millisecond)
		}
		h.q.run()
		if got := h.sink.count(telemetry.NameWarmPathBan); got != round+1 {
			t.Fatalf("round %d: %d warm-path bans", round, got)
		}
	}
	bans, err := h.store.Bans(context.Background(), h.clk.Now())
	if err != nil || len(bans) != 1 || bans[0].Source != "acme/a" || bans[0].Reason != flow.BanReasonRepeat {
		t.Fatalf("global bans = %+v %v", bans, err)
	}
	until := bans[0].Until
	if d := h.f.Fast(cmd("", "acme/a", "tg", "c"), plenty); d.Escalation != flow.EscalateGlobalBan {
		t.Fatalf("globally banned source on the fast path: %v %v", d.Action, d.Escalation)
	}
	if d := h.warm(t, "acme/b", plenty); d.Action != flow.Proceed {
		t.Fatalf("the other source is affected: %v %v", d.Action, d.Escalation)
	}
	// Another instance learns the ban from its cached list (loaded from
	// the store, not queried per command).
	other := newHarness(t, h.store, h.clk, nil)
	if err := other.f.RefreshBans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := other.f.Fast(cmd("", "acme/a", "tg", "c"), plenty); d.Escalation != flow.EscalateGlobalBan {
		t.Fatalf("second instance: %v %v", d.Action, d.Escalation)
	}
	h.clk.Set(until)
	h.q.run()
	if d := h.warm(t, "acme/a", plenty); d.Action != flow.Proceed {
		t.Fatalf("after the global ban expired: %v %v", d.Action, d.Escalation)
	}
}

// TestHardRejectionAndSourceQuota: a source under a warm-path ban goes to
// the slow path, where its per-source quota applies; once the route's
// budget is saturated it is refused with fairness-violation diagnostics.
func TestHardRejectionAndSourceQuota(t *testing.T) {
	quotas := quotaMap{"acme/a": flow.RateLimit{Max: 3, Interval: time.Minute}}
	store := newStore()
	h := newHarness(t, store, clk(), nil)
	f, err := flow.New(flow.Config{Instance: "q1", Clock: h.clk, Metrics: h.m, Executor: h.q.add}, store, h.sink, quotas)
	if err != nil {
		t.Fatal(err)
	}
	h.f = f
	r := &flow.Route{RateLimit: flow.RateLimit{Max: 60, Interval: time.Minute, Burst: 5}}
	for i := range 30 { // a dominates: 27 of 30 warm dispatches, then banned
		src := "acme/a"
		if i%10 == 9 {
			src = "acme/b"
		}
		h.warm(t, src, r)
	}
	if n := h.sink.count(telemetry.NameWarmPathBan); n != 1 {
		t.Fatalf("bans = %d", n)
	}
	// The banned source's commands take the slow path: its quota of 3 applies.
	outcomes := map[flow.Action]int{}
	for range 5 {
		act, _ := h.dispatch(t, cmd("", "acme/a", "tg", "c"), r, always)
		outcomes[act]++
	}
	if outcomes[flow.Proceed] != 3 || outcomes[flow.Reject] != 2 {
		t.Fatalf("quota outcomes = %v, want 3 proceed, 2 reject", outcomes)
	}
	failed := h.sink.of(telemetry.NameFailed)
	if f := failed[len(failed)-1].(telemetry.Failed); f.Reason != telemetry.FailRateLimitExceeded || f.Quota != telemetry.QuotaSource || f.RetryAfterMS <= 0 {
		t.Fatalf("quota refusal = %+v", f)
	}
	// Another instance saturates the route, then the dominant source is
	// hard-rejected with structured diagnostics.
	quotas["acme/a"] = flow.RateLimit{}
	other := newHarness(t, store, h.clk, func(c *flow.Config) { c.Mode = flow.ModeColdOnly })
	for range 60 {
		other.dispatch(t, cmd("", "acme/b", "tg", "c"), r, always)
	}
	act, _ := h.dispatch(t, cmd("", "acme/a", "tg", "c"), r, always)
	if act != flow.Reject {
		t.Fatalf("dominant source on a saturated route: %v", act)
	}
	failed = h.sink.of(telemetry.NameFailed)
	f2 := failed[len(failed)-1].(telemetry.Failed)
	if f2.Reason != telemetry.FailFairnessViolation || f2.Quota != "" || f2.SourceShare < 0.8 || f2.CompetingShare <= 0 || f2.DispatchVolume < 20 || f2.RetryAfterMS <= 0 || f2.ThrottleUntil.IsZero() {
		t.Fatalf("hard rejection = %+v", f2)
	}
}

type quotaMap map[string]flow.RateLimit

func (q quotaMap) SourceQuota(source, target, command string) (flow.RateLimit, bool) {
	r, ok := q[source]
	return r, ok && r.Limited()
}

func TestColdOnlySourceAndMode(t *testing.T) {
	h := newSolo(t, nil)
	if err := h.store.PutBan(context.Background(), flow.Ban{Source: "acme/slow", Until: t0.Add(time.Hour), Reason: flow.BanReasonColdOnly}); err != nil {
		t.Fatal(err)
	}
	if err := h.f.RefreshBans(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := h.f.Fast(cmd("", "acme/slow", "tg", "c"), &flow.Route{}); d.Escalation != flow.EscalateColdOnlySource {
		t.Fatalf("cold-only source: %v", d.Escalation)
	}
	if h.sink.count(flow.EventNameEscalated) != 1 {
		t.Fatal("escalation without telemetry")
	}
	cold := newSolo(t, func(c *flow.Config) { c.Mode = flow.ModeColdOnly })
	if d := cold.f.Fast(cmd("", "acme/x", "tg", "c"), &flow.Route{}); d.Escalation != flow.EscalateColdOnlyMode {
		t.Fatalf("cold-only mode: %v", d.Escalation)
	}
}

// TestBanListRefreshesInBackground: the cached list is refreshed after
// BanCacheTTL by background work, never on the hot path.
func TestBanListRefreshesInBackground(t *testing.T) {
	h := newSolo(t, nil)
	h.f.Fast(cmd("", "acme/x", "tg", "c"), &flow.Route{})
	h.q.run() // initial load
	h.store.PutBan(context.Background(), flow.Ban{Source: "acme/x", Until: t0.Add(time.Hour), Reason: flow.BanReasonAbuse})
	if d := h.f.Fast(cmd("", "acme/x", "tg", "c"), &flow.Route{}); d.Action != flow.Proceed {
		t.Fatalf("the fast path queried the store live: %v", d.Escalation)
	}
	h.clk.Advance(30 * time.Second)
	h.f.Fast(cmd("", "acme/x", "tg", "c"), &flow.Route{}) // stale: schedules a refresh
	h.q.run()
	if d := h.f.Fast(cmd("", "acme/x", "tg", "c"), &flow.Route{}); d.Escalation != flow.EscalateGlobalBan {
		t.Fatalf("after the background refresh: %v %v", d.Action, d.Escalation)
	}
}

func TestAuditor(t *testing.T) {
	h := newSolo(t, nil)
	ctx := context.Background()
	now := h.clk.Now()
	put := func(inst, src, target string, n int64) {
		err := h.store.PutRollups(ctx, []flow.Rollup{{Instance: inst, WindowStart: now.Add(-time.Minute), Source: src, Target: target, Command: "c", Dispatches: n}}, now.Add(time.Hour))
		if err != nil {
			t.Fatal(err)
		}
	}
	// x: 95% of t1 (across two instances) while y competes: single-target abuse.
	put("i1", "acme/x", "t1", 500)
	put("i2", "acme/x", "t1", 450)
	put("i1", "acme/y", "t1", 50)
	// z: 70% of t2 and t3: multi-target abuse.
	put("i1", "acme/z", "t2", 700)
	put("i1", "acme/w", "t2", 300)
	put("i2", "acme/z", "t3", 700)
	put("i2", "acme/w", "t3", 300)
	// lone: 100% of t4, nobody competes: not abuse.
	put("i1", "acme/lone", "t4", 5000)
	events, err := h.f.Audit(ctx, flow.AuditConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 2 || events[0].Source != "acme/x" || events[1].Source != "acme/z" {
		t.Fatalf("abuse events = %+v", events)
	}
	if got := events[0]; len(got.AffectedTargets) != 1 || got.AffectedTargets[0] != "t1" || got.TotalViolations != 1 || !got.BanAppliedUntil.Equal(now.Add(10*time.Minute)) {
		t.Fatalf("x = %+v", got)
	}
	if got := events[1]; len(got.AffectedTargets) != 2 || got.TotalViolations != 2 {
		t.Fatalf("z = %+v", got)
	}
	bans, _ := h.store.Bans(ctx, now)
	if len(bans) != 2 {
		t.Fatalf("global bans = %+v", bans)
	}
	// Once per ban window: a second run right away emits nothing new.
	again, err := h.f.Audit(ctx, flow.AuditConfig{})
	if err != nil || len(again) != 0 {
		t.Fatalf("second audit = %+v %v", again, err)
	}
	if n := h.sink.count(telemetry.NameAbuseDetected); n != 2 {
		t.Fatalf("abuse_detected events = %d", n)
	}
}

func TestFlushRollups(t *testing.T) {
	h := newSolo(t, nil)
	ctx := context.Background()
	for range 7 {
		h.dispatch(t, cmd("", "acme/a", "tg", "c"), &flow.Route{}, always)
	}
	h.dispatch(t, cmd("", "acme/b", "tg", "c"), &flow.Route{}, always)
	if err := h.f.FlushRollups(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	rs, err := h.store.ReadRollups(ctx, t0.Add(-time.Minute), t0)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int64{}
	for _, r := range rs {
		got[r.Source] += r.Dispatches
	}
	if got["acme/a"] != 7 || got["acme/b"] != 1 {
		t.Fatalf("rollups = %+v", rs)
	}
	if err := h.f.FlushRollups(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	rs2, _ := h.store.ReadRollups(ctx, t0.Add(-time.Minute), t0)
	if len(rs2) != len(rs) {
		t.Fatalf("an empty flush changed the rollups: %+v", rs2)
	}
}

// TestFlushRollupsTwiceInAWindow: a put replaces the window's rollup, so
// a second flush in the same window writes the window's total, not the
// counts since the first (a Lambda flushes on its cadence and again at
// SIGTERM); the next window starts from zero.
func TestFlushRollupsTwiceInAWindow(t *testing.T) {
	h := newSolo(t, nil)
	ctx := context.Background()
	sum := func(since time.Time) map[string]int64 {
		t.Helper()
		rs, err := h.store.ReadRollups(ctx, since, h.clk.Now())
		if err != nil {
			t.Fatal(err)
		}
		got := map[string]int64{}
		for _, r := range rs {
			got[r.WindowStart.Format("15:04")+" "+r.Source] += r.Dispatches
		}
		return got
	}
	flush := func() {
		t.Helper()
		if err := h.f.FlushRollups(ctx, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		h.dispatch(t, cmd("", "acme/a", "tg", "c"), &flow.Route{}, always)
	}
	flush()
	h.clk.Advance(10 * time.Second)
	for range 2 {
		h.dispatch(t, cmd("", "acme/a", "tg", "c"), &flow.Route{}, always)
	}
	h.dispatch(t, cmd("", "acme/b", "tg", "c"), &flow.Route{}, always)
	flush()
	if got := sum(t0); got["12:00 acme/a"] != 5 || got["12:00 acme/b"] != 1 || len(got) != 2 {
		t.Fatalf("after two flushes in one window: %v; want acme/a 5, acme/b 1", got)
	}
	h.clk.Advance(time.Minute)
	h.dispatch(t, cmd("", "acme/a", "tg", "c"), &flow.Route{}, always)
	flush()
	if got := sum(t0); got["12:00 acme/a"] != 5 || got["12:01 acme/a"] != 1 || len(got) != 3 {
		t.Fatalf("after the next window's flush: %v; want 12:00 unchanged and acme/a 1 at 12:01", got)
	}
}

func TestConfigValidation(t *testing.T) {
	bad := []flow.Config{
		{},
		{Instance: "i", Mode: "turbo"},
		{Instance: "i", TokenTTL: 2 * time.Minute},
		{Instance: "i", GlobalBanDuration: time.Hour},
		{Instance: "i", InProgressTTL: time.Hour},
		{Instance: "i", Fairness: flow.FairnessParams{DominantShare: 0.3}},
		{Instance: "i", Fairness: flow.FairnessParams{CompetingShare: 0.9}},
	}
	for _, c := range bad {
		if _, err := flow.New(c, newStore(), &counts{}, nil); err == nil {
			t.Errorf("New(%+v) accepted an invalid config", c)
		}
	}
	if _, err := flow.New(flow.Config{Instance: "ok"}, newStore(), &counts{}, nil); err != nil {
		t.Fatalf("defaults rejected: %v", err)
	}
}

// TestBanRepeatInvalid: the shield's escalation of a source whose invalid
// traffic stays over budget is a global warm-path ban, stored, cached,
// told to the tenant, and not renewed while one lasts.
func TestBanRepeatInvalid(t *testing.T) {
	h := newSolo(t, nil)
	h.f.BanRepeatInvalid("acme/noisy", 150, h.clk.Now())
	h.q.run()
	bans, err := h.store.Bans(context.Background(), h.clk.Now())
	if err != nil || len(bans) != 1 || bans[0].Source != "acme/noisy" || bans[0].Reason != flow.BanReasonInvalid || !bans[0].Until.Equal(h.clk.Now().Add(10*time.Minute)) {
		t.Fatalf("global bans = %+v %v", bans, err)
	}
	if d := h.f.Fast(cmd("", "acme/noisy", "tg", "c"), plenty); d.Escalation != flow.EscalateGlobalBan {
		t.Fatalf("banned source on the fast path: %v %v", d.Action, d.Escalation)
	}
	if got := h.sink.count(telemetry.NameAbuseDetected); got != 1 {
		t.Fatalf("%d abuse_detected events, want 1", got)
	}
	// While the ban lasts past what a new one would give, nothing is done.
	h.clk.Advance(time.Minute)
	h.f.BanRepeatInvalid("acme/noisy", 150, h.clk.Now().Add(-2*time.Minute))
	h.q.run()
	if got := h.sink.count(telemetry.NameAbuseDetected); got != 1 {
		t.Fatalf("a lasting ban was renewed: %d events", got)
	}
}
