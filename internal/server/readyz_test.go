package server

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/go-json-experiment/json"
)

// readyBody is /readyz's JSON answer.
type readyBody struct {
	Status string `json:"status"`
	Reason string `json:"reason"`
	Error  string `json:"error"`
	Fix    string `json:"fix"`
}

func readyz(t *testing.T, s *Server) (int, readyBody, string) {
	t.Helper()
	w := getPath(s.http.Handler, "/readyz")
	var b readyBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("readyz body %q: %v", w.Body, err)
	}
	return w.Code, b, w.Header().Get("Retry-After")
}

// TestReadyzSaysWhy: a readiness source's *NotReady gives the 503 its
// reason and fix, any other error reads as not_ready, a full in-flight
// limit as saturated_requests; each clears when its cause does, and
// /healthz answers 200 throughout (it is about liveness only).
func TestReadyzSaysWhy(t *testing.T) {
	var cause atomic.Pointer[error]
	s := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, Ready: func(context.Context) error {
		if e := cause.Load(); e != nil {
			return *e
		}
		return nil
	}})
	healthy := func() {
		t.Helper()
		if w := getPath(s.http.Handler, "/healthz"); w.Code != 200 {
			t.Fatalf("healthz %d %s", w.Code, w.Body)
		}
	}
	if code, b, _ := readyz(t, s); code != 200 || b.Status != "ready" {
		t.Fatalf("readyz at start: %d %+v", code, b)
	}

	var failed error = &NotReady{Reason: "log_failed", Err: errors.New("write 1.log: no space left on device"), Fix: "free space and restart"}
	cause.Store(&failed)
	code, b, retry := readyz(t, s)
	if code != 503 || b.Status != "not ready" || b.Reason != "log_failed" || b.Error != "write 1.log: no space left on device" || b.Fix != "free space and restart" || retry != "1" {
		t.Fatalf("readyz with a failed log: %d %+v Retry-After %q", code, b, retry)
	}
	healthy()

	var plain = errors.New("caches not loaded yet")
	cause.Store(&plain)
	if code, b, _ := readyz(t, s); code != 503 || b.Reason != ReasonNotReady || b.Error != "caches not loaded yet" || b.Fix == "" {
		t.Fatalf("readyz with a plain error: %d %+v", code, b)
	}
	cause.Store(nil)

	// Every request slot taken.
	n := s.ingress.limits.MaxInFlightRequests
	if !s.ingress.requests.tryAcquire(n) {
		t.Fatal("could not take the request slots")
	}
	if code, b, _ := readyz(t, s); code != 503 || b.Reason != ReasonSaturated || b.Fix == "" {
		t.Fatalf("readyz saturated: %d %+v", code, b)
	}
	healthy()
	s.ingress.requests.release(1)
	if code, b, _ := readyz(t, s); code != 200 {
		t.Fatalf("readyz with one slot free: %d %+v", code, b)
	}
	s.ingress.requests.release(n - 1)

	// A failed source outranks the drain: it says what to fix.
	cause.Store(&failed)
	s.draining.Store(true)
	if code, b, _ := readyz(t, s); code != 503 || b.Reason != "log_failed" {
		t.Fatalf("readyz draining after a failure: %d %+v", code, b)
	}
	cause.Store(nil)
	if code, b, _ := readyz(t, s); code != 503 || b.Status != "draining" || b.Reason != ReasonDraining {
		t.Fatalf("readyz draining: %d %+v", code, b)
	}
	s.draining.Store(false)
	healthy()
}
