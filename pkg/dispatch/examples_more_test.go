package dispatch_test

import (
	"bytes"
	"context"
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// These examples use the in-memory Dispatcher of example_test.go.

// A command whose payload changed on the way, after signing, is refused
// by the shield: nothing is delivered.
func Example_badSignature() {
	ctx := context.Background()
	d, clk, key := example("")

	detail := signedCommand(key, "7c9e6679-7425-40de-944b-e07fc1f90ae7", clk.Now(), `{"to":"ann@example.com"}`)
	detail = bytes.Replace(detail, []byte("ann@"), []byte("eve@"), 1)

	res, _ := d.Fast(ctx, "acme/billing", detail)
	fmt.Println("outcome:", res.Outcome, res.Reason)
	// Output:
	// outcome: invalid bad_signature
}

// On a strict route the fast stage escalates every command: the slow
// stage claims its id (exactly-once delivery) and delivers it. The host
// hands the escalation to the slow stage through a durable queue, in the
// wire form of Escalation.Marshal.
func Example_strict() {
	ctx := context.Background()
	d, clk, key := example(registry.DedupeStrict)

	detail := signedCommand(key, "9b2d6c1e-3f4a-4b5c-8d7e-1f2a3b4c5d6e", clk.Now(), `{"to":"bob@example.com"}`)

	res, esc := d.Fast(ctx, "acme/billing", detail)
	fmt.Println("fast:   ", res.Outcome, res.Reason)
	wire, err := esc.Marshal() // enqueue wire; the slow worker receives it
	if err != nil {
		panic(err)
	}
	esc, err = dispatch.UnmarshalEscalation(wire)
	if err != nil {
		panic(err)
	}
	res, err = d.Slow(ctx, esc)
	if err != nil {
		panic(err) // undecided: leave it on the queue to retry
	}
	fmt.Println("slow:   ", res.Outcome, res.Path)
	// Output:
	// fast:    escalated dedupe_required
	// queue:   arn:snavio:sqs:local:000000000000:mailer
	// attrs:   9b2d6c1e-3f4a-4b5c-8d7e-1f2a3b4c5d6e acme/billing mailer send
	// body:    {"metadata":{"id":"9b2d6c1e-3f4a-4b5c-8d7e-1f2a3b4c5d6e","timestamp":"2026-11-25T12:00:00.000Z","type":"snavio.command-sent","hmac":"ff336a7df78b2e4fc35bbca61799a93dae98015cbcdc67e2eba730a648633c8f","version_id":"hmac-v1"},"command":{"source":"acme/billing","target":"mailer","name":"send","payload":{"to":"bob@example.com"}}}
	// slow:    delivered slow
}

// A host acknowledges a bus event only once nothing can lose it: Intake
// runs the shield and the fast stage, hands the escalation of this strict
// command off, archives the event with the shield's verdict, and only
// then acknowledges it. A slow worker takes the hand-off later.
func ExampleIntake() {
	ctx := context.Background()
	d, clk, key := example(registry.DedupeStrict)
	archive, handoff := &memstore.Archive{}, memstore.NewHandoff(clk)
	in, err := dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: d, Archive: archive, Handoff: handoff, Clock: clk})
	if err != nil {
		panic(err)
	}

	detail := signedCommand(key, "2c5ea4c0-4067-41fd-9f1b-6a2c0a3e1f10", clk.Now(), `{"to":"cy@example.com"}`)
	acks, err := in.Run(ctx, []dispatch.Entry{{EventID: "ev-1", Source: "acme/billing", DetailType: envelope.EventType, Detail: detail}})
	if err != nil {
		panic(err) // nothing is acknowledged: the producer retries
	}
	a, _, _ := archive.Get(ctx, acks[0].EventID)
	fmt.Println("ack:     ", acks[0].EventID, "escalated:", acks[0].Escalated)
	fmt.Println("archived:", a.Verdict, a.KeyVersion)

	items, _ := handoff.Take(ctx, 10, 30*time.Second)
	esc, _ := dispatch.UnmarshalEscalation(items[0].Payload)
	res, err := d.Slow(ctx, esc)
	if err != nil {
		return // undecided: leave it; it is taken again after 30 s
	}
	_ = handoff.Done(ctx, items[0])
	fmt.Println("slow:    ", res.Outcome)
	// Output:
	// ack:      ev-1 escalated: true
	// archived: accepted hmac-v1
	// queue:   arn:snavio:sqs:local:000000000000:mailer
	// attrs:   2c5ea4c0-4067-41fd-9f1b-6a2c0a3e1f10 acme/billing mailer send
	// body:    {"metadata":{"id":"2c5ea4c0-4067-41fd-9f1b-6a2c0a3e1f10","timestamp":"2026-11-25T12:00:00.000Z","type":"snavio.command-sent","hmac":"125770058085eb8aae725dcef96dec732588faf5f80ed70ec070a3c45a23ed25","version_id":"hmac-v1"},"command":{"source":"acme/billing","target":"mailer","name":"send","payload":{"to":"cy@example.com"}}}
	// slow:     delivered
}
