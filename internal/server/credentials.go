package server

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// IngressCredentialsFile holds the tenants' ingress credentials (access key
// ids and their secrets) in the data directory, mode 0600.
const IngressCredentialsFile = "ingress-credentials.json"

// Shapes of an ingress credential: AWS's lengths (20-character access key
// id, 40-character secret), with prefixes of our own so that a snavio key
// is never taken for an AWS one.
const (
	AccessKeyIDPrefix  = wire.AccessKeyIDPrefix
	accessKeyIDRandLen = wire.AccessKeyIDRandLen // base32 characters (10 random bytes)
	AccessKeyIDLen     = len(AccessKeyIDPrefix) + accessKeyIDRandLen
	secretRandomBytes  = 30 // 40 base64url characters
	SecretAccessKeyLen = 40
)

// ErrNoSuchCredential is wrapped by Revoke when no credential has the id.
const ErrNoSuchCredential = authError("server: no such ingress credential")

// IngressCredential is what the ingress checks a SigV4 signature against:
// an access key id bound to one tenant, and its secret. SigV4 is an HMAC
// keyed by the secret, so the server keeps the secret itself (not a
// digest), in a 0600 file.
type IngressCredential struct {
	AccessKeyID string    `json:"access_key_id"`
	Tenant      string    `json:"tenant"`
	Created     time.Time `json:"created"`
	Secret      string    `json:"secret_access_key"`
}

// Info returns c without its secret, as lists show it.
func (c IngressCredential) Info() CredentialInfo {
	return CredentialInfo{AccessKeyID: c.AccessKeyID, Tenant: c.Tenant, Created: c.Created}
}

// CredentialInfo describes an ingress credential without its secret.
type CredentialInfo struct {
	AccessKeyID string    `json:"access_key_id"`
	Tenant      string    `json:"tenant"`
	Created     time.Time `json:"created"`
}

// ValidAccessKeyID reports whether s has the shape of a snavio access key
// id: SNVK and 16 characters of [A-Z2-7].
func ValidAccessKeyID(s string) bool { return wire.ValidAccessKeyID(s) }

func validSecret(s string) bool {
	if len(s) != SecretAccessKeyLen {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(s)
	return err == nil
}

// credentialKind is how ingress credentials are kept on disk.
var credentialKind = secretKind[IngressCredential, string]{
	what:   "ingress credentials",
	file:   "an ingress credentials file",
	member: "credentials",
	noun:   "credential",
	redo:   "create the credentials again",
	valid: func(c IngressCredential) bool {
		return ValidAccessKeyID(c.AccessKeyID) && validSecret(c.Secret) && envelope.ValidTenant(c.Tenant)
	},
	key: func(c IngressCredential) string { return c.AccessKeyID },
}

// FileCredentialStore keeps the ingress credentials in one JSON file (mode
// 0600), replaced atomically on every change. It is safe for concurrent
// use within one process; Lookup, on every PutEvents, takes a read lock.
type FileCredentialStore struct {
	clock clock.Clock
	file  *secretStore[IngressCredential, string]
}

// OpenFileCredentialStore opens (or starts empty) the credentials file at
// path, refusing one that others may read or write or that is damaged.
func OpenFileCredentialStore(path string, clk clock.Clock) (*FileCredentialStore, error) {
	if clk == nil {
		return nil, errors.New("server: OpenFileCredentialStore needs a clock; pass clock.System()")
	}
	f, err := openSecretStore(path, credentialKind)
	if err != nil {
		return nil, err
	}
	return &FileCredentialStore{clock: clk, file: f}, nil
}

// decodeCredentialsFile parses and checks the credentials file's content.
func decodeCredentialsFile(b []byte) ([]IngressCredential, error) { return credentialKind.decode(b) }

func newAccessKeyID() string {
	var b [10]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return AccessKeyIDPrefix + base32.StdEncoding.EncodeToString(b[:])
}

func newSecretAccessKey() string {
	var b [secretRandomBytes]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Create issues a credential for tenant and stores it. The returned
// credential carries the secret: callers show it once.
func (s *FileCredentialStore) Create(tenant string) (IngressCredential, error) {
	if !envelope.ValidTenant(tenant) {
		return IngressCredential{}, fmt.Errorf("server: tenant id %q is not valid; use "+envelope.TenantRule, tenant)
	}
	c := IngressCredential{AccessKeyID: newAccessKeyID(), Tenant: tenant, Created: s.clock.Now().UTC().Truncate(time.Second), Secret: newSecretAccessKey()}
	if err := s.file.add(c); err != nil {
		return IngressCredential{}, err
	}
	return c, nil
}

// Revoke removes the credential with access key id; requests signed with it
// are refused from then on. It wraps ErrNoSuchCredential for an unknown id.
func (s *FileCredentialStore) Revoke(accessKeyID string) (CredentialInfo, error) {
	gone, ok, err := s.file.remove(func(c IngressCredential) bool { return c.AccessKeyID == accessKeyID })
	switch {
	case !ok:
		return CredentialInfo{}, fmt.Errorf("%w: no ingress credential has access key id %q; list them to see their ids", ErrNoSuchCredential, accessKeyID)
	case err != nil:
		return CredentialInfo{}, err
	}
	return gone.Info(), nil
}

// Get returns the credential's info (no secret).
func (s *FileCredentialStore) Get(accessKeyID string) (CredentialInfo, bool) {
	c, ok := s.file.lookup(accessKeyID)
	return c.Info(), ok
}

// List returns the credentials without secrets, oldest first.
func (s *FileCredentialStore) List() []CredentialInfo {
	creds := s.file.list()
	out := make([]CredentialInfo, len(creds))
	for i, c := range creds {
		out[i] = c.Info()
	}
	return out
}

// Lookup implements CredentialLookup.
func (s *FileCredentialStore) Lookup(accessKeyID string) (tenant, secret string, ok bool) {
	c, ok := s.file.lookup(accessKeyID)
	return c.Tenant, c.Secret, ok
}
