package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// TestDLQSourceRefusesPlantedMessages: of the messages in a DLQ, the ones
// the dispatcher delivered to a target that dead-letters there come
// without a refusal; every planted one comes with the reason it must not
// be replayed.
func TestDLQSourceRefusesPlantedMessages(t *testing.T) {
	e := newReplayEnv(t)
	ctx := context.Background()
	genuine := map[string]bool{}
	plant := func(name string, m provenance.Message, attrs map[string]string) {
		t.Helper()
		if attrs == nil {
			attrs = m.Attributes()
		}
		attrs[localqueue.AttrDLQReason] = localqueue.DLQReasonMaxReceives
		if _, err := e.store.Send(ctx, dlq, m.Body, attrs); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	body := func(n int, target string) (string, []byte) {
		_, b, id := command(t, n, target, e.clk.Now())
		return id, b
	}

	// Two genuine deliveries, one per target that dead-letters into dlq.
	for i, target := range []string{"mailer", "accounts"} {
		id, b := body(i+1, target)
		e.deadLetter(dlq, e.delivered(id, target, b))
		genuine[id] = true
	}
	want := map[string]string{} // command id -> refusal
	// A forged command with the attributes a producer would expect, no
	// signature (the queue's send path).
	id, b := body(10, "mailer")
	plant("unsigned", provenance.Message{Body: b}, map[string]string{attrSource: src, provenance.AttrCommandID: id, provenance.AttrTarget: "mailer"})
	want[id] = provenance.ReasonUnsigned
	// A made-up signature in the right shape.
	id, b = body(11, "mailer")
	m := e.delivered(id, "mailer", b)
	m.Signature = "v1=" + "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
	plant("made-up signature", m, nil)
	want[id] = provenance.ReasonBadSignature
	// A genuine delivery whose body was changed afterwards.
	id, b = body(12, "mailer")
	m = e.delivered(id, "mailer", b)
	m.Body = bytes.Replace(m.Body, []byte(`"n":12`), []byte(`"n":99`), 1)
	plant("changed body", m, nil)
	want[id] = provenance.ReasonBadSignature
	// A genuine delivery to billing (which dead-letters elsewhere), copied
	// whole into dlq.
	id, b = body(13, "billing")
	plant("copied from billing", e.delivered(id, "billing", b), nil)
	want[id] = provenance.ReasonForeignTarget
	// billing's signature copied onto a message for mailer.
	id, b = body(14, "mailer")
	m = e.delivered(id, "billing", b)
	m.Target = "mailer"
	plant("billing's signature relabelled for mailer", m, nil)
	want[id] = provenance.ReasonBadSignature
	// Signed by another master (another platform, or before the master
	// was replaced).
	id, b = body(15, "mailer")
	other, _ := provenance.NewSigner(bytes.Repeat([]byte{1}, 32))
	m = provenance.Message{CommandID: id, Source: src, Target: "mailer", Command: "send", Body: b}
	if err := other.Sign(&m); err != nil {
		t.Fatal(err)
	}
	plant("another master", m, nil)
	want[id] = provenance.ReasonUnknownKey

	s := newDLQ(e.store, dlq, time.Minute, &deliveryCheck{signer: e.sig, reg: e.api.o.Registry, queues: e.store, clk: e.clk})
	recs, _, err := s.Next(ctx, "", 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(genuine)+len(want) {
		t.Fatalf("%d records, want %d", len(recs), len(genuine)+len(want))
	}
	for _, r := range recs {
		id := recordID(t, r.Detail)
		switch {
		case genuine[id] && r.Refusal != "":
			t.Errorf("genuine %s refused: %s", id, r.Refusal)
		case !genuine[id] && r.Refusal != want[id]:
			t.Errorf("planted %s: refusal %q, want %q", id, r.Refusal, want[id])
		}
	}
}

// TestDLQSourceFollowsTheRoutes: which targets may be replayed from a DLQ
// is read from the routes at the start of each pass.
func TestDLQSourceFollowsTheRoutes(t *testing.T) {
	e := newReplayEnv(t)
	ctx := context.Background()
	_, b, id := command(t, 1, "billing", e.clk.Now())
	e.deadLetter(dlq, e.delivered(id, "billing", b))
	s := newDLQ(e.store, dlq, time.Millisecond, &deliveryCheck{signer: e.sig, reg: e.api.o.Registry, queues: e.store, clk: e.clk})
	recs, _, err := s.Next(ctx, "", 10)
	if err != nil || len(recs) != 1 || recs[0].Refusal != provenance.ReasonForeignTarget {
		t.Fatalf("billing's message before its route dead-letters here: %+v %v", recs, err)
	}
	// billing's route now dead-letters into dlq: the next pass replays it.
	reg := e.api.o.Registry.(registry.Store)
	it, err := reg.Get(ctx, registry.RouteID("billing", "send"), e.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	it.Route.DLQARN = embedded.QueueARN(dlq)
	if _, err := reg.Put(ctx, registry.Actor{Who: "test", At: e.clk.Now()}, it); err != nil {
		t.Fatal(err)
	}
	e.clk.Advance(time.Second) // the first pass's lease ends
	recs, _, err = s.Next(ctx, "", 10)
	if err != nil || len(recs) != 1 || recs[0].Refusal != "" {
		t.Fatalf("billing's message once its route dead-letters here: %+v %v", recs, err)
	}
}

// recordID is the command id of a record's envelope.
func recordID(t *testing.T, detail []byte) string {
	t.Helper()
	var env struct {
		Metadata struct {
			ID string `json:"id"`
		} `json:"metadata"`
	}
	if err := json.Unmarshal(detail, &env); err != nil {
		t.Fatalf("record detail %s: %v", detail, err)
	}
	return env.Metadata.ID
}

// TestDLQSourceResumedChecksTargets: a resumed run's source starts with
// the cursor it stopped at, and still knows which targets dead-letter
// into the queue.
func TestDLQSourceResumedChecksTargets(t *testing.T) {
	e := newReplayEnv(t)
	_, b, id := command(t, 1, "mailer", e.clk.Now())
	e.deadLetter(dlq, e.delivered(id, "mailer", b))
	s := newDLQ(e.store, dlq, time.Minute, &deliveryCheck{signer: e.sig, reg: e.api.o.Registry, queues: e.store, clk: e.clk})
	recs, _, err := s.Next(context.Background(), dlqCursor, 10)
	if err != nil || len(recs) != 1 || recs[0].Refusal != "" {
		t.Fatalf("resumed pass: %+v %v", recs, err)
	}
}
