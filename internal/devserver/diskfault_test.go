package devserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/smallfs"
	"github.com/snavio/snavio/internal/store/embedded"
)

// readyz returns /readyz's status and reason.
func readyz(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var body struct {
		Reason string `json:"reason"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatalf("/readyz body %q: %v", b, err)
	}
	return resp.StatusCode, body.Reason
}

// TestDiskFullFlipsReadyzAndStops runs serve on a real file system of a
// few MB: filled to ENOSPC, /readyz answers 503 log_failed while /healthz
// stays 200, a PutEvents is refused (never acknowledged), Failed delivers
// the log's failure and Shutdown returns it (no clean stop). Once space is
// freed, the restart a supervisor makes is ready and has every
// acknowledged write.
func TestDiskFullFlipsReadyzAndStops(t *testing.T) {
	mnt := smallfs.Mount(t, 8<<20)
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(mnt, "data")
	ctx := context.Background()
	s := startDemo(t, dir, false)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			_ = s.Shutdown(ctx) // before the unmount
		}
	})
	url := s.Info().URL
	if code, reason := readyz(t, url); code != 200 {
		t.Fatalf("/readyz at start: %d %s", code, reason)
	}
	body := make([]byte, 8<<10)
	acked := 0
	var failure error
	for i := range 10000 {
		copy(body, fmt.Sprintf("filler %06d", i))
		if _, err := s.Store().Send(ctx, DemoQueue, body, nil); err != nil {
			failure = err
			break
		}
		acked++
	}
	if !errors.Is(failure, embedded.ErrLogFailed) || !errors.Is(failure, syscall.ENOSPC) {
		t.Fatalf("filling the disk: %d sends acknowledged, then %v", acked, failure)
	}
	if code, reason := readyz(t, url); code != 503 || reason != ReasonLogFailed {
		t.Fatalf("/readyz on a failed log: %d %q, want 503 %s", code, reason, ReasonLogFailed)
	}
	if resp, err := http.Get(url + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("/healthz on a failed log: %v %v, want 200 (the process is alive)", resp, err)
	} else {
		resp.Body.Close()
	}
	k := demoKeyFrom(t, dir)
	out := putEvent(t, dir, url, DemoSource, signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000901", DemoTarget, DemoCommand, `{"sku":"A-1"}`))
	if out["FailedEntryCount"].(float64) != 1 {
		t.Fatalf("PutEvents on a failed log was acknowledged: %v", out)
	}
	var ferr error
	select {
	case ferr = <-s.Failed():
	case <-time.After(10 * time.Second): // a bound on a goroutine's hand-over, not a wait for logic
		t.Fatal("Failed did not deliver the log's failure")
	}
	if !errors.Is(ferr, embedded.ErrLogFailed) || !strings.Contains(ferr.Error(), "supervisor restarts") {
		t.Fatalf("Failed delivered %v", ferr)
	}
	serr := s.Shutdown(ctx)
	stopped = true
	if !errors.Is(serr, ferr) || strings.Contains(serr.Error(), "\n") {
		t.Fatalf("Shutdown after a failed log: %q, want the one-line failure Failed delivered", serr)
	}

	// The operator frees space; the supervisor restarts serve.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s2 := startDemo(t, dir, false)
	defer s2.Shutdown(ctx)
	if code, reason := readyz(t, s2.Info().URL); code != 200 {
		t.Fatalf("/readyz after the restart: %d %s", code, reason)
	}
	stats, err := s2.Store().ListQueues(ctx)
	if err != nil {
		t.Fatal(err)
	}
	held := -1
	for _, q := range stats {
		if q.Name == DemoQueue {
			held = q.Visible + q.InFlight
		}
	}
	if held != acked {
		t.Fatalf("after the restart %s holds %d messages, want the %d acknowledged", DemoQueue, held, acked)
	}
	t.Logf("%d sends of 8 KiB acknowledged before ENOSPC, all recovered", acked)
}
