package snapshot_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func signer(t testing.TB, id string, seed byte) *snapshot.Ed25519Signer {
	t.Helper()
	s, err := snapshot.NewEd25519Signer(id, ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

type metrics struct {
	mu     sync.Mutex
	counts map[string]int64
	obs    map[string][]float64
}

func (m *metrics) Count(n string, v int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.counts == nil {
		m.counts = map[string]int64{}
	}
	m.counts[n] += v
}

func (m *metrics) Observe(n string, v float64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.obs == nil {
		m.obs = map[string][]float64{}
	}
	m.obs[n] = append(m.obs[n], v)
}

type world struct {
	clk   *clock.Fake
	reg   *memstore.Registry
	snaps *memstore.Snapshots
	sig   *snapshot.Ed25519Signer
	m     *metrics
	tel   *telemetry.Memory
	gen   *snapshot.Generator
}

func newWorld(t *testing.T, maxBytes int64) *world {
	t.Helper()
	w := &world{clk: clock.NewFake(t0), reg: memstore.NewRegistry(), snaps: memstore.NewSnapshots(), sig: signer(t, "snapshot-2026-11", 1), m: &metrics{}, tel: &telemetry.Memory{}}
	ctx := context.Background()
	by := registry.Actor{Who: "seed", At: t0.Add(-time.Hour)}
	r := dispatchtest.RegistryRoute("billing", "charge")
	a := dispatchtest.RegistryACL("shop/web", "billing", "charge")
	k := registry.ServiceKey{Source: "shop/web", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: bytes.Repeat([]byte{9}, 32), ActivatedAt: t0.Add(-time.Hour)}}}
	b := registry.Ban{Source: "spam/bot", Kind: registry.BanColdOnly}
	for _, it := range []registry.Item{{Route: &r}, {ACL: &a}, {Key: &k}, {Ban: &b}} {
		if _, err := w.reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	g, err := snapshot.NewGenerator(snapshot.GeneratorConfig{MaxBytes: maxBytes, TTLPolicy: snapshot.TTLPolicy{Routing: snapshot.TTL{FreshSeconds: 60, StaleSeconds: 180}}},
		snapshot.GeneratorDeps{Reader: w.reg, Store: w.snaps, Signer: w.sig, Clock: w.clk, Metrics: w.m, Telemetry: w.tel})
	if err != nil {
		t.Fatal(err)
	}
	w.gen = g
	return w
}

func (w *world) loader(t *testing.T, trusted snapshot.TrustedKeys, store snapshot.Store, maxBytes int64) *snapshot.Loader {
	t.Helper()
	l, err := snapshot.NewLoader(snapshot.LoaderConfig{Trusted: trusted, MaxAge: 180 * time.Second, MaxBytes: maxBytes},
		snapshot.LoaderDeps{Store: store, Clock: w.clk, Metrics: w.m})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func (w *world) trusted() snapshot.TrustedKeys {
	return snapshot.TrustedKeys{w.sig.KeyID(): w.sig.PublicKey()}
}

func (w *world) caches(t *testing.T) *cache.Caches {
	t.Helper()
	c, err := cache.New(cache.Config{Jitter: -1}, cache.Deps{Reader: w.reg, Clock: w.clk, Executor: func(func()) {}})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestGenerateAndColdStart(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	pub, err := w.gen.Generate(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if pub.VersionID != "20261121T120000.000Z" || pub.Bytes[snapshot.KindFull] <= pub.Bytes[snapshot.KindACL] {
		t.Fatalf("published %+v", pub)
	}
	if w.m.counts[telemetry.MetricSnapshotGenerated] != 1 || len(w.m.obs[telemetry.MetricSnapshotSizeBytes]) != 1 ||
		w.m.obs[telemetry.MetricSnapshotSizeBytes][0] != float64(pub.Bytes[snapshot.KindFull]) || len(w.m.obs[telemetry.MetricSnapshotWriteDuration]) != 1 {
		t.Fatalf("generation metrics %+v %+v", w.m.counts, w.m.obs)
	}
	l := w.loader(t, w.trusted(), w.snaps, 0)
	for _, k := range []snapshot.Kind{snapshot.KindACL, snapshot.KindHMAC, snapshot.KindFull} {
		doc, err := l.Load(ctx, k)
		if err != nil {
			t.Fatalf("%s: %v", k, err)
		}
		if doc.Kind != k || doc.VersionID != pub.VersionID || !doc.GeneratedAt.Equal(t0) || doc.TTLPolicy.Routing.StaleSeconds != 180 {
			t.Fatalf("%s document %+v", k, doc)
		}
	}
	doc, _ := l.Load(ctx, snapshot.KindFull)
	if len(doc.Routes) != 1 || len(doc.ACLs) != 1 || len(doc.Keys) != 1 || len(doc.Bans) != 1 {
		t.Fatalf("full document %+v", doc.Data)
	}
	// Cold start 100 s later: the snapshot is used and counts as fresh
	// until generated_at + stale TTL of each type.
	w.clk.Set(t0.Add(100 * time.Second))
	c := w.caches(t)
	src, err := l.ColdStart(ctx, c)
	if err != nil || src != snapshot.FromSnapshot {
		t.Fatalf("ColdStart = %s, %v", src, err)
	}
	if _, st, ok := c.Routes.Lookup(registry.RouteKey{Target: "billing", Command: "charge"}, t0.Add(179*time.Second)); !ok || st != cache.Fresh {
		t.Fatalf("route from the snapshot at generated_at+179s: %v %v; want fresh", st, ok)
	}
	if _, st, _ := c.Routes.Lookup(registry.RouteKey{Target: "billing", Command: "charge"}, t0.Add(180*time.Second)); st != cache.Stale {
		t.Fatalf("at generated_at+180s: %v; want stale", st)
	}
	if _, err := c.Keys.Resolve("shop/web", "hmac-v1", w.clk.Now()); err != nil {
		t.Fatalf("key from the snapshot: %v", err)
	}
	if w.m.counts[telemetry.MetricCacheSnapshotLoadFailure] != 0 {
		t.Fatal("a good snapshot counted as a failure")
	}
}

// mutate returns a store whose latest full document is f(good body).
func mutated(t *testing.T, w *world, f func([]byte) []byte) *memstore.Snapshots {
	t.Helper()
	_, good, err := w.snaps.Latest(context.Background(), snapshot.DefaultPaths().Full, 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	s := memstore.NewSnapshots()
	b := f(bytes.Clone(good))
	if err := s.Put(context.Background(), snapshot.DefaultPaths().Full, "x", b); err != nil {
		t.Fatal(err)
	}
	if err := s.Promote(context.Background(), snapshot.DefaultPaths().Full, "x"); err != nil {
		t.Fatal(err)
	}
	return s
}

func docOf(t *testing.T, good []byte) []byte {
	t.Helper()
	i := bytes.Index(good, []byte(`"document":`))
	return bytes.Clone(good[i+len(`"document":`) : len(good)-1])
}

func TestBadSnapshotsFallBack(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	if _, err := w.gen.Generate(ctx); err != nil {
		t.Fatal(err)
	}
	other := signer(t, "snapshot-2026-11", 2) // same id, another key
	stranger := signer(t, "someone-else", 3)
	reseal := func(s snapshot.Signer, edit func(d *snapshot.Document)) func([]byte) []byte {
		return func(good []byte) []byte {
			var d snapshot.Document
			if err := json.Unmarshal(docOf(t, good), &d); err != nil {
				t.Fatal(err)
			}
			edit(&d)
			raw, err := json.Marshal(&d)
			if err != nil {
				t.Fatal(err)
			}
			out, err := snapshot.Seal(ctx, s, raw)
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
	}
	for _, tc := range []struct {
		name   string
		edit   func([]byte) []byte
		at     time.Duration
		max    int64
		reason snapshot.Reason
	}{
		{"flipped byte in the document", func(b []byte) []byte { b[len(b)-20] ^= 0x01; return b }, 0, 0, snapshot.ReasonBadSignature},
		{"flipped byte in the signature", func(b []byte) []byte {
			i := bytes.Index(b, []byte(`"signature":"`)) + 14
			if b[i] == 'A' {
				b[i] = 'B'
			} else {
				b[i] = 'A'
			}
			return b
		}, 0, 0, snapshot.ReasonBadSignature},
		{"flipped byte in the header", func(b []byte) []byte { b[3] ^= 0x20; return b }, 0, 0, snapshot.ReasonUnsigned},
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }, 0, 0, snapshot.ReasonMalformed},
		// The document's own closing brace now closes the frame: the signature,
		// checked before any JSON is parsed, catches it.
		{"truncated by one byte", func(b []byte) []byte { return b[:len(b)-1] }, 0, 0, snapshot.ReasonBadSignature},
		{"trailing data", func(b []byte) []byte { return append(b, ' ') }, 0, 0, snapshot.ReasonMalformed},
		{"empty", func([]byte) []byte { return nil }, 0, 0, snapshot.ReasonUnsigned},
		{"unsigned document", func(b []byte) []byte { return docOf(t, b) }, 0, 0, snapshot.ReasonUnsigned},
		{"signed by another key", reseal(other, func(*snapshot.Document) {}), 0, 0, snapshot.ReasonBadSignature},
		{"signed by an untrusted key id", reseal(stranger, func(*snapshot.Document) {}), 0, 0, snapshot.ReasonUnknownKey},
		{"older than stale_ttl", func(b []byte) []byte { return b }, 181 * time.Second, 0, snapshot.ReasonExpired},
		{"from the future", reseal(signer(t, "snapshot-2026-11", 1), func(d *snapshot.Document) { d.GeneratedAt = t0.Add(time.Hour) }), 0, 0, snapshot.ReasonFuture},
		{"above the size cap", func(b []byte) []byte { return b }, 0, 512, snapshot.ReasonTooLarge},
		{"wrong kind", reseal(signer(t, "snapshot-2026-11", 1), func(d *snapshot.Document) { d.Kind = snapshot.KindACL; d.Routes = nil }), 0, 0, snapshot.ReasonWrongKind},
		{"invalid but signed", reseal(signer(t, "snapshot-2026-11", 1), func(d *snapshot.Document) { d.Routes[0].QueueARN += ".fifo" }), 0, 0, snapshot.ReasonInvalid},
		{"duplicate keys but signed", reseal(signer(t, "snapshot-2026-11", 1), func(d *snapshot.Document) { d.ACLs = append(d.ACLs, d.ACLs[0]) }), 0, 0, snapshot.ReasonInvalid},
		{"not JSON but signed", func([]byte) []byte {
			out, _ := snapshot.Seal(ctx, signer(t, "snapshot-2026-11", 1), []byte(`{"format":`))
			return out
		}, 0, 0, snapshot.ReasonMalformed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w.clk.Set(t0.Add(tc.at))
			w.m.counts = nil
			l := w.loader(t, w.trusted(), mutated(t, w, tc.edit), tc.max)
			if _, err := l.Load(ctx, snapshot.KindFull); snapshot.ReasonOf(err) != tc.reason {
				t.Fatalf("Load: %v; want reason %s", err, tc.reason)
			}
			c := w.caches(t)
			src, err := l.ColdStart(ctx, c)
			if err != nil || src != snapshot.FromRegistry {
				t.Fatalf("ColdStart = %s, %v; want a cold load from the registry", src, err)
			}
			if w.m.counts[telemetry.MetricCacheSnapshotLoadFailure] != 1 {
				t.Fatalf("SnapshotLoadFailure = %d; want 1", w.m.counts[telemetry.MetricCacheSnapshotLoadFailure])
			}
			if _, _, ok := c.Routes.Lookup(registry.RouteKey{Target: "billing", Command: "charge"}, w.clk.Now()); !ok {
				t.Fatal("the fallback did not load the registry")
			}
		})
	}
}

func TestUnavailableAndDisabled(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	l := w.loader(t, w.trusted(), w.snaps, 0) // nothing published
	if _, err := l.Load(ctx, snapshot.KindFull); snapshot.ReasonOf(err) != snapshot.ReasonUnavailable || !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatalf("Load with nothing published: %v", err)
	}
	if src, err := l.ColdStart(ctx, w.caches(t)); err != nil || src != snapshot.FromRegistry || w.m.counts[telemetry.MetricCacheSnapshotLoadFailure] != 1 {
		t.Fatalf("ColdStart = %s %v %v", src, err, w.m.counts)
	}
	off, err := snapshot.NewLoader(snapshot.LoaderConfig{Disabled: true}, snapshot.LoaderDeps{Metrics: w.m})
	if err != nil {
		t.Fatal(err)
	}
	if src, err := off.ColdStart(ctx, w.caches(t)); err != nil || src != snapshot.FromRegistry || w.m.counts[telemetry.MetricCacheSnapshotLoadFailure] != 1 {
		t.Fatalf("disabled ColdStart = %s %v; want the registry and no failure counted", src, err)
	}
	for name, cfg := range map[string]snapshot.LoaderConfig{
		"no keys":    {MaxAge: time.Minute},
		"no max age": {Trusted: w.trusted()},
	} {
		if _, err := snapshot.NewLoader(cfg, snapshot.LoaderDeps{Store: w.snaps}); err == nil {
			t.Errorf("%s: NewLoader succeeded", name)
		}
	}
}

func TestGenerateTooLarge(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	if _, err := w.gen.Generate(ctx); err != nil {
		t.Fatal(err)
	}
	small, err := snapshot.NewGenerator(snapshot.GeneratorConfig{MaxBytes: 700},
		snapshot.GeneratorDeps{Reader: w.reg, Store: w.snaps, Signer: w.sig, Clock: w.clk, Metrics: w.m, Telemetry: w.tel})
	if err != nil {
		t.Fatal(err)
	}
	w.clk.Advance(time.Minute)
	if _, err := small.Generate(ctx); !errors.Is(err, snapshot.ErrTooLargeToPublish) {
		t.Fatalf("Generate over the cap: %v", err)
	}
	var ev *snapshot.TooLarge
	for _, e := range w.tel.Events() {
		if x, ok := e.(snapshot.TooLarge); ok {
			ev = &x
		}
	}
	if ev == nil || ev.MaxBytes != 700 || ev.SizeBytes <= 700 || ev.Routes != 1 || !ev.Alert() || ev.EventName() != "snavio.snapshot.too_large" {
		t.Fatalf("too_large event = %+v", ev)
	}
	for _, p := range []string{snapshot.DefaultPaths().ACL, snapshot.DefaultPaths().HMAC, snapshot.DefaultPaths().Full} {
		if v, _, _ := w.snaps.Latest(ctx, p, 1<<20); v != "20261121T120000.000Z" {
			t.Fatalf("%s latest = %s; the previous snapshot must stay", p, v)
		}
		if vs, _ := w.snaps.Versions(ctx, p); len(vs) != 1 {
			t.Fatalf("%s has versions %v; nothing may be written", p, vs)
		}
	}
}

// failStore fails Put of one path.
type failStore struct {
	*memstore.Snapshots
	failPath string
}

func (f *failStore) Put(ctx context.Context, path, version string, body []byte) error {
	if path == f.failPath {
		return errors.New("s3: access denied")
	}
	return f.Snapshots.Put(ctx, path, version, body)
}

func TestGenerateIsTwoPhase(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	fs := &failStore{Snapshots: w.snaps, failPath: snapshot.DefaultPaths().Full}
	g, _ := snapshot.NewGenerator(snapshot.GeneratorConfig{}, snapshot.GeneratorDeps{Reader: w.reg, Store: fs, Signer: w.sig, Clock: w.clk, Telemetry: w.tel})
	if _, err := g.Generate(ctx); err == nil {
		t.Fatal("Generate with a failing Put succeeded")
	}
	for _, p := range []string{snapshot.DefaultPaths().ACL, snapshot.DefaultPaths().HMAC} {
		if _, _, err := w.snaps.Latest(ctx, p, 1<<20); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("%s was promoted although the full document failed: %v", p, err)
		}
	}
	var failed bool
	for _, e := range w.tel.Events() {
		if f, ok := e.(snapshot.GenerationFailed); ok && f.Stage == "publish" && f.Alert() {
			failed = true
		}
	}
	if !failed {
		t.Fatal("no generation_failed event")
	}
}

type badRegistry struct{ registry.Store }

func (badRegistry) Load(context.Context, time.Time, ...registry.Kind) (registry.Data, error) {
	r := dispatchtest.RegistryRoute("billing", "charge")
	r.DLQARN = ""
	return registry.Data{Routes: []registry.Route{r}}, nil
}

func TestGenerateValidates(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, 0)
	g, _ := snapshot.NewGenerator(snapshot.GeneratorConfig{}, snapshot.GeneratorDeps{Reader: badRegistry{}, Store: w.snaps, Signer: w.sig, Clock: w.clk, Telemetry: w.tel})
	if _, err := g.Generate(ctx); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("Generate of a route without a DLQ: %v; want ErrInvalid", err)
	}
	if _, _, err := w.snaps.Latest(ctx, snapshot.DefaultPaths().Full, 1<<20); !errors.Is(err, snapshot.ErrNotFound) {
		t.Fatal("invalid data was published")
	}
}

func TestSignerAndPaths(t *testing.T) {
	if _, err := snapshot.NewEd25519Signer("bad id", ed25519.NewKeyFromSeed(make([]byte, 32))); err == nil {
		t.Error("key id with a space accepted")
	}
	if _, err := snapshot.NewEd25519Signer("k", make([]byte, 5)); err == nil {
		t.Error("short key accepted")
	}
	s := signer(t, "k", 1)
	if _, err := s.SignDigest(context.Background(), []byte("short")); err == nil {
		t.Error("SignDigest of a non-digest succeeded")
	}
	p := snapshot.Paths{Full: "/x/latest.json"}
	if p.Of(snapshot.KindFull) != "/x/latest.json" || p.Of(snapshot.KindACL) != "/snavio/registry/acl/latest.json" ||
		p.Of(snapshot.KindHMAC) != "/snavio/registry/hmac/latest.json" || p.Of("nope") != "" {
		t.Error("Paths.Of")
	}
	if !strings.HasPrefix(snapshot.VersionIDAt(t0.Add(1500*time.Millisecond)), "20261121T120001.500Z") {
		t.Error(snapshot.VersionIDAt(t0))
	}
	if at, ok := snapshot.VersionTime(snapshot.VersionIDAt(t0.Add(1500 * time.Millisecond))); !ok || !at.Equal(t0.Add(1500*time.Millisecond).Truncate(time.Millisecond)) {
		t.Errorf("VersionTime of VersionIDAt = %v, %v", at, ok)
	}
	if _, ok := snapshot.VersionTime("v1"); ok {
		t.Error("VersionTime accepts v1")
	}
}
