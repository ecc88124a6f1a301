package snapshotcmd

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func testSigner(t testing.TB, seed byte) *snapshot.Ed25519Signer {
	t.Helper()
	s, err := snapshot.NewEd25519Signer("local-1", ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// testDoc returns a full document with one of each record.
func testDoc(at time.Time) snapshot.Document {
	r := dispatchtest.RegistryRoute("billing", "charge")
	a := dispatchtest.RegistryACL("shop/web", "billing", "charge")
	k := registry.ServiceKey{Source: "shop/web", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: bytes.Repeat([]byte{9}, 32), ActivatedAt: t0.Add(-time.Hour)}}}
	return snapshot.Document{
		Format: snapshot.Format, Kind: snapshot.KindFull, VersionID: snapshot.VersionIDAt(at), GeneratedAt: at,
		TTLPolicy: snapshot.TTLPolicy{Routing: snapshot.TTL{FreshSeconds: 60, StaleSeconds: 180},
			Profiles: map[registry.Profile]snapshot.TTL{registry.ProfileCritical: {FreshSeconds: 2, StaleSeconds: 4}}},
		Data: registry.Data{Routes: []registry.Route{r}, ACLs: []registry.ACL{a}, Keys: []registry.ServiceKey{k}},
	}
}

func seal(t testing.TB, s *snapshot.Ed25519Signer, d snapshot.Document) []byte {
	t.Helper()
	raw, err := jsonv2.Marshal(&d, jsonv2.Deterministic(true))
	if err != nil {
		t.Fatal(err)
	}
	b, err := snapshot.Seal(context.Background(), s, raw)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDecodeAndVerify(t *testing.T) {
	sig := testSigner(t, 1)
	b := seal(t, sig, testDoc(t0))
	f, err := Decode(append(b, '\n'))
	if err != nil {
		t.Fatal(err)
	}
	if !f.Signed || f.KeyID != "local-1" || f.Algorithm != "Ed25519ph" || f.Doc.Kind != snapshot.KindFull || len(f.Doc.Routes) != 1 {
		t.Fatalf("decoded = %+v", f)
	}
	// The right key (named or not), a wrong key, a wrong key id.
	if v := Verify(f, Key{Key: sig.PublicKey()}); !v.Valid {
		t.Fatalf("verify without id = %+v", v)
	}
	if v := Verify(f, Key{ID: "local-1", Key: sig.PublicKey()}); !v.Valid {
		t.Fatalf("verify with id = %+v", v)
	}
	if v := Verify(f, Key{Key: testSigner(t, 2).PublicKey()}); v.Valid || v.Reason != "bad_signature" {
		t.Fatalf("verify with another key = %+v", v)
	}
	if v := Verify(f, Key{ID: "other", Key: sig.PublicKey()}); v.Valid || v.Reason != "unknown_key" {
		t.Fatalf("verify with another id = %+v", v)
	}
	// One flipped byte inside the document.
	tampered := bytes.Replace(b, []byte(`"billing"`), []byte(`"bllling"`), 1)
	ft, err := Decode(tampered)
	if err != nil {
		t.Fatal(err)
	}
	if v := Verify(ft, Key{Key: sig.PublicKey()}); v.Valid || v.Reason != "bad_signature" {
		t.Fatalf("tampered = %+v", v)
	}
	// A bare document decodes, and is unsigned.
	bare, _ := jsonv2.Marshal(testDoc(t0))
	fb, err := Decode(bare)
	if err != nil || fb.Signed {
		t.Fatalf("bare = %+v, %v", fb, err)
	}
	if v := Verify(fb, Key{Key: sig.PublicKey()}); v.Valid || v.Reason != "unsigned" {
		t.Fatalf("bare verify = %+v", v)
	}
}

func TestDecodeRefusesWithClearErrors(t *testing.T) {
	good := seal(t, testSigner(t, 1), testDoc(t0))
	for _, tc := range []struct {
		name, in, want string
	}{
		{"empty", "", "empty"},
		{"not json", "hello", "not valid JSON"},
		{"truncated", string(good[:len(good)/2]), "not valid JSON"},
		{"other json", `{"a":1}`, "not a snavio snapshot"},
		{"array", `[1]`, "not valid JSON"},
		{"version 2", `{"snavio_snapshot":2,"document":{}}`, "version 2"},
		{"no document", `{"snavio_snapshot":1}`, `no "document"`},
		{"wrong format", `{"format":"x/v9","kind":"full"}`, "document format"},
		{"wrong kind", `{"format":"` + snapshot.Format + `","kind":"routes"}`, `kind "routes"`},
		{"no version", `{"format":"` + snapshot.Format + `","kind":"full"}`, "no version_id"},
		{"bad doc", `{"snavio_snapshot":1,"document":{"format":5}}`, "does not decode"},
	} {
		if _, err := Decode([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: Decode = %v, want %q", tc.name, err, tc.want)
		}
	}
}

func TestParseKeyFormats(t *testing.T) {
	sig := testSigner(t, 1)
	pk, err := controlapi.NewPublicKey("local-1", sig.PublicKey())
	if err != nil {
		t.Fatal(err)
	}
	js, _ := json.Marshal(pk)
	for name, in := range map[string]string{
		"pem":      pk.PEM,
		"json":     string(js),
		"json pem": `{"key_id":"local-1","pem":` + strings.TrimSpace(mustJSON(pk.PEM)) + `}`,
		"base64":   pk.PublicKey + "\n",
	} {
		k, err := ParseKey([]byte(in))
		if err != nil || !bytes.Equal(k.Key, sig.PublicKey()) {
			t.Errorf("%s: ParseKey = %+v, %v", name, k, err)
		}
		if strings.HasPrefix(name, "json") && k.ID != "local-1" {
			t.Errorf("%s: id = %q", name, k.ID)
		}
	}
	priv := "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA\n-----END PRIVATE KEY-----\n"
	for _, tc := range []struct{ in, want string }{
		{"", "empty"},
		{"abc", "not a base64 Ed25519"},
		{"AAAA", "not a base64 Ed25519"},
		{priv, "want a PUBLIC KEY"},
		{"-----BEGIN PUBLIC KEY-----\n!!\n-----END PUBLIC KEY-----\n", "does not decode"},
		{`{"key_id":"x"}`, `neither "public_key" nor "pem"`},
		{`{"public_key":"` + pk.PublicKey + `","algorithm":"RSA"}`, "algorithm"},
		{`{`, "not valid JSON"},
	} {
		if _, err := ParseKey([]byte(tc.in)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ParseKey(%.30q) = %v, want %q", tc.in, err, tc.want)
		}
	}
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestReadFileErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := ReadFile(filepath.Join(dir, "missing.json")); err == nil || !strings.Contains(err.Error(), "does not exist") {
		t.Fatalf("missing = %v", err)
	}
	p := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(p, []byte("{\"snavio_snapshot\":1,\"document\":{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadFile(p); err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "not valid JSON") {
		t.Fatalf("corrupted = %v", err)
	}
	if _, err := ReadKeyFile(filepath.Join(dir, "nokey")); err == nil || !strings.Contains(err.Error(), "public key file") {
		t.Fatalf("missing key = %v", err)
	}
}

func TestDiff(t *testing.T) {
	a := testDoc(t0)
	b := testDoc(t0.Add(time.Minute))
	// Same registry, other version: equal.
	if ch, err := Diff(&a, &b); err != nil || len(ch) != 0 {
		t.Fatalf("equal docs: %+v, %v", ch, err)
	}
	b.Routes[0].ExpectedDrainSeconds = 900
	b.Routes[0].Version = 2
	b.Keys[0].Versions[0].Secret = bytes.Repeat([]byte{8}, 32)
	b.ACLs = nil
	q := registry.Quota{Source: "shop/web", Target: "billing", Command: "charge", Limit: registry.RateLimit{Max: 1, IntervalSeconds: 1}}
	b.Quotas = []registry.Quota{q}
	b.TTLPolicy.Routing.StaleSeconds = 240
	delete(b.TTLPolicy.Profiles, registry.ProfileCritical)
	ch, err := Diff(&a, &b)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]Change{}
	for _, c := range ch {
		got[c.ID] = c
	}
	want := map[string]string{
		string(registry.RouteID("billing", "charge")):             "changed",
		string(registry.ACLID("shop/web", "billing", "charge")):   "removed",
		string(registry.KeyID("shop/web")):                        "changed",
		string(registry.QuotaID("shop/web", "billing", "charge")): "added",
		"routing": "changed",
		"acl_profiles." + string(registry.ProfileCritical): "removed",
	}
	if len(ch) != len(want) {
		t.Fatalf("changes = %+v", ch)
	}
	for id, c := range want {
		if got[id].Change != c {
			t.Errorf("%s: %+v, want %s", id, got[id], c)
		}
	}
	if f := got[string(registry.RouteID("billing", "charge"))].Fields; strings.Join(f, ",") != "expected_drain_seconds,version" {
		t.Errorf("route fields = %v", f)
	}
	if f := got["routing"].Fields; strings.Join(f, ",") != "stale_seconds" {
		t.Errorf("routing fields = %v", f)
	}
	// A changed secret is reported, never printed.
	out, _ := json.Marshal(ch)
	if bytes.Contains(out, []byte("CAgI")) || bytes.Contains(out, []byte("CQkJ")) {
		t.Fatalf("a secret leaked into the diff: %s", out)
	}
}

// FuzzDecode: Decode never panics, and whatever it accepts has a document
// of a known kind with a version.
func FuzzDecode(f *testing.F) {
	good := seal(f, testSigner(f, 1), testDoc(t0))
	bare, _ := jsonv2.Marshal(testDoc(t0))
	for _, s := range [][]byte{good, bare, good[:len(good)-1], []byte(`{"snavio_snapshot":1,"document":{}}`), []byte(`{"format":"` + snapshot.Format + `"}`), []byte("null"), {}} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		fl, err := Decode(b)
		if err != nil {
			return
		}
		if fl.Doc == nil || fl.Doc.VersionID == "" || fl.Doc.GeneratedAt.IsZero() {
			t.Fatalf("accepted without a complete document: %+v", fl)
		}
		if _, err := wire.ParseSnapshotKind(string(fl.Doc.Kind)); err != nil {
			t.Fatalf("accepted kind %q", fl.Doc.Kind)
		}
		_ = Verify(fl, Key{Key: make(ed25519.PublicKey, ed25519.PublicKeySize)})
		_ = snapshot.Measure(fl.Doc, len(fl.Raw))
	})
}

// FuzzParseKey: ParseKey never panics and returns only 32-byte keys.
func FuzzParseKey(f *testing.F) {
	pk, err := controlapi.NewPublicKey("local-1", testSigner(f, 1).PublicKey())
	if err != nil {
		f.Fatal(err)
	}
	js, _ := json.Marshal(pk)
	for _, s := range []string{pk.PEM, string(js), pk.PublicKey, "", "{}", "-----BEGIN PUBLIC KEY-----\n-----END PUBLIC KEY-----"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k, err := ParseKey(b)
		if err == nil && len(k.Key) != ed25519.PublicKeySize {
			t.Fatalf("accepted a %d-byte key", len(k.Key))
		}
	})
}
