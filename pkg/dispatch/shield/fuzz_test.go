package shield

import (
	"bytes"
	stdjson "encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// resignAndCheck re-signs detail in place if it parses (swapping in the
// correct HMAC for the bus source and version, keeping every other byte),
// sets the clock to its timestamp and runs the shield.
func resignAndCheck(t *testing.T, fx *fixture, detail []byte, busSource string) (Accepted, error) {
	keyFor := map[string]map[string]byte{src: {"hmac-v1": 1, "hmac-v2": 2}, "tenant-b/other": {"hmac-v1": 9}}
	if env, _, err := envelope.NewParser(envelope.Limits{}).Parse(detail, nil); err == nil {
		if b, ok := keyFor[busSource][env.Metadata.VersionID]; ok {
			k := key(t, env.Metadata.VersionID, b)
			m := signing.FromEnvelope(&env, busSource)
			sig, err := k.Sign(&m)
			if err != nil {
				t.Fatalf("cannot sign what the parser accepted: %v", err)
			}
			detail = bytes.ReplaceAll(detail, []byte(env.Metadata.HMAC), []byte(sig))
		}
		fx.clock.Set(env.SentAt)
	}
	return fx.sh.Check(busSource, detail)
}

// TestFuzzHarnessReachesAcceptance makes sure FuzzShield's harness does
// let valid inputs through, so its acceptance properties are exercised.
func TestFuzzHarnessReachesAcceptance(t *testing.T) {
	for _, name := range []string{"valid", "legacy_key", "other_source", "noncanonical_payload", "replay"} {
		b, err := os.ReadFile("testdata/fuzz/FuzzShield/" + name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		detail, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[1], "[]byte("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		source, err := strconv.Unquote(strings.TrimSuffix(strings.TrimPrefix(lines[2], "string("), ")"))
		if err != nil {
			t.Fatal(err)
		}
		fx := newFixture(t, Config{})
		if acc, err := resignAndCheck(t, fx, []byte(detail), source); err != nil || acc.Envelope.Command.Source != source {
			t.Errorf("seed %s: %v", name, err)
		}
	}
}

// FuzzShield drives the whole shield. Whenever the fuzzer's detail parses,
// the harness re-signs it in place (it swaps in the correct HMAC for the bus
// source and key version, keeping every other byte) and sets the clock to
// its timestamp, so the fuzzer's structure reaches the HMAC and acceptance.
// Properties:
//   - every rejection has a known reason code and emits exactly one
//     snavio.command.invalid with that code;
//   - an accepted command's delivered form carries command.source equal to
//     the bus source, read by encoding/json v1 (which folds case and takes
//     the last duplicate) and by v2, and no other member of command folds
//     to "source".
//
// Seeds are in testdata/fuzz/FuzzShield.
func FuzzShield(f *testing.F) {
	f.Add([]byte(`{}`), src)
	f.Fuzz(func(t *testing.T, detail []byte, busSource string) {
		fx := newFixture(t, Config{NoticeInterval: -1, SampleRate: 1})
		acc, err := resignAndCheck(t, fx, detail, busSource)
		events := fx.sink.Events()
		if err != nil {
			code := reason.Of(err)
			if !reason.Known(code) {
				t.Fatalf("rejection without a known code: %v", err)
			}
			if len(events) != 1 {
				t.Fatalf("%d events for one rejection", len(events))
			}
			inv, ok := events[0].(telemetry.Invalid)
			if !ok || inv.Reason != code {
				t.Fatalf("event %#v for rejection %v", events[0], err)
			}
			if acc.Envelope.Command.Payload != nil || acc.Envelope.Metadata.ID != "" {
				t.Fatalf("partial result on rejection")
			}
			return
		}
		for _, e := range events {
			if e.EventName() == telemetry.NameInvalid {
				t.Fatal("invalid event for an accepted command")
			}
		}
		if acc.Envelope.Command.Source != busSource {
			t.Fatalf("accepted with source %q from bus source %q", acc.Envelope.Command.Source, busSource)
		}
		// The parser differential of issue 3: read the producer's own
		// bytes as encoding/json v1 does (case-folded names, last
		// duplicate wins, merged repeated objects). Nothing the shield
		// accepts may carry a producer-set source for v1, or decode to
		// other identifying fields than the shield saw.
		var sent struct {
			Metadata struct {
				ID string `json:"id"`
			} `json:"metadata"`
			Command struct {
				Source string `json:"source"`
				Target string `json:"target"`
				Name   string `json:"name"`
			} `json:"command"`
		}
		if err := stdjson.Unmarshal(detail, &sent); err != nil {
			t.Fatalf("shield accepted what encoding/json v1 rejects (%v): %q", err, detail)
		}
		if sent.Command.Source != "" {
			t.Fatalf("shield accepted a producer-set command.source %q (as v1 reads it): %q", sent.Command.Source, detail)
		}
		if sent.Metadata.ID != acc.Envelope.Metadata.ID || sent.Command.Target != acc.Envelope.Command.Target || sent.Command.Name != acc.Envelope.Command.Name {
			t.Fatalf("v1 reads id/target/name %q/%q/%q, the shield %q/%q/%q: %q", sent.Metadata.ID, sent.Command.Target, sent.Command.Name,
				acc.Envelope.Metadata.ID, acc.Envelope.Command.Target, acc.Envelope.Command.Name, detail)
		}
		out, err := acc.Envelope.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		var v1 struct {
			Command struct {
				Source string `json:"source"`
			} `json:"command"`
		}
		if err := stdjson.Unmarshal(out, &v1); err != nil || v1.Command.Source != busSource {
			t.Fatalf("v1 reads delivered command.source %q (%v), bus source %q: %s", v1.Command.Source, err, busSource, out)
		}
		var v2 struct {
			Command map[string]jsontext.Value `json:"command"`
		}
		if err := json.Unmarshal(out, &v2); err != nil {
			t.Fatalf("delivered form is not strict JSON: %v: %s", err, out)
		}
		for name := range v2.Command {
			if strings.EqualFold(name, "source") && name != "source" {
				t.Fatalf("delivered command has a second source-like member %q: %s", name, out)
			}
		}
		var got string
		if err := json.Unmarshal(v2.Command["source"], &got); err != nil || got != busSource {
			t.Fatalf("v2 reads delivered command.source %q, bus source %q", got, busSource)
		}
	})
}
