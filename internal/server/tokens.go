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
	"strings"
	"time"

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

// tokenKind is how tenant tokens are kept on disk: by digest, looked up
// by digest.
var tokenKind = secretKind[TokenInfo, [sha256.Size]byte]{
	what:   "tenant tokens",
	file:   "a tenant token file",
	member: "tokens",
	noun:   "token",
	redo:   "issue the tokens again",
	valid: func(t TokenInfo) bool {
		d, err := hex.DecodeString(t.SHA256)
		return err == nil && len(d) == sha256.Size && envelope.ValidTenant(t.Tenant) && t.ID != ""
	},
	key: func(t TokenInfo) (d [sha256.Size]byte) {
		hex.Decode(d[:], []byte(t.SHA256))
		return d
	},
}

// FileTokenStore is a TokenStore kept in one JSON file (mode 0600) of
// token digests. Writes replace the file atomically. It is safe for
// concurrent use within one process.
type FileTokenStore struct {
	clock clock.Clock
	file  *secretStore[TokenInfo, [sha256.Size]byte]
}

var _ TokenStore = (*FileTokenStore)(nil)

// OpenFileTokenStore opens (or starts empty) the token file at path,
// refusing one that others may read or write.
func OpenFileTokenStore(path string, clk clock.Clock) (*FileTokenStore, error) {
	if clk == nil {
		return nil, errors.New("server: OpenFileTokenStore needs a clock; pass clock.System()")
	}
	f, err := openSecretStore(path, tokenKind)
	if err != nil {
		return nil, err
	}
	return &FileTokenStore{clock: clk, file: f}, nil
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
	if err := s.file.add(info); err != nil {
		return "", TokenInfo{}, err
	}
	return token, info, nil
}

// ErrNoSuchToken is wrapped by Revoke when no token has the id, so that
// callers (the token API's 404) can tell it from a storage failure.
const ErrNoSuchToken = authError("server: no such tenant token")

// Revoke removes the token with id. It reports an error wrapping
// ErrNoSuchToken, naming the fix, if no token has that id.
func (s *FileTokenStore) Revoke(id string) error {
	_, ok, err := s.file.remove(func(t TokenInfo) bool { return t.ID == id })
	if !ok {
		return fmt.Errorf("%w: no tenant token has id %q; list the tokens to see their ids", ErrNoSuchToken, id)
	}
	return err
}

// List returns the issued tokens' info, oldest first.
func (s *FileTokenStore) List() []TokenInfo { return s.file.list() }

// Authenticate resolves token by its SHA-256 digest. The lookup keys on
// the digest, so its timing says nothing useful about the token.
func (s *FileTokenStore) Authenticate(_ context.Context, token string) (Principal, error) {
	if !strings.HasPrefix(token, tenantTokenPrefix) {
		return Principal{}, ErrUnknownToken
	}
	t, ok := s.file.lookup(sha256.Sum256([]byte(token)))
	if !ok {
		return Principal{}, ErrUnknownToken
	}
	return TenantPrincipal(t.Tenant), nil
}
