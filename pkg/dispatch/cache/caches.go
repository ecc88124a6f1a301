package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Default TTLs.
// Default TTLs by cache type. Routing and HMAC follow the spec's example
// (60 s, 180 s); bans are shorter because bans are short-lived; quotas
// change rarely and only the slow stage reads them. Constants, not
// package variables: pkg/dispatch holds no mutable globals.
const (
	DefaultRoutingFresh = 60 * time.Second
	DefaultRoutingStale = 180 * time.Second
	DefaultHMACFresh    = 60 * time.Second
	DefaultHMACStale    = 180 * time.Second
	DefaultBansFresh    = 30 * time.Second
	DefaultBansStale    = 90 * time.Second
	DefaultQuotasFresh  = 60 * time.Second
	DefaultQuotasStale  = 180 * time.Second
)

// DefaultProfileTTL returns the spec's ACL TTLs of a sensitivity profile
// (critical 2 s/4 s, moderate 10 s/20 s, low 30 s/90 s); the empty
// profile is moderate; an unknown one gets critical's, the tightest.
func DefaultProfileTTL(p registry.Profile) TTL {
	switch p.OrDefault() {
	case registry.ProfileModerate:
		return TTL{Fresh: 10 * time.Second, Stale: 20 * time.Second}
	case registry.ProfileLow:
		return TTL{Fresh: 30 * time.Second, Stale: 90 * time.Second}
	}
	return TTL{Fresh: 2 * time.Second, Stale: 4 * time.Second}
}

// Config sets the TTLs (platform-level configuration). Zero values take
// the defaults.
type Config struct {
	// Routing, HMAC, Bans and Quotas are the TTLs of those types.
	Routing TTL
	HMAC    TTL
	Bans    TTL
	Quotas  TTL
	// Profiles are the ACL TTLs per sensitivity profile; a missing
	// profile takes DefaultProfileTTL. An ACL entry's own
	// fresh_ttl_seconds/stale_ttl_seconds override its profile's.
	Profiles map[registry.Profile]TTL
	// Jitter, in [0, 0.5], shortens each generation's TTLs by a random
	// factor in [1-Jitter, 1]. 0 means the default 0.1; negative means
	// none.
	Jitter float64
	// RetryBackoff is the shortest time between a failed background
	// refresh and the next one (default 1 s).
	RetryBackoff time.Duration
	// RefreshTimeout bounds a background refresh (default 10 s).
	RefreshTimeout time.Duration
}

func (c Config) withDefaults() Config {
	if c.Routing == (TTL{}) {
		c.Routing = TTL{Fresh: DefaultRoutingFresh, Stale: DefaultRoutingStale}
	}
	if c.HMAC == (TTL{}) {
		c.HMAC = TTL{Fresh: DefaultHMACFresh, Stale: DefaultHMACStale}
	}
	if c.Bans == (TTL{}) {
		c.Bans = TTL{Fresh: DefaultBansFresh, Stale: DefaultBansStale}
	}
	if c.Quotas == (TTL{}) {
		c.Quotas = TTL{Fresh: DefaultQuotasFresh, Stale: DefaultQuotasStale}
	}
	ps := make(map[registry.Profile]TTL, 3)
	for _, p := range registry.Profiles() {
		ps[p] = DefaultProfileTTL(p)
		if t, ok := c.Profiles[p]; ok && t != (TTL{}) {
			ps[p] = t
		}
	}
	c.Profiles = ps
	switch {
	case c.Jitter == 0:
		c.Jitter = 0.1
	case c.Jitter < 0:
		c.Jitter = 0
	}
	if c.RetryBackoff <= 0 {
		c.RetryBackoff = time.Second
	}
	if c.RefreshTimeout <= 0 {
		c.RefreshTimeout = 10 * time.Second
	}
	return c
}

// Validate reports the first setting that makes no sense.
func (c Config) Validate() error {
	d := c.withDefaults()
	for name, t := range map[string]TTL{"routing": d.Routing, "hmac": d.HMAC, "bans": d.Bans, "quotas": d.Quotas} {
		if !t.valid() {
			return fmt.Errorf("cache config: %s TTLs %v/%v: need 0 < fresh < stale", name, t.Fresh, t.Stale)
		}
	}
	for p, t := range c.Profiles {
		if p == "" || !p.Valid() {
			return fmt.Errorf("cache config: unknown sensitivity profile %q: use critical, moderate or low", p)
		}
		if !t.valid() {
			return fmt.Errorf("cache config: %s ACL TTLs %v/%v: need 0 < fresh < stale", p, t.Fresh, t.Stale)
		}
	}
	if d.Jitter > 0.5 {
		return fmt.Errorf("cache config: jitter %v: use at most 0.5", c.Jitter)
	}
	return nil
}

// Deps are the caches' collaborators. Reader is required.
type Deps struct {
	// Reader is the registry every refresh reads.
	Reader registry.Reader
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Metrics receives the Snavio.Cache.* metrics; nil drops them.
	Metrics telemetry.Metrics
	// Telemetry receives Refreshed records and the revocation audit's
	// executed_after_acl_revoked events; nil drops them.
	Telemetry telemetry.Sink
	// Logger receives refresh failures; nil discards.
	Logger *slog.Logger
	// Executor runs background refreshes; nil means `go f()`. Tests pass
	// a synchronous or queued executor.
	Executor func(func())
	// Rand returns uniform numbers in [0, 1) for the jitter; it must be
	// safe for concurrent use. nil means math/rand/v2's Float64.
	Rand func() float64
}

type env struct {
	cfg      Config
	clock    clock.Clock
	metrics  telemetry.Metrics
	tel      telemetry.Sink
	logger   *slog.Logger
	executor func(func())
	rand     func() float64
}

func (e *env) jitter() float64 {
	if e.cfg.Jitter == 0 {
		return 1
	}
	return 1 - e.cfg.Jitter*e.rand()
}

type discardMetrics struct{}

func (discardMetrics) Count(string, int64)     {}
func (discardMetrics) Observe(string, float64) {}

// Caches are the dispatcher's four caches over one registry reader. Safe
// for concurrent use.
type Caches struct {
	env    *env
	reader registry.Reader
	// Routes caches routes by (target, command).
	Routes *Table[registry.RouteKey, *registry.Route]
	// ACLs caches ACL entries (grants and revocations) by (source, target,
	// command), with per-profile TTLs and the revocation audit.
	ACLs *Table[registry.ACLKey, *registry.ACL]
	// Keys caches HMAC keysets by source; it implements the shield's key
	// resolver.
	Keys *KeyCache
	// Bans caches bans by source; it implements the shield's ban list.
	Bans *BanCache
	// Quotas caches per-source quotas by (source, target, command), for
	// the slow stage.
	Quotas *Table[registry.ACLKey, *registry.Quota]
}

// New returns empty caches: every lookup reports Expired until LoadAll,
// Seed or a refresh fills them.
func New(cfg Config, deps Deps) (*Caches, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if deps.Reader == nil {
		return nil, errors.New("cache: a registry reader is required")
	}
	e := &env{cfg: cfg.withDefaults(), clock: deps.Clock, metrics: deps.Metrics, tel: deps.Telemetry,
		logger: deps.Logger, executor: deps.Executor, rand: deps.Rand}
	if e.clock == nil {
		e.clock = clock.System()
	}
	if e.metrics == nil {
		e.metrics = discardMetrics{}
	}
	if e.tel == nil {
		e.tel = telemetry.Discard{}
	}
	if e.logger == nil {
		e.logger = slog.New(slog.DiscardHandler)
	}
	if e.executor == nil {
		e.executor = func(f func()) { go f() }
	}
	if e.rand == nil {
		e.rand = rand.Float64
	}
	c := &Caches{env: e, reader: deps.Reader}
	c.Routes = &Table[registry.RouteKey, *registry.Route]{typ: Routing, env: e, ttl: e.cfg.Routing,
		expOf: func(r *registry.Route) int64 { return r.ExpiresAt },
		fetch: func(ctx context.Context, now time.Time) ([]registry.RouteKey, []*registry.Route, error) {
			d, err := c.load(ctx, now, registry.KindRoute)
			if err != nil {
				return nil, nil, err
			}
			ks, vs := routeEntries(&d)
			return ks, vs, nil
		}}
	c.ACLs = &Table[registry.ACLKey, *registry.ACL]{typ: ACL, env: e, ttl: e.cfg.Profiles[registry.ProfileModerate],
		ttlOf: c.aclTTL, trackUse: true, onSwap: c.auditRevocations,
		expOf: func(a *registry.ACL) int64 { return a.ExpiresAt },
		fetch: func(ctx context.Context, now time.Time) ([]registry.ACLKey, []*registry.ACL, error) {
			d, err := c.load(ctx, now, registry.KindACL)
			if err != nil {
				return nil, nil, err
			}
			ks, vs := aclEntries(&d)
			return ks, vs, nil
		}}
	c.Keys = &KeyCache{t: &Table[string, *keys.Keyring]{typ: HMAC, env: e, ttl: e.cfg.HMAC,
		expOf: func(*keys.Keyring) int64 { return 0 },
		fetch: func(ctx context.Context, now time.Time) ([]string, []*keys.Keyring, error) {
			d, err := c.load(ctx, now, registry.KindKey)
			if err != nil {
				return nil, nil, err
			}
			return keyEntries(&d, now)
		}}}
	c.Bans = &BanCache{t: &Table[string, BanState]{typ: Bans, env: e, ttl: e.cfg.Bans,
		expOf: func(BanState) int64 { return 0 },
		fetch: func(ctx context.Context, now time.Time) ([]string, []BanState, error) {
			d, err := c.load(ctx, now, registry.KindBan)
			if err != nil {
				return nil, nil, err
			}
			ks, vs := banEntries(&d)
			return ks, vs, nil
		}}}
	c.Quotas = &Table[registry.ACLKey, *registry.Quota]{typ: Quotas, env: e, ttl: e.cfg.Quotas,
		expOf: func(q *registry.Quota) int64 { return q.ExpiresAt },
		fetch: func(ctx context.Context, now time.Time) ([]registry.ACLKey, []*registry.Quota, error) {
			d, err := c.load(ctx, now, registry.KindQuota)
			if err != nil {
				return nil, nil, err
			}
			ks, vs := quotaEntries(&d)
			return ks, vs, nil
		}}
	return c, nil
}

// load reads kinds and validates them with the registry's one validation.
func (c *Caches) load(ctx context.Context, now time.Time, kinds ...registry.Kind) (registry.Data, error) {
	d, err := c.reader.Load(ctx, now, kinds...)
	if err != nil {
		return registry.Data{}, err
	}
	if err := registry.Validate(&d); err != nil {
		return registry.Data{}, fmt.Errorf("registry data refused: %w", err)
	}
	return d, nil
}

func (c *Caches) aclTTL(a *registry.ACL) TTL {
	if a.FreshTTLSeconds > 0 && a.StaleTTLSeconds > a.FreshTTLSeconds {
		return TTL{Fresh: time.Duration(a.FreshTTLSeconds) * time.Second, Stale: time.Duration(a.StaleTTLSeconds) * time.Second}
	}
	if t, ok := c.env.cfg.Profiles[a.Profile.OrDefault()]; ok {
		return t
	}
	return DefaultProfileTTL(a.Profile)
}

// LoadAll is the cold load: it reads every kind in one Load, validates
// them, and installs all four caches as read now.
func (c *Caches) LoadAll(ctx context.Context) error {
	now := c.env.clock.Now()
	d, err := c.load(ctx, now)
	if err != nil {
		return fmt.Errorf("cache: cold load: %w", err)
	}
	return c.installAll(&d, now, false)
}

// Seed installs data from a snapshot generated at generatedAt: each entry
// counts as fresh until generatedAt plus its stale TTL, then stale for the
// usual stale window. d must have passed registry.Validate (the snapshot
// loader validates it). Seed keeps references into d; the caller must not
// modify d afterwards.
func (c *Caches) Seed(d *registry.Data, generatedAt time.Time) error {
	return c.installAll(d, generatedAt, true)
}

func (c *Caches) installAll(d *registry.Data, asOf time.Time, snap bool) error {
	kk, kv, err := keyEntries(d, asOf)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	rk, rv := routeEntries(d)
	ak, av := aclEntries(d)
	bk, bv := banEntries(d)
	qk, qv := quotaEntries(d)
	c.Routes.install(rk, rv, asOf, snap)
	c.Quotas.install(qk, qv, asOf, snap)
	c.ACLs.install(ak, av, asOf, snap)
	c.Keys.t.install(kk, kv, asOf, snap)
	c.Bans.t.install(bk, bv, asOf, snap)
	return nil
}

// LookupRoute is Routes.Lookup.
func (c *Caches) LookupRoute(k registry.RouteKey, now time.Time) (*registry.Route, State, bool) {
	return c.Routes.Lookup(k, now)
}

// LookupACL is ACLs.Lookup.
func (c *Caches) LookupACL(k registry.ACLKey, now time.Time) (*registry.ACL, State, bool) {
	return c.ACLs.Lookup(k, now)
}

// LookupQuota is Quotas.Lookup.
func (c *Caches) LookupQuota(k registry.ACLKey, now time.Time) (*registry.Quota, State, bool) {
	return c.Quotas.Lookup(k, now)
}

// RoutesLoaded reports whether the route cache has ever been loaded.
func (c *Caches) RoutesLoaded() bool {
	_, ok := c.Routes.LoadedAt()
	return ok
}

// Refresh refreshes one cache type synchronously (single flight).
func (c *Caches) Refresh(ctx context.Context, t Type) error {
	switch t {
	case Routing:
		return c.Routes.Refresh(ctx)
	case ACL:
		return c.ACLs.Refresh(ctx)
	case HMAC:
		return c.Keys.t.Refresh(ctx)
	case Bans:
		return c.Bans.t.Refresh(ctx)
	case Quotas:
		return c.Quotas.Refresh(ctx)
	}
	return fmt.Errorf("cache: unknown cache type %q", t)
}

// Flush publishes the usage counted since the last publication
// (Snavio.Cache.Usage.* and Snavio.Cache.<Type>.Usage.Stale). Every
// refresh publishes its type's usage; call Flush periodically as well (a
// metrics scrape) so counts do not wait for a refresh.
func (c *Caches) Flush() {
	c.Routes.publish()
	c.ACLs.publish()
	c.Keys.t.publish()
	c.Bans.t.publish()
	c.Quotas.publish()
}

// WaitIdle blocks until no refresh of any type is in flight. Tests use it
// to await background refreshes without sleeping.
func (c *Caches) WaitIdle() {
	c.Routes.waitIdle()
	c.ACLs.waitIdle()
	c.Keys.t.waitIdle()
	c.Bans.t.waitIdle()
	c.Quotas.waitIdle()
}

func routeEntries(d *registry.Data) ([]registry.RouteKey, []*registry.Route) {
	ks := make([]registry.RouteKey, len(d.Routes))
	vs := make([]*registry.Route, len(d.Routes))
	for i := range d.Routes {
		ks[i], vs[i] = d.Routes[i].Key(), &d.Routes[i]
	}
	return ks, vs
}

func aclEntries(d *registry.Data) ([]registry.ACLKey, []*registry.ACL) {
	ks := make([]registry.ACLKey, len(d.ACLs))
	vs := make([]*registry.ACL, len(d.ACLs))
	for i := range d.ACLs {
		ks[i], vs[i] = d.ACLs[i].Key(), &d.ACLs[i]
	}
	return ks, vs
}

func keyEntries(d *registry.Data, now time.Time) ([]string, []*keys.Keyring, error) {
	ks := make([]string, 0, len(d.Keys))
	vs := make([]*keys.Keyring, 0, len(d.Keys))
	for i := range d.Keys {
		k := &d.Keys[i]
		if !registry.Live(k.ExpiresAt, now) {
			continue
		}
		versions := make([]keys.Version, len(k.Versions))
		for j, v := range k.Versions {
			versions[j] = keys.Version{ID: v.ID, Secret: v.Secret, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter}
		}
		ring, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{k.Source: versions})
		if err != nil {
			return nil, nil, err
		}
		ks = append(ks, k.Source)
		vs = append(vs, ring)
	}
	return ks, vs, nil
}

func banEntries(d *registry.Data) ([]string, []BanState) {
	by := make(map[string]int, len(d.Bans))
	var ks []string
	var vs []BanState
	for _, b := range d.Bans {
		i, ok := by[b.Source]
		if !ok {
			i = len(ks)
			by[b.Source] = i
			ks = append(ks, b.Source)
			vs = append(vs, BanState{})
		}
		switch b.Kind {
		case registry.BanGlobal:
			vs[i].GlobalUntil = max(vs[i].GlobalUntil, b.ExpiresAt)
		case registry.BanColdOnly:
			vs[i].ColdOnly = true
			vs[i].ColdOnlyUntil = b.ExpiresAt
		}
	}
	return ks, vs
}

// RefreshAsync starts a background refresh of type t unless one is in
// flight or backing off after a failure; it does not wait.
func (c *Caches) RefreshAsync(t Type) {
	now := c.env.clock.Now().UnixNano()
	switch t {
	case Routing:
		c.Routes.refreshAsync(now)
	case ACL:
		c.ACLs.refreshAsync(now)
	case HMAC:
		c.Keys.t.refreshAsync(now)
	case Bans:
		c.Bans.t.refreshAsync(now)
	case Quotas:
		c.Quotas.refreshAsync(now)
	}
}

func quotaEntries(d *registry.Data) ([]registry.ACLKey, []*registry.Quota) {
	ks := make([]registry.ACLKey, len(d.Quotas))
	vs := make([]*registry.Quota, len(d.Quotas))
	for i := range d.Quotas {
		q := &d.Quotas[i]
		ks[i], vs[i] = registry.ACLKey{Source: q.Source, Target: q.Target, Command: q.Command}, q
	}
	return ks, vs
}
