package replay

import (
	"bytes"
	"testing"
)

// FuzzDecodeCapturedEvent: whatever the capture queue holds, the decoder
// either refuses it or returns an event with its id, detail-type, source,
// a UTC time and a JSON object detail.
func FuzzDecodeCapturedEvent(f *testing.F) {
	f.Add([]byte(`{"version":"0","id":"ev-1","detail-type":"snavio.command-sent","source":"demo/app","account":"000000000000","time":"2026-11-26T01:00:00Z","region":"us-east-1","resources":[],"detail":{"metadata":{"id":"x"}},"replay-name":"snavio-p-replay-1"}`))
	f.Add([]byte(`{"id":"e","detail-type":"d","source":"s","time":"2026-11-26T01:00:00+02:00","detail":{}}`))
	f.Add([]byte(`{"id":"e","detail-type":"d","source":"s","time":"yesterday","detail":{}}`))
	f.Add([]byte(`{"id":"e","detail-type":"d","source":"s","time":"2026-11-26T01:00:00Z","detail":"{}"}`))
	f.Add([]byte(`{"id":"e","id":"f"}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, b []byte) {
		ev, err := DecodeCapturedEvent(b)
		if err != nil {
			return
		}
		if ev.ID == "" || ev.DetailType == "" || ev.Source == "" || ev.Time.Location().String() != "UTC" {
			t.Fatalf("accepted %q as %+v", b, ev)
		}
		if d := bytes.TrimSpace(ev.Detail); len(d) < 2 || d[0] != '{' || d[len(d)-1] != '}' {
			t.Fatalf("detail %q is not an object", ev.Detail)
		}
	})
}
