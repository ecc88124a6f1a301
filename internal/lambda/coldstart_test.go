package lambda

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	stdjson "encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/snapshotbin"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

const snapshotKeyID = "snapshot-gen"

// benchMemoryMB is the ingest function's memory in the cold-start
// benchmark, as Lambda tells it the bootstrap (docs/cost.md).
const benchMemoryMB = 1024

func snapshotSigner(tb testing.TB) *snapshot.Ed25519Signer {
	tb.Helper()
	s, err := snapshot.NewEd25519Signer(snapshotKeyID, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{3}, ed25519.SeedSize)))
	if err != nil {
		tb.Fatal(err)
	}
	return s
}

// fixtureData is the fixture's registry as snapshot data.
func (f *fixture) fixtureData(tb testing.TB) registry.Data {
	tb.Helper()
	reg, err := awsstore.NewRegistryStore(f.store)
	if err != nil {
		tb.Fatal(err)
	}
	d, err := reg.Load(context.Background(), f.clk.Now())
	if err != nil {
		tb.Fatal(err)
	}
	return d
}

// snapshots returns the sealed JSON and compact full documents of d,
// generated now.
func snapshots(tb testing.TB, d registry.Data, now time.Time) (jsonBody, binBody []byte, version string) {
	tb.Helper()
	ctx := context.Background()
	s := snapshotSigner(tb)
	doc := &snapshot.Document{Format: snapshot.Format, Kind: snapshot.KindFull, VersionID: snapshot.VersionIDAt(now), GeneratedAt: now, Data: d}
	raw, err := json.Marshal(doc, json.Deterministic(true))
	if err != nil {
		tb.Fatal(err)
	}
	if jsonBody, err = snapshot.Seal(ctx, s, raw); err != nil {
		tb.Fatal(err)
	}
	if binBody, err = snapshotbin.Seal(ctx, s, doc); err != nil {
		tb.Fatal(err)
	}
	return jsonBody, binBody, doc.VersionID
}

// publish makes a bucket on gofakes3 and publishes the bodies given
// (nil: not published) as the latest JSON and compact documents. It
// returns the store configuration reaching the bucket.
func (f *fixture) publish(tb testing.TB, jsonBody, binBody []byte, version string) awsstore.Config {
	tb.Helper()
	ctx := context.Background()
	e := emu.S3()
	cfg := f.store
	cfg.SnapshotBucket = e.NewBucketName()
	cfg.S3Options = e.ClientOptions()
	raw := s3.NewFromConfig(e.Config(), e.ClientOptions()...)
	if _, err := raw.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(cfg.SnapshotBucket)}); err != nil {
		tb.Fatal(err)
	}
	st, err := awsstore.NewSnapshotStore(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	for _, p := range []struct {
		path string
		body []byte
	}{{snapshot.DefaultPaths().Full, jsonBody}, {snapshotbin.DefaultPath, binBody}} {
		if p.body == nil {
			continue
		}
		if err := st.Put(ctx, p.path, version, p.body); err != nil {
			tb.Fatal(err)
		}
		if err := st.Promote(ctx, p.path, version); err != nil {
			tb.Fatal(err)
		}
	}
	return cfg
}

func (f *fixture) coldConfig(tb testing.TB, store awsstore.Config) Config {
	s := snapshotSigner(tb)
	return Config{Function: FunctionIngest, Store: store, EscalationQueueURL: f.escURL,
		DeliveryKey: bytes.Repeat([]byte{7}, provenance.MinMasterLen), Instance: "cold",
		SnapshotKeys: snapshot.TrustedKeys{snapshotKeyID: s.PublicKey()}, Clock: f.clk}
}

// TestColdStartSources: the cold start takes the compact snapshot, falls
// back to the JSON one when the compact one is missing or corrupt, and to
// the registry tables when neither is usable; each host then delivers.
func TestColdStartSources(t *testing.T) {
	f := newFixture(t)
	jsonBody, binBody, version := snapshots(t, f.fixtureData(t), f.clk.Now())
	corrupt := bytes.Clone(binBody)
	corrupt[len(corrupt)/2] ^= 0xff
	for _, tc := range []struct {
		name       string
		json, bin  []byte
		want       string
		noSnapshot bool
	}{
		{"compact", jsonBody, binBody, FromCompact, false},
		{"no compact", jsonBody, nil, FromJSON, false},
		{"corrupt compact", jsonBody, corrupt, FromJSON, false},
		{"neither", nil, nil, FromRegistry, false},
		{"no bucket configured", nil, nil, FromRegistry, true},
	} {
		store := f.store
		if !tc.noSnapshot {
			store = f.publish(t, tc.json, tc.bin, version)
		}
		cfg := f.coldConfig(t, store)
		if tc.noSnapshot {
			cfg.SnapshotKeys = nil
		}
		h, err := New(context.Background(), cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if src := h.cold.Source(); src != tc.want {
			t.Errorf("%s: loaded from %s, want %s", tc.name, src, tc.want)
		}
		if err := h.Ingest(context.Background(), f.nextEvent(t, "mailer", "send")); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		t.Logf("%s: cold start from %s in %v", tc.name, h.cold.Source(), h.cold.Took.Round(time.Microsecond))
	}
	if n := len(f.receive(t, f.queueURL(t, f.plainARN))); n != 5 {
		t.Errorf("target queue holds %d messages, want 5", n)
	}
}

// TestColdStartRevalidates: a signed compact snapshot that fails
// registry validation (a generator defect) is seeded, found invalid in
// the background once the first invocation ends, and replaced by the
// registry tables' data.
func TestColdStartRevalidates(t *testing.T) {
	f := newFixture(t)
	d := f.fixtureData(t)
	bogus := dispatchtest.RegistryRoute("bogus", "route")
	bogus.QueueARN = "arn:aws:sqs:us-east-1:123456789012:bogus.fifo"
	d.Routes = append(d.Routes, bogus)
	if registry.Validate(&d) == nil {
		t.Fatal("the bogus route passes validation; the test needs an invalid one")
	}
	_, binBody, version := snapshots(t, d, f.clk.Now())
	h, err := New(context.Background(), f.coldConfig(t, f.publish(t, nil, binBody, version)))
	if err != nil {
		t.Fatal(err)
	}
	if err := h.bg.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if src := h.cold.Source(); src != FromCompact {
		t.Fatalf("before the first invocation the caches come from %s, want %s (not validated yet)", src, FromCompact)
	}
	if err := h.Ingest(context.Background(), f.nextEvent(t, "mailer", "send")); err != nil {
		t.Fatal(err)
	}
	if err := h.bg.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	if src := h.cold.Source(); src != FromRegistry {
		t.Errorf("after the background validation the caches come from %s, want %s", src, FromRegistry)
	}
	if _, _, found := h.cold.caches.LookupRoute(registry.RouteKey{Target: "bogus", Command: "route"}, f.clk.Now()); found {
		t.Error("the invalid snapshot's route is still cached")
	}
	if err := h.Ingest(context.Background(), f.nextEvent(t, "mailer", "send")); err != nil {
		t.Fatal(err)
	}
	if n := len(f.receive(t, f.queueURL(t, f.plainARN))); n != 2 {
		t.Errorf("target queue holds %d messages, want 2", n)
	}
}

// TestSnapshotEnv: the cold start's variables, good and bad.
func TestSnapshotEnv(t *testing.T) {
	pub := base64.StdEncoding.EncodeToString(snapshotSigner(t).PublicKey())
	base := map[string]string{
		EnvFunction: FunctionIngest, EnvEnv: "prod", EnvEscalationQueue: "https://sqs.us-east-1.amazonaws.com/123456789012/esc",
		EnvDeliveryKey:    base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, provenance.MinMasterLen)),
		EnvSnapshotBucket: "snavio-snapshots", EnvSnapshotKeys: "gen-1=" + pub + ", gen-2=" + pub, EnvSnapshotMaxAge: "10m",
	}
	with := func(k, v string) func(string) string {
		return func(name string) string {
			if name == k {
				return v
			}
			return base[name]
		}
	}
	c, err := FromEnv(with("", ""), aws.Config{Region: "us-east-1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(c.SnapshotKeys) != 2 || c.SnapshotMaxAge != 10*time.Minute || c.Store.SnapshotBucket != "snavio-snapshots" {
		t.Errorf("config %+v", c)
	}
	for _, tc := range []struct{ name, value, want string }{
		{EnvSnapshotKeys, "", EnvSnapshotKeys},
		{EnvSnapshotKeys, "gen-1", "id=key"},
		{EnvSnapshotKeys, "gen-1=not-base64!", "id=key"},
		{EnvSnapshotKeys, "gen-1=c2hvcnQ=", "id=key"},
		{EnvSnapshotKeys, "=" + pub, "id=key"},
		{EnvSnapshotMaxAge, "10", EnvSnapshotMaxAge},
		{EnvSnapshotMaxAge, "-1m", EnvSnapshotMaxAge},
		{EnvSnapshotBucket, "Not_A_Bucket", "bucket"},
	} {
		if _, err := FromEnv(with(tc.name, tc.value), aws.Config{Region: "us-east-1"}); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s=%q: %v, want an error naming %q", tc.name, tc.value, err, tc.want)
		}
	}
}

// coldStartBench is the set-up of the cold-start benchmarks: the
// bootstrap and a hello-world function built, the fixture's registry plus
// 100k routes, 100k ACLs and 10k keysets published as JSON and compact
// snapshots on gofakes3.
type coldStartBench struct {
	f         *fixture
	bootstrap string
	env       []string
	jsonBody  []byte
}

func buildBinary(tb testing.TB, pkg string) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	build := exec.Command("go", "build", "-trimpath", "-tags", "lambda.norpc", "-ldflags", "-s -w", "-o", bin, pkg)
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, out)
	}
	return bin
}

func newColdStartBench(b *testing.B) *coldStartBench {
	b.Helper()
	f := newFixture(b)
	d := dispatchtest.BenchRegistry(100_000, 10_000, f.clk.Now())
	own := f.fixtureData(b)
	d.Routes = append(d.Routes, own.Routes...)
	d.ACLs = append(d.ACLs, own.ACLs...)
	d.Keys = append(d.Keys, own.Keys...)
	jsonBody, binBody, version := snapshots(b, d, time.Now().UTC())
	store := f.publish(b, jsonBody, binBody, version)
	cb := &coldStartBench{f: f, bootstrap: buildBinary(b, "github.com/snavio/snavio/cmd/snavio-lambda"), jsonBody: jsonBody}
	cb.env = slices.Concat(f.bootstrapEnv(b), []string{
		EnvSnapshotBucket + "=" + store.SnapshotBucket,
		EnvSnapshotKeys + "=" + snapshotKeyID + "=" + base64.StdEncoding.EncodeToString(snapshotSigner(b).PublicKey()),
		"AWS_ENDPOINT_URL_S3=" + emu.S3().Endpoint,
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(benchMemoryMB),
	})
	b.Logf("snapshots: JSON %d bytes, compact %d bytes", len(jsonBody), len(binBody))
	return cb
}

// BenchmarkColdStart runs the real bootstrap as Lambda would, from
// process start to its first command delivered: SDK configuration, the
// compact snapshot of 100k routes, 100k ACLs and 10k keysets from S3
// (gofakes3), verified, decoded and seeded, then one command through
// shield and fast stage to its SQS queue (kumo). Each iteration also
// times the floor (BenchmarkFloorColdStart's Unmarshal) with the timer
// stopped, and reports it and the ratio of the two (x-floor): taken
// moments apart, they share the machine's load, which on a busy machine
// drifts between two benchmarks. The same for CPU: the bootstrap's up to
// its answer (cpu-ns/op) beside the floor's (floor-cpu-ns/op), and their
// ratio (x-floor-cpu), steadier than the wall times on a loaded machine.
func BenchmarkColdStart(b *testing.B) {
	cb := newColdStartBench(b)
	var cpu, floor, floorCPU time.Duration
	b.ResetTimer()
	for range b.N {
		ev := cb.f.eventJSON(b, "mailer", "send")
		got, c := runBootstrap(b, cb.bootstrap, cb.env, ev, nil)
		if got != "response: null" {
			b.Fatalf("answer %q", got)
		}
		cpu += c
		b.StopTimer()
		began, beganCPU := time.Now(), processCPU(b)
		var v any
		if err := stdjson.Unmarshal(cb.jsonBody, &v); err != nil {
			b.Fatal(err)
		}
		floor += time.Since(began)
		floorCPU += processCPU(b) - beganCPU
		runtime.GC() // the floor's garbage is not the next bootstrap's load
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	b.ReportMetric(float64(floor.Nanoseconds())/float64(b.N), "floor-ns/op")
	b.ReportMetric(float64(floorCPU.Nanoseconds())/float64(b.N), "floor-cpu-ns/op")
	b.ReportMetric(float64(b.Elapsed())/float64(floor), "x-floor")
	b.ReportMetric(float64(cpu)/float64(floorCPU), "x-floor-cpu")
}

// BenchmarkFloorColdStart is the cold start's floor: encoding/json's
// Unmarshal of the JSON snapshot of the same registry into any.
func BenchmarkFloorColdStart(b *testing.B) {
	body, _, _ := snapshots(b, dispatchtest.BenchRegistry(100_000, 10_000, time.Now().UTC()), time.Now().UTC())
	b.SetBytes(int64(len(body)))
	before := processCPU(b)
	for b.Loop() {
		var v any
		if err := stdjson.Unmarshal(body, &v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64((processCPU(b)-before).Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// processCPU is this process's CPU time (user and system). The floor's
// CPU beside the bootstrap's: on a loaded machine the CPU times are
// steadier than the wall times, which carry other processes' load.
func processCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		tb.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkHelloWorldInit is a hello-world aws-lambda-go function from
// process start to its first answer, on the same fake Runtime API.
func BenchmarkHelloWorldInit(b *testing.B) {
	bin := buildBinary(b, "./testdata/hello")
	for b.Loop() {
		if got, _ := runBootstrap(b, bin, []string{"HOME=" + b.TempDir()}, []byte(`{}`), nil); got != `response: "hello"` {
			b.Fatalf("answer %q", got)
		}
	}
}
