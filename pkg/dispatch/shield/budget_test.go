package shield

import (
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

type banCall struct {
	source string
	n      int64
	at     time.Time
}

// budgetFixture is a shield with a budget of 3 invalid entries per source
// per minute, banning after 2 consecutive minutes over it.
func budgetFixture(t *testing.T) (*fixture, *[]banCall) {
	t.Helper()
	f := &fixture{clock: clock.NewFake(T), sink: &telemetry.Memory{}}
	var calls []banCall
	sh, err := New(Config{SampleRate: -1, InvalidBudget: 3, InvalidInterval: time.Minute, InvalidBanAfter: 2}, Deps{
		Clock: f.clock, Keys: testRing(t), Telemetry: f.sink,
		BanRepeatInvalid: func(s string, n int64, at time.Time) { calls = append(calls, banCall{s, n, at}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.sh = sh
	return f, &calls
}

func invalidEvents(f *fixture) []telemetry.Invalid {
	var out []telemetry.Invalid
	for _, e := range f.sink.Events() {
		if iv, ok := e.(telemetry.Invalid); ok {
			out = append(out, iv)
		}
	}
	return out
}

// sendInvalid puts one message from source whose signature is wrong.
func (f *fixture) sendInvalid(t *testing.T, source string) error {
	t.Helper()
	_, err := f.sh.Check(source, message(t, f.clock.Now(), key(t, "hmac-v2", 7), nil))
	if reason.Of(err) == "" {
		t.Fatalf("a bad signature was not refused: %v", err)
	}
	return err
}

func TestInvalidBudgetAggregatesPerSource(t *testing.T) {
	f, _ := budgetFixture(t)
	for i := range 10 {
		err := f.sendInvalid(t, src)
		if got, want := Throttled(err), i >= 3; got != want {
			t.Fatalf("entry %d: throttled %v, want %v", i, got, want)
		}
		if reason.Of(err) != reason.BadSignature {
			t.Fatalf("entry %d: the reason is lost: %v", i, err)
		}
	}
	// Another source has a budget of its own.
	if err := f.sendInvalid(t, "tenant-b/other"); Throttled(err) {
		t.Fatal("another source was throttled")
	}
	if n := len(invalidEvents(f)); n != 4 {
		t.Fatalf("%d invalid events within the minute, want 3 + 1 of the other source", n)
	}
	// The aggregate comes once the minute has ended, with any next Check.
	f.clock.Advance(time.Minute)
	f.sink.Reset()
	if _, err := f.sh.Check(src, message(t, f.clock.Now(), key(t, "hmac-v2", 2), nil)); err != nil {
		t.Fatalf("a valid message: %v", err)
	}
	ev := invalidEvents(f)
	if len(ev) != 1 || ev[0].Source != src || ev[0].Suppressed != 7 || ev[0].Reason != reason.BadSignature || ev[0].CommandID != testID {
		t.Fatalf("aggregate = %+v, want one for %s with 7 suppressed, reason bad_signature", ev, src)
	}
	// A new minute: the budget is back.
	f.sink.Reset()
	if err := f.sendInvalid(t, src); Throttled(err) {
		t.Fatal("throttled in a new interval")
	}
	if ev := invalidEvents(f); len(ev) != 1 || ev[0].Suppressed != 0 {
		t.Fatalf("events = %+v, want the entry's own", ev)
	}
}

func TestInvalidBudgetAggregateOnTheSourcesNextEntry(t *testing.T) {
	f, _ := budgetFixture(t)
	for range 5 {
		f.sendInvalid(t, src)
	}
	f.clock.Advance(90 * time.Second)
	f.sink.Reset()
	// The sweep and the entry itself: the aggregate first, then the
	// entry's own event.
	f.sendInvalid(t, src)
	ev := invalidEvents(f)
	if len(ev) != 2 || ev[0].Suppressed != 2 || ev[1].Suppressed != 0 {
		t.Fatalf("events = %+v, want the aggregate of 2 then the entry's own", ev)
	}
}

func TestInvalidBudgetEscalatesToABan(t *testing.T) {
	f, calls := budgetFixture(t)
	over := func() {
		for range 5 {
			f.sendInvalid(t, src)
		}
	}
	over()
	if len(*calls) != 0 {
		t.Fatalf("banned after one interval: %+v", *calls)
	}
	// A quiet interval in between resets the streak.
	f.clock.Advance(2*time.Minute + time.Second)
	over()
	if len(*calls) != 0 {
		t.Fatalf("banned across a quiet interval: %+v", *calls)
	}
	f.clock.Advance(time.Minute)
	over()
	if len(*calls) != 1 || (*calls)[0].source != src || (*calls)[0].n != 4 || !(*calls)[0].at.Equal(f.clock.Now()) {
		t.Fatalf("ban calls = %+v, want one for %s at its 4th invalid entry", *calls, src)
	}
	// Malformed bus sources share one window and are never banned.
	for range 10 {
		f.sendInvalid(t, "no-slash")
	}
	f.clock.Advance(time.Minute)
	for range 10 {
		f.sendInvalid(t, "no-slash")
	}
	if len(*calls) != 1 {
		t.Fatalf("a malformed source was banned: %+v", *calls)
	}
}

func TestInvalidBudgetMemoryIsBounded(t *testing.T) {
	f, _ := budgetFixture(t)
	for i := range maxBudgetSources + 100 {
		f.sh.invalid.admit(telemetry.Invalid{Source: fmt.Sprintf("tenant-a/s%d", i), Reason: reason.BadSignature}, f.clock.Now())
	}
	if n := len(f.sh.invalid.m); n > maxBudgetSources+1 {
		t.Fatalf("the budget holds %d sources, bound %d", n, maxBudgetSources)
	}
	// Sources beyond the bound share one window, reported to the platform
	// (no source): the 100 over the bound used its budget of 3.
	if f.sh.invalid.admit(telemetry.Invalid{Source: "tenant-a/later", Reason: reason.BadSignature}, f.clock.Now()) {
		t.Fatal("the shared overflow window has no budget left, yet the entry got its own event")
	}
	// Once the minute has ended the windows with nothing to report are
	// forgotten; the overflow window's aggregate goes to the platform.
	f.clock.Advance(time.Minute)
	f.sink.Reset()
	f.sh.invalid.sweep(f.clock.Now())
	ev := invalidEvents(f)
	if len(ev) != 1 || ev[0].Source != "" || ev[0].Suppressed == 0 {
		t.Fatalf("events after the sweep = %+v, want the overflow aggregate", ev)
	}
	if n := len(f.sh.invalid.m); n != 1 {
		t.Fatalf("%d windows kept after the sweep, want the overflow window only", n)
	}
}

func TestInvalidBudgetDisabled(t *testing.T) {
	f := newFixture(t, Config{SampleRate: -1, InvalidBudget: -1})
	for range 200 {
		if err := f.sendInvalid(t, src); Throttled(err) {
			t.Fatal("throttled with the budget disabled")
		}
	}
	if n := len(invalidEvents(f)); n != 200 {
		t.Fatalf("%d events, want 200", n)
	}
}
