package devserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// The serve tests run the real assembly on an ephemeral store and a
// loopback port, with the system clock: the replay window needs real
// timestamps from the producer's side too.

func startDemo(t *testing.T, dir string, ephemeral bool) *Serve {
	t.Helper()
	s, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: ephemeral, Listen: "127.0.0.1:0", Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func demoKeyFrom(t *testing.T, dir string) *signing.Key {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, DemoKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	var k demoKey
	if err := json.Unmarshal(b, &k); err != nil {
		t.Fatal(err)
	}
	key, err := signing.NewKey(k.VersionID, k.Secret)
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// putEvent puts one entry, signed with the ingress credentials of the
// source's tenant in dir (<tenant>.credentials, as --demo writes demo's).
func putEvent(t *testing.T, dir, url, source string, detail []byte) map[string]any {
	t.Helper()
	body, _ := json.Marshal(map[string]any{"Entries": []map[string]string{{
		"Source": source, "DetailType": envelope.EventType, "Detail": string(detail), "EventBusName": "snavio-command-bus",
	}}})
	req, _ := http.NewRequest(http.MethodPost, url+"/", bytes.NewReader(body))
	req.Header.Set("Content-Type", server.ContentTypeAWSJSON11)
	req.Header.Set("X-Amz-Target", server.TargetPutEvents)
	tenant, _, _ := strings.Cut(source, "/")
	k, err := ingresscred.ReadFile(ingresscred.DefaultFile(dir, tenant), tenant)
	if err != nil {
		t.Fatal(err)
	}
	if err := ingresscred.Sign(req, body, k, "us-east-1", time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var out map[string]any
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, &out) != nil {
		t.Fatalf("PutEvents: %d %s", resp.StatusCode, b)
	}
	return out
}

// writeCredentials creates tenant's ingress credential and writes it to
// dir/<tenant>.credentials, where putEvent finds it.
func writeCredentials(t *testing.T, s *Serve, dir, tenant string) {
	t.Helper()
	c, err := s.deps.Credentials.Create(tenant)
	if err != nil {
		t.Fatal(err)
	}
	k := ingresscred.Key{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.Secret}
	if err := atomicfile.Write(ingresscred.DefaultFile(dir, tenant), ingresscred.Format(ingresscred.DefaultSection, k), 0o600); err != nil {
		t.Fatal(err)
	}
}

func signed(t *testing.T, k *signing.Key, id, target, name, payload string) []byte {
	t.Helper()
	e := envelope.New(id, time.Now(), target, name, []byte(payload))
	if err := k.SignEnvelope(&e, DemoSource); err != nil {
		t.Fatal(err)
	}
	b, err := e.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitFor polls the store until cond holds: the slow stage runs on its
// own goroutines in real time, so this is a bounded wait for their work,
// not for logic under test.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func names(t *testing.T, s *Serve, tenant string) []string {
	t.Helper()
	recs, err := s.store.ReadTelemetry(context.Background(), tenant, 0, 1000)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		out = append(out, r.Name)
	}
	return out
}

func TestServeDeliversThroughTheWholePipeline(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	url := s.Info().URL

	id := "0f8fad5b-d9cb-469f-a165-000000000001"
	out := putEvent(t, dir, url, DemoSource, signed(t, k, id, DemoTarget, DemoCommand, `{"sku":"A-1"}`))
	if out["FailedEntryCount"].(float64) != 0 {
		t.Fatalf("refused: %v", out)
	}
	var got []byte
	waitFor(t, "the delivery", func() bool {
		msgs, err := s.store.Receive(context.Background(), DemoQueue, 10, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) == 1 {
			got = msgs[0].Body
			if msgs[0].Attributes[provenance.AttrCommandID] != id || msgs[0].Attributes[provenance.AttrSource] != DemoSource {
				t.Errorf("attributes = %v", msgs[0].Attributes)
			}
		}
		return got != nil
	})
	if !strings.Contains(string(got), `"source":"demo/app"`) {
		t.Fatalf("the delivered command does not carry the dispatcher-set source: %s", got)
	}
	waitFor(t, "the delivered event", func() bool { return strings.Contains(strings.Join(names(t, s, "demo"), ","), telemetry.NameDelivered) })

	// A tampered message is acknowledged by the bus and refused by the
	// shield with telemetry (the spec: invalid events are telemetry).
	bad := signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000002", DemoTarget, DemoCommand, `{"sku":"A-1"}`)
	bad = bytes.Replace(bad, []byte(`A-1`), []byte(`B-1`), 1)
	putEvent(t, dir, url, DemoSource, bad)
	waitFor(t, "the invalid event", func() bool { return strings.Contains(strings.Join(names(t, s, "demo"), ","), telemetry.NameInvalid) })

	// A command with no route: snavio.command.failed route-missing.
	putEvent(t, dir, url, DemoSource, signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000003", DemoTarget, "no-such-command", `{}`))
	waitFor(t, "the failed event", func() bool { return strings.Contains(strings.Join(names(t, s, "demo"), ","), telemetry.NameFailed) })
}

func TestServeStrictDuplicateAndRestartKeepsState(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, false)
	k := demoKeyFrom(t, dir)
	url := s.Info().URL
	id := "0f8fad5b-d9cb-469f-a165-000000000010"
	msg := signed(t, k, id, DemoTarget, DemoStrictCommand, `{"amount":5}`)
	putEvent(t, dir, url, DemoSource, msg)
	putEvent(t, dir, url, DemoSource, msg)
	count := func(name string) int { return strings.Count(strings.Join(names(t, s, "demo"), ","), name) }
	waitFor(t, "one delivery and one duplicate", func() bool {
		return count(telemetry.NameDelivered) == 1 && count(telemetry.NameDuplicate) == 1
	})
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}

	// Restart on the same directory: the queue, telemetry, registry and
	// the key survive; the caches cold-start from the signed snapshot.
	s2 := startDemo(t, dir, false)
	defer s2.Shutdown(context.Background())
	if s2.Info().CachesLoadedFrom != "snapshot" || !s2.Info().Demo.Reseeded {
		t.Fatalf("after restart: %+v", s2.Info())
	}
	if n := strings.Count(strings.Join(names(t, s2, "demo"), ","), telemetry.NameDelivered); n != 1 {
		t.Fatalf("delivered events after restart = %d, want the 1 from before", n)
	}
	putEvent(t, dir, s2.Info().URL, DemoSource, msg)
	waitFor(t, "a second duplicate after the restart", func() bool {
		return strings.Count(strings.Join(names(t, s2, "demo"), ","), telemetry.NameDuplicate) == 2
	})
	msgs, err := s2.store.Receive(context.Background(), DemoQueue, 10, time.Minute)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("queue after restart: %d messages, %v", len(msgs), err)
	}
}

// TestRegistryWritesAreUsableAtOnce: a key, route and ACL registered
// through the control API's registry are usable by the very next command,
// not after the caches' fresh TTL.
func TestRegistryWritesAreUsableAtOnce(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	ctx := context.Background()
	secret := bytes.Repeat([]byte{9}, 32)
	by := registry.Actor{Who: "test", At: time.Now()}
	src := "late/comer"
	k := registry.ServiceKey{Source: src, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: time.Now().Add(-time.Second)}}}
	q := "arn:snavio:sqs:local:000000000000:" + DemoQueue
	r := registry.Route{Target: "late", Command: "go", QueueARN: q, DLQARN: "arn:snavio:sqs:local:000000000000:" + DemoDLQ, Profile: registry.ProfileLow}
	a := registry.ACL{Source: src, Target: "late", Command: "go", Allow: true, Profile: registry.ProfileLow}
	for _, it := range []registry.Item{{Key: &k}, {Route: &r}, {ACL: &a}} {
		if _, err := s.Registry().Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	key, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		t.Fatal(err)
	}
	e := envelope.New("0f8fad5b-d9cb-469f-a165-000000000077", time.Now(), "late", "go", []byte(`{}`))
	if err := key.SignEnvelope(&e, src); err != nil {
		t.Fatal(err)
	}
	b, _ := e.AppendJSON(nil)
	writeCredentials(t, s, dir, "late")
	putEvent(t, dir, s.Info().URL, src, b)
	waitFor(t, "the delivered event", func() bool { return strings.Contains(strings.Join(names(t, s, "late"), ","), telemetry.NameDelivered) })
	// The shield samples 1% of accepted commands' skew: that event may
	// come too.
	got := slices.DeleteFunc(names(t, s, "late"), func(n string) bool { return n == telemetry.NameSkewSample })
	if len(got) != 1 {
		t.Fatalf("events = %v, want one delivery and nothing else (no unknown_source)", got)
	}
}

// TestAlertsReachTheDashboardAndTheWebhook: an invalid command (an
// alerting event) goes through the outbox's drain to the dashboard log
// and to the signed webhook.
func TestAlertsReachTheDashboardAndTheWebhook(t *testing.T) {
	got := make(chan []byte, 10)
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("X-Snavio-Signature") == "" {
			t.Errorf("webhook call without a signature")
		}
		got <- b
	}))
	defer hook.Close()
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true,
		WebhookURL: hook.URL, WebhookSecret: bytes.Repeat([]byte("s"), 32), Jobs: Schedule{Alerts: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	bad := signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000099", DemoTarget, DemoCommand, `{"a":1}`)
	putEvent(t, dir, s.Info().URL, DemoSource, bytes.Replace(bad, []byte(`"a":1`), []byte(`"a":2`), 1))
	select {
	case b := <-got:
		if !strings.Contains(string(b), telemetry.NameInvalid) {
			t.Fatalf("webhook body = %s", b)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no webhook call for the invalid command")
	}
	if rec := s.alerts.Dashboard().Recent("demo"); len(rec) != 1 || rec[0].Event != telemetry.NameInvalid {
		t.Fatalf("dashboard = %+v", rec)
	}
}

// TestAlertCursorSurvivesRestart: a drain run saves its cursor (mode
// 0600) when it ends, so a restarted server does not deliver the same
// alert again.
func TestAlertCursorSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	start := func() *Serve {
		s, err := Start(context.Background(), Options{DataDir: dir, Listen: "127.0.0.1:0", Demo: true, Jobs: Schedule{Alerts: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s := start()
	k := demoKeyFrom(t, dir)
	bad := signed(t, k, "0f8fad5b-d9cb-469f-a165-000000000098", DemoTarget, DemoCommand, `{"a":1}`)
	putEvent(t, dir, s.Info().URL, DemoSource, bytes.Replace(bad, []byte(`"a":1`), []byte(`"a":2`), 1))
	waitFor(t, "the invalid event", func() bool { return strings.Contains(strings.Join(names(t, s, "demo"), ","), telemetry.NameInvalid) })
	if err := s.RunJob(context.Background(), JobAlerts); err != nil {
		t.Fatal(err)
	}
	if rec := s.alerts.Dashboard().Recent("demo"); len(rec) != 1 {
		t.Fatalf("dashboard before the restart = %+v", rec)
	}
	fi, err := os.Stat(filepath.Join(dir, alertCursorFile))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("alert cursor: %v, %v", fi, err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := start()
	defer s2.Shutdown(context.Background())
	if err := s2.RunJob(context.Background(), JobAlerts); err != nil {
		t.Fatal(err)
	}
	if rec := s2.alerts.Dashboard().Recent("demo"); len(rec) != 0 {
		t.Fatalf("the alert was delivered again after the restart: %+v", rec)
	}
}

// TestMalformedDetailIsInvalidForItsTenant: a detail the envelope parser
// refuses is acknowledged by the bus (like EventBridge) and reported to
// the sending tenant as snavio.command.invalid.
func TestMalformedDetailIsInvalidForItsTenant(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	putEvent(t, dir, s.Info().URL, DemoSource, []byte(`{"command":{"id":"x"}}`))
	waitFor(t, "the invalid event", func() bool { return strings.Contains(strings.Join(names(t, s, "demo"), ","), telemetry.NameInvalid) })
}

// TestStoreMetricsOnFile: /metrics reports the store's log, its syncs and
// its sync interval (--fsync 100ms here): after a delivery the log has
// frames and writes, and fewer syncs than writes.
func TestStoreMetricsOnFile(t *testing.T) {
	dir := t.TempDir()
	s, err := Start(context.Background(), Options{DataDir: dir, Listen: "127.0.0.1:0", Demo: true, SyncEvery: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	k := demoKeyFrom(t, dir)
	url := s.Info().URL
	if got := s.Info().Fsync; got != "100ms" {
		t.Fatalf("Info().Fsync = %q", got)
	}
	for i := range 5 {
		putEvent(t, dir, url, DemoSource, signed(t, k, fmt.Sprintf("0f8fad5b-d9cb-469f-a165-00000000010%d", i), DemoTarget, DemoCommand, `{"sku":"A-1"}`))
	}
	metric := func(body, name string) float64 {
		for line := range strings.SplitSeq(body, "\n") {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				return f
			}
		}
		t.Fatalf("no %s in /metrics:\n%s", name, body)
		return 0
	}
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	body := string(b)
	frames, writes := metric(body, "snavio_store_log_frames_total"), metric(body, "snavio_store_log_writes_total")
	if frames < 5 || writes < 1 || writes > frames {
		t.Fatalf("log frames %v, writes %v: want the 5 deliveries' frames in at least one write", frames, writes)
	}
	if syncs := metric(body, "snavio_store_log_syncs_total"); syncs > writes {
		t.Fatalf("%v syncs for %v writes with a sync interval", syncs, writes)
	}
	if got := metric(body, "snavio_store_log_sync_interval_seconds"); got != 0.1 {
		t.Fatalf("sync interval %v s, want 0.1", got)
	}
	if metric(body, "snavio_store_log_segments") < 1 || metric(body, "snavio_store_commits_total") < 1 {
		t.Fatalf("segments or commits missing:\n%s", body)
	}
}

// FuzzParseFsync: --fsync is always (0) or an interval within the bounds;
// anything else is an error that quotes the value.
func FuzzParseFsync(f *testing.F) {
	for _, s := range []string{"always", "100ms", "1ms", "10m", "0s", "-1s", "soon", "11m", "1h", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d, err := ParseFsync(v)
		switch {
		case err != nil:
			if d != 0 || !strings.Contains(err.Error(), strconv.Quote(v)) {
				t.Fatalf("ParseFsync(%q) = %v, %v", v, d, err)
			}
		case v == "always":
			if d != 0 {
				t.Fatalf("always = %v", d)
			}
		case d < MinSyncEvery || d > MaxSyncEvery:
			t.Fatalf("ParseFsync(%q) = %v, outside the bounds", v, d)
		}
	})
}

// TestLogSyncLatencyMetric: on file /metrics has the latency histogram of
// the log's syncs (with --fsync always each acknowledged PutEvents waited
// for one); in memory, where nothing is synced, it has none.
func TestLogSyncLatencyMetric(t *testing.T) {
	const fam = "snavio_store_log_sync_duration_seconds"
	for _, ephemeral := range []bool{false, true} {
		t.Run(fmt.Sprint("ephemeral=", ephemeral), func(t *testing.T) {
			dir := t.TempDir()
			s := startDemo(t, dir, ephemeral)
			defer s.Shutdown(context.Background())
			k := demoKeyFrom(t, dir)
			for i := range 3 {
				putEvent(t, dir, s.Info().URL, DemoSource, signed(t, k, fmt.Sprintf("0f8fad5b-d9cb-469f-a165-00000000020%d", i), DemoTarget, DemoCommand, `{"sku":"A-1"}`))
			}
			resp, err := http.Get(s.Info().URL + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			samples := map[string]float64{}
			for line := range strings.SplitSeq(string(b), "\n") {
				name, v, ok := strings.Cut(line, " ")
				if !ok || !strings.HasPrefix(name, "snavio_store_log_sync") {
					continue
				}
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					t.Fatalf("%s: %v", line, err)
				}
				samples[name] = f
			}
			if ephemeral {
				if strings.Contains(string(b), fam) {
					t.Fatalf("a sync latency histogram in memory:\n%s", b)
				}
				return
			}
			count, syncs := samples[fam+"_count"], samples["snavio_store_log_syncs_total"]
			if count < 3 || count > syncs {
				t.Fatalf("%v syncs observed of %v: want one per acknowledged PutEvents at least, and none not counted\n%s", count, syncs, b)
			}
			if samples[fam+"_sum"] <= 0 || samples[fam+`_bucket{le="+Inf"}`] != count {
				t.Fatalf("sum %v, +Inf bucket %v, count %v:\n%s", samples[fam+"_sum"], samples[fam+`_bucket{le="+Inf"}`], count, b)
			}
		})
	}
}

// A taken port fails the start before the data directory is made or seeded.
func TestTakenPortLeavesNoDataDir(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	dir := filepath.Join(t.TempDir(), "data")
	_, err = Start(context.Background(), Options{DataDir: dir, Listen: taken.Addr().String(), Demo: true})
	if err == nil || !strings.Contains(err.Error(), "free the port or pass another --listen address") {
		t.Fatalf("start on a taken port: %v", err)
	}
	if _, serr := os.Stat(dir); !errors.Is(serr, fs.ErrNotExist) {
		t.Fatalf("the data directory exists after a failed start (%v)", serr)
	}
}
