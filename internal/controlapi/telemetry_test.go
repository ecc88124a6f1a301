package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

const operatorToken = "op-token"

// tokens maps tenant tokens to their tenant.
type tokens map[string]string

func (tk tokens) Authenticate(_ context.Context, token string) (server.Principal, error) {
	if t, ok := tk[token]; ok {
		return server.TenantPrincipal(t), nil
	}
	return server.Principal{}, server.ErrUnknownToken
}

// fakeTimers hands out timers the test fires by hand.
type fakeTimers struct {
	mu    sync.Mutex
	asked []time.Duration
	made  chan chan time.Time
}

func (f *fakeTimers) new(d time.Duration) (<-chan time.Time, func() bool) {
	f.mu.Lock()
	f.asked = append(f.asked, d)
	f.mu.Unlock()
	c := make(chan time.Time, 1)
	f.made <- c
	return c, func() bool { return true }
}

type telemetryEnv struct {
	t      *testing.T
	store  *embedded.Store
	clock  *clock.Fake
	bc     *Broadcaster
	api    *TelemetryAPI
	srv    *httptest.Server
	timers *fakeTimers
	// waits receives one value each time a request starts waiting.
	waits chan struct{}
}

func newTelemetryEnv(t *testing.T, tweak func(*TelemetryOptions)) *telemetryEnv {
	t.Helper()
	fc := clock.NewFake(t0)
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: fc})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	e := &telemetryEnv{t: t, store: st, clock: fc, bc: NewBroadcaster(), timers: &fakeTimers{made: make(chan chan time.Time, 64)}, waits: make(chan struct{}, 64)}
	o := TelemetryOptions{Store: st, Changed: e.bc.Changed, Clock: fc, NewTimer: e.timers.new}
	if tweak != nil {
		tweak(&o)
	}
	api, err := NewTelemetryAPI(o)
	if err != nil {
		t.Fatal(err)
	}
	api.onWait = func() { e.waits <- struct{}{} }
	e.api = api
	auth, err := server.NewAuthenticator(operatorToken, tokens{"acme-token": "acme", "globex-token": "globex"})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	e.srv = httptest.NewServer(auth.Middleware(mux))
	t.Cleanup(e.srv.Close)
	return e
}

// appendEv appends one delivered event per source (tenant = before '/')
// and notifies.
func (e *telemetryEnv) appendEv(sources ...string) {
	e.t.Helper()
	var entries []embedded.OutboxEntry
	for _, s := range sources {
		tenant, _, _ := strings.Cut(s, "/")
		entries = append(entries, embedded.OutboxEntry{Tenant: tenant, Event: telemetry.Delivered{
			CommandID: fmt.Sprintf("id-%d", len(entries)), Source: s, Target: "mailer", CommandName: "send", Timestamp: t0.Format(time.RFC3339), Path: telemetry.PathFast,
		}})
	}
	if _, err := e.store.AppendTelemetry(context.Background(), entries); err != nil {
		e.t.Fatal(err)
	}
	e.bc.Notify()
}

type telemetryAnswer struct {
	status int
	header http.Header
	page   wire.TelemetryPage
	err    server.APIError
	raw    string
}

func (e *telemetryEnv) get(token, path string) telemetryAnswer {
	e.t.Helper()
	return e.getCtx(context.Background(), token, path)
}

func (e *telemetryEnv) getCtx(ctx context.Context, token, path string) telemetryAnswer {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.srv.URL+path, nil)
	if err != nil {
		e.t.Error(err)
		return telemetryAnswer{}
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return telemetryAnswer{status: -1, raw: err.Error()}
	}
	defer resp.Body.Close()
	var a telemetryAnswer
	a.status, a.header = resp.StatusCode, resp.Header
	dec := json.NewDecoder(resp.Body)
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		e.t.Errorf("GET %s: body is not JSON: %v", path, err)
		return a
	}
	a.raw = string(raw)
	if a.status == http.StatusOK {
		if err := json.Unmarshal(raw, &a.page); err != nil {
			e.t.Errorf("GET %s: %v", path, err)
		}
	} else if err := json.Unmarshal(raw, &a.err); err != nil {
		e.t.Errorf("GET %s: %v", path, err)
	}
	return a
}

func seqs(p wire.TelemetryPage) string {
	var b []string
	for _, r := range p.Records {
		b = append(b, fmt.Sprintf("%s#%d", r.Tenant, r.Seq))
	}
	return strings.Join(b, " ")
}

func TestReadPagesOneTenantAndAll(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a", "acme/b", "globex/x", "acme/c", "globex/y")

	a := e.get(operatorToken, "/v1/telemetry?tenant=acme&limit=2")
	if a.status != 200 || seqs(a.page) != "acme#1 acme#2" || a.page.NextAfter != 2 || !a.page.ServerTime.Equal(t0) {
		t.Fatalf("first page: %d %s", a.status, a.raw)
	}
	if strings.Contains(a.raw, `"global"`) {
		t.Errorf("a one-tenant read carries global numbers: %s", a.raw)
	}
	a = e.get(operatorToken, "/v1/telemetry?tenant=acme&after=2&limit=2")
	if seqs(a.page) != "acme#3" || a.page.NextAfter != 3 {
		t.Fatalf("second page: %s", a.raw)
	}
	var ev struct {
		Event  string `json:"event"`
		Source string `json:"source"`
	}
	if err := json.Unmarshal(a.page.Records[0].Event, &ev); err != nil || ev.Event != telemetry.NameDelivered || ev.Source != "acme/c" {
		t.Fatalf("event body %s: %v", a.page.Records[0].Event, err)
	}
	if !a.page.Records[0].At.Equal(t0) {
		t.Errorf("at = %v", a.page.Records[0].At)
	}
	// Nothing after the end, without wait: an empty page at once.
	a = e.get(operatorToken, "/v1/telemetry?tenant=acme&after=3")
	if a.status != 200 || len(a.page.Records) != 0 || a.page.NextAfter != 3 || !strings.Contains(a.raw, `"records":[]`) {
		t.Fatalf("end of stream: %d %s", a.status, a.raw)
	}

	// Every tenant: global order, after counts global numbers.
	a = e.get(operatorToken, "/v1/telemetry?limit=3")
	if seqs(a.page) != "acme#1 acme#2 globex#1" || a.page.NextAfter != 3 || a.page.Records[2].Global != 3 {
		t.Fatalf("all, first page: %s", a.raw)
	}
	a = e.get(operatorToken, "/v1/telemetry?after=3")
	if seqs(a.page) != "acme#3 globex#2" || a.page.NextAfter != 5 {
		t.Fatalf("all, second page: %s", a.raw)
	}
}

func TestTenantIsolation(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a", "globex/x", "acme/b")

	a := e.get("acme-token", "/v1/telemetry")
	if a.status != 200 || seqs(a.page) != "acme#1 acme#2" {
		t.Fatalf("a tenant's read without tenant is its own: %d %s", a.status, a.raw)
	}
	a = e.get("acme-token", "/v1/telemetry?tenant=acme")
	if a.status != 200 || seqs(a.page) != "acme#1 acme#2" {
		t.Fatalf("own tenant: %d %s", a.status, a.raw)
	}
	for _, path := range []string{"/v1/telemetry?tenant=globex", "/v1/telemetry/streams?tenant=globex"} {
		a = e.get("acme-token", path)
		if a.status != http.StatusForbidden || !strings.Contains(a.err.Error, `"globex"`) || a.err.Fix == "" {
			t.Fatalf("%s as acme: %d %s", path, a.status, a.raw)
		}
	}
	a = e.get("nobody", "/v1/telemetry")
	if a.status != http.StatusUnauthorized {
		t.Fatalf("unknown token: %d", a.status)
	}

	var st wire.TelemetryStreams
	a = e.get("acme-token", "/v1/telemetry/streams")
	if err := json.Unmarshal([]byte(a.raw), &st); err != nil || len(st.Streams) != 1 || st.Streams[0].Tenant != "acme" || st.Streams[0].LastSeq != 2 || st.Streams[0].Stored != 2 {
		t.Fatalf("acme's streams: %s", a.raw)
	}
	a = e.get(operatorToken, "/v1/telemetry/streams")
	if err := json.Unmarshal([]byte(a.raw), &st); err != nil || len(st.Streams) != 2 || st.Streams[1].Tenant != "globex" || st.Streams[0].Oldest == nil || st.Streams[0].LastAckAt != nil {
		t.Fatalf("operator's streams: %s", a.raw)
	}
	if a = e.get(operatorToken, "/v1/telemetry/streams?tenant=a/b"); a.status != 400 {
		t.Fatalf("bad tenant: %d", a.status)
	}
	if a = e.get(operatorToken, "/v1/telemetry/streams?tenant=_platform"); a.status != 200 {
		t.Fatalf("the platform stream: %d %s", a.status, a.raw)
	}
	if a = e.get(operatorToken, "/v1/telemetry/streams?x=1"); a.status != 400 {
		t.Fatalf("unknown parameter: %d", a.status)
	}
}

func TestLongPollWakesOnAppend(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a")
	got := make(chan telemetryAnswer, 1)
	go func() { got <- e.get("acme-token", "/v1/telemetry?after=1&wait=30s") }()
	<-e.waits
	// Another tenant's append wakes the wait, which finds nothing and waits on.
	e.appendEv("globex/x")
	select {
	case a := <-got:
		t.Fatalf("answered on another tenant's append: %s", a.raw)
	default:
	}
	e.appendEv("acme/b")
	a := <-got
	if a.status != 200 || seqs(a.page) != "acme#2" || a.page.NextAfter != 2 {
		t.Fatalf("woken read: %d %s", a.status, a.raw)
	}
	if e.api.Waiting() != 0 {
		t.Errorf("%d still waiting", e.api.Waiting())
	}
}

func TestHeartbeatAfterWaitAndCap(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a")
	got := make(chan telemetryAnswer, 1)
	go func() { got <- e.get(operatorToken, "/v1/telemetry?after=1&wait=1h") }()
	<-e.waits
	timer := <-e.timers.made
	e.clock.Advance(30 * time.Second)
	timer <- e.clock.Now()
	a := <-got
	if a.status != 200 || len(a.page.Records) != 0 || a.page.NextAfter != 1 || !a.page.ServerTime.Equal(t0.Add(30*time.Second)) {
		t.Fatalf("heartbeat: %d %s", a.status, a.raw)
	}
	e.timers.mu.Lock()
	defer e.timers.mu.Unlock()
	if len(e.timers.asked) != 1 || e.timers.asked[0] != DefaultMaxWait {
		t.Fatalf("wait=1h asked timers %v, want one of %v", e.timers.asked, DefaultMaxWait)
	}
}

func TestWaitersAreBounded(t *testing.T) {
	e := newTelemetryEnv(t, func(o *TelemetryOptions) { o.MaxWaiters, o.MaxWaitersPerPrincipal, o.RetryAfter = 2, 1, 2*time.Second })
	var pending []chan telemetryAnswer
	wait := func(token string) {
		c := make(chan telemetryAnswer, 1)
		go func() { c <- e.get(token, "/v1/telemetry?wait=10s") }()
		<-e.waits
		pending = append(pending, c)
	}
	wait("acme-token")
	a := e.get("acme-token", "/v1/telemetry?wait=10s")
	if a.status != http.StatusTooManyRequests || a.header.Get("Retry-After") != "2" || !strings.Contains(a.err.Error, "tenant:acme") {
		t.Fatalf("second wait of one caller: %d %q %s", a.status, a.header.Get("Retry-After"), a.raw)
	}
	// Without wait nothing is held, so the bound does not apply.
	if a = e.get("acme-token", "/v1/telemetry"); a.status != 200 {
		t.Fatalf("read without wait: %d %s", a.status, a.raw)
	}
	wait(operatorToken)
	a = e.get("globex-token", "/v1/telemetry?wait=10s")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") != "2" {
		t.Fatalf("wait beyond the server's bound: %d %q %s", a.status, a.header.Get("Retry-After"), a.raw)
	}
	e.appendEv("acme/a")
	for _, c := range pending {
		if a := <-c; a.status != 200 || len(a.page.Records) != 1 {
			t.Fatalf("woken: %d %s", a.status, a.raw)
		}
	}
	if e.api.Waiting() != 0 {
		t.Fatalf("%d waiting after all answered", e.api.Waiting())
	}
}

func TestClientLeavingFreesItsSlot(t *testing.T) {
	e := newTelemetryEnv(t, func(o *TelemetryOptions) { o.MaxWaitersPerPrincipal = 1 })
	ctx, cancel := context.WithCancel(context.Background())
	req := httptest.NewRequestWithContext(server.WithPrincipal(ctx, server.TenantPrincipal("acme")), http.MethodGet, "/v1/telemetry?wait=30s", nil)
	rec := httptest.NewRecorder()
	mux := http.NewServeMux()
	e.api.Register(mux)
	done := make(chan struct{})
	go func() { mux.ServeHTTP(rec, req); close(done) }()
	<-e.waits
	if e.api.Waiting() != 1 {
		t.Fatalf("waiting = %d", e.api.Waiting())
	}
	cancel()
	<-done
	if e.api.Waiting() != 0 {
		t.Fatalf("waiting after the client left = %d", e.api.Waiting())
	}
}

func TestSinceSeeksByAppendTime(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	for i := range 10 {
		src := "acme/a"
		if i%3 == 2 {
			src = "globex/x"
		}
		e.appendEv(src)
		e.clock.Advance(time.Minute)
	}
	// Appended at t0+0..9 min: acme at 0,1,3,4,6,7,9; globex at 2,5,8.
	since := url.QueryEscape(t0.Add(4 * time.Minute).Format(time.RFC3339))
	a := e.get(operatorToken, "/v1/telemetry?tenant=acme&since="+since)
	if seqs(a.page) != "acme#4 acme#5 acme#6 acme#7" || a.page.NextAfter != 7 {
		t.Fatalf("acme since +4m: %s", a.raw)
	}
	a = e.get(operatorToken, "/v1/telemetry?since="+since)
	if seqs(a.page) != "acme#4 globex#2 acme#5 acme#6 globex#3 acme#7" || a.page.NextAfter != 10 {
		t.Fatalf("all since +4m: %s", a.raw)
	}
	// Before everything and after everything.
	a = e.get(operatorToken, "/v1/telemetry?tenant=globex&since="+url.QueryEscape(t0.Add(-time.Hour).Format(time.RFC3339)))
	if seqs(a.page) != "globex#1 globex#2 globex#3" {
		t.Fatalf("since before all: %s", a.raw)
	}
	a = e.get(operatorToken, "/v1/telemetry?since="+url.QueryEscape(t0.Add(time.Hour).Format(time.RFC3339)))
	if len(a.page.Records) != 0 || a.page.NextAfter != 10 {
		t.Fatalf("since after all: %s", a.raw)
	}
	// A tenant with no stream.
	a = e.get(operatorToken, "/v1/telemetry?tenant=initech&since="+since)
	if a.status != 200 || len(a.page.Records) != 0 || a.page.NextAfter != 0 {
		t.Fatalf("no stream: %d %s", a.status, a.raw)
	}
}

func TestAfterPastTheEndIsAReset(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a", "globex/x", "acme/b")
	for _, path := range []string{"/v1/telemetry?tenant=acme&after=3&wait=5s", "/v1/telemetry?after=4&wait=5s"} {
		a := e.get(operatorToken, path)
		if a.status != http.StatusConflict || !strings.Contains(a.err.Error, "past the end") || !strings.Contains(a.err.Fix, "after=0") {
			t.Fatalf("%s: %d %s", path, a.status, a.raw)
		}
	}
	// At the end exactly is not a reset: it waits.
	got := make(chan telemetryAnswer, 1)
	go func() { got <- e.get(operatorToken, "/v1/telemetry?after=3&wait=5s") }()
	<-e.waits
	(<-e.timers.made) <- t0
	if a := <-got; a.status != 200 || a.page.NextAfter != 3 {
		t.Fatalf("at the end: %d %s", a.status, a.raw)
	}
}

func TestTelemetryBadQueries(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	for q, param := range map[string]string{
		"after=-1":                           "after",
		"after=x":                            "after",
		"after=18446744073709551615":         "after",
		"limit=0":                            "limit",
		"limit=1001":                         "limit",
		"wait=-1s":                           "wait",
		"wait=soon":                          "wait",
		"since=yesterday":                    "since",
		"after=1&since=2026-11-21T12:00:00Z": "since",
		"tenant=a%20b":                       "tenant",
		"tenant=a/b":                         "tenant",
		"tenant=":                            "tenant",
		// Printable, but not a tenant id: no source carries it, so no stream has it.
		"tenant=acme!":                      "tenant",
		"tenant=-acme":                      "tenant",
		"tenant=" + strings.Repeat("a", 65): "tenant",
		"afer=1":                            `"afer"`,
		"limit=1&limit=2":                   "limit",
	} {
		a := e.get(operatorToken, "/v1/telemetry?"+q)
		if a.status != http.StatusBadRequest || !strings.Contains(a.err.Error, "query parameter "+param) || a.err.Fix == "" {
			t.Errorf("%s: %d %s", q, a.status, a.raw)
		}
	}
}

func TestNewRequiresStoreAndChanged(t *testing.T) {
	if _, err := NewTelemetryAPI(TelemetryOptions{Changed: NewBroadcaster().Changed}); err == nil {
		t.Error("no store accepted")
	}
	st, _ := embedded.Open(embedded.Options{Ephemeral: true})
	defer st.Close()
	if _, err := NewTelemetryAPI(TelemetryOptions{Store: st}); err == nil {
		t.Error("no Changed accepted")
	}
}

func TestBroadcasterWakesAllWaitersOnce(t *testing.T) {
	b := NewBroadcaster()
	c1, c2 := b.Changed(), b.Changed()
	b.Notify()
	for _, c := range []<-chan struct{}{c1, c2} {
		select {
		case <-c:
		default:
			t.Fatal("a waiter was not woken")
		}
	}
	select {
	case <-b.Changed():
		t.Fatal("a channel taken after Notify is already closed")
	default:
	}
}

func FuzzParseTelemetryQuery(f *testing.F) {
	for _, s := range []string{"", "tenant=acme&after=10&limit=5&wait=5s", "since=2026-11-21T12:00:00Z", "wait=30", "after=1&since=x",
		"limit=1001", "tenant=%00", "wait=9999999999h", "after=18446744073709551614", "a=1&a=2", "%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseTelemetryQuery(v, DefaultMaxWait)
		if err != nil {
			var qe *TelemetryQueryError
			if !errors.As(err, &qe) || qe.Fix == "" {
				t.Fatalf("%q: error without a fix: %v", raw, err)
			}
			return
		}
		if q.Limit < 1 || q.Limit > wire.TelemetryMaxLimit || q.Wait < 0 || q.Wait > DefaultMaxWait {
			t.Fatalf("%q: out of bounds: %+v", raw, q)
		}
		if q.Tenant != "" && !telemetry.ValidStream(q.Tenant) || q.HasAfter && !q.Since.IsZero() || q.After == ^uint64(0) {
			t.Fatalf("%q: invalid query accepted: %+v", raw, q)
		}
	})
}

func (e *telemetryEnv) ack(token, body string) (int, string) {
	e.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, e.srv.URL+"/v1/telemetry/ack", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestAckMovesTheConsumerCursor(t *testing.T) {
	e := newTelemetryEnv(t, nil)
	e.appendEv("acme/a", "globex/x", "acme/b")
	if code, body := e.ack("acme-token", `{"seq":1}`); code != http.StatusNoContent {
		t.Fatalf("own ack: %d %s", code, body)
	}
	var st wire.TelemetryStreams
	a := e.get("acme-token", "/v1/telemetry/streams")
	if err := json.Unmarshal([]byte(a.raw), &st); err != nil || st.Streams[0].Cursor != 1 || st.Streams[0].Unconsumed != 1 || st.Streams[0].LastAckAt == nil {
		t.Fatalf("after the ack: %s", a.raw)
	}
	for _, c := range []struct {
		token, body string
		code        int
	}{
		{"acme-token", `{"tenant":"globex","seq":1}`, http.StatusForbidden},
		{"acme-token", `{"seq":3}`, http.StatusConflict}, // past the stream's end
		{"acme-token", `{"seq":0}`, http.StatusBadRequest},
		{"acme-token", `{"seq":1,"extra":true}`, http.StatusBadRequest},
		{"acme-token", `not json`, http.StatusBadRequest},
		{operatorToken, `{"seq":1}`, http.StatusBadRequest}, // the operator names the tenant
		{operatorToken, `{"tenant":"globex","seq":1}`, http.StatusNoContent},
		{"nobody", `{"seq":1}`, http.StatusUnauthorized},
	} {
		if code, body := e.ack(c.token, c.body); code != c.code {
			t.Errorf("ack %s as %s: %d %s, want %d", c.body, c.token, code, body, c.code)
		}
	}
}
