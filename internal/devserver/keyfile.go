package devserver

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

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// SigningKeyFile holds the Ed25519 key that signs registry snapshots,
// base64 of the 32-byte seed, mode 0600.
const SigningKeyFile = "snapshot-signing.key"

// DeliveryKeyFile holds the master secret that every target's delivery
// signature key is derived from (docs/security/delivery-signature.md),
// base64 of 32 random bytes, mode 0600.
const DeliveryKeyFile = "delivery-signing.key"

// secretFile is a secret the data directory keeps: base64 of size random
// bytes, mode 0600, made on first start.
type secretFile struct {
	name, what string
	size       int
	// lost says what making a new one costs, for a damaged file's error.
	lost string
}

var (
	snapshotSecret = secretFile{name: SigningKeyFile, what: "snapshot signing key", size: ed25519.SeedSize,
		lost: "snapshots signed by the old key will then be refused and reloaded from the store"}
	deliverySecret = secretFile{name: DeliveryKeyFile, what: "delivery signing key", size: provenance.MinMasterLen,
		lost: "messages delivered before then no longer verify, and every target team must fetch its new key with `snavio key delivery`"}
)

// loadOrCreateSigningKey reads the snapshot signing key in dir, creating
// it on first start.
func loadOrCreateSigningKey(dir string) (ed25519.PrivateKey, string, error) {
	seed, path, err := loadOrCreateSecret(dir, snapshotSecret)
	if err != nil {
		return nil, path, err
	}
	return ed25519.NewKeyFromSeed(seed), path, nil
}

// loadOrCreateDeliverySigner reads the delivery signing master secret in
// dir, creating it on first start.
func loadOrCreateDeliverySigner(dir string) (*provenance.Signer, string, error) {
	master, path, err := loadOrCreateSecret(dir, deliverySecret)
	if err != nil {
		return nil, path, err
	}
	s, err := provenance.NewSigner(master)
	return s, path, err
}

// loadOrCreateSecret reads f in dir, creating it on first start. A file
// others can read is refused.
func loadOrCreateSecret(dir string, f secretFile) ([]byte, string, error) {
	path := filepath.Join(dir, f.name)
	for range 2 {
		b, err := os.ReadFile(path)
		if err == nil {
			fi, err := os.Stat(path)
			if err != nil {
				return nil, path, err
			}
			if fi.Mode().Perm()&0o077 != 0 {
				return nil, path, fmt.Errorf("the %s %s has mode %v; others must not read it: run chmod 600 %s", f.what, path, fi.Mode().Perm(), path)
			}
			secret, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
			if err != nil || len(secret) != f.size {
				return nil, path, fmt.Errorf("the %s %s is not base64 of %d bytes; delete it to make a new one (%s)", f.what, path, f.size, f.lost)
			}
			return secret, path, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return nil, path, fmt.Errorf("reading the %s: %w", f.what, err)
		}
		secret := make([]byte, f.size)
		if _, err := rand.Read(secret); err != nil {
			return nil, path, err
		}
		err = atomicfile.WriteExclusive(path, []byte(base64.StdEncoding.EncodeToString(secret)+"\n"), 0o600)
		if errors.Is(err, fs.ErrExist) {
			continue // another process made it first: read theirs
		}
		if err != nil {
			return nil, path, fmt.Errorf("creating the %s: %w; check the data directory is writable", f.what, err)
		}
		return secret, path, nil
	}
	return nil, path, fmt.Errorf("the %s %s keeps changing; is another server starting on the same data directory?", f.what, path)
}
