package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/routing"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Config is what Assemble builds a Dispatcher from: three ports, which
// are required, and settings, where zero means the default.
type Config struct {
	// Registry is where routes, ACLs, keys, bans and quotas are read:
	// the caches load from it and the slow stage reads through it.
	Registry registry.Reader
	// FlowStore holds flow control's tokens, leases, claims and bans.
	FlowStore flow.Store
	// Sender delivers commands to their target queues.
	Sender Sender

	// Telemetry receives every stage's events; nil means telemetry.Discard.
	Telemetry telemetry.Sink
	// Clock is every stage's time; nil means the system clock.
	Clock clock.Clock
	// Metrics and Logger are optional.
	Metrics telemetry.Metrics
	Logger  *slog.Logger
	// Executor runs the caches' and flow control's background work; nil
	// means a goroutine each.
	Executor func(func())
	// Polls records producers' key polls, for the shield's
	// key_expiry_imminent notices; optional.
	Polls keys.PollTracker

	// The stages' settings. Flow.Instance is required (unique per
	// dispatcher instance); Flow's Clock, Metrics, Logger and Executor
	// are taken from the fields above when zero.
	Cache  cache.Config
	Shield shield.Config
	Flow   flow.Config

	// Load fills the caches before Assemble returns; nil means
	// Caches.LoadAll, from Registry. A host that cold-starts from a signed
	// snapshot (package snapshot's Loader) loads it here.
	Load func(ctx context.Context, c *cache.Caches) error
}

// Assembly is an assembled Dispatcher and the parts a host keeps.
type Assembly struct {
	Dispatcher *Dispatcher
	// Caches are the fast stage's caches, for a host to refresh, flush
	// or snapshot.
	Caches *cache.Caches
	// Deps are the Dispatcher's parts (Deps.Flow for flow control's
	// background jobs), for a caller that builds another Dispatcher with
	// one of them replaced.
	Deps Deps
}

// Assemble builds the Dispatcher the one standard way: caches over
// cfg.Registry, loaded (cfg.Load); the cache-backed router (package
// routing); flow control over cfg.FlowStore with source quotas from the
// caches; and the shield, reading keys and bans from the caches and
// banning repeat invalid senders through flow control. The lower-level
// constructors (New, shield.New, flow.New, routing.New, cache.New) remain
// for callers that assemble differently.
func Assemble(ctx context.Context, cfg Config) (*Assembly, error) {
	if cfg.Registry == nil || cfg.FlowStore == nil || cfg.Sender == nil {
		return nil, errors.New("dispatch: Config.Registry, Config.FlowStore and Config.Sender are required")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Telemetry == nil {
		cfg.Telemetry = telemetry.Discard{}
	}
	c, err := cache.New(cfg.Cache, cache.Deps{Reader: cfg.Registry, Clock: cfg.Clock, Metrics: cfg.Metrics,
		Telemetry: cfg.Telemetry, Logger: cfg.Logger, Executor: cfg.Executor})
	if err != nil {
		return nil, fmt.Errorf("dispatch: caches: %w", err)
	}
	load := c.LoadAll
	if cfg.Load != nil {
		load = func(ctx context.Context) error { return cfg.Load(ctx, c) }
	}
	if err := load(ctx); err != nil {
		return nil, fmt.Errorf("dispatch: loading the caches: %w", err)
	}
	rt, err := routing.New(c, cfg.Registry, cfg.Clock)
	if err != nil {
		return nil, fmt.Errorf("dispatch: router: %w", err)
	}
	fc := cfg.Flow
	if fc.Clock == nil {
		fc.Clock = cfg.Clock
	}
	if fc.Metrics == nil {
		fc.Metrics = cfg.Metrics
	}
	if fc.Logger == nil {
		fc.Logger = cfg.Logger
	}
	if fc.Executor == nil {
		fc.Executor = cfg.Executor
	}
	fl, err := flow.New(fc, cfg.FlowStore, cfg.Telemetry, routing.NewQuotas(c, cfg.Clock))
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	sh, err := shield.New(cfg.Shield, shield.Deps{Clock: cfg.Clock, Keys: c.Keys, Bans: c.Bans, Polls: cfg.Polls,
		Telemetry: cfg.Telemetry, BanRepeatInvalid: fl.BanRepeatInvalid})
	if err != nil {
		return nil, fmt.Errorf("dispatch: %w", err)
	}
	deps := Deps{Shield: sh, Router: NewRouter(rt), Flow: fl, Sender: cfg.Sender, Clock: cfg.Clock,
		Telemetry: cfg.Telemetry, Logger: cfg.Logger}
	d, err := New(deps)
	if err != nil {
		return nil, err
	}
	return &Assembly{Dispatcher: d, Caches: c, Deps: deps}, nil
}
