package send

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzJudge: any telemetry record decides only for its own command id,
// never panics, and a decided outcome maps to an exit code.
func FuzzJudge(f *testing.F) {
	f.Add([]byte(`{"event":"snavio.command.delivered","command_id":"` + id + `","source":"a/b","target":"t","command_name":"c","timestamp":"t","path":"fast","dispatch_latency_ms":1}`))
	f.Add([]byte(`{"event":"snavio.command.failed","command_id":"` + id + `","reason":"rate-limit-exceeded","retry_after_ms":5,"throttle_until":"2026-11-21T12:00:00Z"}`))
	f.Add([]byte(`{"event":"snavio.command.invalid","command_id":"` + id + `","reason":"bad_signature"}`))
	f.Add([]byte(`{"event":"nope","command_id":"` + id + `"}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, raw []byte) {
		o, decided, err := judge(json.RawMessage(raw), id, nil)
		if err != nil || !decided {
			return
		}
		var head struct {
			CommandID string `json:"command_id"`
		}
		if json.Unmarshal(raw, &head) != nil || head.CommandID != id {
			t.Fatalf("decided on a record of another command: %s", raw)
		}
		if o.Outcome == OutcomeDelivered {
			if OutcomeError(id, o) != nil {
				t.Fatal("delivered is an error")
			}
		} else if OutcomeError(id, o) == nil {
			t.Fatalf("outcome %q is not an error", o.Outcome)
		}
	})
}

// FuzzKeyFromFile: any --secret-file content is refused with an error or
// yields a key of the right source; never a panic.
func FuzzKeyFromFile(f *testing.F) {
	f.Add([]byte(`{"source":"acme/billing","version_id":"hmac-v1","secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="}`))
	f.Add([]byte(`{"tenant":"acme","services":[{"source":"acme/billing","current":{"version_id":"hmac-v1","secret":"MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=","activated_at":"2026-11-20T00:00:00Z"}}]}`))
	f.Add([]byte(`{"services":null}`))
	f.Add([]byte(`{}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, b []byte) {
		p := filepath.Join(dir, "k.json")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		k, err := KeyFromFile(p, "acme/billing", "", time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC))
		if err == nil && k == nil {
			t.Fatal("no key and no error")
		}
	})
}
