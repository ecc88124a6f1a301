package server

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/atomicfile"
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
	AccessKeyIDPrefix   = wire.AccessKeyIDPrefix
	accessKeyIDRandLen  = wire.AccessKeyIDRandLen // base32 characters (10 random bytes)
	AccessKeyIDLen      = len(AccessKeyIDPrefix) + accessKeyIDRandLen
	secretRandomBytes   = 30 // 40 base64url characters
	SecretAccessKeyLen  = 40
	credentialsFileVers = 1
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

type credentialsFile struct {
	Version     int                 `json:"version"`
	Credentials []IngressCredential `json:"credentials"`
}

// FileCredentialStore keeps the ingress credentials in one JSON file (mode
// 0600), replaced atomically on every change. It is safe for concurrent
// use within one process; Lookup, on every PutEvents, takes a read lock.
type FileCredentialStore struct {
	path  string
	clock clock.Clock

	mu    sync.RWMutex
	creds []IngressCredential
	byID  map[string]int
}

// OpenFileCredentialStore opens (or starts empty) the credentials file at
// path, refusing one that others may read or write or that is damaged.
func OpenFileCredentialStore(path string, clk clock.Clock) (*FileCredentialStore, error) {
	if clk == nil {
		return nil, errors.New("server: OpenFileCredentialStore needs a clock; pass clock.System()")
	}
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	s := &FileCredentialStore{path: path, clock: clk}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.index(nil)
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("server: ingress credentials: %w", err)
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, fmt.Errorf("server: refusing the ingress credentials: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: reading ingress credentials: %w", err)
	}
	creds, err := decodeCredentialsFile(b)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", path, err)
	}
	s.index(creds)
	return s, nil
}

// decodeCredentialsFile parses and checks the credentials file's content.
func decodeCredentialsFile(b []byte) ([]IngressCredential, error) {
	var f credentialsFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not an ingress credentials file (%v); restore it from a backup, or remove it and create the credentials again", err)
	}
	if f.Version != credentialsFileVers {
		return nil, fmt.Errorf("version %d, this snavio reads version %d; upgrade snavio", f.Version, credentialsFileVers)
	}
	seen := make(map[string]bool, len(f.Credentials))
	for i, c := range f.Credentials {
		if !ValidAccessKeyID(c.AccessKeyID) || !validSecret(c.Secret) || !envelope.ValidTenant(c.Tenant) || seen[c.AccessKeyID] {
			return nil, fmt.Errorf("credential %d is damaged or repeated; remove it from the file", i+1)
		}
		seen[c.AccessKeyID] = true
	}
	return f.Credentials, nil
}

func (s *FileCredentialStore) index(creds []IngressCredential) {
	s.creds = creds
	s.byID = make(map[string]int, len(creds))
	for i, c := range creds {
		s.byID[c.AccessKeyID] = i
	}
}

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
	s.mu.Lock()
	defer s.mu.Unlock()
	next := append(slices.Clip(s.creds), c)
	if err := s.save(next); err != nil {
		return IngressCredential{}, err
	}
	s.index(next)
	return c, nil
}

// Revoke removes the credential with access key id; requests signed with it
// are refused from then on. It wraps ErrNoSuchCredential for an unknown id.
func (s *FileCredentialStore) Revoke(accessKeyID string) (CredentialInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.byID[accessKeyID]
	if !ok {
		return CredentialInfo{}, fmt.Errorf("%w: no ingress credential has access key id %q; list them to see their ids", ErrNoSuchCredential, accessKeyID)
	}
	gone := s.creds[i].Info()
	next := slices.Delete(slices.Clone(s.creds), i, i+1)
	if err := s.save(next); err != nil {
		return CredentialInfo{}, err
	}
	s.index(next)
	return gone, nil
}

// Get returns the credential's info (no secret).
func (s *FileCredentialStore) Get(accessKeyID string) (CredentialInfo, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.byID[accessKeyID]
	if !ok {
		return CredentialInfo{}, false
	}
	return s.creds[i].Info(), true
}

// List returns the credentials without secrets, oldest first.
func (s *FileCredentialStore) List() []CredentialInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]CredentialInfo, len(s.creds))
	for i, c := range s.creds {
		out[i] = c.Info()
	}
	return out
}

// Lookup implements CredentialLookup.
func (s *FileCredentialStore) Lookup(accessKeyID string) (tenant, secret string, ok bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.byID[accessKeyID]
	if !ok {
		return "", "", false
	}
	return s.creds[i].Tenant, s.creds[i].Secret, true
}

func (s *FileCredentialStore) save(creds []IngressCredential) error {
	if creds == nil {
		creds = []IngressCredential{}
	}
	b, err := json.Marshal(credentialsFile{Version: credentialsFileVers, Credentials: creds})
	if err != nil {
		return fmt.Errorf("server: encoding ingress credentials: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("server: writing ingress credentials %s: %w; check the data directory is writable", s.path, err)
	}
	return nil
}
