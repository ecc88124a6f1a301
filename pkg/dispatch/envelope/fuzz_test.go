package envelope

import (
	"bytes"
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/jcs"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// FuzzParse: the parser never panics, every rejection carries a known
// reason code and no partial value, and every accepted envelope is
// well-formed, canonical and survives a round trip unchanged. Seeds are in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good()))
	p := NewParser(Limits{MaxBytes: 4096, MaxDepth: 8})
	f.Fuzz(func(t *testing.T, in []byte) {
		var checked time.Time
		env, seen, err := p.Parse(in, func(s time.Time) error { checked = s; return nil })
		if err != nil {
			if c := reason.Of(err); !reason.Known(c) {
				t.Fatalf("rejection without a known code: %v", err)
			}
			if env.Metadata != (Metadata{}) || env.Command.Payload != nil || !env.SentAt.IsZero() {
				t.Fatalf("partial envelope on error: %+v", env)
			}
			if seen.ID != "" && !ValidID(seen.ID) || seen.Target != "" && !ValidTarget(seen.Target) ||
				seen.Name != "" && !ValidName(seen.Name) {
				t.Fatalf("malformed Seen: %+v", seen)
			}
			if seen.Timestamp != "" {
				if _, ok := ParseTimestamp(seen.Timestamp); !ok {
					t.Fatalf("malformed Seen timestamp: %+v", seen)
				}
			}
			return
		}
		if !ValidID(env.Metadata.ID) || !ValidHMAC(env.Metadata.HMAC) || !ValidVersionID(env.Metadata.VersionID) ||
			!ValidTarget(env.Command.Target) || !ValidName(env.Command.Name) || env.Metadata.Type != EventType ||
			env.Command.Source != "" {
			t.Fatalf("accepted a malformed envelope: %+v", env)
		}
		// Parser differential: encoding/json v1 (case-folding, last
		// duplicate wins) must read no command.source and the same
		// identifying fields from anything accepted.
		var v1 v1Envelope
		if err := stdjson.Unmarshal(in, &v1); err != nil {
			t.Fatalf("accepted what encoding/json v1 rejects: %v", err)
		}
		if v1.Command.Source != "" || v1.Metadata.ID != env.Metadata.ID || v1.Command.Target != env.Command.Target {
			t.Fatalf("v1 reads %+v from an accepted envelope %+v", v1, env)
		}
		if !checked.Equal(env.SentAt) {
			t.Fatalf("check saw %v, envelope has %v", checked, env.SentAt)
		}
		if c, err := jcs.Append(nil, env.Command.Payload, jcs.Limits{}); err != nil || !bytes.Equal(c, env.Command.Payload) {
			t.Fatalf("payload not canonical: %s", env.Command.Payload)
		}
		if jcs.Depth(env.Command.Payload) > 8 {
			t.Fatalf("payload deeper than the limit: %s", env.Command.Payload)
		}
		out, err := env.AppendJSON(nil)
		if err != nil {
			t.Fatal(err)
		}
		env2, _, err := NewParser(Limits{}).Parse(out, nil)
		if err != nil || env2.Metadata != env.Metadata || env2.Command.Target != env.Command.Target ||
			env2.Command.Name != env.Command.Name || !bytes.Equal(env2.Command.Payload, env.Command.Payload) {
			t.Fatalf("round trip changed the envelope: %s: %+v %v", out, env2, err)
		}
	})
}
