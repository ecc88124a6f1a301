package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// Token files in the data directory.
const (
	// OperatorTokenFile holds the operator token, mode 0600.
	OperatorTokenFile = "operator.token"
	// TenantTokensFile holds the digests of tenant tokens, mode 0600.
	TenantTokensFile = "tenant-tokens.json"

	operatorTokenPrefix = "snvo_"
	tenantTokenPrefix   = "snvt_"
	tokenRandomBytes    = 32
)

// newToken returns prefix + 32 random bytes in unpadded base64url.
func newToken(prefix string) string {
	var b [tokenRandomBytes]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// wellFormedToken reports whether s is prefix + 43 base64url characters.
func wellFormedToken(s, prefix string) bool {
	rest, ok := strings.CutPrefix(s, prefix)
	if !ok || len(rest) != base64.RawURLEncoding.EncodedLen(tokenRandomBytes) {
		return false
	}
	_, err := base64.RawURLEncoding.DecodeString(rest)
	return err == nil
}

// checkPrivate refuses a file that is not a regular file or that its
// group or others may read or write.
func checkPrivate(path string, fi fs.FileInfo) error {
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file (%s); remove it and start the server again to create a fresh one", path, fi.Mode().Type())
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return fmt.Errorf("%s has mode %04o, readable or writable by others; run: chmod 600 %s", path, perm, path)
	}
	return nil
}

// ensureDir creates dir 0700 if it is missing.
func ensureDir(dir string) error {
	if dir == "" {
		return errors.New("server: the data directory is empty; pass --data-dir or use the default under the user's data directory")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("server: creating data directory %s: %w; check its parent exists and is writable", dir, err)
	}
	return nil
}

// LoadOrCreateOperatorToken returns the operator token kept in
// dir/operator.token, creating dir (0700) and the token (crypto/rand,
// mode 0600) on first start and reusing it afterwards. It refuses a token
// file that others may read or write, or whose content is not a token, and
// says how to fix it. created reports whether this call made the token.
func LoadOrCreateOperatorToken(dir string) (token, path string, created bool, err error) {
	if err := ensureDir(dir); err != nil {
		return "", "", false, err
	}
	path = filepath.Join(dir, OperatorTokenFile)
	for range 2 {
		token, err = readOperatorToken(path)
		if err == nil {
			return token, path, false, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", path, false, err
		}
		token = newToken(operatorTokenPrefix)
		err = atomicfile.WriteExclusive(path, []byte(token+"\n"), 0o600)
		if err == nil {
			return token, path, true, nil
		}
		if !errors.Is(err, fs.ErrExist) {
			return "", path, false, fmt.Errorf("server: writing the operator token %s: %w; check the data directory is writable", path, err)
		}
		// Another process created it first: read theirs.
	}
	return "", path, false, fmt.Errorf("server: the operator token %s keeps changing; is another server starting on the same data directory?", path)
}

func readOperatorToken(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if err := checkPrivate(path, fi); err != nil {
		return "", fmt.Errorf("server: refusing the operator token: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return "", fmt.Errorf("server: reading the operator token: %w", err)
	}
	token := strings.TrimSpace(string(b))
	if !wellFormedToken(token, operatorTokenPrefix) {
		return "", fmt.Errorf("server: %s does not hold an operator token (%s followed by 43 base64url characters); remove it and start the server again to create a new one", path, operatorTokenPrefix)
	}
	return token, nil
}

// TokenInfo describes an issued tenant token; the token itself is shown
// once, when issued, and only its SHA-256 digest is stored.
type TokenInfo struct {
	// ID names the token for listing and revoking (not secret).
	ID string `json:"id"`
	// Tenant is the one tenant the token acts as.
	Tenant string `json:"tenant"`
	// Created is when the token was issued.
	Created time.Time `json:"created"`
	// SHA256 is the hex digest of the token.
	SHA256 string `json:"sha256"`
}

type tokenFile struct {
	Version int         `json:"version"`
	Tokens  []TokenInfo `json:"tokens"`
}

// FileTokenStore is a TokenStore kept in one JSON file (mode 0600) of
// token digests. Writes replace the file atomically. It is safe for
// concurrent use within one process.
type FileTokenStore struct {
	path  string
	clock clock.Clock

	mu     sync.RWMutex
	tokens []TokenInfo
	byHash map[[sha256.Size]byte]int // digest -> index in tokens
}

var _ TokenStore = (*FileTokenStore)(nil)

// OpenFileTokenStore opens (or starts empty) the token file at path,
// refusing one that others may read or write.
func OpenFileTokenStore(path string, clk clock.Clock) (*FileTokenStore, error) {
	if clk == nil {
		return nil, errors.New("server: OpenFileTokenStore needs a clock; pass clock.System()")
	}
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	s := &FileTokenStore{path: path, clock: clk}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.index(nil)
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("server: tenant tokens: %w", err)
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, fmt.Errorf("server: refusing the tenant tokens: %w", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: reading tenant tokens: %w", err)
	}
	var f tokenFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("server: %s is not a tenant token file (%v); restore it from a backup or remove it and issue the tokens again", path, err)
	}
	if f.Version != 1 {
		return nil, fmt.Errorf("server: %s has version %d, this snavio reads version 1; upgrade snavio", path, f.Version)
	}
	for i, t := range f.Tokens {
		if d, err := hex.DecodeString(t.SHA256); err != nil || len(d) != sha256.Size || !envelope.ValidTenant(t.Tenant) || t.ID == "" {
			return nil, fmt.Errorf("server: %s: token %d is damaged; remove it from the file", path, i+1)
		}
	}
	s.index(f.Tokens)
	return s, nil
}

func (s *FileTokenStore) index(tokens []TokenInfo) {
	s.tokens = tokens
	s.byHash = make(map[[sha256.Size]byte]int, len(tokens))
	for i, t := range tokens {
		var d [sha256.Size]byte
		hex.Decode(d[:], []byte(t.SHA256))
		s.byHash[d] = i
	}
}

// Issue makes a new token for tenant, stores its digest and returns the
// token (shown once: it cannot be read back) and its info.
func (s *FileTokenStore) Issue(tenant string) (string, TokenInfo, error) {
	if !envelope.ValidTenant(tenant) {
		return "", TokenInfo{}, fmt.Errorf("server: tenant id %q is not valid; use "+envelope.TenantRule, tenant)
	}
	token := newToken(tenantTokenPrefix)
	d := sha256.Sum256([]byte(token))
	info := TokenInfo{ID: "tok_" + hex.EncodeToString(d[:6]), Tenant: tenant, Created: s.clock.Now().UTC(), SHA256: hex.EncodeToString(d[:])}
	s.mu.Lock()
	defer s.mu.Unlock()
	next := append(slices.Clip(s.tokens), info)
	if err := s.save(next); err != nil {
		return "", TokenInfo{}, err
	}
	s.index(next)
	return token, info, nil
}

// ErrNoSuchToken is wrapped by Revoke when no token has the id, so that
// callers (the token API's 404) can tell it from a storage failure.
const ErrNoSuchToken = authError("server: no such tenant token")

// Revoke removes the token with id. It reports an error wrapping
// ErrNoSuchToken, naming the fix, if no token has that id.
func (s *FileTokenStore) Revoke(id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.tokens, func(t TokenInfo) bool { return t.ID == id })
	if i < 0 {
		return fmt.Errorf("%w: no tenant token has id %q; list the tokens to see their ids", ErrNoSuchToken, id)
	}
	next := slices.Delete(slices.Clone(s.tokens), i, i+1)
	if err := s.save(next); err != nil {
		return err
	}
	s.index(next)
	return nil
}

// List returns the issued tokens' info, oldest first.
func (s *FileTokenStore) List() []TokenInfo {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.tokens)
}

// Authenticate resolves token by its SHA-256 digest. The lookup keys on
// the digest, so its timing says nothing useful about the token.
func (s *FileTokenStore) Authenticate(_ context.Context, token string) (Principal, error) {
	if !strings.HasPrefix(token, tenantTokenPrefix) {
		return Principal{}, ErrUnknownToken
	}
	d := sha256.Sum256([]byte(token))
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.byHash[d]
	if !ok {
		return Principal{}, ErrUnknownToken
	}
	return TenantPrincipal(s.tokens[i].Tenant), nil
}

func (s *FileTokenStore) save(tokens []TokenInfo) error {
	if tokens == nil {
		tokens = []TokenInfo{}
	}
	b, err := json.Marshal(tokenFile{Version: 1, Tokens: tokens})
	if err != nil {
		return fmt.Errorf("server: encoding tenant tokens: %w", err)
	}
	if err := atomicfile.Write(s.path, append(b, '\n'), 0o600); err != nil {
		return fmt.Errorf("server: writing tenant tokens %s: %w; check the data directory is writable", s.path, err)
	}
	return nil
}
