package provenance

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"testing"
)

// benchMessage is a delivered command with a 1 KiB payload.
func benchMessage() Message {
	m := testMessage()
	m.Body = []byte(`{"metadata":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","timestamp":"2026-11-25T21:00:00.000Z","version_id":"hmac-v1","hmac":"` +
		string(bytes.Repeat([]byte("a"), 64)) + `"},"command":{"source":"demo/app","target":"orders","name":"create","payload":{"data":"` +
		string(bytes.Repeat([]byte("x"), 1012)) + `"}}}`)
	return m
}

// BenchmarkDeliverySign: the sender's signature of one delivered command
// (per-target state from the cache, canonical form, HMAC, base64). Floor:
// BenchmarkFloorDeliverySign.
func BenchmarkDeliverySign(b *testing.B) {
	s := testSigner(b)
	m := benchMessage()
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Body)))
	for b.Loop() {
		m.Signature = ""
		if err := s.Sign(&m); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorDeliverySign is one HMAC-SHA256 over the same signed bytes
// with a keyed state reused: what any HMAC signature of the message costs.
func BenchmarkFloorDeliverySign(b *testing.B) {
	s := testSigner(b)
	m := benchMessage()
	m.KeyID = s.ID()
	c, err := AppendCanonical(nil, &m)
	if err != nil {
		b.Fatal(err)
	}
	k := DeriveKey(testMaster, m.Target)
	h := hmac.New(sha256.New, k[:])
	var sum [sha256.Size]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Body)))
	for b.Loop() {
		h.Reset()
		h.Write(c)
		h.Sum(sum[:0])
	}
}

// BenchmarkDeliverySignEd25519 is what an asymmetric scheme would cost: an
// Ed25519 signature over the same bytes (not used; see
// docs/security/delivery-signature.md).
func BenchmarkDeliverySignEd25519(b *testing.B) {
	m := benchMessage()
	m.KeyID = "d1-00000000"
	c, err := AppendCanonical(nil, &m)
	if err != nil {
		b.Fatal(err)
	}
	priv := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{1}, ed25519.SeedSize))
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Body)))
	for b.Loop() {
		_ = ed25519.Sign(priv, c)
	}
}

// BenchmarkDeliveryVerify: the platform's check of one message (a replay
// from a dead-letter queue).
func BenchmarkDeliveryVerify(b *testing.B) {
	s := testSigner(b)
	m := benchMessage()
	if err := s.Sign(&m); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(m.Body)))
	for b.Loop() {
		if err := s.Verify(&m); err != nil {
			b.Fatal(err)
		}
	}
}
