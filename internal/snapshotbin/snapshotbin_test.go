package snapshotbin

import (
	"bytes"
	"context"
	"crypto/ed25519"
	stdjson "encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testSigner(t testing.TB, id string, seed byte) *snapshot.Ed25519Signer {
	t.Helper()
	s, err := snapshot.NewEd25519Signer(id, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// fullDoc is a full document over d, generated at t0.
func fullDoc(d registry.Data) *snapshot.Document {
	return &snapshot.Document{Format: snapshot.Format, Kind: snapshot.KindFull, VersionID: snapshot.VersionIDAt(t0), GeneratedAt: t0, Data: d}
}

// everyField is a registry using every field of every record kind.
func everyField() registry.Data {
	d := dispatchtest.BenchRegistry(3, 2, t0)
	d.Routes[0].DedupeMode = registry.DedupeStrict
	d.Routes[0].ExpectedDrainSeconds = 90
	d.Routes[0].RateLimit = registry.RateLimit{Max: 50, IntervalSeconds: 10, Burst: 5, CooldownSeconds: 3}
	d.Routes[0].Fairness = registry.Fairness{DominantShare: 0.75, CompetingShare: 0.2, CompetingSources: 4, WindowSeconds: 60, BanSeconds: 30}
	d.Routes[1].Fairness.Disabled = true
	d.Routes[0].PrefetchLeases = 7
	d.Routes[0].Metadata = map[string]string{"owner": "team-a", "tier": "gold", "ünïcode": "ok"}
	d.Routes[2].ExpiresAt = t0.Add(time.Hour).Unix()
	d.ACLs[0].Allow = false
	d.ACLs[0].RevokedAt = t0.Add(-time.Minute)
	d.ACLs[1].FreshTTLSeconds, d.ACLs[1].StaleTTLSeconds = 3, 9
	d.ACLs[2].ExpiresAt = t0.Add(time.Hour).Unix()
	d.Keys[0].Versions[1].NotAfter = t0.Add(48 * time.Hour)
	d.Keys[1].ExpiresAt = t0.Add(time.Hour).Unix()
	d.Bans = []registry.Ban{{Source: "tenant-0000/service-0", Kind: registry.BanColdOnly, Reason: "abuse", ExpiresAt: t0.Add(time.Hour).Unix(), Version: 2}}
	d.Quotas = []registry.Quota{{Source: "tenant-0001/service-1", Target: "target-00000", Command: "command-0000001",
		Limit: registry.RateLimit{Max: 10, IntervalSeconds: 60}, Version: 1}}
	return d
}

func opts(s *snapshot.Ed25519Signer) snapshot.ParseOptions {
	return snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{s.KeyID(): s.PublicKey()}, Now: t0, MaxAge: time.Minute}
}

// TestRoundTrip: the compact document decodes to the JSON document's
// data, field for field (compared as their JSON).
func TestRoundTrip(t *testing.T) {
	s := testSigner(t, "gen", 1)
	doc := fullDoc(everyField())
	b, err := Seal(context.Background(), s, doc)
	if err != nil {
		t.Fatal(err)
	}
	got, err := Parse(b, opts(s))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(doc.Data, json.Deterministic(true))
	have, _ := json.Marshal(got.Data, json.Deterministic(true))
	if !bytes.Equal(want, have) {
		t.Errorf("round trip differs:\n got %s\nwant %s", have, want)
	}
	if got.VersionID != doc.VersionID || !got.GeneratedAt.Equal(doc.GeneratedAt) || got.Kind != snapshot.KindFull || got.Format != snapshot.Format {
		t.Errorf("metadata: %+v", got)
	}
	again, _ := Seal(context.Background(), s, doc)
	if !bytes.Equal(b, again) {
		t.Error("two encodings of one document differ; a republished version would conflict")
	}
}

// TestRefusals: every defect is a *snapshot.LoadError with its reason.
func TestRefusals(t *testing.T) {
	ctx := context.Background()
	s := testSigner(t, "gen", 1)
	good, err := Seal(ctx, s, fullDoc(everyField()))
	if err != nil {
		t.Fatal(err)
	}
	sealRaw := func(raw []byte) []byte {
		b, err := snapshot.Seal(ctx, s, raw)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	raw, _ := Encode(fullDoc(everyField()))
	bad := everyField()
	bad.Routes[0].QueueARN = "not an arn"
	invalid, _ := Seal(ctx, s, fullDoc(bad))
	old := fullDoc(everyField())
	old.GeneratedAt = t0.Add(-time.Hour)
	expired, _ := Seal(ctx, s, old)
	tampered := bytes.Clone(good)
	tampered[len(tampered)-10] ^= 1
	for _, tc := range []struct {
		name string
		b    []byte
		o    func(*snapshot.ParseOptions)
		want snapshot.Reason
	}{
		{"empty", nil, nil, snapshot.ReasonUnsigned},
		{"json document", []byte(`{"format":"x"}`), nil, snapshot.ReasonUnsigned},
		{"truncated", good[:len(good)-20], nil, snapshot.ReasonMalformed},
		{"tampered", tampered, nil, snapshot.ReasonBadSignature},
		{"other key", good, func(o *snapshot.ParseOptions) {
			o.Trusted = snapshot.TrustedKeys{"gen": testSigner(t, "gen", 2).PublicKey()}
		}, snapshot.ReasonBadSignature},
		{"unknown key", good, func(o *snapshot.ParseOptions) { o.Trusted = snapshot.TrustedKeys{"other": s.PublicKey()} }, snapshot.ReasonUnknownKey},
		{"too large", good, func(o *snapshot.ParseOptions) { o.MaxBytes = 100 }, snapshot.ReasonTooLarge},
		{"wrong kind asked", good, func(o *snapshot.ParseOptions) { o.Kind = snapshot.KindACL }, snapshot.ReasonWrongKind},
		{"signed garbage", sealRaw([]byte("garbage")), nil, snapshot.ReasonMalformed},
		{"signed, cut short", sealRaw(raw[:len(raw)-3]), nil, snapshot.ReasonMalformed},
		{"signed, trailing bytes", sealRaw(append(bytes.Clone(raw), 0)), nil, snapshot.ReasonMalformed},
		{"huge count", sealRaw(append([]byte(magic+"\x04full\x01v\x01\x02"), 0xff, 0xff, 0xff, 0xff, 0x0f)), nil, snapshot.ReasonMalformed},
		{"expired", expired, nil, snapshot.ReasonExpired},
		{"invalid registry", invalid, nil, snapshot.ReasonInvalid},
	} {
		o := opts(s)
		if tc.o != nil {
			tc.o(&o)
		}
		_, err := Parse(tc.b, o)
		if got := snapshot.ReasonOf(err); got != tc.want {
			t.Errorf("%s: reason %q (%v), want %q", tc.name, got, err, tc.want)
		}
	}
}

// TestEncodeRefuses: only full documents have a compact form, and only
// times the encoding holds.
func TestEncodeRefuses(t *testing.T) {
	doc := fullDoc(registry.Data{})
	doc.Kind = snapshot.KindACL
	if _, err := Encode(doc); err == nil {
		t.Error("an acl document was encoded")
	}
	d := everyField()
	d.Keys[0].Versions[0].NotAfter = time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	if _, err := Encode(fullDoc(d)); err == nil || !strings.Contains(err.Error(), "9999") {
		t.Errorf("a time in 9999: %v", err)
	}
}

// FuzzParse: no input panics the decoder or is accepted unsigned; a
// signed one decodes or is refused with a reason.
func FuzzParse(f *testing.F) {
	s := testSigner(f, "gen", 1)
	raw, err := Encode(fullDoc(everyField()))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw)
	f.Add(raw[:len(raw)/2])
	f.Add([]byte(magic))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, raw []byte) {
		b, err := snapshot.Seal(context.Background(), s, raw)
		if err != nil {
			t.Skip()
		}
		doc, err := Parse(b, opts(s))
		if err != nil {
			if snapshot.ReasonOf(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			return
		}
		if doc.Kind != snapshot.KindFull {
			t.Fatalf("accepted kind %q", doc.Kind)
		}
		if _, err := Parse(raw, opts(s)); err == nil {
			t.Fatal("an unsigned document was accepted")
		}
	})
}

// benchBodies are the sealed JSON and compact files of the benchmark
// registry (100k routes, 100k ACLs, 10k keysets).
func benchBodies(b *testing.B) (jsonBody, binBody []byte, s *snapshot.Ed25519Signer) {
	s = testSigner(b, "bench", 1)
	doc := fullDoc(dispatchtest.BenchRegistry(100_000, 10_000, t0))
	raw, err := json.Marshal(doc, json.Deterministic(true))
	if err != nil {
		b.Fatal(err)
	}
	if jsonBody, err = snapshot.Seal(context.Background(), s, raw); err != nil {
		b.Fatal(err)
	}
	if binBody, err = Seal(context.Background(), s, doc); err != nil {
		b.Fatal(err)
	}
	return jsonBody, binBody, s
}

// BenchmarkCompactParse verifies, decodes and validates the compact file
// of the benchmark registry (the caches' Seed is measured with the cold
// start, internal/lambda).
func BenchmarkCompactParse(b *testing.B) {
	_, body, s := benchBodies(b)
	o := opts(s)
	o.MaxBytes = 1 << 30
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse(body, o); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorCompactParse is encoding/json's Unmarshal of the JSON
// file of the same registry into any: the cold-start floor.
func BenchmarkFloorCompactParse(b *testing.B) {
	body, _, _ := benchBodies(b)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var v any
		if err := stdjson.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
