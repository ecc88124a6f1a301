package shield

import (
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// TestDryRunRecordsAndSpendsNothing: a dry run records each check (the
// failing one, then the rest skipped) and neither emits nor counts into
// the source's invalid budget, so the budget's real entries are still all
// there afterwards.
func TestDryRunRecordsAndSpendsNothing(t *testing.T) {
	f, _ := budgetFixture(t)
	bad := message(t, f.clock.Now(), key(t, "hmac-v2", 7), nil)
	for range 10 {
		tr := &trace.Trace{DryRun: true}
		if _, err := f.sh.CheckTrace(src, bad, tr); reason.Of(err) != reason.BadSignature || Throttled(err) {
			t.Fatalf("dry run: %v, want bad_signature, not throttled", err)
		}
		want := []struct{ check, result string }{{CheckBusSource, trace.Pass}, {CheckEnvelope, trace.Pass}, {CheckReplayWindow, trace.Pass},
			{CheckKeyVersion, trace.Pass}, {CheckHMAC, trace.Fail}, {CheckBan, trace.Skip}}
		if len(tr.Steps) != len(want) {
			t.Fatalf("steps %+v", tr.Steps)
		}
		for i, w := range want {
			if s := tr.Steps[i]; s.Stage != trace.Shield || s.Check != w.check || s.Result != w.result {
				t.Fatalf("step %d = %+v, want %s %s", i, s, w.check, w.result)
			}
		}
	}
	if n := len(f.sink.Events()); n != 0 {
		t.Fatalf("dry runs emitted %d events", n)
	}
	for i := range 3 {
		if err := f.sendInvalid(t, src); Throttled(err) {
			t.Fatalf("real entry %d throttled: the dry runs spent the budget", i)
		}
	}
	if n := len(invalidEvents(f)); n != 3 {
		t.Fatalf("%d invalid events, want 3", n)
	}
}
