package snapshot

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// TooLarge is snavio.snapshot.too_large: generation refused to publish
// because a document is above the size cap (the spec's
// `navio.snapshot.too_large`, a typo). The previous snapshot stays
// published. Alerting.
type TooLarge struct {
	VersionID string `json:"version_id"`
	Kind      Kind   `json:"kind"`
	SizeBytes int64  `json:"size_bytes"`
	MaxBytes  int64  `json:"max_bytes"`
	Routes    int    `json:"routes"`
	ACLs      int    `json:"acls"`
	Keys      int    `json:"keys"`
}

// EventNameTooLarge is TooLarge's event name.
const EventNameTooLarge = "snavio.snapshot.too_large"

// EventName implements telemetry.Event.
func (TooLarge) EventName() string { return EventNameTooLarge }

// Alert implements telemetry.Event.
func (TooLarge) Alert() bool { return true }

// GenerationFailed is snavio.snapshot.generation_failed: the registry
// could not be read, failed validation, or could not be signed or
// published. The previous snapshot stays published. Alerting.
type GenerationFailed struct {
	// Stage is read, validate, encode, sign or publish.
	Stage string `json:"stage"`
	Error string `json:"error"`
}

// EventNameGenerationFailed is GenerationFailed's event name.
const EventNameGenerationFailed = "snavio.snapshot.generation_failed"

// EventName implements telemetry.Event.
func (GenerationFailed) EventName() string { return EventNameGenerationFailed }

// Alert implements telemetry.Event.
func (GenerationFailed) Alert() bool { return true }

// ErrTooLargeToPublish is returned by Generate when a document is above
// the cap.
var ErrTooLargeToPublish = errors.New("snapshot: above the size cap; not published")

// GeneratorConfig configures a Generator.
type GeneratorConfig struct {
	// Paths default to DefaultPaths.
	Paths Paths
	// MaxBytes caps each signed document; 0 means DefaultMaxBytes.
	MaxBytes int64
	// TTLPolicy is written into every document.
	TTLPolicy TTLPolicy
}

// GeneratorDeps are a Generator's collaborators; Reader, Store and Signer
// are required.
type GeneratorDeps struct {
	Reader    registry.Reader
	Store     Store
	Signer    Signer
	Clock     clock.Clock
	Metrics   telemetry.Metrics
	Telemetry telemetry.Sink
	Logger    *slog.Logger
}

// Generator builds and publishes snapshots (the snapshot-generation job).
// Safe for concurrent use, though one generator per platform is the
// intended deployment.
type Generator struct {
	cfg GeneratorConfig
	d   GeneratorDeps
}

// NewGenerator returns a Generator.
func NewGenerator(cfg GeneratorConfig, deps GeneratorDeps) (*Generator, error) {
	if deps.Reader == nil || deps.Store == nil || deps.Signer == nil {
		return nil, errors.New("snapshot: generator needs a registry reader, a store and a signer")
	}
	cfg.Paths = cfg.Paths.withDefaults()
	if cfg.MaxBytes <= 0 {
		cfg.MaxBytes = DefaultMaxBytes
	}
	if deps.Clock == nil {
		deps.Clock = clock.System()
	}
	if deps.Metrics == nil {
		deps.Metrics = discardMetrics{}
	}
	if deps.Telemetry == nil {
		deps.Telemetry = telemetry.Discard{}
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	return &Generator{cfg: cfg, d: deps}, nil
}

// Published describes a published snapshot.
type Published struct {
	VersionID   string
	GeneratedAt time.Time
	// Bytes is the signed size of each document.
	Bytes map[Kind]int
}

// VersionIDAt returns the version id of a snapshot generated at t:
// its UTC time to the millisecond, e.g. 20261121T120000.000Z.
func VersionIDAt(t time.Time) string { return t.UTC().Format(versionLayout) }

const versionLayout = "20060102T150405.000Z"

// VersionTime returns the generation time a version id names, and false
// for an id VersionIDAt did not make.
func VersionTime(id string) (time.Time, bool) {
	t, err := time.Parse(versionLayout, id)
	return t, err == nil
}

// Generate reads the whole registry, validates it, builds the acl, hmac
// and full documents, refuses (TooLarge event, ErrTooLargeToPublish) if
// any is above the cap, signs them, and publishes them in two phases: Put
// of the three versions, then Promote of the three. If a Put fails nothing
// is promoted; the latest pointers only ever name complete, signed
// versions. It emits Snavio.Snapshot.Generated, .SizeBytes (of the full
// document) and .WriteDuration.
func (g *Generator) Generate(ctx context.Context) (Published, error) {
	now := g.d.Clock.Now().UTC()
	d, err := g.d.Reader.Load(ctx, now)
	if err != nil {
		return Published{}, g.fail("read", err)
	}
	if err := registry.Validate(&d); err != nil {
		return Published{}, g.fail("validate", err)
	}
	pub := Published{VersionID: VersionIDAt(now), GeneratedAt: now, Bytes: make(map[Kind]int, 3)}
	kinds := []Kind{KindACL, KindHMAC, KindFull}
	bodies := make(map[Kind][]byte, 3)
	for _, k := range kinds {
		doc := Document{Format: Format, Kind: k, VersionID: pub.VersionID, GeneratedAt: now, TTLPolicy: g.cfg.TTLPolicy}
		switch k {
		case KindACL:
			doc.ACLs = d.ACLs
		case KindHMAC:
			doc.Keys = d.Keys
		case KindFull:
			doc.Data = d
		}
		raw, err := json.Marshal(&doc, json.Deterministic(true))
		if err != nil {
			return Published{}, g.fail("encode", err)
		}
		body, err := Seal(ctx, g.d.Signer, raw)
		if err != nil {
			return Published{}, g.fail("sign", err)
		}
		if int64(len(body)) > g.cfg.MaxBytes {
			g.d.Telemetry.Emit(TooLarge{VersionID: pub.VersionID, Kind: k, SizeBytes: int64(len(body)), MaxBytes: g.cfg.MaxBytes,
				Routes: len(d.Routes), ACLs: len(d.ACLs), Keys: len(d.Keys)})
			g.d.Logger.Error("snapshot above the size cap; not published", "kind", string(k), "bytes", len(body), "max_bytes", g.cfg.MaxBytes)
			return Published{}, fmt.Errorf("%w: %s document is %d bytes, cap %d", ErrTooLargeToPublish, k, len(body), g.cfg.MaxBytes)
		}
		bodies[k] = body
		pub.Bytes[k] = len(body)
	}
	start := g.d.Clock.Now()
	for _, k := range kinds {
		if err := g.d.Store.Put(ctx, g.cfg.Paths.Of(k), pub.VersionID, bodies[k]); err != nil {
			return Published{}, g.fail("publish", fmt.Errorf("put %s: %w", k, err))
		}
	}
	for _, k := range kinds {
		if err := g.d.Store.Promote(ctx, g.cfg.Paths.Of(k), pub.VersionID); err != nil {
			return Published{}, g.fail("publish", fmt.Errorf("promote %s: %w", k, err))
		}
	}
	g.d.Metrics.Observe(telemetry.MetricSnapshotWriteDuration, g.d.Clock.Now().Sub(start).Seconds())
	g.d.Metrics.Observe(telemetry.MetricSnapshotSizeBytes, float64(pub.Bytes[KindFull]))
	g.d.Metrics.Count(telemetry.MetricSnapshotGenerated, 1)
	g.d.Logger.Info("snapshot published", "version_id", pub.VersionID, "bytes", pub.Bytes[KindFull],
		"routes", len(d.Routes), "acls", len(d.ACLs), "keys", len(d.Keys))
	return pub, nil
}

func (g *Generator) fail(stage string, err error) error {
	g.d.Telemetry.Emit(GenerationFailed{Stage: stage, Error: err.Error()})
	g.d.Logger.Error("snapshot generation failed", "stage", stage, "err", err)
	return fmt.Errorf("snapshot: %s: %w", stage, err)
}
