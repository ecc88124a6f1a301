package serve

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// SigningKeyFile holds the Ed25519 key that signs registry snapshots,
// base64 of the 32-byte seed, mode 0600.
const SigningKeyFile = "snapshot-signing.key"

// loadOrCreateSigningKey reads the snapshot signing key in dir, creating
// it on first start. A key file others can read is refused.
func loadOrCreateSigningKey(dir string) (ed25519.PrivateKey, string, error) {
	path := filepath.Join(dir, SigningKeyFile)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			fi, err := os.Stat(path)
			if err != nil {
				return nil, path, err
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, path, fmt.Errorf("the snapshot signing key %s has mode %v; others must not read it: run chmod 600 %s", path, fi.Mode().Perm(), path)
			}
			seed, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(seed) != ed25519.SeedSize {
				return nil, path, fmt.Errorf("the snapshot signing key %s is not a base64 Ed25519 seed; delete it to make a new one (snapshots signed by the old key will then be refused and reloaded from the store)", path)
			}
			return ed25519.NewKeyFromSeed(seed), path, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, path, fmt.Errorf("reading the snapshot signing key: %w", err)
		}
		seed := make([]byte, ed25519.SeedSize)
		if _, err := rand.Read(seed); err != nil {
			return nil, path, err
		}
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it first: read theirs
		}
		if err != nil {
			return nil, path, fmt.Errorf("creating the snapshot signing key: %w; check the data directory is writable", err)
		}
		_, werr := f.WriteString(base64.StdEncoding.EncodeToString(seed) + "\n")
		serr := f.Sync()
		if cerr := f.Close(); werr == nil && serr == nil {
			werr = cerr
		}
		if werr = errors.Join(werr, serr); werr != nil {
			return nil, path, fmt.Errorf("writing the snapshot signing key: %w", werr)
		}
		return ed25519.NewKeyFromSeed(seed), path, nil
	}
	return nil, path, fmt.Errorf("the snapshot signing key %s keeps changing; is another server starting on the same data directory?", path)
}
