package alerts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type configs map[string]Config

func (c configs) Alerts(tenant string) Config { return c[tenant] }

// hook is a real HTTP endpoint that answers with the queued statuses.
type hook struct {
	mu       sync.Mutex
	statuses []int
	got      []Alert
	sigOK    []bool
}

func (h *hook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	mac := hmac.New(sha256.New, []byte("0123456789abcdef0123456789abcdef"))
	mac.Write(body)
	ok := r.Header.Get("X-Snavio-Signature") == "sha256="+hex.EncodeToString(mac.Sum(nil))
	h.mu.Lock()
	defer h.mu.Unlock()
	status := http.StatusOK
	if len(h.statuses) > 0 {
		status, h.statuses = h.statuses[0], h.statuses[1:]
	}
	if status == http.StatusOK {
		var a Alert
		_ = json.Unmarshal(body, &a)
		h.got = append(h.got, a)
		h.sigOK = append(h.sigOK, ok)
	}
	w.WriteHeader(status)
}

func router(t *testing.T, h *hook, cfg configs) (*Router, *int) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	wh, err := NewWebhook(srv.URL, []byte("0123456789abcdef0123456789abcdef"))
	if err != nil {
		t.Fatal(err)
	}
	sleeps := 0
	r := New(Options{Channels: map[string]Channel{"ops-hook": wh}, Configs: cfg, Clock: clock.NewFake(t0),
		Sleep: func(context.Context, time.Duration) error { sleeps++; return nil }})
	return r, &sleeps
}

var invalid = telemetry.Invalid{Source: "acme/billing", Reason: "bad_signature"}

func TestWebhookSignedAndRetried(t *testing.T) {
	h := &hook{statuses: []int{503, 500, 200}}
	r, sleeps := router(t, h, configs{"acme": {"*": {"ops-hook"}}})
	got, err := r.Handle(context.Background(), "acme", invalid)
	if err != nil || len(got) != 1 || got[0] != "ops-hook" || *sleeps != 2 {
		t.Fatalf("delivered %v err %v sleeps %d", got, err, *sleeps)
	}
	if len(h.got) != 1 || !h.sigOK[0] || h.got[0].Event != telemetry.NameInvalid || !h.got[0].Critical || h.got[0].Tenant != "acme" {
		t.Fatalf("webhook got %+v sig %v", h.got, h.sigOK)
	}
	var payload map[string]any
	if err := json.Unmarshal(h.got[0].Payload, &payload); err != nil || payload["reason"] != "bad_signature" {
		t.Fatalf("payload = %s", h.got[0].Payload)
	}
}

func TestCriticalAlertsCannotBeDisabled(t *testing.T) {
	// No configuration at all, and a configuration that routes nothing.
	for _, cfg := range []configs{nil, {"acme": {telemetry.NameInvalid: {}}}} {
		r, _ := router(t, &hook{}, cfg)
		got, _ := r.Handle(context.Background(), "acme", invalid)
		if len(got) != 1 || got[0] != "dashboard" || r.Unrouted() != 1 || len(r.Dashboard().Recent("acme")) != 1 {
			t.Fatalf("cfg %v: delivered %v unrouted %d", cfg, got, r.Unrouted())
		}
	}
	// A failing channel: the critical alert still lands on the dashboard.
	h := &hook{statuses: []int{500, 500, 500}}
	r, _ := router(t, h, configs{"acme": {"*": {"ops-hook"}}})
	got, err := r.Handle(context.Background(), "acme", telemetry.Dropped{Tenant: "acme", Reason: telemetry.DroppedQueueUnconsumed})
	if err == nil || len(got) != 1 || got[0] != "dashboard" {
		t.Fatalf("failing channel: %v %v", got, err)
	}
}

func TestPermanentFailureIsNotRetried(t *testing.T) {
	h := &hook{statuses: []int{404}}
	r, sleeps := router(t, h, configs{"acme": {"*": {"ops-hook"}}})
	_, err := r.Handle(context.Background(), "acme", telemetry.ExecutedAfterACLRevoked{Source: "acme/x"})
	if err == nil || *sleeps != 0 {
		t.Fatalf("err %v sleeps %d: a 404 must not be retried", err, *sleeps)
	}
}

func TestNonCriticalAndNonAlertingEvents(t *testing.T) {
	r, _ := router(t, &hook{}, nil)
	// Alerting but not critical, and nothing configured: not delivered.
	if got, _ := r.Handle(context.Background(), "acme", telemetry.ExecutedAfterACLRevoked{}); len(got) != 0 {
		t.Fatalf("unconfigured non-critical alert delivered to %v", got)
	}
	// Not alerting at all.
	if got, _ := r.Handle(context.Background(), "acme", telemetry.Delivered{}); len(got) != 0 || r.Unrouted() != 0 {
		t.Fatalf("a delivered event alerted: %v", got)
	}
	r2, _ := router(t, &hook{}, configs{"acme": {telemetry.NameExecutedAfterACLRevoked: {"pager"}}})
	if _, err := r2.Handle(context.Background(), "acme", telemetry.ExecutedAfterACLRevoked{}); err == nil {
		t.Fatal("an unknown channel name was ignored silently")
	}
}

func TestWebhookValidation(t *testing.T) {
	for _, u := range []string{"ftp://x", "not a url", "https://"} {
		if _, err := NewWebhook(u, []byte("0123456789abcdef0123")); err == nil {
			t.Errorf("NewWebhook(%q) accepted", u)
		}
	}
	if _, err := NewWebhook("https://x/y", []byte("short")); err == nil {
		t.Error("short secret accepted")
	}
}

func TestDashboardIsBounded(t *testing.T) {
	r := New(Options{DashboardSize: 3, Clock: clock.NewFake(t0)})
	for i := 0; i < 10; i++ {
		r.Handle(context.Background(), "acme", invalid)
	}
	if n := len(r.Dashboard().Recent("")); n != 3 {
		t.Fatalf("dashboard holds %d alerts, bound 3", n)
	}
}
