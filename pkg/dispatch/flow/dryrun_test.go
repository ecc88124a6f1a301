package flow

import (
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// TestDryRunDecidesAndChangesNothing: a dry run of the fast stage decides
// what the real one decides from the same memory, and leaves that memory
// as it was: no token taken, no usage counted, no ban made, no telemetry.
func TestDryRunDecidesAndChangesNothing(t *testing.T) {
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tel := &telemetry.Memory{}
	f, err := New(Config{Instance: "dry", Clock: clock.NewFake(now), Executor: func(func()) {}}, nil, tel, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &Route{RateLimit: RateLimit{Max: 100, Interval: time.Minute}}
	k := RouteKey{Target: "mailer", Command: "send"}
	start, end := window(now, time.Minute)
	f.limiter.buckets.get(k).refill(5, start.UnixNano(), end.UnixNano())
	loud := &Command{ID: "c1", Source: "acme/loud", Target: "mailer", Name: "send"}
	quiet := &Command{ID: "c2", Source: "acme/quiet", Target: "mailer", Name: "send"}

	tr := &trace.Trace{DryRun: true}
	if d := f.FastTrace(loud, r, now, tr); d.Action != Proceed {
		t.Fatalf("dry run with tokens in hand: %v", d.Action)
	}
	if got := f.limiter.buckets.peek(k).tokens.Load(); got != 5 {
		t.Fatalf("a dry run took a token: %d left, want 5", got)
	}
	if last := tr.Steps[len(tr.Steps)-1]; last.Check != CheckRateLimit || last.Result != trace.Pass {
		t.Fatalf("last step %+v, want rate_limit pass", last)
	}
	if f.usage.peek(k) != nil {
		t.Fatal("a dry run counted usage")
	}

	// The loud source dominates the window: the real check would ban it.
	u := f.usage.get(k)
	p := f.fairness(r)
	for range 30 {
		u.record(loud.Source, true, p, now)
	}
	for range 5 {
		u.record(quiet.Source, true, p, now)
	}
	tr = &trace.Trace{DryRun: true}
	if d := f.FastTrace(loud, r, now, tr); d.Action != Escalate || d.Escalation != EscalateWarmPathBanned {
		t.Fatalf("dry run of a dominant source: %v %s, want escalate warm_path_banned", d.Action, d.Escalation)
	}
	if _, banned := u.bannedUntil(loud.Source, now); banned || u.total != 35 {
		t.Fatalf("the dry run changed the window: banned %v, total %d", banned, u.total)
	}
	if n := len(tel.Events()); n != 0 {
		t.Fatalf("a dry run emitted %d events", n)
	}
	// The real run decides the same, and does ban.
	if d := f.FastAt(loud, r, now); d.Action != Escalate || d.Escalation != EscalateWarmPathBanned {
		t.Fatalf("real run: %v %s", d.Action, d.Escalation)
	}
	if _, banned := u.bannedUntil(loud.Source, now); !banned {
		t.Fatal("the real run did not ban the dominant source")
	}
}
