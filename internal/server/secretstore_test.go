package server

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// The files written before the shared secretStore (one struct per kind)
// must load, and the store must write the same bytes.
func TestSecretStoreKeepsTheFileFormat(t *testing.T) {
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	creds := []IngressCredential{{AccessKeyID: "SNVKTESTKEYACMEAAAAA", Tenant: "acme", Created: created, Secret: "YWNtZS1pbmdyZXNzLXRlc3Qtc2VjcmV0LTAxMjM0"}}
	tokens := []TokenInfo{{ID: "tok_0123456789ab", Tenant: "acme", Created: created, SHA256: "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}}
	// The file structs of the code before secretStore.
	oldCreds, err := json.Marshal(struct {
		Version     int                 `json:"version"`
		Credentials []IngressCredential `json:"credentials"`
	}{1, creds})
	if err != nil {
		t.Fatal(err)
	}
	oldTokens, err := json.Marshal(struct {
		Version int         `json:"version"`
		Tokens  []TokenInfo `json:"tokens"`
	}{1, tokens})
	if err != nil {
		t.Fatal(err)
	}
	oldCreds, oldTokens = append(oldCreds, '\n'), append(oldTokens, '\n')

	dir := t.TempDir()
	cp, tp := filepath.Join(dir, IngressCredentialsFile), filepath.Join(dir, TenantTokensFile)
	for p, b := range map[string][]byte{cp: oldCreds, tp: oldTokens} {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cs, err := OpenFileCredentialStore(cp, clock.System())
	if err != nil {
		t.Fatal(err)
	}
	if got := cs.List(); len(got) != 1 || got[0] != creds[0].Info() {
		t.Fatalf("credentials = %+v, want %+v", got, creds)
	}
	ts, err := OpenFileTokenStore(tp, clock.System())
	if err != nil {
		t.Fatal(err)
	}
	if got := ts.List(); len(got) != 1 || got[0] != tokens[0] {
		t.Fatalf("tokens = %+v, want %+v", got, tokens)
	}

	if b, err := credentialKind.encode(creds); err != nil || !bytes.Equal(b, oldCreds) {
		t.Fatalf("credentials encode = %s, %v; want %s", b, err, oldCreds)
	}
	if b, err := tokenKind.encode(tokens); err != nil || !bytes.Equal(b, oldTokens) {
		t.Fatalf("tokens encode = %s, %v; want %s", b, err, oldTokens)
	}
	if b, err := tokenKind.encode(nil); err != nil || string(b) != `{"version":1,"tokens":[]}`+"\n" {
		t.Fatalf("empty encode = %s, %v", b, err)
	}
}

// A token file with one digest twice is damaged: both ids would name one
// token.
func TestTokenFileRefusesRepeatedDigest(t *testing.T) {
	d := "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	b := []byte(`{"version":1,"tokens":[{"id":"tok_a","tenant":"acme","sha256":"` + d + `"},{"id":"tok_b","tenant":"acme","sha256":"` + d + `"}]}`)
	if _, err := tokenKind.decode(b); err == nil {
		t.Fatal("decode accepted a repeated digest")
	}
}

// FuzzDecodeTokenFile: the token file decoder never panics and accepts
// only well-formed tokens with distinct digests.
func FuzzDecodeTokenFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"tokens":[{"id":"tok_0123456789ab","tenant":"acme","created":"2026-01-01T00:00:00Z","sha256":"0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"}]}`))
	f.Add([]byte(`{"version":1,"tokens":[]}`))
	f.Add([]byte(`{"version":1,"tokens":null}`))
	f.Add([]byte(`{"version":"1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		tokens, err := tokenKind.decode(b)
		if err != nil {
			return
		}
		seen := map[[32]byte]bool{}
		for _, tok := range tokens {
			if !tokenKind.valid(tok) || seen[tokenKind.key(tok)] {
				t.Fatalf("accepted %+v", tok)
			}
			seen[tokenKind.key(tok)] = true
		}
	})
}
