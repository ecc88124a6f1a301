package signing

import (
	"bytes"
	"encoding/hex"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

type vector struct {
	Description      string `json:"description"`
	SecretHex        string `json:"secret_hex"`
	VersionID        string `json:"version_id"`
	ID               string `json:"id"`
	Timestamp        string `json:"timestamp"`
	Source           string `json:"source"`
	Target           string `json:"target"`
	Name             string `json:"name"`
	Replay           bool   `json:"replay"`
	ReplayID         string `json:"replay_id"`
	ReplayReason     string `json:"replay_reason"`
	Payload          string `json:"payload"`
	CanonicalPayload string `json:"canonical_payload"`
	ContentHex       string `json:"content_hex"`
	Signature        string `json:"signature"`
}

func loadVectors(t *testing.T) []vector {
	t.Helper()
	b, err := os.ReadFile("testdata/vectors.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Scheme  string   `json:"scheme"`
		Note    string   `json:"note"`
		Vectors []vector `json:"vectors"`
	}
	if err := json.Unmarshal(b, &doc, json.RejectUnknownMembers(true)); err != nil {
		t.Fatal(err)
	}
	if doc.Scheme != Scheme || len(doc.Vectors) < 5 {
		t.Fatalf("vectors file: scheme %q, %d vectors", doc.Scheme, len(doc.Vectors))
	}
	return doc.Vectors
}

// TestVectors checks this implementation against vectors produced by an
// independent one (testdata/genvectors.py): the exact signed bytes and the
// signature, from the payload as sent.
func TestVectors(t *testing.T) {
	sigs := map[string]string{}
	for _, v := range loadVectors(t) {
		t.Run(v.Description, func(t *testing.T) {
			secret, _ := hex.DecodeString(v.SecretHex)
			k, err := NewKey(v.VersionID, secret)
			if err != nil {
				t.Fatal(err)
			}
			m := Message{ID: v.ID, Timestamp: v.Timestamp, Source: v.Source, Target: v.Target, Name: v.Name,
				Replay: v.Replay, ReplayID: v.ReplayID, ReplayReason: v.ReplayReason, Payload: []byte(v.Payload)}
			content, err := AppendContent(nil, v.VersionID, &m)
			if err != nil {
				t.Fatal(err)
			}
			if got := hex.EncodeToString(content); got != v.ContentHex {
				t.Fatalf("content\n got %s\nwant %s", got, v.ContentHex)
			}
			if !bytes.HasSuffix(content, []byte(v.CanonicalPayload)) {
				t.Fatalf("content does not end with the canonical payload %s", v.CanonicalPayload)
			}
			sig, err := k.Sign(&m)
			if err != nil || sig != v.Signature {
				t.Fatalf("Sign = %s, %v; want %s", sig, err, v.Signature)
			}
			if err := k.Verify(&m, v.Signature); err != nil {
				t.Fatalf("Verify: %v", err)
			}
			sigs[v.Description] = sig
		})
	}
	if sigs["replayed by the platform replayer"] == "" || sigs["replayed by the platform replayer"] == sigs["second key version"] {
		t.Fatal("the replay vector must exist and differ from the live one")
	}
	if sigs["canonical object payload"] == "" ||
		sigs["canonical object payload"] != sigs["same payload re-serialized (whitespace, member order, escapes, number spelling): same signature"] {
		t.Fatal("a re-serialized payload must keep its signature")
	}
}

var testSecret = bytes.Repeat([]byte{0x5a}, 32)

func testMessage() Message {
	return Message{
		ID: "0f8fad5b-d9cb-469f-a165-70867728950e", Timestamp: "2025-04-07T12:58:00.000Z",
		Source: "tenant-a/billing", Target: "discord-bot", Name: "notify-user",
		Payload: []byte(`{"amount":1250,"user":"u-42"}`),
	}
}

func TestVerifyRejectsEveryChange(t *testing.T) {
	k, _ := NewKey("hmac-v1", testSecret)
	m := testMessage()
	sig, err := k.Sign(&m)
	if err != nil {
		t.Fatal(err)
	}
	flip := func(s string) string { b := []byte(s); b[len(b)-1] ^= 1; return string(b) }
	for name, mut := range map[string]func(*Message){
		"id":        func(m *Message) { m.ID = flip(m.ID) },
		"timestamp": func(m *Message) { m.Timestamp = flip(m.Timestamp) },
		"source":    func(m *Message) { m.Source = "tenant-b/billing" },
		"target":    func(m *Message) { m.Target = flip(m.Target) },
		"name":      func(m *Message) { m.Name = flip(m.Name) },
		"replay":    func(m *Message) { m.Replay, m.ReplayID, m.ReplayReason = true, "r1", "x" },
		"payload":   func(m *Message) { m.Payload = []byte(`{"amount":1251,"user":"u-42"}`) },
		// Moving bytes between fields changes the framing, not just the concatenation.
		"boundary": func(m *Message) { m.Target, m.Name = m.Target+"n", m.Name[1:] },
	} {
		mm := testMessage()
		mut(&mm)
		if err := k.Verify(&mm, sig); reason.Of(err) != reason.BadSignature {
			t.Errorf("%s changed: Verify = %v, want bad_signature", name, err)
		}
	}
	if err := k.Verify(&m, flip(sig)); reason.Of(err) != reason.BadSignature {
		t.Errorf("flipped signature: %v", err)
	}
	if err := k.Verify(&m, strings.ToUpper(sig)); reason.Of(err) != reason.InvalidHMAC {
		t.Errorf("upper-case signature: %v", err)
	}
	other, _ := NewKey("hmac-v2", testSecret)
	if err := other.Verify(&m, sig); reason.Of(err) != reason.BadSignature {
		t.Errorf("same secret under another version id must not verify: %v", err)
	}
	bad := testMessage()
	bad.Payload = []byte(`{"a":`)
	if _, err := k.Sign(&bad); reason.Of(err) != reason.InvalidPayload {
		t.Errorf("Sign of invalid payload: %v", err)
	}
}

func TestNewKey(t *testing.T) {
	if _, err := NewKey("hmac-v1", testSecret[:31]); err == nil || !strings.Contains(err.Error(), "at least 32") {
		t.Errorf("short secret: %v", err)
	}
	if _, err := NewKey("v1", testSecret); err == nil {
		t.Error("bad version id accepted")
	}
	secret := bytes.Clone(testSecret)
	k, _ := NewKey("hmac-v1", secret)
	m := testMessage()
	before, _ := k.Sign(&m)
	secret[0] ^= 0xff
	if after, _ := k.Sign(&m); after != before {
		t.Error("NewKey keeps a reference to the caller's secret")
	}
}

func TestEnvelopeRoundTrip(t *testing.T) {
	k, _ := NewKey("hmac-v7", testSecret)
	env := envelope.New("0f8fad5b-d9cb-469f-a165-70867728950e", time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC),
		"discord-bot", "notify-user", []byte(`{"b": 2, "a": 1}`))
	if err := k.SignEnvelope(&env, "tenant-a/billing"); err != nil {
		t.Fatal(err)
	}
	if env.Metadata.VersionID != "hmac-v7" || !envelope.ValidHMAC(env.Metadata.HMAC) || env.Metadata.Timestamp != "2025-04-07T12:58:00.000Z" {
		t.Fatalf("metadata after signing: %+v", env.Metadata)
	}
	wire, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	parsed, _, err := envelope.NewParser(envelope.Limits{}).Parse(wire, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := k.VerifyEnvelope(&parsed, "tenant-a/billing"); err != nil {
		t.Fatalf("verify after the wire: %v", err)
	}
	if err := k.VerifyEnvelope(&parsed, "tenant-b/billing"); reason.Of(err) != reason.BadSignature {
		t.Fatalf("verify as another sender: %v", err)
	}
}

func TestVerifyAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	k, _ := NewKey("hmac-v1", testSecret)
	m := testMessage()
	sig, _ := k.Sign(&m)
	if n := testing.AllocsPerRun(100, func() { _ = k.Verify(&m, sig) }); n != 0 {
		t.Fatalf("Verify allocates %v times", n)
	}
}

// FuzzVerify: Verify never panics, accepts exactly the signature Sign
// produces, and rejects everything else with a known reason code. Seeds are
// in testdata/fuzz/FuzzVerify.
func FuzzVerify(f *testing.F) {
	m := testMessage()
	k, _ := NewKey("hmac-v1", testSecret)
	sig, _ := k.Sign(&m)
	f.Add(m.ID, m.Timestamp, m.Source, m.Target, m.Name, false, "", "", m.Payload, sig)
	f.Fuzz(func(t *testing.T, id, ts, source, target, name string, replay bool, replayID, replayReason string, payload []byte, sig string) {
		m := Message{ID: id, Timestamp: ts, Source: source, Target: target, Name: name,
			Replay: replay, ReplayID: replayID, ReplayReason: replayReason, Payload: payload}
		err := k.Verify(&m, sig)
		want, serr := k.Sign(&m)
		switch {
		case err == nil && (serr != nil || sig != want):
			t.Fatalf("accepted %q, Sign gives %q, %v", sig, want, serr)
		case err != nil && !reason.Known(reason.Of(err)):
			t.Fatalf("rejection without a known code: %v", err)
		case err != nil && serr == nil && sig == want:
			t.Fatalf("rejected Sign's own signature: %v", err)
		}
	})
}

func TestPayloadCanonicalClaim(t *testing.T) {
	k, _ := NewKey("hmac-v1", testSecret)
	m := testMessage()
	sig, _ := k.Sign(&m)
	claimed := m
	claimed.PayloadCanonical = true
	if err := k.Verify(&claimed, sig); err != nil {
		t.Fatalf("true claim: %v", err)
	}
	// A non-canonical payload wrongly claimed canonical is signed as given:
	// it does not verify against the producer's signature.
	wrong := m
	wrong.Payload = []byte(`{"user":"u-42","amount":1250}`)
	wrong.PayloadCanonical = true
	if err := k.Verify(&wrong, sig); reason.Of(err) != reason.BadSignature {
		t.Fatalf("false claim: %v", err)
	}
}
