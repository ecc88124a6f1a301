package snapshot_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// fuzzOpts are the checks of both fuzz targets: the key of signer(…,
// "fuzz", 7) is trusted, the clock is t0 and the stale TTL 180 s.
func fuzzOpts(tb testing.TB) snapshot.ParseOptions {
	s := signer(tb, "fuzz", 7)
	return snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{"fuzz": s.PublicKey()},
		MaxBytes: 1 << 20, Now: t0, MaxAge: 180 * time.Second}
}

// check is the loader's contract on any input: no panic, and either a
// *LoadError with a reason, or a document of the asked kind, generated
// within the age window, that passes registry.Validate.
func check(t *testing.T, b []byte, o snapshot.ParseOptions) {
	doc, err := snapshot.Parse(b, o)
	if err != nil {
		var le *snapshot.LoadError
		if !errors.As(err, &le) || le.Reason == "" {
			t.Fatalf("Parse returned %T %v; want a *LoadError", err, err)
		}
		if doc != nil {
			t.Fatal("Parse returned a document with an error")
		}
		return
	}
	if doc.Kind != o.Kind || doc.Format != snapshot.Format || o.Now.Sub(doc.GeneratedAt) > o.MaxAge || doc.GeneratedAt.Sub(o.Now) > snapshot.MaxFutureSkew {
		t.Fatalf("Parse accepted %+v", doc)
	}
	if err := registry.Validate(&doc.Data); err != nil {
		t.Fatalf("Parse accepted invalid data: %v", err)
	}
}

// FuzzParse feeds whole files to the loader. Signatures cannot be forged
// by the fuzzer, so this explores the framing and the refusals; the seeds
// include valid files so mutations start from the real format.
func FuzzParse(f *testing.F) {
	o := fuzzOpts(f)
	f.Add(sealed(f, []byte(`{"format":"snavio.registry.snapshot/v1","kind":"full","version_id":"v","generated_at":"2026-11-21T12:00:00Z","ttl_policy":{}}`)))
	f.Fuzz(func(t *testing.T, b []byte) { check(t, b, o) })
}

// FuzzDocument signs arbitrary document bytes with the trusted key and
// loads them: this explores the JSON decoding, the metadata checks and
// validation behind a valid signature (a compromised or buggy generator).
func FuzzDocument(f *testing.F) {
	o := fuzzOpts(f)
	s := signer(f, "fuzz", 7)
	f.Add([]byte(`{"format":"snavio.registry.snapshot/v1","kind":"full","version_id":"v","generated_at":"2026-11-21T12:00:00Z","ttl_policy":{},"routes":[{"target":"a","command":"b","queue_arn":"arn:aws:sqs:eu-west-1:123456789012:q","dlq_arn":"arn:aws:sqs:eu-west-1:123456789012:d"}]}`))
	f.Fuzz(func(t *testing.T, doc []byte) {
		b, err := snapshot.Seal(context.Background(), s, doc)
		if err != nil {
			t.Fatal(err)
		}
		check(t, b, o)
	})
}

func sealed(tb testing.TB, doc []byte) []byte {
	b, err := snapshot.Seal(context.Background(), signer(tb, "fuzz", 7), doc)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}
