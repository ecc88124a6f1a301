package dispatch_test

import (
	"context"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch"
)

// FuzzUnmarshalEscalation: the hand-off record between the stages is read
// back from a durable queue, so a corrupt record must be refused, never
// panic, and anything accepted must marshal back to an equivalent record.
func FuzzUnmarshalEscalation(f *testing.F) {
	fx := newFixture(f, false)
	fx.register(f, "mailer", "notify")
	_, esc := fx.d.Fast(context.Background(), source, fx.message(f, uuidN(9), "mailer", "notify", `{"a":[1,2,{"b":null}]}`))
	good, err := esc.Marshal()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"envelope":{"metadata":{"id":"x"},"command":{"source":"a/b","target":"t","name":"n","payload":1}},"reason":"r"}`))
	f.Add([]byte(`{"envelope":null}`))
	f.Add(good[:len(good)/2])
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := dispatch.UnmarshalEscalation(b)
		if err != nil {
			return
		}
		again, err := e.Marshal()
		if err != nil {
			t.Fatalf("accepted escalation does not marshal: %v", err)
		}
		e2, err := dispatch.UnmarshalEscalation(again)
		if err != nil {
			t.Fatalf("re-marshalled escalation is refused: %v", err)
		}
		if e2.Envelope.Metadata.ID != e.Envelope.Metadata.ID || e2.Reason != e.Reason || string(e2.Envelope.Command.Payload) != string(e.Envelope.Command.Payload) {
			t.Fatalf("round trip changed the escalation")
		}
	})
}
