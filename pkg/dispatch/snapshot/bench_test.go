package snapshot_test

import (
	"context"
	stdjson "encoding/json"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// benchData is dispatchtest.BenchRegistry at t0.
func benchData(n, k int) registry.Data { return dispatchtest.BenchRegistry(n, k, t0) }

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
