package lambda

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/aws/aws-lambda-go/events"
)

// FuzzOutboxStreamEvent: whatever a stream batch holds, the drain does
// not panic, publishes only event records with a tenant and a sequence
// number, and hands back only sequence numbers of the batch.
func FuzzOutboxStreamEvent(f *testing.F) {
	good, _ := json.Marshal(events.DynamoDBEvent{Records: []events.DynamoDBEventRecord{record("acme", 1, "100"), record("globex", 2, "101")}})
	f.Add(good)
	f.Add([]byte(`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":"acme"},"sk":{"S":"seq"},"last":{"N":"3"}},"SequenceNumber":"1"}}]}`))
	f.Add([]byte(`{"Records":[{"eventName":"REMOVE","userIdentity":{"type":"Service","principalId":"dynamodb.amazonaws.com"},"dynamodb":{"SequenceNumber":"2"}}]}`))
	f.Add([]byte(`{"Records":[{"eventName":"INSERT","dynamodb":{"NewImage":{"pk":{"S":""},"sk":{"S":"x"},"event":{"L":[]}},"SequenceNumber":"3"}}]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var ev events.DynamoDBEvent
		if json.Unmarshal(b, &ev) != nil {
			return
		}
		pub := &flakyPublisher{failing: map[string]int{"globex": 9}}
		resp, err := NewOutboxDrain(pub, noAppend{}, OutboxConfig{Sleep: noWait}).Handle(context.Background(), ev)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range pub.got {
			if m.Seq == 0 || m.Tenant == "" || m.Name == "" {
				t.Fatalf("published %+v", m)
			}
		}
		seqs := map[string]bool{}
		for _, r := range ev.Records {
			seqs[r.Change.SequenceNumber] = true
		}
		for _, f := range resp.BatchItemFailures {
			if !seqs[f.ItemIdentifier] {
				t.Fatalf("handed back %q, not a record of the batch", f.ItemIdentifier)
			}
		}
	})
}
