package snapshot_test

import (
	"fmt"
	"os"
	"runtime"
	rtmetrics "runtime/metrics"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// heap returns the bytes of live heap objects after a full collection.
func heap() uint64 {
	runtime.GC()
	s := []rtmetrics.Sample{{Name: "/gc/heap/live:bytes"}}
	rtmetrics.Read(s)
	return s[0].Value.Uint64()
}

// load parses body and seeds fresh caches. It returns the document's
// Measure, the live heap the loaded document and caches hold (measured as
// the drop in live heap once they are released) and the time taken.
func load(t testing.TB, body []byte) (snapshot.Size, int64, time.Duration) {
	s := signer(t, "bench", 1)
	start := time.Now()
	doc, err := snapshot.Parse(body, snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: snapshot.TrustedKeys{"bench": s.PublicKey()}, MaxBytes: 1 << 31})
	if err != nil {
		t.Fatal(err)
	}
	c, err := cache.New(cache.Config{}, cache.Deps{Reader: memstore.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Seed(&doc.Data, doc.GeneratedAt); err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	size := snapshot.Measure(doc, len(body))
	with := heap()
	runtime.KeepAlive(c)
	runtime.KeepAlive(doc)
	c, doc = nil, nil
	without := heap()
	runtime.KeepAlive(body)
	return size, int64(with) - int64(without), took
}

func TestSizeEstimate(t *testing.T) {
	if testing.Short() {
		t.Skip("measures heap")
	}
	body := sealedFull(t, benchData(20_000, 2_000))
	s, measured, _ := load(t, body)
	if s.Routes != 20_000 || s.ACLs != 20_000 || s.Keys != 2_000 || s.FileBytes != int64(len(body)) {
		t.Fatalf("counts %+v", s)
	}
	ratio := float64(s.MemoryBytes) / float64(measured)
	t.Logf("estimate %d bytes, measured %d bytes (ratio %.2f)", s.MemoryBytes, measured, ratio)
	if ratio < 0.8 || ratio > 1.2 {
		t.Fatalf("estimate %d is %.2fx the measured heap %d; recalibrate Measure", s.MemoryBytes, ratio, measured)
	}
}

// TestSizeTable prints the measured size table of docs/registry/snapshots.md.
// Run with SNAVIO_SIZE_TABLE=1 (it needs several GB for 1M).
func TestSizeTable(t *testing.T) {
	if os.Getenv("SNAVIO_SIZE_TABLE") == "" {
		t.Skip("set SNAVIO_SIZE_TABLE=1 to measure the size table")
	}
	fmt.Println("| routes and ACLs | keysets | file bytes | measured heap | Measure estimate | parse+verify+validate+index |")
	fmt.Println("| ---: | ---: | ---: | ---: | ---: | ---: |")
	for _, n := range []int{10_000, 100_000, 1_000_000} {
		body := sealedFull(t, benchData(n, n/10))
		s, measured, took := load(t, body)
		fmt.Printf("| %d | %d | %.1f MiB | %.1f MiB | %.1f MiB | %v |\n", n, n/10, mib(len(body)), mib(int(measured)), mib(int(s.MemoryBytes)), took.Round(time.Millisecond))
	}
}

func mib(n int) float64 { return float64(n) / (1 << 20) }
