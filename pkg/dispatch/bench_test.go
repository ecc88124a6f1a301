package dispatch_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	stdjson "encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/internal/benchdata"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// discard is a Sender that drops deliveries.
type discard struct{ n atomic.Int64 }

func (d *discard) Send(context.Context, *dispatch.Delivery) error { d.n.Add(1); return nil }

type benchFixture struct {
	d      *dispatch.Dispatcher
	detail []byte
	out    *discard
}

// newBench builds the whole warm path on the real stack (see buildStack):
// shield with warm keys from the caches, routing from caches fresh for the
// whole run, flow control with a rate-limited route whose tokens are
// prefetched in the background, a discarding sender and telemetry sink.
func newBench(b *testing.B, strict bool) *benchFixture {
	b.Helper()
	route := dispatchtest.RegistryRoute("mailer", "send")
	route.Profile = registry.ProfileLow
	route.RateLimit = registry.RateLimit{Max: 1 << 40, IntervalSeconds: 3600, Burst: 1 << 30}
	if strict {
		route.DedupeMode = registry.DedupeStrict
	}
	long := cache.TTL{Fresh: time.Hour, Stale: 2 * time.Hour}
	cc := cache.Config{Jitter: -1, Routing: long, HMAC: long, Bans: long, Profiles: map[registry.Profile]cache.TTL{registry.ProfileCritical: long, registry.ProfileLow: long}}
	out := &discard{}
	d, clk, _ := buildStack(b, route, cc, telemetry.Discard{}, out, func(f func()) { go f() })
	f := &fixture{clk: clk}
	f.key, _ = newKey()
	detail := f.message(b, uuidN(1), "mailer", "send", benchdata.Payload1K())
	bf := &benchFixture{d: d, detail: detail, out: out}
	if !strict {
		// Warm up: the first message escalates for a token and starts the
		// prefetch; wait until a message goes the fast path.
		for i := 0; ; i++ {
			res, _ := d.Fast(context.Background(), source, detail)
			if res.Outcome == dispatch.Delivered {
				break
			}
			if i > 1e6 {
				b.Fatalf("no token after warm-up: %+v", res)
			}
		}
	}
	return bf
}

// BenchmarkFastDispatch: a valid 1 KiB-payload message through shield and
// fast (warm caches, token available, non-strict route) to a sender that
// discards. Floor: BenchmarkFloorShield (json.Valid + one HMAC-SHA256).
func BenchmarkFastDispatch(b *testing.B) {
	bf := newBench(b, false)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(bf.detail)))
	for b.Loop() {
		if res, _ := bf.d.Fast(ctx, source, bf.detail); res.Outcome != dispatch.Delivered {
			b.Fatalf("result %+v", res)
		}
	}
}

// BenchmarkFloorShield is the floor of BenchmarkFastDispatch measured in
// this package's run too, so that the pair's ratio comes from one process:
// the same definition as the shield package's (json.Valid over the envelope
// plus one HMAC-SHA256 over the signed content, keyed state reused), on the
// bytes BenchmarkFastDispatch sends. tools/benchratio prefers a floor from
// the benchmark's own package.
func BenchmarkFloorShield(b *testing.B) {
	bf := newBench(b, false)
	env, _, err := envelope.NewParser(envelope.Limits{}).Parse(bf.detail, nil)
	if err != nil {
		b.Fatal(err)
	}
	m := signing.FromEnvelope(&env, source)
	content, err := signing.AppendContent(nil, "hmac-v1", &m)
	if err != nil {
		b.Fatal(err)
	}
	h := hmac.New(sha256.New, secret)
	var sum [sha256.Size]byte
	b.ReportAllocs()
	b.SetBytes(int64(len(bf.detail)))
	for b.Loop() {
		if !stdjson.Valid(bf.detail) {
			b.Fatal("invalid")
		}
		h.Reset()
		h.Write(content)
		h.Sum(sum[:0])
	}
}

// BenchmarkFastDispatchParallel is BenchmarkFastDispatch on every core.
func BenchmarkFastDispatchParallel(b *testing.B) {
	bf := newBench(b, false)
	ctx := context.Background()
	b.ReportAllocs()
	b.SetBytes(int64(len(bf.detail)))
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if res, _ := bf.d.Fast(ctx, source, bf.detail); res.Outcome != dispatch.Delivered {
				b.Errorf("result %+v", res)
				return
			}
		}
	})
}

// BenchmarkPeerWatermill is the peer of BenchmarkFastDispatchParallel:
// Watermill's GoChannel pub/sub and Router with a no-op handler, 1 KiB
// messages, published from every core, in the same run and GOMAXPROCS.
func BenchmarkPeerWatermill(b *testing.B) {
	logger := watermill.NopLogger{}
	ps := gochannel.NewGoChannel(gochannel.Config{OutputChannelBuffer: 1024}, logger)
	router, err := message.NewRouter(message.RouterConfig{}, logger)
	if err != nil {
		b.Fatal(err)
	}
	var handled sync.WaitGroup
	router.AddConsumerHandler("noop", "commands", ps, func(*message.Message) error {
		handled.Done()
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = router.Run(ctx) }()
	<-router.Running()
	payload := []byte(benchdata.Payload1K())
	b.ReportAllocs()
	b.SetBytes(int64(len(payload)))
	b.ResetTimer()
	handled.Add(b.N)
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := ps.Publish("commands", message.NewMessage(watermill.NewUUID(), payload)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	handled.Wait()
	b.StopTimer()
	_ = router.Close()
}

// BenchmarkStrictSlowPath: a strict-route command through shield, fast
// (escalates: dedupe_required) and slow (claim, budget, deliver, complete)
// against the in-memory store, each iteration a new command id.
func BenchmarkStrictSlowPath(b *testing.B) {
	bf := newBench(b, true)
	f := &fixture{clk: clock.NewFake(t0)}
	f.key, _ = newKey()
	const n = 4096
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = f.message(b, uuidN(100000+i), "mailer", "send", benchdata.Payload1K())
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		res, esc := bf.d.Fast(ctx, source, msgs[i%n])
		i++
		if res.Outcome != dispatch.Escalated {
			// After n iterations ids repeat: still inside the dedupe TTL, so
			// the fast path's seen-set drops them. Rebuild ids instead.
			b.Fatalf("fast = %+v (iteration %d)", res, i)
		}
		if res, err := bf.d.Slow(ctx, esc); err != nil || res.Outcome != dispatch.Delivered {
			b.Fatalf("slow = %+v %v", res, err)
		}
		if i%n == 0 {
			b.StopTimer()
			for j := range msgs {
				msgs[j] = f.message(b, uuidN(100000+i+j), "mailer", "send", benchdata.Payload1K())
			}
			b.StartTimer()
		}
	}
}
