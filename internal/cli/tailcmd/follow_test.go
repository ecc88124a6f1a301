package tailcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// restartable is a dispatch serve stand-in: the real telemetry API over an
// embedded store, as the operator, that can go down (connections are
// dropped, as when the process is gone) and come back, possibly on a
// fresh store (an ephemeral server's restart).
type restartable struct {
	t     *testing.T
	clock *clock.Fake
	mu    sync.Mutex
	down  bool
	store *embedded.Store
	api   http.Handler
	srv   *httptest.Server
}

func newRestartable(t *testing.T) *restartable {
	r := &restartable{t: t, clock: clock.NewFake(t0)}
	r.fresh()
	r.srv = httptest.NewServer(r)
	t.Cleanup(r.srv.Close)
	return r
}

// fresh replaces the store by an empty one.
func (r *restartable) fresh() {
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: r.clock})
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = st.Close() })
	bc := controlapi.NewBroadcaster()
	api, err := controlapi.NewTelemetryAPI(controlapi.TelemetryOptions{Store: st, Changed: bc.Changed, Clock: r.clock,
		// A wait ends at once: every empty read is an immediate heartbeat.
		NewTimer: func(time.Duration) (<-chan time.Time, func() bool) {
			c := make(chan time.Time, 1)
			c <- t0
			return c, func() bool { return true }
		}})
	if err != nil {
		r.t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	r.mu.Lock()
	r.store, r.api = st, mux
	r.mu.Unlock()
}

func (r *restartable) setDown(down bool) {
	r.mu.Lock()
	r.down = down
	r.mu.Unlock()
}

func (r *restartable) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	down, h := r.down, r.api
	r.mu.Unlock()
	if down {
		conn, _, err := w.(http.Hijacker).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	}
	h.ServeHTTP(w, req.WithContext(server.WithPrincipal(req.Context(), server.OperatorPrincipal())))
}

func (r *restartable) append(tenant string, n int) {
	r.t.Helper()
	r.mu.Lock()
	st := r.store
	r.mu.Unlock()
	for range n {
		_, err := st.AppendTelemetry(context.Background(), []embedded.OutboxEntry{{Tenant: tenant, Event: telemetry.Failed{
			CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: tenant + "/billing", Target: "mailer", CommandName: "send", Reason: telemetry.FailACLDeny}}})
		if err != nil {
			r.t.Fatal(err)
		}
	}
}

func (r *restartable) fetch() Fetch {
	return platform.NewLocal(r.srv.URL, nil, r.srv.Client()).ReadTelemetry
}

// recorder is a Sink that logs what it gets; onRecord runs on each record.
type recorder struct {
	log      []string
	onRecord func(wire.TelemetryRecord)
}

func (s *recorder) Record(r wire.TelemetryRecord) error {
	s.log = append(s.log, fmt.Sprintf("%s#%d", r.Tenant, r.Seq))
	if s.onRecord != nil {
		s.onRecord(r)
	}
	return nil
}
func (s *recorder) Heartbeat(time.Time) {}
func (s *recorder) Connection(connected bool, err error, retryIn time.Duration) {
	if connected {
		s.log = append(s.log, "connected")
		return
	}
	var ue *platform.UnreachableError
	s.log = append(s.log, fmt.Sprintf("lost(unreachable=%v, retry in %s)", errors.As(err, &ue), retryIn))
}
func (s *recorder) Gap(tenant string, from, to uint64) {
	s.log = append(s.log, fmt.Sprintf("gap %s #%d-#%d", tenant, from, to))
}
func (s *recorder) Reset(at uint64) { s.log = append(s.log, fmt.Sprintf("reset past #%d", at)) }

func TestFollowAcrossRestartsBackfillsWithoutGapOrDuplicate(t *testing.T) {
	srv := newRestartable(t)
	srv.append("acme", 3)
	srv.append("globex", 1) // another tenant's stream is not read
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var slept []time.Duration
	onSleep := map[int]func(){}
	sink := &recorder{}
	sink.onRecord = func(r wire.TelemetryRecord) {
		switch {
		case r.Seq == 3 && len(slept) == 0:
			// The server dies; events keep being appended while it is down
			// (they are durable), and it comes back on the second retry.
			srv.setDown(true)
			srv.append("acme", 3)
			onSleep[2] = func() { srv.setDown(false) }
		case r.Seq == 6:
			// Down again; meanwhile #7 and #8 age out of retention unread.
			srv.setDown(true)
			srv.append("acme", 2)
			srv.clock.Advance(2 * time.Hour)
			srv.append("acme", 1)
			if _, n, err := srv.store.PurgeTelemetry(context.Background(), time.Hour, 1000); err != nil || n != 9 {
				t.Errorf("purge: %d deleted, %v", n, err)
			}
			onSleep[3] = func() { srv.setDown(false) }
		case r.Seq == 9:
			// Restart on a fresh (ephemeral) store: the stream starts over.
			srv.fresh()
			srv.append("acme", 2)
		case r.Seq == 2 && len(slept) == 3:
			cancel()
		}
	}
	f := &Follower{
		Fetch: srv.fetch(), Sink: sink, Tenant: "acme", Follow: true,
		Sleep: func(_ context.Context, d time.Duration) error {
			slept = append(slept, d)
			if fn := onSleep[len(slept)]; fn != nil {
				fn()
			}
			return nil
		},
	}
	if err := f.Run(ctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	want := []string{
		"connected", "acme#1", "acme#2", "acme#3",
		"lost(unreachable=true, retry in 250ms)", "lost(unreachable=true, retry in 500ms)", "connected",
		"acme#4", "acme#5", "acme#6",
		"lost(unreachable=true, retry in 250ms)", "connected",
		"gap acme #7-#8", "acme#9",
		"reset past #9", "acme#1", "acme#2",
	}
	if got := strings.Join(sink.log, "\n"); got != strings.Join(want, "\n") {
		t.Fatalf("follower saw:\n%s\n\nwant:\n%s", got, strings.Join(want, "\n"))
	}
	if f.Duplicates != 0 {
		t.Errorf("%d duplicates from a correct server", f.Duplicates)
	}
}

// scripted is a Fetch that answers from a script and records the queries.
type scripted struct {
	queries []url.Values
	answers []func() (wire.TelemetryPage, error)
}

func (s *scripted) fetch(_ context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error) {
	s.queries = append(s.queries, q.Values())
	if len(s.answers) == 0 {
		return wire.TelemetryPage{}, errors.New("script exhausted")
	}
	a := s.answers[0]
	s.answers = s.answers[1:]
	return a()
}

func page(next uint64, seqs ...uint64) func() (wire.TelemetryPage, error) {
	return func() (wire.TelemetryPage, error) {
		p := wire.TelemetryPage{Records: []wire.TelemetryRecord{}, NextAfter: next, ServerTime: t0}
		for _, s := range seqs {
			p.Records = append(p.Records, wire.TelemetryRecord{Seq: s, Tenant: "acme", At: t0, Event: []byte(`{"event":"snavio.command.delivered"}`)})
		}
		return p, nil
	}
}

func fail(err error) func() (wire.TelemetryPage, error) {
	return func() (wire.TelemetryPage, error) { return wire.TelemetryPage{}, err }
}

func TestFollowFalseReadsToTheEndFromSince(t *testing.T) {
	s := &scripted{answers: []func() (wire.TelemetryPage, error){page(2, 1, 2), page(4, 3, 4), page(5, 5)}}
	sink := &recorder{}
	since := t0.Add(-10 * time.Minute)
	f := &Follower{Fetch: s.fetch, Sink: sink, Since: since, Limit: 2}
	if err := f.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sink.log, " "); got != "connected acme#1 acme#2 acme#3 acme#4 acme#5" {
		t.Fatalf("log: %s", got)
	}
	if len(s.queries) != 3 || s.queries[0].Get("since") != since.Format(time.RFC3339Nano) || s.queries[0].Has("after") ||
		s.queries[1].Get("after") != "2" || s.queries[2].Get("after") != "4" || s.queries[1].Has("since") {
		t.Fatalf("queries: %v", s.queries)
	}
	for _, q := range s.queries {
		if q.Has("wait") || q.Get("limit") != "2" {
			t.Fatalf("a read that does not follow must not wait: %v", q)
		}
	}
}

func TestFollowErrors(t *testing.T) {
	unreachable := &platform.UnreachableError{Endpoint: "http://x", Err: errors.New("connection refused")}
	forbidden := &platform.APIError{Status: 403, Message: "tenant:acme may not read globex"}
	busy := &platform.APIError{Status: 503, Message: "too many", RetryAfter: 3 * time.Second}
	noSleep := func(context.Context, time.Duration) error { return nil }

	// The first read is not retried: a wrong endpoint fails at once.
	f := &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){fail(unreachable)}}).fetch, Sink: &recorder{}, Follow: true, Sleep: noSleep}
	if err := f.Run(context.Background()); !errors.Is(err, unreachable) {
		t.Fatalf("first read unreachable: %v", err)
	}
	// A refusal is not retried either; a busy server is, no sooner than it asks.
	sink := &recorder{}
	var slept []time.Duration
	f = &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){page(1, 1), fail(busy), page(1), fail(forbidden)}}).fetch,
		Sink: sink, Follow: true, Sleep: func(_ context.Context, d time.Duration) error { slept = append(slept, d); return nil }}
	if err := f.Run(context.Background()); !errors.Is(err, forbidden) {
		t.Fatalf("forbidden: %v", err)
	}
	if len(slept) != 1 || slept[0] != 3*time.Second {
		t.Fatalf("slept %v, want the server's Retry-After of 3s", slept)
	}
	// Without --follow a failure after the first read is not retried.
	f = &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){page(2, 1, 2), fail(unreachable)}}).fetch, Sink: &recorder{}, Limit: 2}
	if err := f.Run(context.Background()); !errors.Is(err, unreachable) {
		t.Fatalf("no follow: %v", err)
	}
	// Cancelling while waiting to retry is a clean stop.
	ctx, cancel := context.WithCancel(context.Background())
	f = &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){page(1, 1), fail(unreachable)}}).fetch, Sink: &recorder{}, Follow: true,
		Sleep: func(ctx context.Context, _ time.Duration) error { cancel(); return ctx.Err() }}
	if err := f.Run(ctx); err != nil {
		t.Fatalf("cancelled: %v", err)
	}
}

func TestMisbehavingServer(t *testing.T) {
	// Records already handed over are dropped, not repeated.
	sink := &recorder{}
	f := &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){page(2, 1, 2), page(3, 2, 3), page(3)}}).fetch, Sink: sink, Limit: 2}
	if err := f.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(sink.log, " "); got != "connected acme#1 acme#2 acme#3" || f.Duplicates != 1 {
		t.Fatalf("log %q, %d duplicates", got, f.Duplicates)
	}
	// Records with a next_after that does not move would loop forever.
	f = &Follower{Fetch: (&scripted{answers: []func() (wire.TelemetryPage, error){page(2, 1, 2), page(2, 3, 4)}}).fetch, Sink: &recorder{}, Limit: 2}
	if err := f.Run(context.Background()); err == nil || !strings.Contains(err.Error(), "next_after") {
		t.Fatalf("stuck cursor: %v", err)
	}
}

func TestBackoffDoublesToACap(t *testing.T) {
	var got []time.Duration
	for a := 1; a <= 8; a++ {
		got = append(got, Backoff(a))
	}
	want := []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 10 * time.Second, 10 * time.Second}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("backoff %v, want %v", got, want)
	}
}
