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

// Reason says why a snapshot was refused. Reasons are stable; they are
// logged with Snavio.Cache.SnapshotLoadFailure.
type Reason string

// Load failure reasons.
const (
	ReasonDisabled     Reason = "disabled"      // preloading is turned off
	ReasonUnavailable  Reason = "unavailable"   // the store failed, or no snapshot was published
	ReasonTooLarge     Reason = "too_large"     // above the loader's size cap
	ReasonUnsigned     Reason = "unsigned"      // no signed snapshot header
	ReasonMalformed    Reason = "malformed"     // bad framing or JSON (including truncation)
	ReasonUnknownKey   Reason = "unknown_key"   // signed with a key id that is not trusted
	ReasonBadSignature Reason = "bad_signature" // the signature does not verify (tampered, or another key)
	ReasonWrongKind    Reason = "wrong_kind"    // not the document kind asked for, or another format
	ReasonExpired      Reason = "expired"       // generated_at older than the stale TTL
	ReasonFuture       Reason = "future"        // generated_at too far in the future
	ReasonInvalid      Reason = "invalid"       // fails registry.Validate
)

// LoadError is a refused snapshot.
type LoadError struct {
	Reason Reason
	Detail string
	// Err is the underlying error, if any.
	Err error
}

func (e *LoadError) Error() string {
	s := "snapshot refused (" + string(e.Reason) + "): " + e.Detail
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// Unwrap returns the underlying error.
func (e *LoadError) Unwrap() error { return e.Err }

func loadErr(r Reason, detail string) *LoadError { return &LoadError{Reason: r, Detail: detail} }

// ReasonOf returns the Reason of a *LoadError in err's chain, "" if none.
func ReasonOf(err error) Reason {
	var le *LoadError
	if errors.As(err, &le) {
		return le.Reason
	}
	return ""
}

// MaxFutureSkew is how far in the future generated_at may be (clock skew
// between the generator and the dispatcher).
const MaxFutureSkew = time.Minute

// DefaultMaxBytes is the default size cap of a snapshot file, for the
// generator and the loader (64 MiB: about 150k routes and 150k ACLs,
// docs/registry/snapshots.md).
const DefaultMaxBytes = 64 << 20

// ParseOptions are the checks of Parse.
type ParseOptions struct {
	// Kind is the document kind expected.
	Kind Kind
	// Trusted are the accepted signing keys.
	Trusted TrustedKeys
	// MaxBytes caps the file size; 0 means DefaultMaxBytes.
	MaxBytes int64
	// Now and MaxAge: a document generated more than MaxAge before Now is
	// expired; one generated more than MaxFutureSkew after Now is refused.
	// A zero MaxAge skips the age check.
	Now    time.Time
	MaxAge time.Duration
}

// Parse checks a snapshot file and returns its document. It never panics:
// every defect is a *LoadError. The checks, in order: size cap, signed
// framing, signature (before any JSON is parsed), JSON, format and kind,
// age, and registry.Validate.
func Parse(b []byte, o ParseOptions) (doc *Document, err error) {
	defer func() {
		// Defence in depth: a decoder bug must not take the dispatcher down.
		if r := recover(); r != nil {
			doc, err = nil, loadErr(ReasonMalformed, fmt.Sprintf("parser panic: %v", r))
		}
	}()
	max := o.MaxBytes
	if max <= 0 {
		max = DefaultMaxBytes
	}
	if int64(len(b)) > max {
		return nil, loadErr(ReasonTooLarge, fmt.Sprintf("%d bytes, cap %d", len(b), max))
	}
	raw, err := unseal(b, o.Trusted)
	if err != nil {
		return nil, err
	}
	var d Document
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, &LoadError{Reason: ReasonMalformed, Detail: "document JSON", Err: err}
	}
	if d.Format != Format || d.Kind != o.Kind {
		return nil, loadErr(ReasonWrongKind, fmt.Sprintf("format %q kind %q; want %q kind %q", clip(d.Format), clip(string(d.Kind)), Format, o.Kind))
	}
	if err := d.kindHolds(); err != nil {
		return nil, err
	}
	if d.VersionID == "" || d.GeneratedAt.IsZero() {
		return nil, loadErr(ReasonMalformed, "version_id and generated_at are required")
	}
	if !o.Now.IsZero() {
		if o.MaxAge > 0 && o.Now.Sub(d.GeneratedAt) > o.MaxAge {
			return nil, loadErr(ReasonExpired, fmt.Sprintf("generated at %s, more than %v before %s", d.GeneratedAt.Format(time.RFC3339), o.MaxAge, o.Now.Format(time.RFC3339)))
		}
		if d.GeneratedAt.Sub(o.Now) > MaxFutureSkew {
			return nil, loadErr(ReasonFuture, "generated_at "+d.GeneratedAt.Format(time.RFC3339)+" is in the future")
		}
	}
	if err := registry.Validate(&d.Data); err != nil {
		return nil, &LoadError{Reason: ReasonInvalid, Detail: "registry data", Err: err}
	}
	return &d, nil
}

// kindHolds checks that a document holds only its kind's records.
func (d *Document) kindHolds() error {
	switch d.Kind {
	case KindACL:
		if len(d.Routes)+len(d.Keys)+len(d.Bans)+len(d.Quotas) > 0 {
			return loadErr(ReasonWrongKind, "an acl document holds only ACLs")
		}
	case KindHMAC:
		if len(d.Routes)+len(d.ACLs)+len(d.Bans)+len(d.Quotas) > 0 {
			return loadErr(ReasonWrongKind, "an hmac document holds only keysets")
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

// LoaderConfig configures a Loader.
type LoaderConfig struct {
	// Disabled turns snapshot preloading off (platform configuration):
	// ColdStart goes straight to the registry.
	Disabled bool
	// Paths default to DefaultPaths.
	Paths Paths
	// Trusted are the accepted signing keys. Required unless Disabled.
	Trusted TrustedKeys
	// MaxBytes caps a snapshot's size; 0 means DefaultMaxBytes.
	MaxBytes int64
	// MaxAge is the stale TTL: an older snapshot is expired. Required
	// unless Disabled.
	MaxAge time.Duration
}

// Loader loads snapshots from a Store. Safe for concurrent use.
type Loader struct {
	cfg     LoaderConfig
	store   Store
	clock   clock.Clock
	metrics telemetry.Metrics
	logger  *slog.Logger
}

// LoaderDeps are a Loader's collaborators; Store is required unless
// preloading is disabled.
type LoaderDeps struct {
	Store   Store
	Clock   clock.Clock
	Metrics telemetry.Metrics
	Logger  *slog.Logger
}

// NewLoader returns a Loader.
func NewLoader(cfg LoaderConfig, deps LoaderDeps) (*Loader, error) {
	if !cfg.Disabled {
		switch {
		case deps.Store == nil:
			return nil, errors.New("snapshot: loader needs a store (or Disabled)")
		case len(cfg.Trusted) == 0:
			return nil, errors.New("snapshot: loader needs at least one trusted key (or Disabled)")
		case cfg.MaxAge <= 0:
			return nil, errors.New("snapshot: loader needs MaxAge, the stale TTL")
		}
	}
	l := &Loader{cfg: cfg, store: deps.Store, clock: deps.Clock, metrics: deps.Metrics, logger: deps.Logger}
	l.cfg.Paths = cfg.Paths.withDefaults()
	if l.cfg.MaxBytes <= 0 {
		l.cfg.MaxBytes = DefaultMaxBytes
	}
	if l.clock == nil {
		l.clock = clock.System()
	}
	if l.metrics == nil {
		l.metrics = discardMetrics{}
	}
	if l.logger == nil {
		l.logger = slog.New(slog.DiscardHandler)
	}
	return l, nil
}

type discardMetrics struct{}

func (discardMetrics) Count(string, int64)     {}
func (discardMetrics) Observe(string, float64) {}

// Load fetches the latest document of kind and checks it with Parse.
func (l *Loader) Load(ctx context.Context, kind Kind) (*Document, error) {
	if l.cfg.Disabled {
		return nil, loadErr(ReasonDisabled, "snapshot preloading is disabled")
	}
	path := l.cfg.Paths.Of(kind)
	if path == "" {
		return nil, loadErr(ReasonWrongKind, "unknown document kind "+string(kind))
	}
	_, body, err := l.store.Latest(ctx, path, l.cfg.MaxBytes)
	switch {
	case errors.Is(err, ErrTooLarge):
		return nil, &LoadError{Reason: ReasonTooLarge, Detail: path, Err: err}
	case err != nil:
		return nil, &LoadError{Reason: ReasonUnavailable, Detail: path, Err: err}
	}
	return Parse(body, ParseOptions{Kind: kind, Trusted: l.cfg.Trusted, MaxBytes: l.cfg.MaxBytes, Now: l.clock.Now(), MaxAge: l.cfg.MaxAge})
}

// Caches is what ColdStart fills: *cache.Caches implements it.
type Caches interface {
	// Seed installs snapshot data generated at generatedAt.
	Seed(d *registry.Data, generatedAt time.Time) error
	// LoadAll is the cold load from the registry.
	LoadAll(ctx context.Context) error
}

// Source says where ColdStart loaded the caches from.
type Source string

// Sources.
const (
	FromSnapshot Source = "snapshot"
	FromRegistry Source = "registry"
)

// ColdStart preloads c from the latest full snapshot; if the snapshot is
// refused for any reason it counts Snavio.Cache.SnapshotLoadFailure, logs
// the reason, and falls back to a cold load from the registry. It returns
// where the data came from; an error only if the fallback failed too.
func (l *Loader) ColdStart(ctx context.Context, c Caches) (Source, error) {
	doc, err := l.Load(ctx, KindFull)
	if err == nil {
		if err = c.Seed(&doc.Data, doc.GeneratedAt); err == nil {
			l.logger.Info("caches preloaded from snapshot", "version_id", doc.VersionID, "generated_at", doc.GeneratedAt,
				"routes", len(doc.Routes), "acls", len(doc.ACLs), "keys", len(doc.Keys))
			return FromSnapshot, nil
		}
		err = &LoadError{Reason: ReasonInvalid, Detail: "seeding the caches", Err: err}
	}
	reason := ReasonOf(err)
	if reason != ReasonDisabled {
		l.metrics.Count(telemetry.MetricCacheSnapshotLoadFailure, 1)
		l.logger.Warn("snapshot refused; cold load from the registry", "reason", string(reason), "err", err)
	}
	if err := c.LoadAll(ctx); err != nil {
		return FromRegistry, fmt.Errorf("snapshot: fallback cold load: %w", err)
	}
	return FromRegistry, nil
}
