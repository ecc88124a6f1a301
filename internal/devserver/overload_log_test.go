package devserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// countingWriter counts the bytes and lines written to it.
type countingWriter struct {
	bytes, lines atomic.Int64
	mu           sync.Mutex
	head         bytes.Buffer // the first lines, for the failure message
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.bytes.Add(int64(len(p)))
	w.lines.Add(int64(bytes.Count(p, []byte{'\n'})))
	w.mu.Lock()
	if w.head.Len() < 4096 {
		w.head.Write(p)
	}
	w.mu.Unlock()
	return len(p), nil
}

// TestOverloadLogsStaySmall floods a route whose queue is full (no
// consumer, max depth 10, no rate limit), so that every command fails its
// fast delivery, is escalated and is refused at admission to the slow
// stage (ThrottlingException), as in the overload of issue 20, with
// serve's logger at the CLI's level (WARN). The log stays under 1 MB (a
// refusal at admission logs nothing; the count is in /metrics, and so
// are the lines logagg suppresses). SNAVIO_OVERLOAD_SECONDS
// sets the flood's length (default 5; 60 for the figure in
// docs/server/README.md).
func TestOverloadLogsStaySmall(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the server for seconds")
	}
	secs := 5
	if v := os.Getenv("SNAVIO_OVERLOAD_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SNAVIO_OVERLOAD_SECONDS=%q: want a whole number of seconds", v)
		}
		secs = n
	}
	ctx := context.Background()
	dir := t.TempDir()
	logs := &countingWriter{}
	s, err := Start(ctx, Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true,
		Logger:            slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		HandoffVisibility: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	dlq, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: "flood-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: "flood-q", MaxDepth: 10, DeadLetterQueue: "flood-dlq", MaxReceives: 5})
	if err != nil {
		t.Fatal(err)
	}
	by := registry.Actor{Who: "test", At: time.Now()}
	for _, it := range []registry.Item{
		{Route: &registry.Route{Target: DemoTarget, Command: "flood", QueueARN: q.ARN, DLQARN: dlq.ARN, Profile: registry.ProfileModerate}},
		{ACL: &registry.ACL{Source: DemoSource, Target: DemoTarget, Command: "flood", Allow: true, Profile: registry.ProfileModerate}},
	} {
		if _, err := s.Registry().Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	k := demoKeyFrom(t, dir)
	url := s.Info().URL
	cred, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, DemoTenant), DemoTenant)
	if err != nil {
		t.Fatal(err)
	}
	var sent, acked atomic.Int64
	var seq atomic.Int64
	stop := time.Now().Add(time.Duration(secs) * time.Second)
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				entries := make([]map[string]string, 10)
				for i := range entries {
					id := fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", seq.Add(1))
					entries[i] = map[string]string{"Source": DemoSource, "DetailType": envelope.EventType,
						"Detail": string(signed(t, k, id, DemoTarget, "flood", `{"n":1}`)), "EventBusName": "snavio-command-bus"}
				}
				body, _ := json.Marshal(map[string]any{"Entries": entries})
				req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
				req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
				req.Header.Set("X-Amz-Target", server.TargetPutEvents)
				if err := ingresscred.Sign(req, body, cred, "us-east-1", time.Now()); err != nil {
					t.Error(err)
					return
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Error(err)
					return
				}
				var out struct{ FailedEntryCount int }
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == 200 && json.Unmarshal(b, &out, json.MatchCaseInsensitiveNames(true)) == nil {
					acked.Add(int64(10 - out.FailedEntryCount))
				}
				sent.Add(10)
			}
		}()
	}
	wg.Wait()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	mb, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	suppressed, throttled := 0.0, 0.0
	for line := range strings.SplitSeq(string(mb), "\n") {
		f, _ := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		switch {
		case strings.HasPrefix(line, "snavio_log_lines_suppressed_total{"):
			suppressed += f
		case strings.HasPrefix(line, "snavio_node_entries_throttled_total "):
			throttled = f
		}
	}
	st := s.Node().Stats()
	written, lines := logs.bytes.Load(), logs.lines.Load()
	t.Logf("%d s flood: %d commands sent, %d acknowledged; node: %d escalated, %d throttled, %d refused; log: %d bytes in %d lines, %.0f lines suppressed (about %.1f MB unaggregated)",
		secs, sent.Load(), acked.Load(), st.Escalated, st.Throttled, st.Refused, written, lines, suppressed,
		float64(written)/float64(max(lines, 1))*(suppressed+float64(lines))/1e6)
	if st.Throttled == 0 {
		t.Fatalf("the flood caused no throttled entries: the test does not reproduce the overload")
	}
	if throttled == 0 || throttled > float64(st.Throttled) {
		t.Fatalf("snavio_node_entries_throttled_total %v, node stats %d after the scrape", throttled, st.Throttled)
	}
	if written > 1<<20 {
		logs.mu.Lock()
		defer logs.mu.Unlock()
		t.Fatalf("%d s of overload wrote %d bytes of logs (%d lines), over 1 MB; the first:\n%s", secs, written, lines, logs.head.String())
	}
}
