package flow

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Mode is the dispatcher's snavio_dispatch_mode.
type Mode string

// Modes.
const (
	// ModeAdaptive (default): warm tokens with fairness and abuse detection.
	ModeAdaptive Mode = "adaptive"
	// ModeColdOnly: every request takes the cold path, for strict
	// enforcement.
	ModeColdOnly Mode = "cold-only"
)

// Metric names of flow control beyond the spec's Snavio.Dedup.* (which are
// telemetry.MetricDedup*).
const (
	MetricTokensPrefetched    = "Snavio.RateLimit.TokensPrefetched"
	MetricPrefetchLeaseDenied = "Snavio.RateLimit.PrefetchLeaseDenied"
	MetricRateLimited         = "Snavio.RateLimit.Rejected"
	MetricShadowWouldRefuse   = "Snavio.RateLimit.ShadowWouldRefuse"
	// MetricClaimsTakenOver counts strict claims a sole instance took over
	// from a process that is gone (Config.SoleInstance).
	MetricClaimsTakenOver = "Snavio.Dedup.ClaimsTakenOver"
	MetricWarmPathBans    = "Snavio.Fairness.WarmPathBans"
	MetricGlobalBans      = "Snavio.Fairness.GlobalBans"
	MetricEscalations     = "Snavio.Dispatch.Escalations"
)

// Config configures flow control for one dispatcher instance. Zero fields
// take the defaults listed; Validate reports values that make no sense.
type Config struct {
	// Instance identifies this instance in leases, claims and rollups; it
	// must be unique across the fleet (a random id per process).
	Instance string
	Mode     Mode // default adaptive
	// Shadow records what rate limiting and fairness would refuse, without
	// refusing.
	Shadow bool

	// TokenTTL bounds a prefetched token's life (default 30 s, at most
	// 60 s); tokens also die at the end of their window.
	TokenTTL time.Duration
	// PrefetchLeases is how many instances may prefetch per route per
	// 1-second slot (default 5); a route may override it.
	PrefetchLeases int
	// StoreTimeout bounds each background store call (default 2 s).
	StoreTimeout time.Duration

	// Fairness defaults for routes that do not set their own.
	Fairness FairnessParams
	// GlobalBanAfter bans (default 3) within GlobalBanWindow (default
	// 10 min) escalate to a global warm-path ban of GlobalBanDuration
	// (default 10 min; 5-15 min).
	GlobalBanAfter    int
	GlobalBanWindow   time.Duration
	GlobalBanDuration time.Duration
	// BanCacheTTL is how long the cached global ban list is used before a
	// background refresh (default 30 s).
	BanCacheTTL time.Duration

	// DedupeTTL is how long a delivered strict command id stays claimed
	// (default 300 s); InProgressTTL is how long a claim may stay in
	// progress before a retry may take it over (default 30 s).
	DedupeTTL     time.Duration
	InProgressTTL time.Duration
	// SoleInstance says this instance is its store's only user (`dispatch
	// serve` holds the store's file lock): a claim in progress under
	// another instance was left by a process that is gone, and the slow
	// stage takes it over at once instead of after InProgressTTL. Never
	// set it where several dispatchers share the store.
	SoleInstance bool
	// SeenSetSize bounds the fast path's set of delivered ids (default
	// 100000). DisableSeenSet turns the set off: every strict command then
	// takes the slow path's claim (correct, only slower).
	SeenSetSize    int
	DisableSeenSet bool

	Clock   clock.Clock
	Metrics telemetry.Metrics
	Logger  *slog.Logger
	// Executor runs background work (prefetch, ban recording, cache
	// refresh). Default: a new goroutine. Tests pass a synchronous or
	// queued executor to make background work deterministic.
	Executor func(func())
}

// FairnessParams are a route's warm-path fairness parameters.
type FairnessParams struct {
	// Disabled turns warm-path fairness off for the route.
	Disabled bool
	// DominantShare: a source above this share of the window's warm
	// dispatches (default 0.8)...
	DominantShare float64
	// ...is banned only if the others together hold at least
	// CompetingShare (default 0.1) or there are at least CompetingSources
	// other sources (default 3): quiet periods and lone senders are never
	// penalised.
	CompetingShare   float64
	CompetingSources int
	// MinVolume: no ban while the window has fewer warm dispatches
	// (default 20), so a handful of messages cannot trigger one.
	MinVolume int64
	// Window is the usage window, reset when it ends (default 30 s).
	Window time.Duration
	// BanDuration is how long a dominant source is excluded from the warm
	// path (default 30 s).
	BanDuration time.Duration
}

func (p FairnessParams) withDefaults(d FairnessParams) FairnessParams {
	if p.DominantShare == 0 {
		p.DominantShare = d.DominantShare
	}
	if p.CompetingShare == 0 {
		p.CompetingShare = d.CompetingShare
	}
	if p.CompetingSources == 0 {
		p.CompetingSources = d.CompetingSources
	}
	if p.MinVolume == 0 {
		p.MinVolume = d.MinVolume
	}
	if p.Window == 0 {
		p.Window = d.Window
	}
	if p.BanDuration == 0 {
		p.BanDuration = d.BanDuration
	}
	return p
}

type discardMetrics struct{}

func (discardMetrics) Count(string, int64)     {}
func (discardMetrics) Observe(string, float64) {}

// withDefaults returns c with every zero field set to its default.
func (c Config) withDefaults() Config {
	if c.Mode == "" {
		c.Mode = ModeAdaptive
	}
	if c.TokenTTL == 0 {
		c.TokenTTL = 30 * time.Second
	}
	if c.PrefetchLeases == 0 {
		c.PrefetchLeases = 5
	}
	if c.StoreTimeout == 0 {
		c.StoreTimeout = 2 * time.Second
	}
	c.Fairness = c.Fairness.withDefaults(FairnessParams{
		DominantShare: 0.8, CompetingShare: 0.1, CompetingSources: 3,
		MinVolume: 20, Window: 30 * time.Second, BanDuration: 30 * time.Second,
	})
	if c.GlobalBanAfter == 0 {
		c.GlobalBanAfter = 3
	}
	if c.GlobalBanWindow == 0 {
		c.GlobalBanWindow = 10 * time.Minute
	}
	if c.GlobalBanDuration == 0 {
		c.GlobalBanDuration = 10 * time.Minute
	}
	if c.BanCacheTTL == 0 {
		c.BanCacheTTL = 30 * time.Second
	}
	if c.DedupeTTL == 0 {
		c.DedupeTTL = 300 * time.Second
	}
	if c.InProgressTTL == 0 {
		c.InProgressTTL = 30 * time.Second
	}
	if c.SeenSetSize == 0 {
		c.SeenSetSize = 100_000
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Metrics == nil {
		c.Metrics = discardMetrics{}
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Executor == nil {
		c.Executor = func(f func()) { go f() }
	}
	return c
}

// Validate reports the first invalid setting, naming it and the fix.
func (c Config) Validate() error {
	d := c.withDefaults()
	switch {
	case d.Instance == "":
		return fmt.Errorf("flow config: instance id is empty: give every dispatcher instance a unique id")
	case d.Mode != ModeAdaptive && d.Mode != ModeColdOnly:
		return fmt.Errorf("flow config: unknown dispatch mode %q: use adaptive or cold-only", d.Mode)
	case d.TokenTTL < time.Second || d.TokenTTL > 60*time.Second:
		return fmt.Errorf("flow config: token TTL %v out of range: use 1s to 60s (the spec asks 30-60s)", d.TokenTTL)
	case d.PrefetchLeases < 1:
		return fmt.Errorf("flow config: prefetch leases %d: use at least 1", d.PrefetchLeases)
	case d.GlobalBanDuration < 5*time.Minute || d.GlobalBanDuration > 15*time.Minute:
		return fmt.Errorf("flow config: global ban duration %v: use 5m to 15m", d.GlobalBanDuration)
	case d.InProgressTTL >= d.DedupeTTL:
		return fmt.Errorf("flow config: in-progress TTL %v must be shorter than the dedupe TTL %v", d.InProgressTTL, d.DedupeTTL)
	}
	return ValidateFairness(d.Fairness)
}

// ValidateFairness checks a route's fairness parameters.
func ValidateFairness(p FairnessParams) error {
	switch {
	case p.DominantShare <= 0.5 || p.DominantShare > 1:
		return fmt.Errorf("fairness: dominant share %v: use a value in (0.5, 1]", p.DominantShare)
	case p.CompetingShare <= 0 || p.CompetingShare > 0.5:
		return fmt.Errorf("fairness: competing share %v: use a value in (0, 0.5]", p.CompetingShare)
	case p.CompetingSources < 1:
		return fmt.Errorf("fairness: competing sources %d: use at least 1", p.CompetingSources)
	case p.MinVolume < 1:
		return fmt.Errorf("fairness: minimum volume %d: use at least 1", p.MinVolume)
	case p.Window < time.Second || p.BanDuration < time.Second:
		return fmt.Errorf("fairness: window %v and ban duration %v must be at least 1s", p.Window, p.BanDuration)
	}
	return nil
}
