package controlapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

const (
	src = "acme/billing"
	dlq = "mailer-dlq"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// pipeline stands in for the node: it verifies every replayed command the
// way the shield would (parse, HMAC with the registered key), archives
// accepted ones like the node does, and can refuse an id or call a hook
// after each acceptance.
type pipeline struct {
	t      *testing.T
	key    *signing.Key
	store  *embedded.Store
	clk    *clock.Fake
	mu     sync.Mutex
	got    []envelope.Envelope
	refuse string
	after  func(n int)
	seq    int
}

func (p *pipeline) Ingest(ctx context.Context, entries []server.Entry) []server.EntryResult {
	out := make([]server.EntryResult, len(entries))
	for i, e := range entries {
		env, _, err := envelope.NewParser(envelope.Limits{}).Parse(e.Detail, nil)
		if err != nil {
			p.t.Errorf("replayed detail does not parse: %v", err)
			continue
		}
		if err := p.key.VerifyEnvelope(&env, e.Source); err != nil {
			p.t.Errorf("replayed command %s is not validly signed: %v", env.Metadata.ID, err)
		}
		if p.refuse != "" && strings.HasSuffix(env.Metadata.ID, p.refuse) {
			out[i] = server.Refused(server.EntryErrInternal, "refused by the test")
			continue
		}
		p.mu.Lock()
		p.got = append(p.got, env)
		p.seq++
		id := "ev-" + strconv.Itoa(p.seq)
		n := len(p.got)
		p.mu.Unlock()
		if err := p.store.ArchiveAppend(ctx, embedded.ArchivedEvent{EventID: id, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: p.clk.Now()}); err != nil {
			p.t.Errorf("archive: %v", err)
		}
		out[i] = server.Accepted(id)
		if p.after != nil {
			p.after(n)
		}
	}
	return out
}

func (p *pipeline) ids() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	m := map[string]int{}
	for _, e := range p.got {
		m[e.Metadata.ID]++
	}
	return m
}

type replayEnv struct {
	t     *testing.T
	api   *ReplayAPI
	mux   *http.ServeMux
	store *embedded.Store
	clk   *clock.Fake
	pipe  *pipeline
	sig   *provenance.Signer // the dispatcher's delivery signer
}

func newReplayEnv(t *testing.T) *replayEnv {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	reg := memstore.NewRegistry()
	by := registry.Actor{Who: "test", At: t0.Add(-2 * time.Hour)}
	// Both targets dead-letter into dlq; billing into a DLQ of its own.
	strict := dispatchtest.RegistryRoute("accounts", "send")
	strict.DedupeMode = registry.DedupeStrict
	mailer := dispatchtest.RegistryRoute("mailer", "send")
	billing := dispatchtest.RegistryRoute("billing", "send")
	for _, r := range []*registry.Route{&strict, &mailer, &billing} {
		r.QueueARN, r.DLQARN = embedded.QueueARN(r.Target), embedded.QueueARN(dlq)
	}
	billing.DLQARN = embedded.QueueARN("billing-dlq")
	for _, it := range []registry.Item{
		// Commands were signed with hmac-v1; replays sign with hmac-v2.
		{Key: &registry.ServiceKey{Source: src, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-3 * time.Hour)}, {ID: "hmac-v2", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}}}},
		{Route: &strict}, {Route: &mailer}, {Route: &billing},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	for _, q := range []localqueue.QueueConfig{{Name: dlq}, {Name: "empty-dlq"}} {
		if _, err := st.CreateQueue(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	key, _ := signing.NewKey("hmac-v2", secret)
	p := &pipeline{t: t, key: key, store: st, clk: clk}
	sig, err := provenance.NewSigner(bytes.Repeat([]byte{0x5d}, 32))
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewReplayAPI(ReplayOptions{
		Store: st, Registry: reg, Pipeline: p, Audits: &replay.FileAudits{Dir: t.TempDir()}, Delivery: sig, Clock: clk,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Advance(d); return ctx.Err() },
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Register(mux)
	return &replayEnv{t: t, api: a, mux: mux, store: st, clk: clk, pipe: p, sig: sig}
}

// command returns command n's envelope signed with an old key version, as
// the producer sent it, and as the dispatcher delivered it (with
// command.source).
func command(t *testing.T, n int, target string, at time.Time) (sent, delivered []byte, id string) {
	id = fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n)
	e := envelope.New(id, at, target, "send", []byte(`{"n":`+strconv.Itoa(n)+`}`))
	e.Metadata.VersionID = "hmac-v1"
	old, _ := signing.NewKey("hmac-v1", secret)
	if err := old.SignEnvelope(&e, src); err != nil {
		t.Fatal(err)
	}
	sent, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	e.Command.Source = src
	delivered, err = e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return sent, delivered, id
}

// fillDLQ dead-letters n commands, sent a minute apart ending 10 min ago,
// as the dispatcher delivered them (signed); every fourth goes to the
// strict route accounts.
func (e *replayEnv) fillDLQ(n int) {
	e.t.Helper()
	for i := 1; i <= n; i++ {
		target := "mailer"
		if i%4 == 0 {
			target = "accounts"
		}
		_, body, id := command(e.t, i, target, e.clk.Now())
		e.deadLetter(dlq, e.delivered(id, target, body))
	}
	e.clk.Advance(10 * time.Minute)
}

// delivered is a command as the dispatcher delivers it to target.
func (e *replayEnv) delivered(id, target string, body []byte) provenance.Message {
	e.t.Helper()
	m := provenance.Message{CommandID: id, Source: src, Target: target, Command: "send", Body: body}
	if err := e.sig.Sign(&m); err != nil {
		e.t.Fatal(err)
	}
	return m
}

// deadLetter puts m into queue q with its attributes and the store's DLQ
// reason, as a redrive does.
func (e *replayEnv) deadLetter(q string, m provenance.Message) {
	e.t.Helper()
	attrs := m.Attributes()
	attrs[localqueue.AttrDLQReason] = localqueue.DLQReasonMaxReceives
	if _, err := e.store.Send(context.Background(), q, m.Body, attrs); err != nil {
		e.t.Fatal(err)
	}
}

func (e *replayEnv) depth(q string) int {
	e.t.Helper()
	qs, err := e.store.ListQueues(context.Background())
	if err != nil {
		e.t.Fatal(err)
	}
	for _, s := range qs {
		if s.Name == q {
			return s.Visible + s.InFlight
		}
	}
	e.t.Fatalf("no queue %s", q)
	return 0
}

func (e *replayEnv) do(ctx context.Context, p server.Principal, method, path string, body any) *httptest.ResponseRecorder {
	e.t.Helper()
	var b []byte
	if body != nil {
		b, _ = json.Marshal(body)
	}
	req := httptest.NewRequest(method, path, bytes.NewReader(b)).WithContext(server.WithPrincipal(ctx, p))
	w := httptest.NewRecorder()
	e.mux.ServeHTTP(w, req)
	return w
}

func (e *replayEnv) op(method, path string, body any) *httptest.ResponseRecorder {
	return e.do(context.Background(), server.OperatorPrincipal(), method, path, body)
}

// updates decodes a run's NDJSON answer and returns its last update.
func updates(t *testing.T, w *httptest.ResponseRecorder) ([]wire.ReplayUpdate, wire.ReplayUpdate) {
	t.Helper()
	if w.Code != http.StatusOK {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	var us []wire.ReplayUpdate
	sc := bufio.NewScanner(w.Body)
	for sc.Scan() {
		var u wire.ReplayUpdate
		if err := json.Unmarshal(sc.Bytes(), &u); err != nil {
			t.Fatalf("bad line %q: %v", sc.Text(), err)
		}
		us = append(us, u)
	}
	if len(us) < 2 || us[0].Event != wire.ReplayEventStarted || us[len(us)-1].Event != wire.ReplayEventFinished {
		t.Fatalf("updates = %+v", us)
	}
	return us, us[len(us)-1]
}

func TestPlanChangesNothing(t *testing.T) {
	e := newReplayEnv(t)
	e.fillDLQ(8)
	w := e.op("POST", "/v1/replays/plan", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "incident 42"})
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var pr wire.ReplayPlanResponse
	if err := json.Unmarshal(w.Body.Bytes(), &pr); err != nil {
		t.Fatal(err)
	}
	p := pr.Plan
	if p.Total != 8 || p.ByRoute["mailer/send"] != 6 || p.ByRoute["accounts/send"] != 2 || p.FirstID != "0f8fad5b-d9cb-469f-a165-000000000001" || p.LastID != "0f8fad5b-d9cb-469f-a165-000000000008" {
		t.Fatalf("plan = %+v", p)
	}
	// The accounts commands were queued 10 min ago: past the 300 s TTL.
	if p.Held != 0 || len(p.Warnings) != 0 {
		t.Fatalf("plan warns: %+v", p)
	}
	if len(e.pipe.got) != 0 || e.depth(dlq) != 8 {
		t.Fatalf("the plan sent %d or deleted (depth %d)", len(e.pipe.got), e.depth(dlq))
	}
	// A second plan right after sees the same: the plan's receives expire.
	e.clk.Advance(time.Millisecond)
	w = e.op("POST", "/v1/replays/plan", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Target: "accounts"})
	_ = json.Unmarshal(w.Body.Bytes(), &pr)
	if pr.Plan.Total != 2 {
		t.Fatalf("filtered plan = %+v", pr.Plan)
	}
}

func TestDLQReplayDeletesOnlyAccepted(t *testing.T) {
	e := newReplayEnv(t)
	e.fillDLQ(6)
	e.pipe.refuse = "000000000003"
	_, fin := updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "incident 42"}))
	a := fin.Replay
	if fin.Error != "" || a.Status != wire.ReplayDone || a.SentCount != 5 || a.Failed != 1 || a.Planned != 6 || a.Operator != "operator" {
		t.Fatalf("finished = %+v", fin)
	}
	if d := e.depth(dlq); d != 1 {
		t.Fatalf("DLQ depth %d after the replay, want 1 (the refused message stays)", d)
	}
	for _, env := range e.pipe.got {
		m := env.Metadata
		if !m.Replay || m.ReplayReason != "incident 42" || m.ReplayID != a.ID || m.VersionID != "hmac-v2" || m.Timestamp != envelope.FormatTimestamp(e.clk.Now()) {
			t.Fatalf("replayed metadata = %+v", m)
		}
	}
	// The audit lives server side, listed and shown without the sent ids.
	w := e.op("GET", "/v1/replays", nil)
	var l wire.ReplayList
	if err := json.Unmarshal(w.Body.Bytes(), &l); err != nil || len(l.Replays) != 1 || l.Replays[0].ID != a.ID || l.Replays[0].Sent != nil {
		t.Fatalf("list = %s %v", w.Body, err)
	}
	w = e.op("GET", "/v1/replays/"+a.ID, nil)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"reason":"incident 42"`) {
		t.Fatalf("show = %d %s", w.Code, w.Body)
	}
	// Resuming a finished replay is refused.
	if w := e.op("POST", "/v1/replays/"+a.ID+"/resume", nil); w.Code != http.StatusConflict {
		t.Fatalf("resume of a finished replay: %d %s", w.Code, w.Body)
	}
}

func TestStrictKeepIDHoldsAndNewIDRunsAgain(t *testing.T) {
	e := newReplayEnv(t)
	e.fillDLQ(4)
	e.clk.Advance(-8 * time.Minute) // #4 (accounts, strict) queued 2 min ago
	w := e.op("POST", "/v1/replays/plan", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r"})
	var pr wire.ReplayPlanResponse
	_ = json.Unmarshal(w.Body.Bytes(), &pr)
	if pr.Plan.Held != 1 || len(pr.Plan.Warnings) != 1 || !strings.Contains(pr.Plan.Warnings[0], "--dedupe new-id") {
		t.Fatalf("plan = %+v", pr.Plan)
	}
	e.clk.Advance(time.Millisecond)
	_, fin := updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r"}))
	if fin.Replay.SentCount != 3 || fin.Replay.Held != 1 || e.depth(dlq) != 1 {
		t.Fatalf("keep-id: %+v, depth %d", fin.Replay, e.depth(dlq))
	}
	e.clk.Advance(DefaultLease)
	_, fin = updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Dedupe: "new-id"}))
	last := e.pipe.got[len(e.pipe.got)-1].Metadata.ID
	if fin.Replay.SentCount != 1 || e.depth(dlq) != 0 || last == "0f8fad5b-d9cb-469f-a165-000000000004" || !envelope.ValidID(last) {
		t.Fatalf("new-id: %+v, depth %d, id %s", fin.Replay, e.depth(dlq), last)
	}
}

// TestInterruptAndResume cuts a DLQ replay after every possible number of
// accepted commands, by the client going away (Ctrl-C) or by the server
// shutting down, then resumes it: no command is sent twice, none is lost,
// and the DLQ ends empty.
func TestInterruptAndResume(t *testing.T) {
	const n = 13
	for cut := 1; cut < n; cut++ {
		for _, how := range []string{"client", "shutdown"} {
			e := newReplayEnv(t)
			e.fillDLQ(n)
			ctx, cancel := context.WithCancel(context.Background())
			e.pipe.after = func(got int) {
				if got == cut {
					if how == "client" {
						cancel()
					} else {
						e.api.Close()
					}
				}
			}
			req := wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r"}
			if cut%2 == 0 {
				req.Rate = 3 // one command per put, batches of 3
			}
			_, fin := updates(t, e.do(ctx, server.OperatorPrincipal(), "POST", "/v1/replays", req))
			id := fin.Replay.ID
			// Paced, every command is its own put; otherwise the batch in
			// hand (up to 10) is finished before the run stops.
			sentOK := fin.Replay.SentCount == cut || (req.Rate == 0 && fin.Replay.SentCount >= cut)
			if fin.Replay.Status != wire.ReplayInterrupted || !strings.Contains(fin.Error, "--resume "+id) || !sentOK {
				t.Fatalf("cut %d by %s: %+v", cut, how, fin)
			}
			e.pipe.after = nil
			e.api.mu.Lock()
			e.api.closed = false
			e.api.mu.Unlock()
			_, fin = updates(t, e.op("POST", "/v1/replays/"+id+"/resume", nil))
			if fin.Replay.Status != wire.ReplayDone || fin.Replay.Resumes != 1 || fin.Replay.SentCount != n {
				t.Fatalf("cut %d by %s: resume = %+v", cut, how, fin)
			}
			ids := e.pipe.ids()
			if len(ids) != n {
				t.Fatalf("cut %d by %s: %d distinct commands sent, want %d", cut, how, len(ids), n)
			}
			for id, c := range ids {
				if c != 1 {
					t.Fatalf("cut %d by %s: %s sent %d times", cut, how, id, c)
				}
			}
			if d := e.depth(dlq); d != 0 {
				t.Fatalf("cut %d by %s: %d messages left in the DLQ", cut, how, d)
			}
		}
	}
}

func TestLimitPausesAndResumeContinues(t *testing.T) {
	e := newReplayEnv(t)
	e.fillDLQ(5)
	_, fin := updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Limit: 2}))
	if fin.Replay.Status != wire.ReplayPaused || fin.Replay.SentCount != 2 || fin.Error != "" || e.depth(dlq) != 3 {
		t.Fatalf("limited run = %+v, depth %d", fin, e.depth(dlq))
	}
	_, fin = updates(t, e.op("POST", "/v1/replays/"+fin.Replay.ID+"/resume", wire.ReplayResumeRequest{Limit: 2}))
	if fin.Replay.Status != wire.ReplayPaused || fin.Replay.SentCount != 4 {
		t.Fatalf("second leg = %+v", fin)
	}
	_, fin = updates(t, e.op("POST", "/v1/replays/"+fin.Replay.ID+"/resume", nil))
	if fin.Replay.Status != wire.ReplayDone || fin.Replay.SentCount != 5 || e.depth(dlq) != 0 || len(e.pipe.ids()) != 5 {
		t.Fatalf("last leg = %+v", fin)
	}
}

func TestArchiveReplayNeverReadsItsOwnOutput(t *testing.T) {
	e := newReplayEnv(t)
	ctx := context.Background()
	for i := 1; i <= 12; i++ {
		sent, _, _ := command(t, i, "mailer", e.clk.Now())
		if err := e.store.ArchiveAppend(ctx, embedded.ArchivedEvent{EventID: "a" + strconv.Itoa(i), Source: src, DetailType: envelope.EventType, Detail: sent, ReceivedAt: e.clk.Now()}); err != nil {
			t.Fatal(err)
		}
		e.clk.Advance(time.Minute)
	}
	// No --start: refused with the fix.
	if w := e.op("POST", "/v1/replays", wire.ReplayRequest{From: "archive", Reason: "r"}); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "--start") {
		t.Fatalf("archive without start: %d %s", w.Code, w.Body)
	}
	start := t0.Add(2 * time.Minute) // commands 3..12
	w := e.op("POST", "/v1/replays/plan", wire.ReplayRequest{From: "archive", Reason: "r", Start: start, Rate: 100})
	var pr wire.ReplayPlanResponse
	_ = json.Unmarshal(w.Body.Bytes(), &pr)
	if pr.Plan.Total != 10 || !pr.End.Equal(e.clk.Now()) {
		t.Fatalf("archive plan = %s", w.Body)
	}
	// The pipeline archives what it accepts (as the node does); the
	// clock moves on while pacing, so the replay's output lands inside an
	// open-ended range unless the run bounds it at its start.
	_, fin := updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "archive", Reason: "r", Start: start, Rate: 100}))
	if fin.Replay.Status != wire.ReplayDone || fin.Replay.SentCount != 10 || len(e.pipe.got) != 10 {
		t.Fatalf("archive replay = %+v, %d put", fin.Replay, len(e.pipe.got))
	}
	if e.op("GET", "/v1/replays/"+fin.Replay.ID, nil).Code != http.StatusOK {
		t.Fatal("audit not found")
	}
}

func TestRunningWithoutARunShowsInterrupted(t *testing.T) {
	e := newReplayEnv(t)
	a := wire.ReplayAudit{ID: "11111111-2222-4333-8444-555555555555", Origin: "archive", Reason: "r", Status: wire.ReplayRunning, StartedAt: t0}
	if err := e.api.o.Audits.Create(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	w := e.op("GET", "/v1/replays/"+a.ID, nil)
	var got wire.ReplayAudit
	_ = json.Unmarshal(w.Body.Bytes(), &got)
	if got.Status != wire.ReplayInterrupted || !strings.Contains(got.Error, "--resume") {
		t.Fatalf("a crashed run shows %+v", got)
	}
}

func TestBadInput(t *testing.T) {
	e := newReplayEnv(t)
	for _, c := range []struct {
		body   any
		status int
		want   string
	}{
		{wire.ReplayRequest{From: "s3:bucket", Reason: "r"}, 400, "unknown --from"},
		{wire.ReplayRequest{From: "dlq:nope", Reason: "r"}, 404, "snavio queue list"},
		{wire.ReplayRequest{From: "dlq:" + dlq}, 400, "--reason-text"},
		{wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Rate: -1}, 400, "--rate"},
		{wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Dedupe: "maybe"}, 400, "keep-id"},
		{wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Start: t0, End: t0.Add(-time.Hour)}, 400, "bad time range"},
		{wire.ReplayRequest{From: "archive", Reason: "r", Start: t0.Add(-time.Hour), FailureReason: "x"}, 400, "archived events have none"},
		{wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Target: "Bad Target"}, 400, "--target"},
		{map[string]any{"from": "archive", "reson": "typo"}, 400, "unknown field"},
	} {
		for _, path := range []string{"/v1/replays/plan", "/v1/replays"} {
			w := e.op("POST", path, c.body)
			if w.Code != c.status || !strings.Contains(w.Body.String(), c.want) || !strings.Contains(w.Body.String(), `"fix"`) {
				t.Errorf("%s %+v: %d %s, want %d with %q", path, c.body, w.Code, w.Body, c.status, c.want)
			}
		}
	}
	if w := e.op("GET", "/v1/replays/..%2fetc", nil); w.Code != http.StatusBadRequest {
		t.Errorf("bad id: %d", w.Code)
	}
	if w := e.op("GET", "/v1/replays/11111111-2222-4333-8444-555555555555", nil); w.Code != http.StatusNotFound {
		t.Errorf("unknown id: %d %s", w.Code, w.Body)
	}
	if w := e.do(context.Background(), server.TenantPrincipal("acme"), "GET", "/v1/replays", nil); w.Code != http.StatusForbidden {
		t.Errorf("a tenant listed replays: %d", w.Code)
	}
}

// TestServerShutdownInterruptsRuns: a graceful shutdown of the http.Server
// the API runs in interrupts a running replay (its audit says interrupted)
// instead of waiting for it to finish.
func TestServerShutdownInterruptsRuns(t *testing.T) {
	e := newReplayEnv(t)
	e.fillDLQ(30)
	srv := httptest.NewUnstartedServer(servertest.Authenticated(e.mux, servertest.Operator))
	srv.Start()
	defer srv.Close()
	shut := make(chan error, 1)
	e.pipe.after = func(n int) {
		if n == 3 {
			go func() {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				defer cancel()
				shut <- srv.Config.Shutdown(ctx)
			}()
			// Hold the run until the shutdown has begun and cancelled it.
			select {
			case <-e.api.done:
			case <-time.After(10 * time.Second):
				t.Error("the shutdown did not close the API")
			}
		}
	}
	body, _ := json.Marshal(wire.ReplayRequest{From: "dlq:" + dlq, Reason: "r", Rate: 1})
	resp, err := http.Post(srv.URL+"/v1/replays", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var last wire.ReplayUpdate
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		_ = json.Unmarshal(sc.Bytes(), &last)
	}
	if err := <-shut; err != nil {
		t.Fatalf("shutdown waited for the replay: %v", err)
	}
	if last.Event != wire.ReplayEventFinished || last.Replay.Status != wire.ReplayInterrupted || last.Replay.SentCount != 3 {
		t.Fatalf("last update = %+v", last)
	}
}

// Records archived before verdicts were recorded are verified again, as
// of when they were received: a forgery among them is refused with the
// shield's reason, a recorded rejection with "shield:" and its reason.
func TestArchiveRecordsWithoutVerdictAreVerifiedAgain(t *testing.T) {
	e := newReplayEnv(t)
	ctx := context.Background()
	good, _, _ := command(t, 1, "mailer", e.clk.Now())
	forged := bytes.Replace(good, []byte(`"n":1`), []byte(`"n":2`), 1) // payload changed after signing
	stale, _, _ := command(t, 3, "mailer", e.clk.Now().Add(-2*time.Minute))
	rejected, _, _ := command(t, 4, "mailer", e.clk.Now())
	for i, ev := range []embedded.ArchivedEvent{
		{Detail: good}, {Detail: forged}, {Detail: stale},
		{Detail: rejected, Verdict: embedded.VerdictRejected, Reason: "source_banned"},
		{Detail: good, Verdict: embedded.VerdictAccepted, KeyVersion: "hmac-v2"},
	} {
		ev.EventID, ev.Source, ev.DetailType, ev.ReceivedAt = "a"+strconv.Itoa(i), src, envelope.EventType, e.clk.Now()
		if err := e.store.ArchiveAppend(ctx, ev); err != nil {
			t.Fatal(err)
		}
	}
	e.clk.Advance(time.Minute)
	w := e.op("POST", "/v1/replays/plan", wire.ReplayRequest{From: "archive", Reason: "r", Start: t0.Add(-time.Minute)})
	var pr wire.ReplayPlanResponse
	_ = json.Unmarshal(w.Body.Bytes(), &pr)
	want := map[string]int{"bad_signature": 1, "timestamp_too_old": 1, "shield:source_banned": 1, replay.RefuseKeyVersionMismatch: 1}
	if pr.Plan.Total != 1 || pr.Plan.Refused != 4 || fmt.Sprint(pr.Plan.RefusedBy) != fmt.Sprint(want) {
		t.Fatalf("plan = %s", w.Body)
	}
	_, fin := updates(t, e.op("POST", "/v1/replays", wire.ReplayRequest{From: "archive", Reason: "r", Start: t0.Add(-time.Minute)}))
	if fin.Replay.SentCount != 1 || fin.Replay.Refused != 4 || len(e.pipe.got) != 1 || e.pipe.got[0].Metadata.ID != "0f8fad5b-d9cb-469f-a165-000000000001" {
		t.Fatalf("run = %+v, put %d", fin.Replay, len(e.pipe.got))
	}
}

// A command signed with a key version revoked since it was received is
// refused: whoever leaked the key could have signed it.
func TestArchiveReplayRefusesARevokedKeysCommands(t *testing.T) {
	e := newReplayEnv(t)
	ctx := context.Background()
	sent, _, _ := command(t, 1, "mailer", e.clk.Now())
	if err := e.store.ArchiveAppend(ctx, embedded.ArchivedEvent{EventID: "a1", Source: src, DetailType: envelope.EventType, Detail: sent, ReceivedAt: e.clk.Now(), Verdict: embedded.VerdictAccepted, KeyVersion: "hmac-v1"}); err != nil {
		t.Fatal(err)
	}
	req := wire.ReplayRequest{From: "archive", Reason: "r", Start: t0.Add(-time.Minute)}
	e.clk.Advance(time.Minute)
	var pr wire.ReplayPlanResponse
	_ = json.Unmarshal(e.op("POST", "/v1/replays/plan", req).Body.Bytes(), &pr)
	if pr.Plan.Total != 1 || pr.Plan.Refused != 0 {
		t.Fatalf("before the revocation: %+v", pr.Plan)
	}
	reg := e.api.o.Registry.(*memstore.Registry)
	it, err := reg.Get(ctx, registry.KeyID(src), e.clk.Now())
	if err != nil {
		t.Fatal(err)
	}
	k := *it.Key
	k.Versions[0].NotAfter = e.clk.Now()
	if _, err := reg.Put(ctx, registry.Actor{Who: "test", At: e.clk.Now()}, registry.Item{Key: &k}); err != nil {
		t.Fatal(err)
	}
	_ = json.Unmarshal(e.op("POST", "/v1/replays/plan", req).Body.Bytes(), &pr)
	if pr.Plan.Total != 0 || pr.Plan.RefusedBy[replay.RefuseKeyRevoked] != 1 {
		t.Fatalf("after the revocation: %+v", pr.Plan)
	}
}
