package dispatchtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Durability is what TestDurability needs of a store: its adapters of
// the durability ports, and a way to read back what the archive holds.
type Durability struct {
	Archive dispatch.Archive
	Handoff dispatch.HandoffQueue
	// Archived returns the archived event id, ok=false when there is none.
	Archived func(ctx context.Context, id string) (a dispatch.Archived, ok bool, err error)
}

// TestDurability is the contract of dispatch.Archive and
// dispatch.HandoffQueue, and of dispatch.Intake running over them: an
// entry is acknowledged only once it is archived with its verdict and its
// command delivered, refused with telemetry, or handed off; a failed
// archive or hand-off refuses what it would have lost. Each call of
// newStore returns an empty store.
func TestDurability(t *testing.T, newStore func(t *testing.T) Durability) {
	ctx := context.Background()
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	ev := func(id, detail string, v dispatch.Verdict) dispatch.Archived {
		a := dispatch.Archived{EventID: id, Source: "acme/billing", DetailType: envelope.EventType, Detail: []byte(detail), ReceivedAt: at, Verdict: v}
		switch v {
		case dispatch.VerdictAccepted:
			a.KeyVersion = "hmac-v1"
		case dispatch.VerdictRejected:
			a.Reason = "bad_signature"
		case dispatch.VerdictNotCommand:
			a.DetailType = "order-placed"
		}
		return a
	}
	get := func(t *testing.T, s Durability, id string) (dispatch.Archived, bool) {
		t.Helper()
		a, ok, err := s.Archived(ctx, id)
		if err != nil {
			t.Fatalf("reading archived event %s: %v", id, err)
		}
		return a, ok
	}

	t.Run("ArchiveRoundTrip", func(t *testing.T) {
		s := newStore(t)
		want := []dispatch.Archived{ev("e1", `{"a":1}`, dispatch.VerdictAccepted), ev("e2", `{"b":2}`, dispatch.VerdictRejected), ev("e3", `{"c":3}`, dispatch.VerdictNotCommand)}
		if err := s.Archive.Append(ctx, want); err != nil {
			t.Fatal(err)
		}
		for _, w := range want {
			got, ok := get(t, s, w.EventID)
			if !ok {
				t.Fatalf("event %s not archived", w.EventID)
			}
			if err := sameArchived(got, w); err != nil {
				t.Errorf("event %s: %v", w.EventID, err)
			}
		}
		if _, ok := get(t, s, "e9"); ok {
			t.Fatal("an event never appended reads back")
		}
	})

	t.Run("ArchiveTakesARequest", func(t *testing.T) {
		s := newStore(t)
		evs := make([]dispatch.Archived, dispatch.MaxArchiveBatch)
		for i := range evs {
			evs[i] = ev(fmt.Sprintf("b%02d", i), string(bytes.Repeat([]byte("x"), 1000)), dispatch.VerdictAccepted)
		}
		if err := s.Archive.Append(ctx, evs); err != nil {
			t.Fatalf("Append of %d events: %v", len(evs), err)
		}
		for _, e := range evs {
			if _, ok := get(t, s, e.EventID); !ok {
				t.Fatalf("event %s of the batch not archived", e.EventID)
			}
		}
	})

	t.Run("ArchiveAllOrNothing", func(t *testing.T) {
		s := newStore(t)
		noID := ev("", "{}", dispatch.VerdictAccepted)
		noTime := ev("n2", "{}", dispatch.VerdictAccepted)
		noTime.ReceivedAt = time.Time{}
		for _, bad := range []dispatch.Archived{noID, noTime} {
			if err := s.Archive.Append(ctx, []dispatch.Archived{ev("ok1", "{}", dispatch.VerdictAccepted), bad}); err == nil {
				t.Fatalf("Append with a bad event (%+v) succeeded", bad)
			}
			if _, ok := get(t, s, "ok1"); ok {
				t.Fatal("a failed Append stored part of its events")
			}
		}
		if err := s.Archive.Append(ctx, nil); err == nil {
			t.Fatal("Append of no events succeeded")
		}
	})

	t.Run("ArchiveStoresAnIDOnce", func(t *testing.T) {
		s := newStore(t)
		if err := s.Archive.Append(ctx, []dispatch.Archived{ev("d1", `{"first":1}`, dispatch.VerdictAccepted)}); err != nil {
			t.Fatal(err)
		}
		again := []dispatch.Archived{ev("d1", `{"second":2}`, dispatch.VerdictRejected), ev("d2", `{"x":1}`, dispatch.VerdictAccepted), ev("d2", `{"y":2}`, dispatch.VerdictAccepted)}
		if err := s.Archive.Append(ctx, again); err != nil {
			t.Fatalf("Append of an id already archived, and of one repeated: %v", err)
		}
		if a, _ := get(t, s, "d1"); string(a.Detail) != `{"first":1}` || a.Verdict != dispatch.VerdictAccepted {
			t.Fatalf("d1 = %s %s; want the first copy kept", a.Detail, a.Verdict)
		}
		if a, ok := get(t, s, "d2"); !ok || string(a.Detail) != `{"x":1}` {
			t.Fatalf("d2 = %s (%v); want the first copy of the batch", a.Detail, ok)
		}
	})

	t.Run("HandoffRoundTrip", func(t *testing.T) {
		s := newStore(t)
		want := map[string]bool{}
		for i := range 3 {
			p := fmt.Sprintf(`{"n":%d}`, i)
			want[p] = true
			if err := s.Handoff.Put(ctx, []byte(p)); err != nil {
				t.Fatal(err)
			}
		}
		got := takeAll(t, s.Handoff, len(want))
		for _, it := range got {
			if !want[string(it.Payload)] || it.Receives != 1 || it.Handle == "" {
				t.Fatalf("taken %q (receives %d, handle %q); want one of the payloads put, first receive", it.Payload, it.Receives, it.Handle)
			}
			delete(want, string(it.Payload))
		}
		if more, err := s.Handoff.Take(ctx, 10, time.Minute); err != nil || len(more) != 0 {
			t.Fatalf("Take while every item is hidden = %d items, %v; want none", len(more), err)
		}
		for _, it := range got {
			if err := s.Handoff.Done(ctx, it); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("HandoffRetryAndDone", func(t *testing.T) {
		s := newStore(t)
		if err := s.Handoff.Put(ctx, []byte("once")); err != nil {
			t.Fatal(err)
		}
		first := takeAll(t, s.Handoff, 1)[0]
		if err := s.Handoff.Retry(ctx, first, 0); err != nil {
			t.Fatalf("Retry: %v", err)
		}
		second := takeAll(t, s.Handoff, 1)[0]
		if string(second.Payload) != "once" || second.Receives != 2 {
			t.Fatalf("after Retry: %q, receives %d; want the item again, second receive", second.Payload, second.Receives)
		}
		if err := s.Handoff.Done(ctx, second); err != nil {
			t.Fatal(err)
		}
		if err := s.Handoff.Retry(ctx, second, 0); err == nil {
			// Some queues (SQS) refuse a retry of a deleted item; none may
			// bring it back.
			if got, _ := s.Handoff.Take(ctx, 10, time.Minute); len(got) != 0 {
				t.Fatalf("a Done item came back: %q", got[0].Payload)
			}
		}
		if got, err := s.Handoff.Take(ctx, 10, time.Minute); err != nil || len(got) != 0 {
			t.Fatalf("Take after Done = %d items, %v; want none", len(got), err)
		}
	})

	t.Run("Intake", func(t *testing.T) {
		s := newStore(t)
		h := newIntakeHarness(t)
		in, err := dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: h.d, Archive: s.Archive, Handoff: s.Handoff, NewID: h.newID, Clock: h.clk})
		if err != nil {
			t.Fatal(err)
		}
		entries := []dispatch.Entry{
			h.command(t, "mailer", "send", 1, h.key),
			h.command(t, "ledger", "post", 2, h.key),
			{Source: "acme/billing", DetailType: "order-placed", Detail: []byte(`{"order":7}`)},
			h.command(t, "mailer", "send", 3, h.wrong),
		}
		acks, err := in.Run(ctx, entries)
		if err != nil {
			t.Fatal(err)
		}
		wantVerdict := []dispatch.Verdict{dispatch.VerdictAccepted, dispatch.VerdictAccepted, dispatch.VerdictNotCommand, dispatch.VerdictRejected}
		for i, a := range acks {
			if !a.Acknowledged() {
				t.Fatalf("entry %d refused: %s %v", i, a.Refused, a.Err)
			}
			got, ok := get(t, s, a.EventID)
			if !ok || got.Verdict != wantVerdict[i] || !bytes.Equal(got.Detail, entries[i].Detail) {
				t.Fatalf("entry %d archived %v as %s; want %s", i, ok, got.Verdict, wantVerdict[i])
			}
		}
		if acks[0].Result.Outcome != dispatch.Delivered || h.sent.n != 1 {
			t.Fatalf("plain command: %s, %d delivered; want delivered by the fast stage", acks[0].Result.Outcome, h.sent.n)
		}
		if !acks[1].Escalated {
			t.Fatalf("strict command not handed off: %+v", acks[1])
		}
		it := takeAll(t, s.Handoff, 1)[0]
		esc, err := dispatch.UnmarshalEscalation(it.Payload)
		if err != nil || esc.Envelope.Metadata.ID != acks[1].Result.CommandID {
			t.Fatalf("the hand-off holds %v (%v); want the strict command's escalation", esc, err)
		}
		if _, err := h.d.Slow(ctx, esc); err != nil || h.sent.n != 2 {
			t.Fatalf("the slow stage on the hand-off: %v, %d delivered", err, h.sent.n)
		}
	})

	t.Run("IntakeRefusesWhatItCouldNotStore", func(t *testing.T) {
		s := newStore(t)
		h := newIntakeHarness(t)
		broken := errors.New("store unavailable")
		in, err := dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: h.d, Archive: s.Archive, Handoff: failingHandoff{broken}, NewID: h.newID, Clock: h.clk})
		if err != nil {
			t.Fatal(err)
		}
		acks, err := in.Run(ctx, []dispatch.Entry{h.command(t, "mailer", "send", 1, h.key), h.command(t, "ledger", "post", 2, h.key)})
		if err != nil {
			t.Fatal(err)
		}
		if !acks[0].Acknowledged() || acks[1].Acknowledged() || acks[1].Refused != dispatch.RefusedRetry || !errors.Is(acks[1].Err, broken) {
			t.Fatalf("with a failing hand-off: %+v, %+v; want the plain one acknowledged, the strict one refused for retry", acks[0], acks[1])
		}
		n := 0
		for _, id := range []string{"ev-1", "ev-2"} {
			if _, ok := get(t, s, id); ok {
				n++
			}
		}
		if n != 1 {
			t.Fatalf("%d events archived; want only the acknowledged one", n)
		}

		in, err = dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: h.d, Archive: failingArchive{broken}, Handoff: s.Handoff, NewID: h.newID, Clock: h.clk})
		if err != nil {
			t.Fatal(err)
		}
		acks, err = in.Run(ctx, []dispatch.Entry{h.command(t, "mailer", "send", 3, h.key), h.command(t, "ledger", "post", 4, h.key)})
		if !errors.Is(err, broken) {
			t.Fatalf("Run with a failing archive: %v; want its error", err)
		}
		for i, a := range acks {
			if a.Acknowledged() || a.Refused != dispatch.RefusedRetry {
				t.Fatalf("entry %d acknowledged without its archive: %+v", i, a)
			}
		}
	})
}

// sameArchived compares an archived event read back with the one
// appended (times to the millisecond).
func sameArchived(got, want dispatch.Archived) error {
	switch {
	case got.EventID != want.EventID, got.Source != want.Source, got.DetailType != want.DetailType:
		return fmt.Errorf("read back %s %s %s; want %s %s %s", got.EventID, got.Source, got.DetailType, want.EventID, want.Source, want.DetailType)
	case !bytes.Equal(got.Detail, want.Detail):
		return fmt.Errorf("detail %q; want %q", got.Detail, want.Detail)
	case !got.ReceivedAt.Truncate(time.Millisecond).Equal(want.ReceivedAt.Truncate(time.Millisecond)):
		return fmt.Errorf("received at %v; want %v", got.ReceivedAt, want.ReceivedAt)
	case got.Verdict != want.Verdict, got.Reason != want.Reason, got.KeyVersion != want.KeyVersion:
		return fmt.Errorf("verdict %s %q %q; want %s %q %q", got.Verdict, got.Reason, got.KeyVersion, want.Verdict, want.Reason, want.KeyVersion)
	}
	return nil
}

// takeAll takes n items, in as many Takes as the queue needs (SQS returns
// fewer than asked when it likes), hidden for a minute.
func takeAll(t *testing.T, q dispatch.HandoffQueue, n int) []dispatch.HandoffItem {
	t.Helper()
	var got []dispatch.HandoffItem
	for range 20 {
		items, err := q.Take(context.Background(), 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, items...)
		if len(got) >= n {
			break
		}
	}
	if len(got) != n {
		t.Fatalf("took %d items; want %d", len(got), n)
	}
	return got
}

type failingHandoff struct{ err error }

func (f failingHandoff) Put(context.Context, []byte) error { return f.err }

type failingArchive struct{ err error }

func (f failingArchive) Append(context.Context, []dispatch.Archived) error { return f.err }

// countingSender counts deliveries.
type countingSender struct{ n int }

func (c *countingSender) Send(context.Context, *dispatch.Delivery) error { c.n++; return nil }

// intakeHarness is a Dispatcher over memstore with a plain route
// mailer/send and a strict one ledger/post, both open to acme/billing.
type intakeHarness struct {
	d          *dispatch.Dispatcher
	clk        *clock.Fake
	key, wrong *signing.Key
	sent       *countingSender
	ids        int
}

func newIntakeHarness(t *testing.T) *intakeHarness {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	secret := []byte("0123456789abcdef0123456789abcdef")
	reg := memstore.NewRegistry()
	plain, strict := RegistryRoute("mailer", "send"), RegistryRoute("ledger", "post")
	strict.DedupeMode = registry.DedupeStrict
	aclPlain, aclStrict := RegistryACL("acme/billing", "mailer", "send"), RegistryACL("acme/billing", "ledger", "post")
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: "acme/billing", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: clk.Now().Add(-time.Hour)}}}},
		{Route: &plain}, {Route: &strict}, {ACL: &aclPlain}, {ACL: &aclStrict},
	} {
		if _, err := reg.Put(ctx, registry.Actor{Who: "dispatchtest", At: clk.Now()}, it); err != nil {
			t.Fatal(err)
		}
	}
	h := &intakeHarness{clk: clk, sent: &countingSender{}}
	a, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: memstore.NewFlow(), Sender: h.sent, Clock: clk,
		Flow: flow.Config{Instance: "dispatchtest"}})
	if err != nil {
		t.Fatal(err)
	}
	h.d = a.Dispatcher
	if h.key, err = signing.NewKey("hmac-v1", secret); err != nil {
		t.Fatal(err)
	}
	if h.wrong, err = signing.NewKey("hmac-v1", []byte("another secret, another secret!!")); err != nil {
		t.Fatal(err)
	}
	return h
}

func (h *intakeHarness) newID() string {
	h.ids++
	return fmt.Sprintf("ev-%d", h.ids)
}

// command is a mailer/send or ledger/post entry from acme/billing, signed
// with key.
func (h *intakeHarness) command(t *testing.T, target, name string, n int, key *signing.Key) dispatch.Entry {
	t.Helper()
	env := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), h.clk.Now(), target, name, []byte(`{}`))
	if err := key.SignEnvelope(&env, "acme/billing"); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return dispatch.Entry{Source: "acme/billing", DetailType: envelope.EventType, Detail: b}
}
