package server

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

func getPath(h http.Handler, path string) *httptest.ResponseRecorder {
	w := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	r.Host = "127.0.0.1"
	h.ServeHTTP(w, r)
	return w
}

func startServer(t *testing.T, opts StartOptions) *Server {
	t.Helper()
	if opts.Listen == "" {
		opts.Listen = "127.0.0.1:0"
	}
	if opts.DataDir == "" {
		opts.DataDir = t.TempDir()
	}
	writeTestCredentials(t, opts.DataDir)
	s, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Shutdown(context.Background()) })
	return s
}

func get(t *testing.T, url, token string) (int, string, http.Header) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, url, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header
}

func TestStartServesEverything(t *testing.T) {
	var ready atomic.Bool
	control := http.NewServeMux()
	control.Handle("GET /v1/whoami", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		io.WriteString(w, p.String())
	}))
	s := startServer(t, StartOptions{
		Pipeline: &recordingPipeline{},
		Ready: func(context.Context) error {
			if !ready.Load() {
				return errors.New("caches not loaded yet")
			}
			return nil
		},
		Control: control,
	})
	if !strings.HasPrefix(s.Addr(), "127.0.0.1:") || !s.OperatorTokenCreated() {
		t.Fatalf("Addr %s created %v", s.Addr(), s.OperatorTokenCreated())
	}

	if code, body, _ := get(t, s.URL()+"/healthz", ""); code != 200 || body != `{"status":"ok"}` {
		t.Fatalf("healthz %d %s", code, body)
	}
	if code, body, h := get(t, s.URL()+"/readyz", ""); code != 503 || !strings.Contains(body, "caches not loaded yet") || h.Get("Retry-After") != "1" {
		t.Fatalf("readyz before ready: %d %s", code, body)
	}
	ready.Store(true)
	if code, body, _ := get(t, s.URL()+"/readyz", ""); code != 200 || body != `{"status":"ready"}` {
		t.Fatalf("readyz %d %s", code, body)
	}

	// The real SDK through the whole server.
	out, err := sdkClient(s.URL()).PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
		{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
	}})
	if err != nil || aws.ToString(out.Entries[0].EventId) != "evt-a" {
		t.Fatalf("PutEvents %v %+v", err, out)
	}

	tok, _, _, err := LoadOrCreateOperatorToken(s.tokenPath[:len(s.tokenPath)-len(OperatorTokenFile)])
	if err != nil {
		t.Fatal(err)
	}
	if code, body, _ := get(t, s.URL()+"/v1/whoami", tok); code != 200 || body != "operator" {
		t.Fatalf("whoami %d %s", code, body)
	}
	if code, _, _ := get(t, s.URL()+"/v1/whoami", ""); code != 401 {
		t.Fatalf("whoami unauthenticated %d", code)
	}
	if code, body, _ := get(t, s.URL()+"/nope", ""); code != 404 || !strings.Contains(body, `"fix"`) {
		t.Fatalf("unknown path %d %s", code, body)
	}

	code, body, _ := get(t, s.URL()+"/metrics", "")
	for _, want := range []string{
		`snavio_http_request_duration_seconds_count{code="200",handler="putevents"} 1`,
		`snavio_http_rejected_total{handler="control",reason="unauthenticated"} 1`,
		`snavio_ingress_entries_total{result="accepted"} 1`,
		`snavio_http_requests_in_flight{handler="metrics"} 1`,
		"snavio_ingress_saturation 0",
		"go_goroutines",
	} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

func TestStartValidatesOptions(t *testing.T) {
	if _, err := Start(StartOptions{DataDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "Pipeline is nil") {
		t.Fatalf("no pipeline: %v", err)
	}
	if _, err := Start(StartOptions{Pipeline: &recordingPipeline{}}); err == nil || !strings.Contains(err.Error(), "DataDir is empty") {
		t.Fatalf("no data dir: %v", err)
	}
	s := startServer(t, StartOptions{Pipeline: &recordingPipeline{}})
	if _, err := Start(StartOptions{Pipeline: &recordingPipeline{}, DataDir: t.TempDir(), Listen: s.Addr()}); err == nil || !strings.Contains(err.Error(), "--listen") {
		t.Fatalf("port in use: %v", err)
	}
}

func TestRestartReusesOperatorToken(t *testing.T) {
	dir := t.TempDir()
	s1 := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, DataDir: dir})
	s1.Shutdown(context.Background())
	s2 := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, DataDir: dir})
	if s2.OperatorTokenCreated() || s2.OperatorTokenPath() != s1.OperatorTokenPath() {
		t.Fatalf("restart created a new token")
	}
}

func TestShutdownDrainsInFlightThenRunsHooksInOrder(t *testing.T) {
	p := newBlockingPipeline()
	s := startServer(t, StartOptions{Pipeline: p})
	var finished atomic.Bool
	var order []string
	s.OnDrain("first", func(context.Context) error {
		if !finished.Load() {
			t.Error("drain hook ran before the in-flight request finished")
		}
		order = append(order, "first")
		return nil
	})
	s.OnDrain("outbox", func(context.Context) error {
		order = append(order, "outbox")
		return errors.New("flush failed")
	})
	s.OnDrain("last", func(context.Context) error {
		order = append(order, "last")
		return nil
	})

	inflight := make(chan error, 1)
	go func() {
		out, err := sdkClient(s.URL()).PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
			{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
		}})
		if err == nil && aws.ToString(out.Entries[0].EventId) != "id" {
			err = errors.New("no event id")
		}
		inflight <- err
	}()
	<-p.entered

	shut := make(chan error, 1)
	go func() { shut <- s.Shutdown(context.Background()) }()
	<-s.stopping // the listener is closed

	// New connections are refused, and readiness says draining.
	if c, err := net.Dial("tcp", s.Addr()); err == nil {
		c.Close()
		t.Fatal("a new connection was accepted during shutdown")
	}
	if w := getPath(s.http.Handler, "/readyz"); w.Code != 503 || !strings.Contains(w.Body.String(), "draining") {
		t.Fatalf("readyz while draining: %d %s", w.Code, w.Body)
	}
	select {
	case err := <-shut:
		t.Fatalf("Shutdown returned %v before the in-flight request finished", err)
	default:
	}

	finished.Store(true)
	close(p.release)
	if err := <-inflight; err != nil {
		t.Fatalf("in-flight request failed: %v", err)
	}
	err := <-shut
	if err == nil || !strings.Contains(err.Error(), "drain hook outbox: flush failed") {
		t.Fatalf("Shutdown = %v", err)
	}
	if strings.Join(order, ",") != "first,outbox,last" {
		t.Fatalf("hooks ran %v", order)
	}
	if err2 := s.Shutdown(context.Background()); err2 != err {
		t.Fatalf("second Shutdown = %v", err2)
	}
}

func TestShutdownDeadlineClosesStuckRequests(t *testing.T) {
	p := newBlockingPipeline()
	s := startServer(t, StartOptions{Pipeline: p})
	defer close(p.release)
	var hookRan atomic.Bool
	s.OnDrain("hook", func(context.Context) error { hookRan.Store(true); return nil })
	go sdkClient(s.URL()).PutEvents(context.Background(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
		{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
	}})
	<-p.entered
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := s.Shutdown(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not finish in time") || !hookRan.Load() {
		t.Fatalf("Shutdown = %v, hook ran %v", err, hookRan.Load())
	}
}

func TestControlAPIBounded(t *testing.T) {
	entered, release := make(chan struct{}, 1), make(chan struct{})
	control := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		entered <- struct{}{}
		<-release
	})
	s := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, Control: control, Limits: Limits{MaxInFlightControl: 1}})
	tok, _, _, _ := LoadOrCreateOperatorToken(strings.TrimSuffix(s.OperatorTokenPath(), OperatorTokenFile))
	done := make(chan int, 1)
	go func() {
		code, _, _ := get(t, s.URL()+"/v1/slow", tok)
		done <- code
	}()
	<-entered
	code, body, h := get(t, s.URL()+"/v1/slow", tok)
	if code != 503 || h.Get("Retry-After") != "1" || !strings.Contains(body, `"fix"`) {
		t.Fatalf("saturated control: %d %s", code, body)
	}
	close(release)
	if c := <-done; c != 200 {
		t.Fatalf("held control request: %d", c)
	}
}
