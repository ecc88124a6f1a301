package lambda

import (
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/internal/snapshotbin"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Environment of the cold start from S3 (docs/lambda.md, "Cold start").
const (
	EnvSnapshotKeys   = "SNAVIO_SNAPSHOT_KEYS"
	EnvSnapshotMaxAge = "SNAVIO_SNAPSHOT_MAX_AGE"
)

// DefaultSnapshotMaxAge is the oldest snapshot a cold start takes, as
// dispatch serve's default.
const DefaultSnapshotMaxAge = 30 * time.Minute

// Where a cold start loaded the caches from: the compact snapshot, the
// JSON one, or the registry tables.
const (
	FromCompact  = "snapshot-compact"
	FromJSON     = "snapshot-json"
	FromRegistry = "registry"
)

// snapshotFromEnv reads the cold start's variables into c: the bucket
// (none: the cold start reads the registry tables), the trusted signing
// keys as id=base64-public-key pairs separated by commas, and the
// maximum age.
func snapshotFromEnv(getenv func(string) string, c *Config) []error {
	var errs []error
	c.Store.SnapshotBucket = getenv(EnvSnapshotBucket)
	if v := getenv(EnvSnapshotKeys); v != "" {
		c.SnapshotKeys = snapshot.TrustedKeys{}
		for _, pair := range strings.Split(v, ",") {
			id, key, ok := strings.Cut(strings.TrimSpace(pair), "=")
			pub, err := base64.StdEncoding.DecodeString(key)
			if !ok || id == "" || err != nil || len(pub) != ed25519.PublicKeySize {
				errs = append(errs, fmt.Errorf("%s: %q is not id=key: give each snapshot signing key as its id, '=', and base64 of its %d-byte Ed25519 public key, separated by commas", EnvSnapshotKeys, clipEnv(pair), ed25519.PublicKeySize))
				continue
			}
			c.SnapshotKeys[id] = ed25519.PublicKey(pub)
		}
	}
	if v := getenv(EnvSnapshotMaxAge); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Errorf("%s=%q: give a positive duration such as 30m", EnvSnapshotMaxAge, v))
		}
		c.SnapshotMaxAge = d
	}
	return errs
}

func clipEnv(s string) string {
	if len(s) > 24 {
		return s[:24] + "..."
	}
	return s
}

// validateSnapshot checks the cold start's settings of c.
func (c *Config) validateSnapshot() error {
	if c.SnapshotMaxAge == 0 {
		c.SnapshotMaxAge = DefaultSnapshotMaxAge
	}
	if c.Store.SnapshotBucket != "" && len(c.SnapshotKeys) == 0 {
		return fmt.Errorf("%s is set but %s is empty: give the snapshot generator's public key(s), or unset the bucket to cold-load from the registry", EnvSnapshotBucket, EnvSnapshotKeys)
	}
	return nil
}

// coldStart fills the caches at init: the compact snapshot first, then
// the JSON one, then the registry tables (snapshot.Loader.ColdStart).
type coldStart struct {
	store  *awsstore.SnapshotStore // nil: no bucket, the registry tables
	loader *snapshot.Loader
	clock  clock.Clock
	log    *slog.Logger
	opts   snapshot.ParseOptions
	bg     *background
	// Source and Took say what the last load did; Source turns to
	// FromRegistry if the compact snapshot fails its validation after
	// it was seeded.
	mu     sync.Mutex
	source string
	Took   time.Duration
	// caches are the caches loaded.
	caches *cache.Caches
	// validation is the background validation of a seeded compact
	// snapshot, started as the first invocation ends (afterInvocation).
	validation atomic.Pointer[func()]
}

// Source is where the caches were loaded from.
func (cs *coldStart) Source() string {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	return cs.source
}

func (cs *coldStart) setSource(s string) {
	cs.mu.Lock()
	cs.source = s
	cs.mu.Unlock()
}

func newColdStart(cfg *Config, bg *background) (*coldStart, error) {
	cs := &coldStart{clock: cfg.Clock, log: cfg.Logger, bg: bg}
	if cfg.Store.SnapshotBucket == "" {
		return cs, nil
	}
	st, err := awsstore.NewSnapshotStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	cs.store = st
	cs.opts = snapshot.ParseOptions{Kind: snapshot.KindFull, Trusted: cfg.SnapshotKeys, MaxBytes: snapshot.DefaultMaxBytes, MaxAge: cfg.SnapshotMaxAge}
	cs.loader, err = snapshot.NewLoader(snapshot.LoaderConfig{Trusted: cfg.SnapshotKeys, MaxAge: cfg.SnapshotMaxAge},
		snapshot.LoaderDeps{Store: st, Clock: cfg.Clock, Logger: cfg.Logger})
	return cs, err
}

// load is dispatch.Config's Load.
func (cs *coldStart) load(ctx context.Context, c *cache.Caches) error {
	began := time.Now()
	defer func() { cs.Took = time.Since(began) }()
	gcForLambda(cs.log)
	cs.caches = c
	if cs.store == nil {
		cs.setSource(FromRegistry)
		return c.LoadAll(ctx)
	}
	err := cs.compact(ctx, c)
	if err == nil {
		cs.setSource(FromCompact)
		return nil
	}
	cs.log.Warn("compact snapshot refused; trying the JSON one", "reason", string(snapshot.ReasonOf(err)), "err", err)
	src, err := cs.loader.ColdStart(ctx, c)
	cs.setSource(FromRegistry)
	if src == snapshot.FromSnapshot {
		cs.setSource(FromJSON)
	}
	return err
}

// afterInvocation starts the seeded snapshot's validation, once: the
// handlers call it as an invocation ends, so that the validation's CPU
// does not compete with the first answer (on a Lambda of less than one
// vCPU it would take its share of it).
func (cs *coldStart) afterInvocation() {
	if v := cs.validation.Swap(nil); v != nil {
		cs.bg.run(*v)
	}
}

// revalidate runs registry.Validate on a seeded compact snapshot, beside
// the commands after the first. The generator validated the same data
// before it signed them, so a failure means a generator or codec defect:
// the caches are then reloaded from the registry tables.
func (cs *coldStart) revalidate(doc *snapshot.Document, c *cache.Caches) {
	err := snapshotbin.Validate(doc)
	if err == nil {
		return
	}
	cs.log.Error("the compact snapshot seeded at cold start fails validation; reloading the caches from the registry tables", "version_id", doc.VersionID, "err", err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := c.LoadAll(ctx); err != nil {
		cs.log.Error("reloading the caches from the registry tables failed; the snapshot's data stay until the next refresh", "err", err)
		return
	}
	cs.setSource(FromRegistry)
}

// gcForLambda bounds the heap by the function's memory instead of by
// its growth: a memory limit of 80% of AWS_LAMBDA_FUNCTION_MEMORY_SIZE
// and no proportional collection (GOGC off). The cold load allocates
// about twice what it keeps, which a collector at GOGC=100 would trace
// several times as the heap grows from nothing, and once more right
// after, beside the first command; a warm command leaves a few KB of
// garbage, so with a limit hundreds of MB above the live caches the
// collector runs once per hundreds of thousands of commands. Lambda bills
// the configured memory, used or not. Outside Lambda, or when GOGC or
// GOMEMLIMIT is set, it does nothing.
func gcForLambda(log *slog.Logger) {
	mb, err := strconv.ParseInt(os.Getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"), 10, 64)
	if err != nil || mb < 128 || os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	limit := mb << 20 * 8 / 10
	debug.SetMemoryLimit(limit)
	debug.SetGCPercent(-1)
	log.Info("garbage collection bounded by the function's memory", "memory_limit_mb", limit>>20)
}

// compact loads the compact snapshot into c.
func (cs *coldStart) compact(ctx context.Context, c *cache.Caches) error {
	began := time.Now()
	_, body, err := cs.store.Latest(ctx, snapshotbin.DefaultPath, cs.opts.MaxBytes)
	fetched := time.Now()
	switch {
	case errors.Is(err, snapshot.ErrTooLarge):
		return &snapshot.LoadError{Reason: snapshot.ReasonTooLarge, Detail: snapshotbin.DefaultPath, Err: err}
	case err != nil:
		return &snapshot.LoadError{Reason: snapshot.ReasonUnavailable, Detail: snapshotbin.DefaultPath, Err: err}
	}
	o := cs.opts
	o.Now = cs.clock.Now()
	doc, err := snapshotbin.Decode(body, o)
	if err != nil {
		return err
	}
	parsed := time.Now()
	if err := c.Seed(&doc.Data, doc.GeneratedAt); err != nil {
		return &snapshot.LoadError{Reason: snapshot.ReasonInvalid, Detail: "seeding the caches", Err: err}
	}
	validate := func() { cs.revalidate(doc, c) }
	cs.validation.Store(&validate)
	cs.log.Info("caches preloaded from the compact snapshot", "version_id", doc.VersionID, "generated_at", doc.GeneratedAt,
		"routes", len(doc.Routes), "acls", len(doc.ACLs), "keys", len(doc.Keys), "bytes", len(body),
		"fetch_ms", fetched.Sub(began).Milliseconds(), "parse_ms", parsed.Sub(fetched).Milliseconds(), "seed_ms", time.Since(parsed).Milliseconds())
	return nil
}
