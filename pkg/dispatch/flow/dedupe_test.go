package flow_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var strict = &flow.Route{Strict: true}

// TestStrictDedupeProof: 64 goroutines send 1,000 copies each of 100
// strict-mode command ids through fast and slow: exactly 100 deliveries,
// every other copy a duplicate, with the fast path's seen-set on and off.
func TestStrictDedupeProof(t *testing.T) {
	for _, seen := range []bool{true, false} {
		t.Run(fmt.Sprintf("seenSet=%v", seen), func(t *testing.T) {
			h := newSolo(t, func(c *flow.Config) { c.DisableSeenSet = !seen })
			var delivered sync.Map
			var deliveries atomic.Int64
			var wg sync.WaitGroup
			const goroutines, copies, ids = 64, 1000, 100
			for g := range goroutines {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range copies {
						id := fmt.Sprintf("cmd-%03d", (g+i)%ids)
						c := cmd(id, "acme/billing", "mailer", "send")
						h.dispatch(t, c, strict, func() bool {
							if _, dup := delivered.LoadOrStore(id, true); dup {
								t.Errorf("command %s delivered twice", id)
							}
							deliveries.Add(1)
							return true
						})
					}
				}()
			}
			wg.Wait()
			if got := deliveries.Load(); got != ids {
				t.Fatalf("%d deliveries, want exactly %d", got, ids)
			}
			if got, want := h.sink.count(telemetry.NameDuplicate), goroutines*copies-ids; got != want {
				t.Fatalf("%d duplicate events, want %d", got, want)
			}
			if got := h.m.get(telemetry.MetricDedupDuplicatesPrevented); got != goroutines*copies-ids {
				t.Fatalf("DuplicatesPrevented = %d", got)
			}
			if seen && h.m.get(telemetry.MetricDedupEscalations) >= goroutines*copies {
				t.Fatalf("the seen-set saved no escalation (%d)", h.m.get(telemetry.MetricDedupEscalations))
			}
		})
	}
}

// TestDedupeStates walks each record state, with the seen-set on and off.
func TestDedupeStates(t *testing.T) {
	for _, seen := range []bool{true, false} {
		name := fmt.Sprintf("seenSet=%v", seen)
		mod := func(c *flow.Config) { c.DisableSeenSet = !seen }

		t.Run(name+"/DeliveredThenDuplicate", func(t *testing.T) {
			h := newSolo(t, mod)
			c := cmd("a", "acme/s", "tg", "c")
			if act, ok := h.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("first: %v %v", act, ok)
			}
			d := h.f.Fast(c, strict)
			if seen && d.Action != flow.Drop {
				t.Fatalf("fast with seen-set: %v, want drop", d.Action)
			}
			if !seen && (d.Action != flow.Escalate || d.Escalation != flow.EscalateDedupeRequired) {
				t.Fatalf("fast without seen-set: %v %v, want escalate dedupe_required", d.Action, d.Escalation)
			}
			if act, _ := h.dispatch(t, c, strict, always); act != flow.Drop {
				t.Fatalf("copy: %v, want drop", act)
			}
			dups := h.sink.of(telemetry.NameDuplicate)
			if len(dups) < 1 || dups[0].(telemetry.Duplicate).DedupeMode != "strict" || dups[0].(telemetry.Duplicate).CommandID != "a" {
				t.Fatalf("duplicate events = %+v", dups)
			}
		})

		t.Run(name+"/IDsAreScopedByTenant", func(t *testing.T) {
			h := newSolo(t, mod)
			mine := cmd("shared-id", "acme/s", "tg", "c")
			if act, ok := h.dispatch(t, mine, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("acme: %v %v", act, ok)
			}
			// Another tenant with the same id and payload is delivered:
			// neither the seen-set nor the claim may count acme's delivery.
			theirs := cmd("shared-id", "globex/shop", "tg", "c")
			if d := h.f.Fast(theirs, strict); d.Action != flow.Escalate {
				t.Fatalf("fast for globex: %v, want escalate", d.Action)
			}
			if act, ok := h.dispatch(t, theirs, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("globex: %v %v, want delivered", act, ok)
			}
			// Another service of the same tenant is the same scope.
			sibling := cmd("shared-id", "acme/other", "tg", "c")
			if act, _ := h.dispatch(t, sibling, strict, always); act != flow.Drop {
				t.Fatalf("acme/other: %v, want drop (one delivery per id within the tenant)", act)
			}
			if n := len(h.sink.of(telemetry.NameDuplicate)); n != 1 {
				t.Fatalf("%d duplicate events, want 1", n)
			}
		})

		t.Run(name+"/InProgressCopyIsRetriedNotDropped", func(t *testing.T) {
			h := newSolo(t, mod)
			c := cmd("b", "acme/s", "tg", "c")
			first, err := h.f.Slow(context.Background(), c, strict)
			if err != nil || first.Action != flow.Proceed {
				t.Fatalf("claim: %v %v", first.Action, err)
			}
			// While the first attempt is in progress a copy is neither
			// delivered nor dropped: the first may yet fail or die.
			if _, err := h.f.Slow(context.Background(), c, strict); !errors.Is(err, flow.ErrClaimInProgress) {
				t.Fatalf("copy while in progress: %v, want ErrClaimInProgress", err)
			}
			if n := len(h.sink.of(telemetry.NameDuplicate)); n != 0 {
				t.Fatalf("%d duplicate events for a copy of an undelivered command", n)
			}
			if err := h.f.Finish(context.Background(), c, strict, first, true); err != nil {
				t.Fatal(err)
			}
			// Once delivered, the retried copy is a duplicate.
			if act, _ := h.dispatch(t, c, strict, always); act != flow.Drop {
				t.Fatalf("copy after delivery: %v, want drop", act)
			}
		})

		t.Run(name+"/FailedDeliveryReleasesForRetry", func(t *testing.T) {
			h := newSolo(t, mod)
			c := cmd("c", "acme/s", "tg", "c")
			if act, ok := h.dispatch(t, c, strict, func() bool { return false }); act != flow.Proceed || ok {
				t.Fatalf("failing delivery: %v %v", act, ok)
			}
			if act, ok := h.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("retry after failed delivery: %v %v: the command was lost", act, ok)
			}
			if act, _ := h.dispatch(t, c, strict, always); act != flow.Drop {
				t.Fatalf("copy after delivery: %v", act)
			}
		})

		t.Run(name+"/CrashBetweenClaimAndDelivery", func(t *testing.T) {
			store := newStore()
			crashed := newHarness(t, store, clk(), mod)
			c := cmd("d", "acme/s", "tg", "c")
			if d, err := crashed.f.Slow(context.Background(), c, strict); err != nil || d.Action != flow.Proceed {
				t.Fatalf("claim: %v %v", d.Action, err)
			}
			// The instance dies here: no Finish. Another instance's retry
			// inside the in-progress TTL must wait (not drop: that would
			// lose the command)...
			other := newHarness(t, store, crashed.clk, mod)
			if _, err := other.f.Slow(context.Background(), c, strict); !errors.Is(err, flow.ErrClaimInProgress) {
				t.Fatalf("retry inside the in-progress TTL: %v, want ErrClaimInProgress", err)
			}
			// ...and after it, the retry claims and delivers: nothing lost.
			crashed.clk.Advance(30 * time.Second)
			if act, ok := other.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("retry after the in-progress TTL: %v %v", act, ok)
			}
		})

		t.Run(name+"/SoleInstanceTakesOverAClaimLeftByADeadProcess", func(t *testing.T) {
			store := newStore()
			sole := func(c *flow.Config) { mod(c); c.SoleInstance = true }
			crashed := newHarness(t, store, clk(), sole)
			c := cmd("g", "acme/s", "tg", "c")
			if d, err := crashed.f.Slow(context.Background(), c, strict); err != nil || d.Action != flow.Proceed {
				t.Fatalf("claim: %v %v", d.Action, err)
			}
			// The process dies; its successor, the store's only user, takes
			// the claim over at once, well inside the in-progress TTL.
			next := newHarness(t, store, crashed.clk, sole)
			if act, ok := next.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("retry by the next process: %v %v, want delivered at once", act, ok)
			}
			if n := next.m.get(flow.MetricClaimsTakenOver); n != 1 {
				t.Fatalf("%s = %d, want 1", flow.MetricClaimsTakenOver, n)
			}
			// Delivered once: the dead process's copy, or a third process,
			// finds it delivered, not orphaned.
			third := newHarness(t, store, crashed.clk, sole)
			if act, _ := third.dispatch(t, c, strict, always); act != flow.Drop {
				t.Fatalf("copy after the takeover's delivery: %v, want drop", act)
			}
			// Its own claims in progress are never taken over: a copy waits.
			own := cmd("h", "acme/s", "tg", "c")
			if d, err := next.f.Slow(context.Background(), own, strict); err != nil || d.Action != flow.Proceed {
				t.Fatalf("claim: %v %v", d.Action, err)
			}
			if _, err := next.f.Slow(context.Background(), own, strict); !errors.Is(err, flow.ErrClaimInProgress) {
				t.Fatalf("copy of its own claim in progress: %v, want ErrClaimInProgress", err)
			}
			// Nor with another payload: that stays a conflict.
			other := cmd("h", "acme/s", "tg", "c")
			other.PayloadHash = "different"
			if d, err := third.f.Slow(context.Background(), other, strict); err != nil || d.Action != flow.Reject {
				t.Fatalf("reused id under an orphaned claim: %v %v, want reject", d.Action, err)
			}
		})

		t.Run(name+"/ReplayAfterDedupeTTL", func(t *testing.T) {
			h := newSolo(t, mod)
			c := cmd("e", "acme/s", "tg", "c")
			h.dispatch(t, c, strict, always)
			h.clk.Advance(299 * time.Second)
			if act, _ := h.dispatch(t, c, strict, always); act != flow.Drop {
				t.Fatalf("inside the TTL: %v", act)
			}
			h.clk.Advance(time.Second)
			if act, ok := h.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
				t.Fatalf("replay after the 300 s TTL: %v %v, want delivered", act, ok)
			}
		})

		t.Run(name+"/ReusedIDWithOtherPayloadIsAConflict", func(t *testing.T) {
			h := newSolo(t, mod)
			h.dispatch(t, cmd("f", "acme/s", "tg", "c"), strict, always)
			other := cmd("f", "acme/s", "tg", "c")
			other.PayloadHash = "different"
			// Not dropped on the id alone: the fast stage escalates and
			// the slow stage refuses it as a conflict.
			if d := h.f.Fast(other, strict); d.Action != flow.Escalate || d.Escalation != flow.EscalateDedupeRequired {
				t.Fatalf("fast on a reused id with another payload: %v %v, want escalate dedupe_required", d.Action, d.Escalation)
			}
			if dups := h.sink.of(telemetry.NameDuplicate); len(dups) != 0 {
				t.Fatalf("reused id reported as a duplicate: %+v", dups)
			}
			d, err := h.f.Slow(context.Background(), other, strict)
			if err != nil || d.Action != flow.Reject {
				t.Fatalf("reused id: %v %v, want reject", d.Action, err)
			}
			inv := h.sink.of(telemetry.NameInvalid)
			if len(inv) != 1 || inv[0].(telemetry.Invalid).Reason != flow.ReasonDedupeConflict {
				t.Fatalf("invalid events = %+v", inv)
			}
		})
	}
}

// TestFastHashesPayloadOnlyForKnownIDs: given the payload instead of its
// hash, the fast stage drops a copy of a delivered id whose payload hashes
// the same and escalates one whose payload differs.
func TestFastHashesPayloadOnlyForKnownIDs(t *testing.T) {
	h := newSolo(t, nil)
	payload := []byte(`{"n":1}`)
	c := cmd("g", "acme/s", "tg", "c")
	c.PayloadHash = flow.PayloadHash(payload)
	if act, ok := h.dispatch(t, c, strict, always); act != flow.Proceed || !ok {
		t.Fatalf("first: %v %v", act, ok)
	}
	same := cmd("g", "acme/s", "tg", "c")
	same.PayloadHash, same.Payload = "", payload
	if d := h.f.Fast(same, strict); d.Action != flow.Drop {
		t.Fatalf("copy with the same payload: %v, want drop", d.Action)
	}
	other := cmd("g", "acme/s", "tg", "c")
	other.PayloadHash, other.Payload = "", []byte(`{"n":2}`)
	if d := h.f.Fast(other, strict); d.Action != flow.Escalate {
		t.Fatalf("copy with another payload: %v, want escalate", d.Action)
	}
	unknown := cmd("g", "acme/s", "tg", "c")
	unknown.PayloadHash = ""
	if d := h.f.Fast(unknown, strict); d.Action != flow.Escalate {
		t.Fatalf("copy with neither payload nor hash: %v, want escalate", d.Action)
	}
	if got := flow.PayloadHash(payload); got != "2bfd14f43d17fc7cea24e0917a8879b4b2f880b8baeec1b9d90fbaad655e71bd" {
		t.Fatalf("PayloadHash = %q", got)
	}
}

func TestStrictNeedsIDAndHash(t *testing.T) {
	h := newSolo(t, nil)
	c := cmd("", "acme/s", "tg", "c")
	if _, err := h.f.Slow(context.Background(), c, strict); err == nil {
		t.Fatal("strict command without id accepted")
	}
}

func TestSlowPathLatencyObserved(t *testing.T) {
	h := newSolo(t, nil)
	c := cmd("lat", "acme/s", "tg", "c")
	ctx := context.Background()
	d, _ := h.f.Slow(ctx, c, strict)
	h.clk.Advance(40 * time.Millisecond)
	if err := h.f.Finish(ctx, c, strict, d, true); err != nil {
		t.Fatal(err)
	}
	h.m.mu.Lock()
	obs := h.m.obs[telemetry.MetricDedupSlowPathLatency]
	h.m.mu.Unlock()
	if len(obs) != 1 || obs[0] != 0.04 {
		t.Fatalf("SlowPathLatency observations = %v, want [0.04]", obs)
	}
}
