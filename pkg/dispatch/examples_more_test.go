package dispatch_test

import (
	"bytes"
	"context"
	"fmt"

	"github.com/snavio/snavio/pkg/dispatch"
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
