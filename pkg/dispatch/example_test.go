package dispatch_test

import (
	"context"
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// printQueue is an in-memory Sender: it prints each delivery instead of
// sending it to a queue (SQS, or a local queue in `dispatch serve`).
type printQueue struct{}

func (printQueue) Send(_ context.Context, d *dispatch.Delivery) error {
	fmt.Println("queue:  ", d.QueueARN)
	fmt.Println("attrs:  ", d.CommandID, d.Source, d.Target, d.Command)
	fmt.Println("body:   ", string(d.Body))
	return nil
}

// example builds a Dispatcher over the in-memory store holding a route
// mailer/send (with strict dedupe if dedupe is registry.DedupeStrict), an
// ACL letting acme/billing send it, and acme/billing's HMAC key; it
// returns the Dispatcher, its clock and the producer's key.
func example(dedupe registry.DedupeMode) (*dispatch.Dispatcher, *clock.Fake, *signing.Key) {
	ctx := context.Background()
	clk := clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))
	secret := []byte("an example secret of 32 bytes or more")

	reg := memstore.NewRegistry()
	by := registry.Actor{Who: "example", At: clk.Now()}
	for _, it := range []registry.Item{
		{Route: &registry.Route{Target: "mailer", Command: "send", QueueARN: "arn:snavio:sqs:local:000000000000:mailer",
			DLQARN: "arn:snavio:sqs:local:000000000000:mailer-dlq", Profile: registry.ProfileModerate, DedupeMode: dedupe}},
		{ACL: &registry.ACL{Source: "acme/billing", Target: "mailer", Command: "send", Allow: true,
			Profile: registry.ProfileModerate}},
		{Key: &registry.ServiceKey{Source: "acme/billing", Versions: []registry.KeyVersion{
			{ID: "hmac-v1", Secret: secret, ActivatedAt: clk.Now().Add(-time.Hour)}}}},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			panic(err)
		}
	}

	a, err := dispatch.Assemble(ctx, dispatch.Config{
		Registry:  reg,
		FlowStore: memstore.NewFlow(),
		Sender:    printQueue{},
		Clock:     clk,
		Flow:      flow.Config{Instance: "example-1"},
	})
	if err != nil {
		panic(err)
	}
	key, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		panic(err)
	}
	return a.Dispatcher, clk, key
}

// signedCommand is what acme/billing's producer does: it builds the
// envelope of a mailer/send command, signs it with key and encodes it as
// the bus event's detail.
func signedCommand(key *signing.Key, id string, at time.Time, payload string) []byte {
	env := envelope.New(id, at, "mailer", "send", []byte(payload))
	if err := key.SignEnvelope(&env, "acme/billing"); err != nil {
		panic(err)
	}
	detail, err := env.AppendJSON(nil)
	if err != nil {
		panic(err)
	}
	return detail
}

// A producer signs a command; the dispatcher checks it and delivers it to
// its route's queue. Fast decides from memory; a command it escalates
// goes to Slow, after a durable hand-off in a real host.
func Example() {
	ctx := context.Background()
	d, clk, key := example("")

	detail := signedCommand(key, "0f8fad5b-d9cb-469f-a165-70867728950e", clk.Now(), `{"to":"ann@example.com"}`)

	res, esc := d.Fast(ctx, "acme/billing", detail)
	if esc != nil {
		var err error
		if res, err = d.Slow(ctx, esc); err != nil {
			panic(err) // undecided: retry the hand-off later
		}
	}
	fmt.Println("outcome:", res.Outcome, res.Path)
	// Output:
	// queue:   arn:snavio:sqs:local:000000000000:mailer
	// attrs:   0f8fad5b-d9cb-469f-a165-70867728950e acme/billing mailer send
	// body:    {"metadata":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","timestamp":"2026-11-25T12:00:00.000Z","type":"snavio.command-sent","hmac":"a022dbab20970bc953c0dea2c55f4358cc986e9c6258db0447abb61e6221e3a7","version_id":"hmac-v1"},"command":{"source":"acme/billing","target":"mailer","name":"send","payload":{"to":"ann@example.com"}}}
	// outcome: delivered fast
}
