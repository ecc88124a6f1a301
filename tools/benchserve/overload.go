package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
	"github.com/snavio/snavio/internal/devserver"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// The overload mode (-overload N, `make bench-serve-overload`): the
// server's capacity is measured with the closed-loop clients first, then
// an open-loop generator offers N times that many commands per second for
// -duration, whatever the answers. Passing means: every request answered
// (200 with per-entry results, or 429/503 with Retry-After), the p99
// latency of the answers within -overload-p99, and within 1 s after the
// load stops a normal send is accepted and /readyz answers 200
// (docs/server/README.md, "Overload").

// overloadWorkers bounds the generator's requests in flight (one
// connection each); they dial from overloadWorkers/clientConns loopback
// addresses (127.0.0.2 and up), as many producers would, so the server's
// per-client connection cap (128) is not what the run measures.
const (
	overloadWorkers = 1024
	clientConns     = 64
)

// overloadOutcome counts the answers of the overload run.
type overloadOutcome struct {
	requests, ok, throttled429, throttled503, missingRetryAfter, otherStatus, transport atomic.Int64
	// Per-entry results of the 200 answers.
	accepted, entryThrottled, entryOther atomic.Int64
	// shed counts requests the generator could not send on time (all its
	// workers busy): the offered rate fell short by that much.
	shed atomic.Int64
	mu   sync.Mutex
	lat  *hdrhistogram.Histogram
	// statuses keeps an example of each unexpected answer.
	examples []string
}

func (o *overloadOutcome) record(d time.Duration) {
	o.mu.Lock()
	_ = o.lat.RecordValue(max(1, d.Microseconds()))
	o.mu.Unlock()
}

func (o *overloadOutcome) example(s string) {
	o.mu.Lock()
	if len(o.examples) < 5 {
		o.examples = append(o.examples, s)
	}
	o.mu.Unlock()
}

// runOverload runs the overload mode against a full serve with the bench
// route: calibrate for calib, then factor times capacity for dur.
func runOverload(factor float64, calib, dur time.Duration, clients, consumers int, ephemeral bool, syncEvery time.Duration, payloadBytes int, p99Bound time.Duration) error {
	dir, err := os.MkdirTemp("", "benchserve-overload")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()
	secret := bytes.Repeat([]byte{7}, 32)
	key, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		return err
	}
	payload, _ := json.Marshal(map[string]string{"data": string(bytes.Repeat([]byte("x"), payloadBytes-12))})
	s, err := devserver.Start(ctx, devserver.Options{DataDir: dir, Ephemeral: ephemeral, SyncEvery: syncEvery, Listen: "127.0.0.1:0"})
	if err != nil {
		return err
	}
	defer s.Shutdown(ctx)
	if err := seed(ctx, s.Store(), s.Registry(), secret); err != nil {
		return err
	}
	cred, err := s.Credentials().Create("bench")
	if err != nil {
		return err
	}
	creds := ingresscred.Key{AccessKeyID: cred.AccessKeyID, SecretAccessKey: cred.Secret}
	stopConsumer := consume(s.Store(), consumers, true)
	defer stopConsumer()
	url := s.Info().URL

	capacity, calRes, err := load(url, key, &creds, payload, clients, calib, nil)
	if err != nil {
		return fmt.Errorf("calibration: %w", err)
	}
	if capacity <= 0 {
		return fmt.Errorf("calibration: no command accepted in %v", calib)
	}
	offered := factor * capacity
	out := &overloadOutcome{lat: newLatencies()}
	start := time.Now()
	sent := offerOpenLoop(url, key, creds, payload, offered, dur, out)
	loadEnd := time.Now()
	elapsed := loadEnd.Sub(start)

	// Recovery: a normal send accepted and /readyz 200.
	var sendOK, readyOK time.Duration
	for deadline := loadEnd.Add(10 * time.Second); time.Now().Before(deadline) && (sendOK == 0 || readyOK == 0); time.Sleep(10 * time.Millisecond) {
		if sendOK == 0 && normalSend(url, key, creds, payload) {
			sendOK = time.Since(loadEnd)
		}
		if readyOK == 0 && ready(url) {
			readyOK = time.Since(loadEnd)
		}
	}

	store := "file (--fsync always)"
	if syncEvery > 0 {
		store = fmt.Sprintf("file (--fsync %v)", syncEvery)
	}
	if ephemeral {
		store = "in memory"
	}
	at := func(v int64) time.Duration { return time.Duration(v) * time.Microsecond }
	fmt.Printf("bench-serve overload: %.0fx capacity for %v, PutEvents batches of 10, %d B payloads, store %s\n", factor, dur, payloadBytes, store)
	fmt.Printf("  capacity (%d closed-loop clients, %v): %.0f commands/s, %s\n", clients, calib, capacity, calRes.latencyLine())
	fmt.Printf("  offered %.0f commands/s (%d requests sent in %v: %.0f commands/s; %d not sent on time, all %d generator workers busy)\n",
		offered, sent, elapsed.Round(time.Millisecond), float64(sent*10)/elapsed.Seconds(), out.shed.Load(), overloadWorkers)
	fmt.Printf("  answers: %d requests: 200 %d (entries accepted %d, ThrottlingException %d, other %d), 429 %d, 503 %d; without Retry-After %d; other status %d; no answer %d\n",
		out.requests.Load(), out.ok.Load(), out.accepted.Load(), out.entryThrottled.Load(), out.entryOther.Load(),
		out.throttled429.Load(), out.throttled503.Load(), out.missingRetryAfter.Load(), out.otherStatus.Load(), out.transport.Load())
	fmt.Printf("  accepted %.0f commands/s under overload (%.2fx capacity)\n", float64(out.accepted.Load())/elapsed.Seconds(), float64(out.accepted.Load())/elapsed.Seconds()/capacity)
	fmt.Printf("  latency of every answer: p50 %v, p99 %v, max %v (bound on p99: %v)\n",
		at(out.lat.ValueAtQuantile(50)), at(out.lat.ValueAtQuantile(99)), at(out.lat.Max()), p99Bound)
	show := func(d time.Duration) string {
		if d == 0 {
			return "not within 10s"
		}
		return d.Round(time.Millisecond).String()
	}
	fmt.Printf("  after the load stopped: a normal send accepted after %s, /readyz 200 after %s\n", show(sendOK), show(readyOK))
	for _, e := range out.examples {
		fmt.Printf("  unexpected answer: %s\n", e)
	}
	var missed []string
	if n := out.otherStatus.Load() + out.transport.Load() + out.missingRetryAfter.Load() + out.entryOther.Load(); n > 0 {
		missed = append(missed, fmt.Sprintf("%d requests not answered as 200, or 429/503 with Retry-After", n))
	}
	if p := at(out.lat.ValueAtQuantile(99)); p > p99Bound {
		missed = append(missed, fmt.Sprintf("p99 %v over %v", p, p99Bound))
	}
	if sendOK == 0 || sendOK > time.Second || readyOK == 0 || readyOK > time.Second {
		missed = append(missed, "not recovered within 1 s")
	}
	if len(missed) > 0 {
		fmt.Printf("  overload: MISSED: %v\n", missed)
		return fmt.Errorf("overload: %d requirements missed", len(missed))
	}
	fmt.Printf("  overload: met (every request answered, p99 within bound, recovered within 1 s)\n")
	return nil
}

// offerOpenLoop sends batches of 10 at rate commands/s for dur, on time
// whatever the answers (open loop), and returns how many it sent.
func offerOpenLoop(url string, key *signing.Key, creds ingresscred.Key, payload []byte, rate float64, dur time.Duration, out *overloadOutcome) int64 {
	work := make(chan struct{})
	var wg sync.WaitGroup
	var seq atomic.Int64
	clients := make([]*http.Client, overloadWorkers/clientConns)
	for i := range clients {
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, byte(2+i))}, Timeout: 5 * time.Second}
		clients[i] = &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, MaxIdleConnsPerHost: clientConns}}
	}
	for w := range overloadWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			hc := clients[w/clientConns]
			var body bytes.Buffer
			for range work {
				batchBody(&body, key, payload, w, &seq)
				req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body.Bytes()))
				req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
				req.Header.Set("X-Amz-Target", server.TargetPutEvents)
				if err := ingresscred.Sign(req, body.Bytes(), creds, "us-east-1", time.Now()); err != nil {
					out.example(err.Error())
					out.transport.Add(1)
					continue
				}
				t0 := time.Now()
				resp, err := hc.Do(req)
				if err != nil {
					out.record(time.Since(t0))
					out.requests.Add(1)
					out.transport.Add(1)
					out.example(err.Error())
					continue
				}
				b, _ := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				out.record(time.Since(t0))
				out.requests.Add(1)
				judgeAnswer(resp, b, out)
			}
		}()
	}
	interval := time.Duration(float64(time.Second) * 10 / rate)
	start := time.Now()
	var sent int64
	for next := start; next.Sub(start) < dur; next = next.Add(interval) {
		if d := time.Until(next); d > 0 {
			time.Sleep(d)
		}
		select {
		case work <- struct{}{}:
			sent++
		default:
			out.shed.Add(1)
		}
	}
	close(work)
	wg.Wait()
	return sent
}

// judgeAnswer counts one answer: 200 with a result per entry, or 429/503
// with Retry-After.
func judgeAnswer(resp *http.Response, body []byte, out *overloadOutcome) {
	switch resp.StatusCode {
	case http.StatusOK:
		var r struct {
			Entries []struct{ EventId, ErrorCode string }
		}
		if err := json.Unmarshal(body, &r); err != nil || len(r.Entries) != 10 {
			out.otherStatus.Add(1)
			out.example(fmt.Sprintf("200 without 10 entry results: %.200s", body))
			return
		}
		out.ok.Add(1)
		for _, e := range r.Entries {
			switch {
			case e.EventId != "":
				out.accepted.Add(1)
			case e.ErrorCode == server.EntryErrThrottling:
				out.entryThrottled.Add(1)
			default:
				out.entryOther.Add(1)
				out.example("entry refused with " + e.ErrorCode)
			}
		}
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if resp.StatusCode == http.StatusTooManyRequests {
			out.throttled429.Add(1)
		} else {
			out.throttled503.Add(1)
		}
		if resp.Header.Get("Retry-After") == "" {
			out.missingRetryAfter.Add(1)
			out.example(fmt.Sprintf("%d without Retry-After: %.200s", resp.StatusCode, body))
		}
	default:
		out.otherStatus.Add(1)
		out.example(fmt.Sprintf("%d: %.200s", resp.StatusCode, body))
	}
}

// batchBody writes a PutEvents request of 10 freshly signed commands of
// worker w into body.
func batchBody(body *bytes.Buffer, key *signing.Key, payload []byte, w int, seq *atomic.Int64) {
	body.Reset()
	body.WriteString(`{"Entries":[`)
	for i := range 10 {
		id := fmt.Sprintf("0f8fad5b-d9cb-469f-a%03d-%012d", w%1000, seq.Add(1))
		e := envelope.New(id, time.Now(), target, command, payload)
		_ = key.SignEnvelope(&e, source) // a fixed valid key: cannot fail
		detail, _ := e.AppendJSON(nil)
		entry, _ := json.Marshal(map[string]string{"Source": source, "DetailType": envelope.EventType, "Detail": string(detail), "EventBusName": "snavio-command-bus"})
		if i > 0 {
			body.WriteByte(',')
		}
		body.Write(entry)
	}
	body.WriteString(`]}`)
}

// normalSend says whether one PutEvents of one command is accepted.
func normalSend(url string, key *signing.Key, creds ingresscred.Key, payload []byte) bool {
	e := envelope.New(fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", time.Now().UnixNano()%1e12), time.Now(), target, command, payload)
	if err := key.SignEnvelope(&e, source); err != nil {
		return false
	}
	detail, _ := e.AppendJSON(nil)
	body, _ := json.Marshal(map[string]any{"Entries": []map[string]string{{"Source": source, "DetailType": envelope.EventType, "Detail": string(detail), "EventBusName": "snavio-command-bus"}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
	req.Header.Set("X-Amz-Target", server.TargetPutEvents)
	if err := ingresscred.Sign(req, body, creds, "us-east-1", time.Now()); err != nil {
		return false
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	var r struct {
		Entries []struct{ EventId string }
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode == 200 && json.Unmarshal(b, &r) == nil && len(r.Entries) == 1 && r.Entries[0].EventId != ""
}

// ready says whether /readyz answers 200.
func ready(url string) bool {
	resp, err := http.Get(url + "/readyz")
	if err != nil {
		return false
	}
	_ = resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
