package lambda

import (
	"context"
	"crypto/ed25519"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/internal/snapshotbin"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// SnapshotJob is the snapshot function: on its schedule (an EventBridge
// Scheduler or rule, every 5 minutes) it reads the registry, builds the
// signed acl, hmac and full documents and publishes them to S3 in two
// phases (every version Put, then every Promote), as `dispatch serve`'s
// snapshot job does on the embedded store.
type SnapshotJob struct {
	jobBase
	gen     *snapshot.Generator
	store   snapshot.Store
	signer  snapshot.Signer
	trusted snapshot.TrustedKeys
}

// NewSnapshotJob builds the generator on the registry tables and the
// snapshot bucket of cfg.Store, signing with cfg.SnapshotKey.
func NewSnapshotJob(cfg JobConfig) (*SnapshotJob, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reg, err := awsstore.NewRegistryStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	store, err := awsstore.NewSnapshotStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	base, err := newJobBase(cfg)
	if err != nil {
		return nil, err
	}
	signer, err := snapshot.NewEd25519Signer(cfg.SnapshotKeyID, cfg.SnapshotKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvSnapshotSigningKey, err)
	}
	j := &SnapshotJob{jobBase: base, store: store, signer: signer,
		trusted: snapshot.TrustedKeys{cfg.SnapshotKeyID: cfg.SnapshotKey.Public().(ed25519.PublicKey)}}
	j.gen, err = snapshot.NewGenerator(snapshot.GeneratorConfig{TTLPolicy: snapshot.DefaultTTLPolicy()}, snapshot.GeneratorDeps{
		Reader: reg, Store: store, Signer: signer, Clock: cfg.Clock, Metrics: j.metrics, Telemetry: j.sink, Logger: cfg.Logger,
	})
	if err != nil {
		return nil, err
	}
	return j, nil
}

// Handle generates and publishes one snapshot. An error makes the
// scheduler's invocation fail (and retry); the generator has already
// reported the failure (its telemetry is stored in the outbox here).
func (j *SnapshotJob) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	_, err := j.Generate(ctx)
	return err
}

// Generate publishes one snapshot (the JSON documents, then the compact
// one) and stores the run's telemetry: the snapshot function's run, and
// the control API's POST /v1/snapshots/generate (controlapi.Generator).
func (j *SnapshotJob) Generate(ctx context.Context) (snapshot.Published, error) {
	p, genErr := j.gen.Generate(ctx)
	if genErr == nil {
		genErr = j.publishCompact(ctx, p.VersionID)
	}
	err := j.finish(ctx)
	if genErr != nil {
		return p, fmt.Errorf("snapshot generation: %w", genErr)
	}
	if err != nil {
		return p, fmt.Errorf("snapshot %s published; storing its telemetry failed: %w", p.VersionID, err)
	}
	j.log.Info("snapshot published", "version_id", p.VersionID, "full_bytes", p.Bytes[snapshot.KindFull])
	return p, nil
}

// publishCompact publishes the compact encoding of the full document just
// published (version), which cold starts read first (coldstart.go): it
// reads the JSON document back, checks it is the one just signed, and
// seals the same data.
func (j *SnapshotJob) publishCompact(ctx context.Context, version string) error {
	path := snapshot.DefaultPaths().Full
	got, body, err := j.store.Latest(ctx, path, snapshot.DefaultMaxBytes)
	if err != nil {
		return fmt.Errorf("reading back %s: %w", path, err)
	}
	if got != version {
		return fmt.Errorf("reading back %s: version %s, want %s (another generator ran; the next run publishes the compact one)", path, got, version)
	}
	doc, err := snapshot.Parse(body, snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: j.trusted, MaxBytes: int64(len(body))})
	if err != nil {
		return fmt.Errorf("reading back %s: %w", path, err)
	}
	return snapshotbin.Publish(ctx, j.store, j.signer, snapshotbin.DefaultPath, doc)
}
