package snapshot_test

import (
	"bytes"
	"context"
	stdjson "encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// benchData returns a registry of n routes, n ACLs and k keysets shaped
// like production entries: every route has a DLQ, a profile and a rate
// limit; every ACL a profile; every keyset two versions.
func benchData(n, k int) registry.Data {
	d := registry.Data{Routes: make([]registry.Route, n), ACLs: make([]registry.ACL, n), Keys: make([]registry.ServiceKey, k)}
	profiles := registry.Profiles()
	for i := range n {
		target := fmt.Sprintf("target-%05d", i/20)
		command := fmt.Sprintf("command-%07d", i)
		d.Routes[i] = registry.Route{
			Target: target, Command: command,
			QueueARN: "arn:aws:sqs:eu-west-1:123456789012:" + target + "-commands",
			DLQARN:   "arn:aws:sqs:eu-west-1:123456789012:" + target + "-dlq",
			Profile:  profiles[i%3], RateLimit: registry.RateLimit{Max: 1000, IntervalSeconds: 1},
			Version: 3,
		}
		d.ACLs[i] = registry.ACL{Source: fmt.Sprintf("tenant-%04d/service-%d", i%k, i%7), Target: target, Command: command,
			Allow: true, Profile: profiles[i%3], Version: 1}
	}
	secret := bytes.Repeat([]byte{0x5a}, 32)
	for i := range k {
		d.Keys[i] = registry.ServiceKey{Source: fmt.Sprintf("tenant-%04d/service-%d", i, i%7), Version: 2, Versions: []registry.KeyVersion{
			{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-40 * 24 * time.Hour)},
			{ID: "hmac-v2", Secret: secret, ActivatedAt: t0.Add(-10 * 24 * time.Hour)},
		}}
	}
	return d
}

func sealedFull(tb testing.TB, d registry.Data) []byte {
	tb.Helper()
	doc := snapshot.Document{Format: snapshot.Format, Kind: snapshot.KindFull, VersionID: snapshot.VersionIDAt(t0), GeneratedAt: t0, Data: d}
	raw, err := json.Marshal(&doc, json.Deterministic(true))
	if err != nil {
		tb.Fatal(err)
	}
	b, err := snapshot.Seal(context.Background(), signer(tb, "bench", 1), raw)
	if err != nil {
		tb.Fatal(err)
	}
	return b
}

// BenchmarkSnapshotLoad parses, verifies, validates and indexes into the
// caches a full snapshot of 100k routes, 100k ACLs and 10k keysets.
func BenchmarkSnapshotLoad(b *testing.B) {
	body := sealedFull(b, benchData(100_000, 10_000))
	s := signer(b, "bench", 1)
	opts := snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{"bench": s.PublicKey()}, MaxBytes: 1 << 30, Now: t0, MaxAge: time.Minute}
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		doc, err := snapshot.Parse(body, opts)
		if err != nil {
			b.Fatal(err)
		}
		c, err := cache.New(cache.Config{}, cache.Deps{Reader: memstore.NewRegistry()})
		if err != nil {
			b.Fatal(err)
		}
		if err := c.Seed(&doc.Data, doc.GeneratedAt); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkFloorSnapshotLoad is the floor of BenchmarkSnapshotLoad:
// encoding/json's Unmarshal of the same bytes into any.
func BenchmarkFloorSnapshotLoad(b *testing.B) {
	body := sealedFull(b, benchData(100_000, 10_000))
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		var v any
		if err := stdjson.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
}
