package devserver

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// atLimit returns a signed detail whose PutEvents entry (source,
// detail-type and detail, as EventBridge counts it) is exactly 256 KiB.
func atLimit(t *testing.T, k *signing.Key, id, name string) []byte {
	t.Helper()
	want := server.DefaultMaxEntriesBytes - len(DemoSource) - len(envelope.EventType)
	pad := func(n int) []byte {
		return signed(t, k, id, DemoTarget, name, `{"pad":"`+strings.Repeat("a", n)+`"}`)
	}
	d := pad(0)
	d = pad(want - len(d))
	if len(d) != want {
		t.Fatalf("detail of %d bytes, want %d", len(d), want)
	}
	return d
}

// TestEntryAtTheLimitIsDelivered: an entry of exactly 262,144 bytes, the
// documented PutEvents limit, passes the ingress and the shield, so it must
// be delivered: on the fast path (create) and through the hand-off to the
// slow stage (charge, strict). Both used to be refused with a retryable
// InternalException: the hand-off and the delivered message add bytes.
func TestEntryAtTheLimitIsDelivered(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	for i, name := range []string{DemoCommand, DemoStrictCommand} {
		id := "0f8fad5b-d9cb-469f-a165-00000000000" + string(rune('1'+i))
		out := putEvent(t, dir, s.Info().URL, DemoSource, atLimit(t, k, id, name))
		if out["FailedEntryCount"].(float64) != 0 {
			t.Fatalf("%s: refused: %v", name, out["Entries"])
		}
		var size int
		waitFor(t, name+"'s delivery", func() bool {
			msgs, err := s.store.Receive(context.Background(), DemoQueue, 10, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			for _, m := range msgs {
				if m.Attributes[provenance.AttrCommandID] == id {
					size = len(m.Body)
					for k, v := range m.Attributes {
						size += len(k) + len(v)
					}
				}
			}
			return size > 0
		})
		if size <= server.DefaultMaxEntriesBytes {
			t.Fatalf("%s: the delivered message is %d bytes; it should weigh more than the entry", name, size)
		}
	}
}

// TestCanonicalGrowthIsRefusedPermanently: 228 KB of 1e400 numbers fit the
// limit as sent but canonicalize (RFC 8785) to about 1 MB, which can never
// be delivered: the entry is refused at once with a permanent per-entry
// error, and the tenant gets snavio.command.invalid, reason too_large.
func TestCanonicalGrowthIsRefusedPermanently(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	payload := "[" + strings.Repeat("1e400,", 38_000) + "1e400]"
	detail := signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000009", DemoTarget, DemoCommand, payload)
	if len(detail) > envelope.DefaultMaxBytes {
		t.Fatalf("the detail as sent is %d bytes: it must fit the limit", len(detail))
	}
	out := putEvent(t, dir, s.Info().URL, DemoSource, detail)
	e := out["Entries"].([]any)[0].(map[string]any)
	if out["FailedEntryCount"].(float64) != 1 || e["ErrorCode"] != server.EntryErrInvalidArgument || !strings.Contains(e["ErrorMessage"].(string), "do not retry") {
		t.Fatalf("entry result = %v, want a permanent %s", e, server.EntryErrInvalidArgument)
	}
	recs, err := s.store.ReadTelemetry(context.Background(), "demo", 0, 100)
	if err != nil {
		t.Fatal(err)
	}
	var invalid []string
	for _, r := range recs {
		if r.Name == telemetry.NameInvalid {
			invalid = append(invalid, string(r.Event))
		}
	}
	if len(invalid) != 1 || !strings.Contains(invalid[0], `"reason":"too_large"`) {
		t.Fatalf("invalid events = %v, want one with reason too_large", invalid)
	}
	if msgs, _ := s.store.Receive(context.Background(), DemoQueue, 10, time.Minute); len(msgs) != 0 {
		t.Fatalf("%d messages delivered", len(msgs))
	}
}
