package server

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

func TestFileCredentialStoreLifecycle(t *testing.T) {
	path := filepath.Join(t.TempDir(), IngressCredentialsFile)
	s, err := OpenFileCredentialStore(path, clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)))
	if err != nil {
		t.Fatal(err)
	}
	a, err := s.Create("acme")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := s.Create("acme")
	if !ValidAccessKeyID(a.AccessKeyID) || len(a.Secret) != SecretAccessKeyLen || a.AccessKeyID == b.AccessKeyID || a.Secret == b.Secret {
		t.Fatalf("credentials %+v %+v", a, b)
	}
	if _, err := s.Create("acme/billing"); err == nil {
		t.Fatal("a source was taken for a tenant")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("file mode %v, %v", fi.Mode(), err)
	}
	// Reopened: the same credentials; listing never shows a secret.
	s2, err := OpenFileCredentialStore(path, clock.System())
	if err != nil {
		t.Fatal(err)
	}
	if tenant, secret, ok := s2.Lookup(a.AccessKeyID); !ok || tenant != "acme" || secret != a.Secret {
		t.Fatalf("Lookup after reopen = %s %s %v", tenant, secret, ok)
	}
	if l := s2.List(); len(l) != 2 || l[0].AccessKeyID != a.AccessKeyID {
		t.Fatalf("List = %+v", l)
	}
	// Rotation: revoke the old one; the new one still works.
	if info, err := s2.Revoke(a.AccessKeyID); err != nil || info.Tenant != "acme" {
		t.Fatalf("Revoke = %+v, %v", info, err)
	}
	if _, _, ok := s2.Lookup(a.AccessKeyID); ok {
		t.Fatal("revoked credential still resolves")
	}
	if _, _, ok := s2.Lookup(b.AccessKeyID); !ok {
		t.Fatal("the new credential stopped working")
	}
	if _, err := s2.Revoke(a.AccessKeyID); !errors.Is(err, ErrNoSuchCredential) {
		t.Fatalf("second Revoke = %v", err)
	}
}

func TestFileCredentialStoreRefusesBadFiles(t *testing.T) {
	dir := t.TempDir()
	for name, tc := range map[string]struct {
		content string
		mode    os.FileMode
		want    string
	}{
		"open mode": {`{"version":1,"credentials":[]}`, 0o644, "chmod 600"},
		"not json":  {`nope`, 0o600, "not an ingress credentials file"},
		"version":   {`{"version":2,"credentials":[]}`, 0o600, "version 2"},
		"damaged":   {`{"version":1,"credentials":[{"access_key_id":"AKIA","tenant":"a","secret_access_key":"x"}]}`, 0o600, "credential 1 is damaged"},
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(tc.content), tc.mode); err != nil {
				t.Fatal(err)
			}
			os.Chmod(p, tc.mode)
			if _, err := OpenFileCredentialStore(p, clock.System()); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Open = %v, want %q", err, tc.want)
			}
		})
	}
}

// FuzzDecodeCredentialsFile: the credentials file decoder never panics and
// accepts only well-formed, distinct credentials.
func FuzzDecodeCredentialsFile(f *testing.F) {
	f.Add([]byte(`{"version":1,"credentials":[{"access_key_id":"SNVKTESTKEYACMEAAAAA","tenant":"acme","created":"2026-01-01T00:00:00Z","secret_access_key":"YWNtZS1pbmdyZXNzLXRlc3Qtc2VjcmV0LTAxMjM0"}]}`))
	f.Add([]byte(`{"version":1,"credentials":[]}`))
	f.Add([]byte(`{"version":1}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		creds, err := decodeCredentialsFile(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, c := range creds {
			if !ValidAccessKeyID(c.AccessKeyID) || !validSecret(c.Secret) || !envelope.ValidTenant(c.Tenant) || seen[c.AccessKeyID] {
				t.Fatalf("accepted %+v", c)
			}
			seen[c.AccessKeyID] = true
		}
	})
}
