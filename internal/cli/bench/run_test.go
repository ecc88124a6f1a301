package bench

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/send"
	"github.com/snavio/snavio/internal/devserver"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/syncbuf"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// fakeBus stands in for the bus where a test needs refusals and failed
// calls a real server does not produce on demand: it refuses every third
// entry and fails every fourth call.
type fakeBus struct {
	mu      sync.Mutex
	calls   int
	entries int
	sizes   map[int]int
}

func (b *fakeBus) PutEvents(_ context.Context, events []platform.Event) ([]platform.PutResult, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls++
	b.sizes[len(events)]++
	if b.calls%4 == 0 {
		return nil, errors.New("connection refused")
	}
	out := make([]platform.PutResult, len(events))
	for i, e := range events {
		if _, _, err := envelope.NewParser(envelope.Limits{}).Parse(e.Detail, nil); err != nil || e.Source != "acme/billing" {
			return nil, errors.New("not a signed command")
		}
		b.entries++
		if b.entries%3 == 0 {
			out[i] = platform.PutResult{ErrorCode: "ThrottlingException", ErrorMessage: "slow down"}
		} else {
			out[i] = platform.PutResult{EventID: "e"}
		}
	}
	return out, nil
}

func TestRunnerCountsRefusalsAndFailedCalls(t *testing.T) {
	k, err := signing.NewKey("hmac-v1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	bus := &fakeBus{sizes: map[int]int{}}
	clk := clock.System()
	r := &Runner{Bus: bus, Clock: clk, Limiter: NewLimiter(0, clk, nil)}
	s, err := r.Run(context.Background(), Plan{Source: "acme/billing", Target: "mailer", Command: "send", Payload: []byte(`{}`), Key: k,
		Count: 43, Concurrency: 3, Batch: 5})
	if err != nil {
		t.Fatal(err)
	}
	// 43 in batches of 5: 8 calls of 5 and one of 3; calls 4 and 8 fail
	// (10 entries, or 8 when one of them is the call of 3).
	if bus.calls != 9 || bus.sizes[5] != 8 || bus.sizes[3] != 1 {
		t.Fatalf("calls %d, sizes %v: want 8 of 5 and 1 of 3", bus.calls, bus.sizes)
	}
	if s.Sent != 43 || s.Requests != 9 || s.PutLatency.Count != 9 {
		t.Fatalf("sent %d in %d requests (%d latencies), want 43 in 9", s.Sent, s.Requests, s.PutLatency.Count)
	}
	failed := s.RequestErrors
	if failed != 43-bus.entries || (failed != 10 && failed != 8) || s.LastError != "connection refused" {
		t.Fatalf("request errors %d (last %q), the bus took %d entries", failed, s.LastError, bus.entries)
	}
	if s.Accepted+s.Refused["ThrottlingException"] != bus.entries || s.Refused["ThrottlingException"] != bus.entries/3 {
		t.Fatalf("accepted %d, refused %v of %d entries", s.Accepted, s.Refused, bus.entries)
	}
	if code := cmdutil.ExitCode(ExitError(s)); code != cmdutil.ExitNotAccepted {
		t.Fatalf("exit %d, want %d", code, cmdutil.ExitNotAccepted)
	}
}

func TestExitError(t *testing.T) {
	none := func() *Outcomes { return &Outcomes{Failed: map[string]int{}, Invalid: map[string]int{}} }
	for _, tc := range []struct {
		name string
		s    Summary
		want int
	}{
		{"all accepted", Summary{Sent: 3, Accepted: 3}, 0},
		{"all delivered", Summary{Sent: 3, Accepted: 3, Outcomes: &Outcomes{Delivered: 3}}, 0},
		{"refused", Summary{Sent: 3, Accepted: 2, Refused: map[string]int{"X": 1}, Outcomes: &Outcomes{Delivered: 1, Invalid: map[string]int{"bad_signature": 1}}}, cmdutil.ExitNotAccepted},
		{"request error", Summary{Sent: 3, RequestErrors: 3}, cmdutil.ExitNotAccepted},
		{"invalid before failed", Summary{Outcomes: &Outcomes{Invalid: map[string]int{"bad_signature": 1}, Failed: map[string]int{"acl-deny": 1}, Timeout: 1}}, cmdutil.ExitInvalid},
		{"failed", Summary{Outcomes: &Outcomes{Failed: map[string]int{"acl-deny": 1}, Duplicate: 1}}, cmdutil.ExitFailed},
		{"duplicate", Summary{Outcomes: &Outcomes{Duplicate: 1, Timeout: 2}}, cmdutil.ExitDuplicate},
		{"timeout", Summary{Outcomes: func() *Outcomes { o := none(); o.Timeout = 1; return o }()}, cmdutil.ExitTimeout},
		{"interrupted", Summary{Interrupted: true, Refused: map[string]int{"X": 1}}, cmdutil.ExitError},
	} {
		if got := cmdutil.ExitCode(ExitError(tc.s)); got != tc.want {
			t.Errorf("%s: exit %d, want %d (%v)", tc.name, got, tc.want, ExitError(tc.s))
		}
	}
}

func TestProgressLine(t *testing.T) {
	got := progressLine(Counts{Sent: 150, Accepted: 148, Refused: 2, Decided: 120, Elapsed: 1500 * time.Millisecond}, Plan{Count: 200, Wait: time.Second})
	if want := "sent 150/200  accepted 148  refused 2  decided 120  100.0/s  1.5s"; got != want {
		t.Fatalf("progress line\n got %q\nwant %q", got, want)
	}
	got = progressLine(Counts{Sent: 10, Accepted: 10, Elapsed: 2 * time.Second}, Plan{})
	if want := "sent 10  accepted 10  refused 0  5.0/s  2s"; got != want {
		t.Fatalf("progress line\n got %q\nwant %q", got, want)
	}
}

// TestBenchAgainstServe sends through a real dispatch serve (--demo): 200
// commands at 80/s with four calls in flight, and follows every outcome
// through one telemetry reader; then 20 to a target without a route.
func TestBenchAgainstServe(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a dispatch serve and sends for about 3 s")
	}
	dir := t.TempDir()
	srv, err := devserver.Start(context.Background(), devserver.Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Shutdown(context.Background()) })
	url := srv.Info().URL
	key, err := send.KeyFromFile(filepath.Join(dir, devserver.DemoKeyFile), devserver.DemoSource, "", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	ck, _, err := ingresscred.Resolve(ingresscred.Input{Tenant: devserver.DemoTenant, DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	bus := platform.NewBus(platform.Target{Kind: "local", Endpoint: url}, platform.BusOptions{Credentials: credentials.NewStaticCredentialsProvider(ck.AccessKeyID, ck.SecretAccessKey, "")})
	api := platform.NewLocal(url, platform.LocalToken(func(string) (string, bool) { return "", false }, dir), nil)

	bench := func(target string, count int, rate float64, batch int) Summary {
		t.Helper()
		cur, err := send.StartCursor(context.Background(), api, devserver.DemoTenant)
		if err != nil {
			t.Fatal(err)
		}
		clk := clock.System()
		r := &Runner{Bus: bus, Clock: clk, Limiter: NewLimiter(rate, clk, clock.Sleep), Telemetry: api, Cursor: cur}
		s, err := r.Run(context.Background(), Plan{Source: devserver.DemoSource, Target: target, Command: devserver.DemoCommand, Payload: []byte(`{"sku":"A-1"}`), Key: key,
			Count: count, Concurrency: 4, Batch: batch, Wait: 30 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	s := bench(devserver.DemoTarget, 200, 80, 1)
	o := s.Outcomes
	// The demo route allows 100/s (burst 20): at 80/s everything is
	// delivered unless the server stalls long enough to bunch more than
	// the burst, which a loaded machine can do; those few then fail
	// rate-limit-exceeded, and every command still has its outcome.
	limited := o.Failed["rate-limit-exceeded"]
	if s.Sent != 200 || s.Accepted != 200 || s.Requests != 200 || o.Delivered+limited != 200 || limited > 20 || o.Timeout != 0 || len(o.Failed) > 1 || len(o.Invalid)+o.Duplicate != 0 {
		t.Fatalf("summary %+v, outcomes %+v: want 200 sent, accepted and delivered", s, *o)
	}
	if s.PutLatency.Count != 200 || s.OutcomeLatency.Count != 200 || s.OutcomeLatency.P50MS <= 0 || s.OutcomeLatency.P50MS > s.OutcomeLatency.MaxMS {
		t.Fatalf("latencies put %+v outcome %+v", s.PutLatency, *s.OutcomeLatency)
	}
	// The limiter held the rate: 199 intervals of 12.5 ms at least.
	if s.ElapsedSeconds < 2.48 || s.Throughput > 81 {
		t.Fatalf("200 at 80/s took %gs (%g/s): the rate was not held", s.ElapsedSeconds, s.Throughput)
	}
	if err, want := ExitError(s), limited > 0; (err != nil) != want || want && cmdutil.ExitCode(err) != cmdutil.ExitFailed {
		t.Fatalf("exit: %v (rate-limited %d)", err, limited)
	}
	t.Logf("200 at 80/s: %d delivered, %d rate-limited; put p50 %gms p99 %gms; outcome p50 %gms p99 %gms", o.Delivered, limited, s.PutLatency.P50MS, s.PutLatency.P99MS, s.OutcomeLatency.P50MS, s.OutcomeLatency.P99MS)

	s = bench("nobody", 20, 0, 5)
	if s.Accepted != 20 || s.Requests != 4 || s.Outcomes.Failed["route-missing"] != 20 || s.Outcomes.Delivered != 0 {
		t.Fatalf("to a target without a route: %+v, outcomes %+v", s, *s.Outcomes)
	}
	if code := cmdutil.ExitCode(ExitError(s)); code != cmdutil.ExitFailed {
		t.Fatalf("exit %d, want %d", code, cmdutil.ExitFailed)
	}
}

// TestProgressDrawsWhileRunning: on a terminal the line is redrawn in
// place and the last one, drawn on stop, holds the final counts.
func TestProgressDrawsWhileRunning(t *testing.T) {
	k, err := signing.NewKey("hmac-v1", []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	clk := clock.System()
	r := &Runner{Bus: &fakeBus{sizes: map[int]int{}}, Clock: clk, Limiter: NewLimiter(0, clk, nil)}
	p := Plan{Source: "acme/billing", Target: "mailer", Command: "send", Payload: []byte(`{}`), Key: k, Count: 30, Concurrency: 2, Batch: 10}
	var buf syncbuf.Buffer
	pv := startProgress(&buf, r, p, time.Millisecond)
	if _, err := r.Run(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	pv.stop()
	out := buf.String()
	last := out[strings.LastIndex(out, "\r\x1b[K")+4:]
	if !strings.HasPrefix(last, "sent 30/30  accepted ") || !strings.HasSuffix(last, "\n") {
		t.Fatalf("last progress line %q (all: %q)", last, out)
	}
}
