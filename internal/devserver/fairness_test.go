package devserver

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Issue 20, finding 1: tenant A floods one of its routes at full rate,
// half strict and half not, while tenant B sends a strict command every
// 200 ms. B's commands are all accepted and delivered promptly, whatever
// A does:
//   - full-queue: A's queue is full (no consumer, max depth 10). A's
//     commands are refused at once, per entry, with a retryable
//     ThrottlingException; none is acknowledged and left to fail later.
//   - backlog: A's queue has room, so A's strict commands pile up for the
//     slow stage. A is held to its tenant's bound (throttled beyond it),
//     and B's commands, in the light tenants' hand-off, do not wait
//     behind A's backlog.
//
// SNAVIO_FAIRNESS_SECONDS sets each case's length (default 8).

const (
	fairSourceB = "globex/shop"
	fairTargetB = "billing"
	fairQueueB  = "globex-billing"
	fairQueueA  = "demo-flood"
)

func TestNoisyNeighbour(t *testing.T) {
	if testing.Short() {
		t.Skip("floods the server for seconds")
	}
	secs := 8
	if v := os.Getenv("SNAVIO_FAIRNESS_SECONDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("SNAVIO_FAIRNESS_SECONDS=%q: want a whole number of seconds", v)
		}
		secs = n
	}
	t.Run("full-queue", func(t *testing.T) { noisyNeighbour(t, secs, 10) })
	t.Run("backlog", func(t *testing.T) { noisyNeighbour(t, secs, 10_000_000) })
}

// noisyNeighbour runs the flood for secs into a queue of A's of depth.
func noisyNeighbour(t *testing.T, secs, depth int) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := Start(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(ctx)
	keyA := demoKeyFrom(t, dir)
	keyB := seedTenantB(t, s)
	writeCredentials(t, s, dir, "globex")
	credA, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, DemoTenant), DemoTenant)
	if err != nil {
		t.Fatal(err)
	}
	credB, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, "globex"), "globex")
	if err != nil {
		t.Fatal(err)
	}
	dlqA, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: fairQueueA + "-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	qa, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: fairQueueA, MaxDepth: depth, DeadLetterQueue: dlqA.QueueConfig.Name, MaxReceives: 5})
	if err != nil {
		t.Fatal(err)
	}
	by := registry.Actor{Who: "test", At: time.Now()}
	for _, r := range []registry.Route{
		{Target: DemoTarget, Command: "flood", QueueARN: qa.ARN, DLQARN: dlqA.ARN, Profile: registry.ProfileModerate},
		{Target: DemoTarget, Command: "flood-strict", QueueARN: qa.ARN, DLQARN: dlqA.ARN, Profile: registry.ProfileCritical, DedupeMode: registry.DedupeStrict},
	} {
		acl := registry.ACL{Source: DemoSource, Target: r.Target, Command: r.Command, Allow: true, Profile: r.Profile}
		for _, it := range []registry.Item{{Route: &r}, {ACL: &acl}} {
			if _, err := s.Registry().Put(ctx, by, it); err != nil {
				t.Fatal(err)
			}
		}
	}
	url := s.Info().URL

	// B's consumer records when each command reaches B's queue.
	var mu sync.Mutex
	deliveredAt := map[string]time.Time{}
	consumed := make(chan struct{})
	stopConsumer := make(chan struct{})
	go func() {
		defer close(consumed)
		for {
			msgs, err := s.Store().Receive(ctx, fairQueueB, 10, time.Hour)
			now := time.Now()
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			for _, m := range msgs {
				deliveredAt[m.Attributes[provenance.AttrCommandID]] = now
			}
			mu.Unlock()
			if len(msgs) == 0 {
				select {
				case <-stopConsumer:
					return
				case <-time.After(2 * time.Millisecond):
				}
			}
		}
	}()

	stop := time.Now().Add(time.Duration(secs) * time.Second)
	// A: four producers at full rate, batches of 10.
	var aSent, aAcked, aThrottled, aOther atomic.Int64
	var aLat latencies
	var wg sync.WaitGroup
	var seq atomic.Int64
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				details := make([][]byte, 10)
				for i := range details {
					name := "flood"
					if i%2 == 1 {
						name = "flood-strict"
					}
					id := fmt.Sprintf("0f8fad5b-d9cb-469f-a%03d-%012d", g, seq.Add(1))
					details[i] = signedBy(t, keyA, DemoSource, id, DemoTarget, name, `{"n":1}`)
				}
				start := time.Now()
				codes, err := putEntries(url, credA, DemoSource, details)
				aLat.add(time.Since(start))
				if err != nil {
					t.Error(err)
					return
				}
				aSent.Add(int64(len(details)))
				for _, c := range codes {
					switch c {
					case "":
						aAcked.Add(1)
					case server.EntryErrThrottling:
						aThrottled.Add(1)
					default:
						aOther.Add(1)
					}
				}
			}
		}()
	}

	// B: one strict command every 200 ms.
	type bCmd struct {
		id   string
		sent time.Time
		code string
	}
	var bs []bCmd
	var bLat latencies
	tick := time.NewTicker(200 * time.Millisecond)
	for n := 0; time.Now().Before(stop); n++ {
		<-tick.C
		id := fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", n)
		start := time.Now()
		codes, err := putEntries(url, credB, fairSourceB, [][]byte{signedBy(t, keyB, fairSourceB, id, fairTargetB, "charge", `{"amount":1}`)})
		bLat.add(time.Since(start))
		code := "request failed"
		if err == nil {
			code = codes[0]
		} else {
			t.Logf("B's PutEvents: %v", err)
		}
		bs = append(bs, bCmd{id: id, sent: start, code: code})
	}
	tick.Stop()
	wg.Wait()
	// B's last commands reach their queue.
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(deliveredAt)
		mu.Unlock()
		if n >= len(bs) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(stopConsumer)
	<-consumed

	var accepted, delivered, refused int
	var e2e latencies
	codes := map[string]int{}
	mu.Lock()
	for _, b := range bs {
		if b.code != "" {
			refused++
			codes[b.code]++
			continue
		}
		accepted++
		if at, ok := deliveredAt[b.id]; ok {
			delivered++
			e2e.add(at.Sub(b.sent))
		}
	}
	mu.Unlock()
	st := s.Node().Stats()
	t.Logf("%d s, A's queue of depth %d: A sent %d, acknowledged %d, throttled %d, other refusals %d; A's PutEvents p50 %v p99 %v",
		secs, depth, aSent.Load(), aAcked.Load(), aThrottled.Load(), aOther.Load(), aLat.pct(50), aLat.pct(99))
	t.Logf("B sent %d strict commands: accepted %d (%.1f%%), delivered %d (%.1f%%), refused %d %v; B's PutEvents p50 %v p99 %v; sent to delivered p50 %v p99 %v max %v",
		len(bs), accepted, 100*float64(accepted)/float64(len(bs)), delivered, 100*float64(delivered)/float64(len(bs)), refused, codes,
		bLat.pct(50), bLat.pct(99), e2e.pct(50), e2e.pct(99), e2e.pct(100))
	t.Logf("node: escalated %d, throttled %d, failed at once on a full queue %d, gave up %d, slow retries %d",
		st.Escalated, st.Throttled, st.TargetFull, st.GaveUp, st.SlowRetries)

	if len(bs) < 5*secs-2 {
		t.Fatalf("B sent %d commands in %d s, want about %d", len(bs), secs, 5*secs)
	}
	if float64(delivered) < 0.99*float64(len(bs)) {
		t.Errorf("B: %d of %d accepted and delivered, want at least 99%%", delivered, len(bs))
	}
	if refused > 0 {
		t.Errorf("B: %d commands refused (%v) while A flooded", refused, codes)
	}
	// The goal is a p99 under 1 s; the race detector slows every step
	// several times over, so under it only a gross regression fails.
	bound := time.Second
	if raceEnabled {
		bound = 3 * time.Second
	}
	if p := e2e.pct(99); p >= bound {
		t.Errorf("B: p99 from send to delivery %v, want under %v", p, bound)
	}
	if aThrottled.Load() == 0 || aOther.Load() != 0 {
		t.Errorf("A: %d throttled, %d refused otherwise: want A refused with %s only", aThrottled.Load(), aOther.Load(), server.EntryErrThrottling)
	}
	waitFor(t, "the slow stage to finish what it admitted", func() bool { total, _ := s.Node().Waiting("demo"); return total == 0 })
	st = s.Node().Stats()
	if st.SlowRetries != 0 || st.GaveUp != st.TargetFull {
		t.Errorf("slow stage: %d retries, %d gave up (%d at once on a full queue): something acknowledged was left to fail later", st.SlowRetries, st.GaveUp, st.TargetFull)
	}
	if depth < 100 {
		// What A had acknowledged is in its queue, or was admitted while
		// the queue had room that fast-path deliveries then took, and
		// failed at once.
		if a, want := aAcked.Load(), int64(depth)+st.TargetFull; a != want {
			t.Errorf("A: %d commands acknowledged, want the queue's depth %d plus %d failed at once", a, depth, st.TargetFull)
		}
	}
}

// seedTenantB registers tenant B's service key, a strict route to its
// own queue and the ACL, and returns the key.
func seedTenantB(t *testing.T, s *Serve) *signing.Key {
	t.Helper()
	ctx := context.Background()
	dlq, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: fairQueueB + "-dlq"})
	if err != nil {
		t.Fatal(err)
	}
	q, err := s.Store().CreateQueue(ctx, localqueue.QueueConfig{Name: fairQueueB, DeadLetterQueue: dlq.QueueConfig.Name, MaxReceives: 5})
	if err != nil {
		t.Fatal(err)
	}
	secret := bytes.Repeat([]byte{7}, 32)
	now := time.Now()
	by := registry.Actor{Who: "test", At: now}
	r := registry.Route{Target: fairTargetB, Command: "charge", QueueARN: q.ARN, DLQARN: dlq.ARN, Profile: registry.ProfileCritical, DedupeMode: registry.DedupeStrict}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: fairSourceB, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: now.Add(-time.Minute)}}}},
		{Route: &r},
		{ACL: &registry.ACL{Source: fairSourceB, Target: fairTargetB, Command: "charge", Allow: true, Profile: registry.ProfileCritical}},
	} {
		if _, err := s.Registry().Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	k, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func signedBy(t *testing.T, k *signing.Key, source, id, target, name, payload string) []byte {
	t.Helper()
	e := envelope.New(id, time.Now(), target, name, []byte(payload))
	if err := k.SignEnvelope(&e, source); err != nil {
		t.Error(err)
	}
	b, err := e.AppendJSON(nil)
	if err != nil {
		t.Error(err)
	}
	return b
}

// putEntries sends details as one PutEvents request signed with cred and
// returns each entry's error code ("" for accepted).
func putEntries(url string, cred ingresscred.Key, source string, details [][]byte) ([]string, error) {
	entries := make([]map[string]string, len(details))
	for i, d := range details {
		entries[i] = map[string]string{"Source": source, "DetailType": envelope.EventType, "Detail": string(d), "EventBusName": "snavio-command-bus"}
	}
	body, _ := json.Marshal(map[string]any{"Entries": entries})
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
	req.Header.Set("X-Amz-Target", server.TargetPutEvents)
	if err := ingresscred.Sign(req, body, cred, "us-east-1", time.Now()); err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("PutEvents: %d %s", resp.StatusCode, b)
	}
	var out struct {
		Entries []struct{ EventId, ErrorCode string }
	}
	if err := json.Unmarshal(b, &out, json.MatchCaseInsensitiveNames(true)); err != nil || len(out.Entries) != len(details) {
		return nil, fmt.Errorf("PutEvents: %d entries in %s (%v)", len(out.Entries), b, err)
	}
	codes := make([]string, len(details))
	for i, e := range out.Entries {
		codes[i] = e.ErrorCode
	}
	return codes, nil
}

// latencies collects durations for percentiles.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// pct is the p-th percentile (nearest rank), 0 when empty.
func (l *latencies) pct(p int) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	s := slices.Clone(l.d)
	slices.Sort(s)
	i := (p*len(s)+99)/100 - 1
	return s[max(0, min(i, len(s)-1))].Round(time.Millisecond)
}
