package controlapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

type queueFixture struct {
	store *embedded.Store
	clk   *clock.Fake
	srv   *httptest.Server
	api   *QueueAPI
	// onPause runs at each long-poll pause, after the fake clock moved.
	mu      sync.Mutex
	pauses  []time.Duration
	onPause func(n int)
}

func newQueueFixture(t *testing.T, tweak func(*QueueOptions)) *queueFixture {
	t.Helper()
	fx := &queueFixture{clk: clock.NewFake(t0)}
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: fx.clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	fx.store = st
	o := QueueOptions{Queues: st, Clock: fx.clk, After: fx.after}
	if tweak != nil {
		tweak(&o)
	}
	fx.api, err = NewQueueAPI(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	fx.api.Register(mux)
	// A stand-in for the server's authentication: X-Test-Tenant names a
	// tenant principal, X-Test-None sends none, else the operator.
	fx.srv = httptest.NewServer(servertest.Authenticated(mux, servertest.Headers))
	t.Cleanup(fx.srv.Close)
	return fx
}

// after is the long poll's timer: it moves the fake clock by d and fires
// at once, so a 20 s wait takes no real time.
func (fx *queueFixture) after(d time.Duration) <-chan time.Time {
	fx.clk.Advance(d)
	fx.mu.Lock()
	fx.pauses = append(fx.pauses, d)
	n, hook := len(fx.pauses), fx.onPause
	fx.mu.Unlock()
	if hook != nil {
		hook(n)
	}
	ch := make(chan time.Time, 1)
	ch <- fx.clk.Now()
	return ch
}

func (fx *queueFixture) call(t *testing.T, method, path string, body any, hdr map[string]string) (int, []byte, http.Header) {
	t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		raw, err := json.Marshal(b)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(raw)
	}
	req, err := http.NewRequest(method, fx.srv.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, out, resp.Header
}

func (fx *queueFixture) ok(t *testing.T, method, path string, body, out any) {
	t.Helper()
	status, b, _ := fx.call(t, method, path, body, nil)
	if status/100 != 2 {
		t.Fatalf("%s %s = %d %s", method, path, status, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
}

func wantError(t *testing.T, status int, b []byte, wantStatus int, wantMsg string) {
	t.Helper()
	var e server.APIError
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("error body %s: %v", b, err)
	}
	if status != wantStatus || !strings.Contains(e.Error, wantMsg) || e.Fix == "" {
		t.Fatalf("got %d %+v; want %d with %q and a fix", status, e, wantStatus, wantMsg)
	}
}

func TestCreateListGet(t *testing.T) {
	fx := newQueueFixture(t, nil)
	var dlq wire.QueueCreateResult
	status, b, _ := fx.call(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders-dlq"}, nil)
	if status != http.StatusCreated {
		t.Fatalf("create = %d %s", status, b)
	}
	if err := json.Unmarshal(b, &dlq); err != nil || !dlq.Created || dlq.VisibilityTimeoutSeconds != 30 || dlq.MaxDepth != localqueue.DefaultMaxDepth {
		t.Fatalf("dlq = %+v (%v)", dlq, err)
	}
	req := wire.QueueCreateRequest{Name: "orders", DeadLetterQueue: "orders-dlq", MaxReceives: 3, VisibilityTimeoutSeconds: 10, MaxDepth: 50}
	fx.ok(t, "POST", "/v1/queues", req, nil)
	// The same configuration again is 200 and not created; another is 409.
	status, b, _ = fx.call(t, "POST", "/v1/queues", req, nil)
	if status != http.StatusOK || !strings.Contains(string(b), `"created":false`) {
		t.Fatalf("re-create = %d %s", status, b)
	}
	req.MaxDepth = 51
	status, b, _ = fx.call(t, "POST", "/v1/queues", req, nil)
	wantError(t, status, b, http.StatusConflict, "different configuration")

	if _, err := fx.store.Send(context.Background(), "orders", []byte(`{"a":1}`), nil); err != nil {
		t.Fatal(err)
	}
	fx.clk.Advance(5 * time.Second)
	var l wire.QueueList
	fx.ok(t, "GET", "/v1/queues", nil, &l)
	if len(l.Queues) != 2 || l.Next != nil || l.Queues[0].Name != "orders" || l.Queues[0].Visible != 1 || l.Queues[0].OldestAgeSeconds != 5 ||
		l.Queues[0].DeadLetterQueue != "orders-dlq" || l.Queues[0].ARN != embedded.QueueARN("orders") {
		t.Fatalf("list = %+v", l)
	}
	// Paging by name.
	l = wire.QueueList{}
	fx.ok(t, "GET", "/v1/queues?limit=1", nil, &l)
	if len(l.Queues) != 1 || l.Next == nil || *l.Next != "orders" {
		t.Fatalf("page 1 = %+v", l)
	}
	l = wire.QueueList{}
	fx.ok(t, "GET", "/v1/queues?limit=1&after=orders", nil, &l)
	if len(l.Queues) != 1 || l.Queues[0].Name != "orders-dlq" || l.Next != nil {
		t.Fatalf("page 2 = %+v", l)
	}
	var in wire.QueueInfo
	fx.ok(t, "GET", "/v1/queues/orders", nil, &in)
	if in.Visible != 1 || in.MaxReceives != 3 || in.VisibilityTimeoutSeconds != 10 {
		t.Fatalf("get = %+v", in)
	}
	status, b, _ = fx.call(t, "GET", "/v1/queues/nope", nil, nil)
	wantError(t, status, b, http.StatusNotFound, "does not exist")

	// A DLQ without max receives takes the default.
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "mailer", DeadLetterQueue: "orders-dlq"}, nil)
	in = wire.QueueInfo{}
	fx.ok(t, "GET", "/v1/queues/mailer", nil, &in)
	if in.MaxReceives != wire.QueueDefaultMaxReceives || in.DeadLetterQueue != "orders-dlq" {
		t.Fatalf("default max receives: get = %+v", in)
	}
}

func TestCreateRefusesBadInput(t *testing.T) {
	fx := newQueueFixture(t, nil)
	for _, tc := range []struct {
		body any
		want string
	}{
		{wire.QueueCreateRequest{Name: "orders.fifo"}, "FIFO"},
		{wire.QueueCreateRequest{Name: ""}, "must be 1 to 80"},
		{wire.QueueCreateRequest{Name: "a b"}, "not allowed"},
		{wire.QueueCreateRequest{Name: strings.Repeat("a", 81)}, "must be 1 to 80"},
		{wire.QueueCreateRequest{Name: "q", DeadLetterQueue: "q.fifo", MaxReceives: 1}, "dead-letter queue \"q.fifo\" is a FIFO"},
		{wire.QueueCreateRequest{Name: "q", DeadLetterQueue: "q", MaxReceives: 1}, "its own dead-letter"},
		{wire.QueueCreateRequest{Name: "q", DeadLetterQueue: "d", MaxReceives: -1}, "max receives -1"},
		{wire.QueueCreateRequest{Name: "q", DeadLetterQueue: "d", MaxReceives: 1001}, "max receives 1001"},
		{wire.QueueCreateRequest{Name: "q", MaxReceives: 2}, "without a dead-letter"},
		{wire.QueueCreateRequest{Name: "q", VisibilityTimeoutSeconds: 43201}, "visibility timeout"},
		{wire.QueueCreateRequest{Name: "q", MaxDepth: -1}, "max depth"},
		{`{"name":"q","bogus":1}`, "unknown field"},
		{`{"name":"q"}{}`, "more than one"},
		{`[`, "request body"},
	} {
		status, b, _ := fx.call(t, "POST", "/v1/queues", tc.body, nil)
		wantError(t, status, b, http.StatusBadRequest, tc.want)
	}
	// A DLQ that does not exist is 404.
	status, b, _ := fx.call(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "q", DeadLetterQueue: "d", MaxReceives: 2}, nil)
	wantError(t, status, b, http.StatusNotFound, "does not exist")
	// Oversized bodies are 413.
	status, b, _ = fx.call(t, "POST", "/v1/queues", `{"name":"`+strings.Repeat("a", 70<<10)+`"}`, nil)
	wantError(t, status, b, http.StatusRequestEntityTooLarge, "over 65536 bytes")
	for _, q := range []string{"limit=0", "limit=1001", "limit=x", "after=" + strings.Repeat("a", 81)} {
		status, b, _ = fx.call(t, "GET", "/v1/queues?"+q, nil, nil)
		wantError(t, status, b, http.StatusBadRequest, "")
	}
}

func TestAccess(t *testing.T) {
	fx := newQueueFixture(t, nil)
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders"}, nil)
	tenant := map[string]string{"X-Test-Tenant": "acme"}
	for _, path := range []string{"/v1/queues", "/v1/queues/orders"} {
		if status, b, _ := fx.call(t, "GET", path, nil, tenant); status != http.StatusOK {
			t.Errorf("tenant GET %s = %d %s", path, status, b)
		}
	}
	for _, path := range []string{"/v1/queues", "/v1/queues/orders/receive", "/v1/queues/orders/messages/delete", "/v1/queues/orders/purge"} {
		status, b, _ := fx.call(t, "POST", path, `{}`, tenant)
		wantError(t, status, b, http.StatusForbidden, "needs the operator")
	}
	status, b, _ := fx.call(t, "GET", "/v1/queues", nil, map[string]string{"X-Test-None": "1"})
	wantError(t, status, b, http.StatusUnauthorized, "not authenticated")
}

func TestReceiveDeletePurge(t *testing.T) {
	fx := newQueueFixture(t, nil)
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "dlq"}, nil)
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders", DeadLetterQueue: "dlq", MaxReceives: 1}, nil)
	ctx := context.Background()
	for i := range 3 {
		if _, err := fx.store.Send(ctx, "orders", []byte(fmt.Sprintf(`{"n":%d}`, i)), map[string]string{"command.source": "acme/billing"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := fx.store.Send(ctx, "orders", []byte{0xff, 0x00}, nil); err != nil {
		t.Fatal(err)
	}
	var got wire.QueueReceived
	fx.ok(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{Max: 10, VisibilityTimeoutSeconds: 60}, &got)
	if len(got.Messages) != 4 {
		t.Fatalf("received %d, want 4", len(got.Messages))
	}
	m := got.Messages[0]
	if m.Body != `{"n":0}` || m.BodyEncoding != "utf-8" || m.Attributes["command.source"] != "acme/billing" || m.ReceiveCount != 1 || m.ReceiptHandle == "" {
		t.Fatalf("message = %+v", m)
	}
	if b := got.Messages[3]; b.BodyEncoding != "base64" || b.Body != "/wA=" {
		t.Fatalf("binary body = %+v", b)
	}
	var del wire.QueueDeleteResult
	fx.ok(t, "POST", "/v1/queues/orders/messages/delete", wire.QueueDeleteRequest{ReceiptHandles: []string{m.ReceiptHandle, m.ReceiptHandle, "garbage"}}, &del)
	if len(del.Results) != 3 || !del.Results[0].Deleted || del.Results[1].Code != "stale_receipt" || del.Results[2].Code != "invalid_receipt" {
		t.Fatalf("delete = %+v", del)
	}
	// The other three become visible again after 60 s; with max receives
	// 1 the next receive moves them to the DLQ.
	fx.clk.Advance(61 * time.Second)
	fx.ok(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{Max: 10}, &got)
	if len(got.Messages) != 0 {
		t.Fatalf("received %d after redrive, want 0", len(got.Messages))
	}
	fx.ok(t, "POST", "/v1/queues/dlq/receive", wire.QueueReceiveRequest{Max: 1}, &got)
	if len(got.Messages) != 1 || got.Messages[0].Attributes[localqueue.AttrDLQReason] != localqueue.DLQReasonMaxReceives {
		t.Fatalf("dlq receive = %+v", got)
	}
	var p wire.QueuePurgeResult
	fx.ok(t, "POST", "/v1/queues/dlq/purge", nil, &p)
	if p.Purged != 3 {
		t.Fatalf("purged %d, want 3", p.Purged)
	}
	for _, tc := range []struct {
		path string
		body any
		want string
		code int
	}{
		{"/v1/queues/orders/receive", wire.QueueReceiveRequest{Max: 11}, "max 11", 400},
		{"/v1/queues/orders/receive", wire.QueueReceiveRequest{Max: -1}, "max -1", 400},
		{"/v1/queues/orders/receive", wire.QueueReceiveRequest{WaitSeconds: 21}, "wait 21", 400},
		{"/v1/queues/orders/receive", wire.QueueReceiveRequest{VisibilityTimeoutSeconds: -1}, "visibility", 400},
		{"/v1/queues/o.fifo/receive", nil, "FIFO", 400},
		{"/v1/queues/none/receive", nil, "does not exist", 404},
		{"/v1/queues/orders/messages/delete", wire.QueueDeleteRequest{}, "0 receipt handles", 400},
		{"/v1/queues/orders/messages/delete", wire.QueueDeleteRequest{ReceiptHandles: make([]string, 11)}, "11 receipt handles", 400},
		{"/v1/queues/orders/messages/delete", wire.QueueDeleteRequest{ReceiptHandles: []string{""}}, "empty", 400},
		{"/v1/queues/none/messages/delete", wire.QueueDeleteRequest{ReceiptHandles: []string{"x"}}, "does not exist", 404},
		{"/v1/queues/none/purge", nil, "does not exist", 404},
	} {
		status, b, _ := fx.call(t, "POST", tc.path, tc.body, nil)
		wantError(t, status, b, tc.code, tc.want)
	}
}

func TestLongPollWaitsUntilTheDeadline(t *testing.T) {
	fx := newQueueFixture(t, nil)
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders"}, nil)
	var got wire.QueueReceived
	fx.ok(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{WaitSeconds: 20}, &got)
	if len(got.Messages) != 0 {
		t.Fatalf("got %d messages from an empty queue", len(got.Messages))
	}
	if now := fx.clk.Now(); !now.Equal(t0.Add(20 * time.Second)) {
		t.Fatalf("the poll ended at %v, want the 20 s deadline", now.Sub(t0))
	}
	// Backoff: 50, 100, 200, 400 ms, then 500 ms pauses; the last one is
	// cut to the deadline (250 ms). 20 s takes 43 pauses, not thousands.
	fx.mu.Lock()
	defer fx.mu.Unlock()
	if len(fx.pauses) != 43 || fx.pauses[42] != 250*time.Millisecond || fx.pauses[0] != 50*time.Millisecond || fx.pauses[4] != 500*time.Millisecond {
		t.Fatalf("pauses = %v (%d)", fx.pauses, len(fx.pauses))
	}
	var sum time.Duration
	for _, p := range fx.pauses {
		sum += p
	}
	if sum != 20*time.Second {
		t.Fatalf("pauses sum to %v", sum)
	}
}

func TestLongPollReturnsWhenAMessageArrives(t *testing.T) {
	fx := newQueueFixture(t, nil)
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders"}, nil)
	fx.onPause = func(n int) {
		if n == 3 {
			if _, err := fx.store.Send(context.Background(), "orders", []byte("hello"), nil); err != nil {
				t.Error(err)
			}
		}
	}
	var got wire.QueueReceived
	fx.ok(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{WaitSeconds: 20}, &got)
	if len(got.Messages) != 1 || got.Messages[0].Body != "hello" {
		t.Fatalf("got %+v", got)
	}
	if waited := fx.clk.Now().Sub(t0); waited != 350*time.Millisecond {
		t.Fatalf("waited %v, want 350ms (three pauses)", waited)
	}
}

// blockingAfter never fires: the long poll waits until its request ends.
type blockingAfter struct{ started chan struct{} }

func (b blockingAfter) after(time.Duration) <-chan time.Time {
	b.started <- struct{}{}
	return nil
}

func TestLongPollWaitersAreBounded(t *testing.T) {
	b := blockingAfter{started: make(chan struct{}, 4)}
	fx := newQueueFixture(t, func(o *QueueOptions) { o.MaxWaiters = 2; o.After = b.after })
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req, _ := http.NewRequestWithContext(ctx, "POST", fx.srv.URL+"/v1/queues/orders/receive", strings.NewReader(`{"wait_seconds":20}`))
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
	}
	<-b.started
	<-b.started
	status, body, hdr := fx.call(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{WaitSeconds: 1}, nil)
	wantError(t, status, body, http.StatusTooManyRequests, "already waiting")
	if hdr.Get("Retry-After") != "1" {
		t.Fatalf("Retry-After = %q", hdr.Get("Retry-After"))
	}
	// A receive that does not wait is still served.
	if status, body, _ := fx.call(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{}, nil); status != http.StatusOK {
		t.Fatalf("short poll = %d %s", status, body)
	}
	cancel()
	wg.Wait()
	// The waiters released their slots when their requests ended (Close
	// waits for every handler to return).
	fx.srv.Close()
	if n := fx.api.waiting.Load(); n != 0 {
		t.Fatalf("%d waiters still counted", n)
	}
}

func TestNewNeedsAStore(t *testing.T) {
	if _, err := NewQueueAPI(QueueOptions{}); err == nil || !strings.Contains(err.Error(), "Queues") {
		t.Fatalf("New(Options{}) = %v", err)
	}
}

func TestLongPollWakesOnChange(t *testing.T) {
	var (
		mu sync.Mutex
		ch = make(chan struct{})
	)
	changed := func() <-chan struct{} { mu.Lock(); defer mu.Unlock(); return ch }
	started := make(chan struct{}, 1)
	fx := newQueueFixture(t, func(o *QueueOptions) {
		o.Changed = changed
		// The timer never fires: only the change can end the pause.
		o.After = func(time.Duration) <-chan time.Time { started <- struct{}{}; return nil }
	})
	fx.ok(t, "POST", "/v1/queues", wire.QueueCreateRequest{Name: "orders"}, nil)
	go func() {
		<-started
		if _, err := fx.store.Send(context.Background(), "orders", []byte("woken"), nil); err != nil {
			t.Error(err)
		}
		mu.Lock()
		close(ch)
		ch = make(chan struct{})
		mu.Unlock()
	}()
	var got wire.QueueReceived
	fx.ok(t, "POST", "/v1/queues/orders/receive", wire.QueueReceiveRequest{WaitSeconds: 20}, &got)
	if len(got.Messages) != 1 || got.Messages[0].Body != "woken" {
		t.Fatalf("got %+v", got)
	}
}

func TestReservedQueuesAreReadOnly(t *testing.T) {
	fx := newQueueFixture(t, func(o *QueueOptions) { o.Reserved = func(n string) bool { return n == "handoff" } })
	if _, err := fx.store.CreateQueue(context.Background(), localqueue.QueueConfig{Name: "handoff"}); err != nil {
		t.Fatal(err)
	}
	var in wire.QueueInfo
	fx.ok(t, "GET", "/v1/queues/handoff", nil, &in)
	if !in.Reserved {
		t.Fatalf("info = %+v", in)
	}
	for _, tc := range []struct {
		path string
		body any
	}{
		{"/v1/queues", wire.QueueCreateRequest{Name: "handoff"}},
		{"/v1/queues/handoff/receive", nil},
		{"/v1/queues/handoff/messages/delete", wire.QueueDeleteRequest{ReceiptHandles: []string{"x"}}},
		{"/v1/queues/handoff/purge", nil},
	} {
		status, b, _ := fx.call(t, "POST", tc.path, tc.body, nil)
		wantError(t, status, b, http.StatusBadRequest, "reserved")
	}
}

func TestOldestAgeIsMilliseconds(t *testing.T) {
	in := (&QueueAPI{}).info(localqueue.QueueStats{Queue: localqueue.Queue{QueueConfig: localqueue.QueueConfig{Name: "q"}}, OldestAge: 3940121915 * time.Nanosecond})
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"oldest_age_seconds":3.94}`) {
		t.Fatalf("info = %s, want oldest_age_seconds 3.94", b)
	}
}
