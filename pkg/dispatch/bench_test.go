package dispatch_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/ThreeDotsLabs/watermill/pubsub/gochannel"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// payload1K is a canonical JSON object of exactly 1024 bytes (the same
// shape as the shield's benchmarks, whose BenchmarkFloorShield is the
// floor of these).
func payload1K() string {
	var sb strings.Builder
	sb.WriteString("{")
	for i := 0; ; i++ {
		field := fmt.Sprintf(`"k%03d":"value number %04d",`, i, i)
		if sb.Len()+len(field) > 1024-40 {
			break
		}
		sb.WriteString(field)
	}
	pad := 1024 - sb.Len() - len(`"zz":""}`)
	sb.WriteString(`"zz":"` + strings.Repeat("p", pad) + `"}`)
	return sb.String()
}

// discard is a Sender that drops deliveries.
type discard struct{ n atomic.Int64 }

func (d *discard) Send(context.Context, *dispatch.Delivery) error { d.n.Add(1); return nil }

type benchFixture struct {
	d      *dispatch.Dispatcher
	detail []byte
	out    *discard
}

// newBench builds the whole warm path: real shield with warm keys, the
// route table, real flow control over the in-memory store with a
// rate-limited route whose tokens are prefetched, a discarding sender and
// a discarding telemetry sink.
func newBench(b *testing.B, strict bool) *benchFixture {
	b.Helper()
	clk := clock.NewFake(t0)
	ring, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{
		source: {{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}},
	})
	if err != nil {
		b.Fatal(err)
	}
	tel := telemetry.Discard{}
	sh, err := shield.New(shield.Config{}, shield.Deps{Clock: clk, Keys: ring, Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	fl, err := flow.New(flow.Config{Instance: "bench", Clock: clk}, memstore.NewFlow(), tel, nil)
	if err != nil {
		b.Fatal(err)
	}
	limit := flow.RateLimit{Max: 1 << 40, Interval: time.Hour, Burst: 1 << 30}
	r := &routes{m: map[[2]string]dispatch.Route{{"mailer", "send"}: {QueueARN: queue, Flow: flow.Route{Strict: strict, RateLimit: limit}}}}
	out := &discard{}
	d, err := dispatch.New(dispatch.Deps{Shield: sh, Router: r, Flow: fl, Sender: out, Clock: clk, Telemetry: tel})
	if err != nil {
		b.Fatal(err)
	}
	f := &fixture{clk: clk}
	f.key, _ = newKey()
	detail := f.message(b, uuidN(1), "mailer", "send", payload1K())
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
	payload := []byte(payload1K())
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
		msgs[i] = f.message(b, uuidN(100000+i), "mailer", "send", payload1K())
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
				msgs[j] = f.message(b, uuidN(100000+i+j), "mailer", "send", payload1K())
			}
			b.StartTimer()
		}
	}
}
