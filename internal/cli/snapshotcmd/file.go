package snapshotcmd

import (
	"bytes"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"os"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// MaxFileBytes bounds a snapshot file the CLI reads: the platform's
// default size cap.
const MaxFileBytes = snapshot.DefaultMaxBytes

// MaxKeyFileBytes bounds a public-key file.
const MaxKeyFileBytes = 64 << 10

// File is a snapshot file as read for display, before (and apart from)
// signature verification.
type File struct {
	// Raw is the file without trailing whitespace: what Verify checks.
	Raw []byte
	// Signed is true for a signed snapshot ({"snavio_snapshot":1,...});
	// false for a bare document.
	Signed    bool
	KeyID     string
	Algorithm string
	// Doc is the decoded document, not yet verified.
	Doc *snapshot.Document
}

// readLimited reads at most max bytes of path, naming the file and the fix
// in every error.
func readLimited(path string, max int64, what string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%s %s does not exist: check the path", what, path)
		}
		return nil, fmt.Errorf("open %s %s: %w", what, path, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("read %s %s: %w", what, path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s %s is over %d bytes, the cap: it is not a snapshot this platform would load", what, path, max)
	}
	return b, nil
}

// ReadFile reads and decodes the snapshot file at path.
func ReadFile(path string) (*File, error) {
	b, err := readLimited(path, MaxFileBytes, "snapshot file")
	if err != nil {
		return nil, err
	}
	f, err := Decode(b)
	if err != nil {
		return nil, fmt.Errorf("snapshot file %s: %w", path, err)
	}
	return f, nil
}

// envelope is the signed file's frame.
type envelope struct {
	SnavioSnapshot *int            `json:"snavio_snapshot"`
	Alg            string          `json:"alg"`
	KeyID          string          `json:"key_id"`
	Signature      string          `json:"signature"`
	Document       json.RawMessage `json:"document"`
	Format         string          `json:"format"`
}

// Decode decodes a snapshot file: a signed snapshot or a bare document.
// It checks the structure only; Verify checks the signature. It never
// panics on any input (FuzzDecode).
func Decode(b []byte) (*File, error) {
	b = bytes.TrimRight(b, " \t\r\n")
	if int64(len(b)) > MaxFileBytes {
		return nil, fmt.Errorf("%d bytes, over the cap of %d", len(b), MaxFileBytes)
	}
	if len(b) == 0 {
		return nil, errors.New("the file is empty: it is not a snapshot")
	}
	var env envelope
	if err := json.Unmarshal(b, &env); err != nil {
		return nil, fmt.Errorf("not valid JSON (%v): a snapshot file is the JSON `snavio dispatch serve` publishes; fetch it again with `snavio snapshot pull`", err)
	}
	f := &File{Raw: b}
	doc := b
	switch {
	case env.SnavioSnapshot != nil:
		if *env.SnavioSnapshot != 1 {
			return nil, fmt.Errorf("snavio_snapshot version %d: this snavio reads version 1; upgrade snavio", *env.SnavioSnapshot)
		}
		if len(env.Document) == 0 || env.Document[0] != '{' {
			return nil, errors.New(`the signed snapshot has no "document" object: the file is truncated or was edited`)
		}
		f.Signed, f.KeyID, f.Algorithm, doc = true, env.KeyID, env.Alg, env.Document
	case env.Format != "":
	default:
		return nil, errors.New(`not a snavio snapshot: neither a signed snapshot ({"snavio_snapshot":1,...}) nor a bare document ({"format":"` + snapshot.Format + `",...})`)
	}
	var d snapshot.Document
	if err := jsonv2.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("the document does not decode (%v): the file is corrupted or was edited", err)
	}
	if d.Format != snapshot.Format {
		return nil, fmt.Errorf("document format %.64q: this snavio reads %q", d.Format, snapshot.Format)
	}
	if _, err := wire.ParseSnapshotKind(string(d.Kind)); err != nil {
		return nil, fmt.Errorf("document %w", err)
	}
	if d.VersionID == "" || d.GeneratedAt.IsZero() {
		return nil, errors.New("the document has no version_id or generated_at: it is incomplete")
	}
	f.Doc = &d
	return f, nil
}

// Key is a public key that verifies snapshots. ID is empty when the key
// file named none: the key is then trusted under whatever key id the
// snapshot names.
type Key struct {
	ID  string
	Key ed25519.PublicKey
}

// ReadKeyFile reads a public-key file (see ParseKey).
func ReadKeyFile(path string) (Key, error) {
	b, err := readLimited(path, MaxKeyFileBytes, "public key file")
	if err != nil {
		return Key{}, err
	}
	k, err := ParseKey(b)
	if err != nil {
		return Key{}, fmt.Errorf("public key file %s: %w", path, err)
	}
	return k, nil
}

// keyFileHelp lists the accepted key formats.
const keyFileHelp = "use the PEM (-----BEGIN PUBLIC KEY-----), the JSON of `snavio snapshot public-key -o json`, or the base64 of the 32-byte key"

// ParseKey parses an Ed25519 public key: a PEM "PUBLIC KEY" block (PKIX),
// the JSON of GET /v1/snapshots/public-key ({"key_id","public_key",...}),
// or the standard base64 of the 32 raw bytes. It never panics
// (FuzzParseKey).
func ParseKey(b []byte) (Key, error) {
	b = bytes.TrimSpace(b)
	if len(b) > MaxKeyFileBytes {
		return Key{}, fmt.Errorf("%d bytes: a public key file is at most %d", len(b), MaxKeyFileBytes)
	}
	switch {
	case len(b) == 0:
		return Key{}, errors.New("empty: " + keyFileHelp)
	case bytes.HasPrefix(b, []byte("-----BEGIN")):
		k, err := pemKey(b)
		return Key{Key: k}, err
	case b[0] == '{':
		var pk wire.SnapshotPublicKey
		if err := json.Unmarshal(b, &pk); err != nil {
			return Key{}, fmt.Errorf("not valid JSON (%v): %s", err, keyFileHelp)
		}
		var k ed25519.PublicKey
		var err error
		switch {
		case pk.PublicKey != "":
			k, err = rawKey(pk.PublicKey)
		case pk.PEM != "":
			k, err = pemKey([]byte(pk.PEM))
		default:
			err = errors.New(`the JSON has neither "public_key" nor "pem": ` + keyFileHelp)
		}
		if err != nil {
			return Key{}, err
		}
		if pk.Algorithm != "" && pk.Algorithm != snapshot.Algorithm {
			return Key{}, fmt.Errorf("algorithm %.40q: snapshots are signed with %s", pk.Algorithm, snapshot.Algorithm)
		}
		return Key{ID: pk.KeyID, Key: k}, nil
	default:
		k, err := rawKey(string(b))
		return Key{Key: k}, err
	}
}

func pemKey(b []byte) (ed25519.PublicKey, error) {
	blk, _ := pem.Decode(b)
	if blk == nil {
		return nil, errors.New("the PEM block does not decode: " + keyFileHelp)
	}
	if blk.Type != "PUBLIC KEY" {
		return nil, fmt.Errorf("PEM block %.40q: want a PUBLIC KEY (never share a private key)", blk.Type)
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil {
		return nil, fmt.Errorf("the PEM public key does not parse: %v", err)
	}
	k, ok := pub.(ed25519.PublicKey)
	if !ok {
		return nil, fmt.Errorf("the PEM holds a %T key: snapshots are signed with Ed25519", pub)
	}
	return k, nil
}

func rawKey(s string) (ed25519.PublicKey, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) != ed25519.PublicKeySize {
		return nil, errors.New("not a base64 Ed25519 public key of 32 bytes: " + keyFileHelp)
	}
	return ed25519.PublicKey(k), nil
}

// Verification is the outcome of checking a snapshot's signature and
// content with a key.
type Verification struct {
	Valid bool `json:"valid"`
	// Reason is the snapshot.Reason of a refusal (bad_signature,
	// unknown_key, unsigned, malformed, wrong_kind, invalid, too_large).
	Reason string `json:"reason,omitempty"`
	Detail string `json:"detail,omitempty"`
	KeyID  string `json:"key_id,omitempty"`
}

// Verify checks f with key exactly as a dispatcher's loader does
// (snapshot.Parse: framing, signature before any JSON, format and kind,
// registry validation), without the age check: an old snapshot still
// verifies.
func Verify(f *File, key Key) Verification {
	id := key.ID
	if id == "" {
		id = f.KeyID
	}
	kind := snapshot.KindFull
	if f.Doc != nil {
		kind = f.Doc.Kind
	}
	_, err := snapshot.Parse(f.Raw, snapshot.ParseOptions{Kind: kind, Trusted: snapshot.TrustedKeys{id: key.Key}, MaxBytes: MaxFileBytes})
	if err != nil {
		v := Verification{Reason: string(snapshot.ReasonOf(err)), Detail: err.Error(), KeyID: f.KeyID}
		if v.Reason == "" {
			v.Reason = string(snapshot.ReasonMalformed)
		}
		return v
	}
	return Verification{Valid: true, KeyID: f.KeyID}
}
