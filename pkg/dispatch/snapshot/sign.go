package snapshot

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha512"
	"encoding/base64"
	"fmt"
	"strconv"
)

// Algorithm is the signature algorithm of every snapshot: Ed25519ph
// (RFC 8032 section 5.1, pre-hashed with SHA-512, empty context). The
// signer sees only the 64-byte SHA-512 digest of the document, which is
// what a KMS asymmetric Ed25519 key signs in DIGEST mode, so a KMS-backed
// Signer implements the same interface without shipping the document.
const Algorithm = "Ed25519ph"

// Signer signs snapshot documents.
type Signer interface {
	// KeyID names the key; loaders pick the verification key by it.
	// 1-128 bytes of [A-Za-z0-9._:/-].
	KeyID() string
	// SignDigest returns the Ed25519ph signature (64 bytes) of the
	// document whose SHA-512 digest is digest.
	SignDigest(ctx context.Context, digest []byte) ([]byte, error)
}

// Ed25519Signer is a Signer with a local Ed25519 private key.
type Ed25519Signer struct {
	id  string
	key ed25519.PrivateKey
}

// NewEd25519Signer returns a signer with key under id.
func NewEd25519Signer(id string, key ed25519.PrivateKey) (*Ed25519Signer, error) {
	if !validKeyID(id) {
		return nil, fmt.Errorf("snapshot: key id %q: use 1-128 bytes of [A-Za-z0-9._:/-]", id)
	}
	if len(key) != ed25519.PrivateKeySize {
		return nil, fmt.Errorf("snapshot: an Ed25519 private key has %d bytes, not %d", ed25519.PrivateKeySize, len(key))
	}
	return &Ed25519Signer{id: id, key: bytes.Clone(key)}, nil
}

// KeyID implements Signer.
func (s *Ed25519Signer) KeyID() string { return s.id }

// SignDigest implements Signer.
func (s *Ed25519Signer) SignDigest(_ context.Context, digest []byte) ([]byte, error) {
	if len(digest) != sha512.Size {
		return nil, fmt.Errorf("snapshot: digest has %d bytes; want a SHA-512 digest", len(digest))
	}
	return s.key.Sign(nil, digest, &ed25519.Options{Hash: crypto.SHA512})
}

// PublicKey returns the signer's public key, for the loaders' trust set.
func (s *Ed25519Signer) PublicKey() ed25519.PublicKey {
	return s.key.Public().(ed25519.PublicKey)
}

// TrustedKeys are the public keys a loader accepts, by key id. Keeping
// the old and the new key during a rotation lets either sign.
type TrustedKeys map[string]ed25519.PublicKey

func validKeyID(id string) bool {
	if id == "" || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == ':' || c == '/' || c == '-') {
			return false
		}
	}
	return true
}

// The signed file is exactly
//
//	{"snavio_snapshot":1,"alg":"Ed25519ph","key_id":"<id>","signature":"<base64>","document":<DOC>}
//
// with no other whitespace, where <DOC> is the JSON document and the
// signature is over exactly the bytes of <DOC>.
const (
	headPrefix = `{"snavio_snapshot":1,"alg":"` + Algorithm + `","key_id":"`
	headSig    = `","signature":"`
	headDoc    = `","document":`
)

// Seal signs the document bytes doc with s and frames them as a snapshot
// file. Generate uses it; it is exported for tools that re-sign or build
// test snapshots.
func Seal(ctx context.Context, s Signer, doc []byte) ([]byte, error) {
	sum := sha512.Sum512(doc)
	sig, err := s.SignDigest(ctx, sum[:])
	if err != nil {
		return nil, fmt.Errorf("snapshot: sign: %w", err)
	}
	if len(sig) != ed25519.SignatureSize {
		return nil, fmt.Errorf("snapshot: signer returned %d bytes; want %d", len(sig), ed25519.SignatureSize)
	}
	id := s.KeyID()
	if !validKeyID(id) {
		return nil, fmt.Errorf("snapshot: signer key id %q is not valid", id)
	}
	enc := base64.StdEncoding
	out := make([]byte, 0, len(headPrefix)+len(id)+len(headSig)+enc.EncodedLen(len(sig))+len(headDoc)+len(doc)+1)
	out = append(out, headPrefix...)
	out = append(out, id...)
	out = append(out, headSig...)
	out = enc.AppendEncode(out, sig)
	out = append(out, headDoc...)
	out = append(out, doc...)
	return append(out, '}'), nil
}

// unseal checks the framing and the signature of b and returns the signed
// document bytes (a sub-slice of b).
func unseal(b []byte, trusted TrustedKeys) ([]byte, error) {
	if !bytes.HasPrefix(b, []byte(headPrefix)) {
		if bytes.HasPrefix(b, []byte(`{"snavio_snapshot":1,`)) {
			return nil, loadErr(ReasonMalformed, "unknown signature algorithm or header layout")
		}
		return nil, loadErr(ReasonUnsigned, "the file does not start with a signed snapshot header")
	}
	rest := b[len(headPrefix):]
	end := bytes.IndexByte(rest, '"')
	if end < 0 || !validKeyID(string(rest[:end])) {
		return nil, loadErr(ReasonMalformed, "bad key_id")
	}
	id := string(rest[:end])
	rest = rest[end:]
	if !bytes.HasPrefix(rest, []byte(headSig)) {
		return nil, loadErr(ReasonMalformed, "no signature after key_id")
	}
	rest = rest[len(headSig):]
	enc := base64.StdEncoding
	n := enc.EncodedLen(ed25519.SignatureSize)
	if len(rest) < n || !bytes.HasPrefix(rest[n:], []byte(headDoc)) {
		return nil, loadErr(ReasonMalformed, "the signature is not "+strconv.Itoa(n)+" base64 characters")
	}
	var buf [ed25519.SignatureSize + 2]byte // DecodedLen of the padded form
	m, err := enc.Decode(buf[:], rest[:n])
	if err != nil || m != ed25519.SignatureSize {
		return nil, loadErr(ReasonMalformed, "the signature is not 64 bytes of valid base64")
	}
	sig := buf[:ed25519.SignatureSize]
	doc := rest[n+len(headDoc):]
	if len(doc) < 2 || doc[len(doc)-1] != '}' {
		return nil, loadErr(ReasonMalformed, "the file does not end after the document (truncated?)")
	}
	doc = doc[:len(doc)-1]
	pub, ok := trusted[id]
	if !ok {
		return nil, loadErr(ReasonUnknownKey, "key id "+strconv.Quote(id)+" is not trusted")
	}
	if len(pub) != ed25519.PublicKeySize {
		return nil, loadErr(ReasonUnknownKey, "trusted key "+strconv.Quote(id)+" is not an Ed25519 public key")
	}
	sum := sha512.Sum512(doc)
	if err := ed25519.VerifyWithOptions(pub, sum[:], sig, &ed25519.Options{Hash: crypto.SHA512}); err != nil {
		return nil, loadErr(ReasonBadSignature, "the signature does not verify with key "+strconv.Quote(id))
	}
	return doc, nil
}

// Open checks the framing and the signature of a sealed file and returns
// the signed document bytes (a sub-slice of b), for documents in another
// encoding than Parse's JSON. Failures are *LoadError.
func Open(b []byte, trusted TrustedKeys) ([]byte, error) { return unseal(b, trusted) }
