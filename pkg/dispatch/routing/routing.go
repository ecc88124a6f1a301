// Package routing makes the routing and ACL decisions of the fast and
// slow stages from the registry caches (package cache). It decides; it
// does not send: the dispatcher composes a Decision with flow control and
// delivery.
//
// Fast uses memory only and never blocks: it returns a route to deliver to,
// or an escalation Reason for the slow stage. It never refuses: a command
// the cache says is unroutable or unauthorised is escalated, and only the
// slow stage, which confirms against the registry, refuses it.
//
// Slow is authoritative: it refreshes expired caches synchronously, and
// confirms every miss or denial with a point read of the registry before
// refusing with route-missing or acl-deny (the snavio.command.failed
// reasons; FailedEvent builds the event). docs/registry/routing.md lists
// the reason codes.
package routing

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Reason is an escalation reason code of the fast stage's routing
// decision. Codes are stable; they appear in escalation telemetry.
type Reason string

// Escalation reasons, in the order Fast checks them.
const (
	// CacheCold: the routing cache was never loaded (cold start without a
	// snapshot, or the cold load failed).
	CacheCold Reason = "cache_cold"
	// RoutingStale: the routing cache is past its stale_ttl (expired);
	// the slow stage refreshes it first.
	RoutingStale Reason = "routing_stale"
	// CacheMiss: the routing cache has no route for (target, command), or
	// only one whose expires_at has passed; the slow stage confirms
	// against the registry.
	CacheMiss Reason = "cache_miss"
	// ACLExpired: the ACL entry (or, on a miss, the ACL cache) is past its
	// stale_ttl.
	ACLExpired Reason = "acl_expired"
	// ACLMissing: no ACL entry for (source, target, command) in the cache.
	ACLMissing Reason = "acl_missing"
	// ACLDenied: the cached entry is a revocation; the slow stage confirms
	// it (it may have been granted again since).
	ACLDenied Reason = "acl_denied"
)

// Decision is a routing decision.
type Decision struct {
	// Route is the route to deliver to; nil unless Deliver. It is shared
	// and immutable: do not modify it.
	Route *registry.Route
	// Flow is the route's flow-control parameters (set with Route).
	Flow flow.Route
	// Deliver reports that the command may be delivered to Route.
	Deliver bool
	// Escalate is the fast stage's reason to escalate; set when Fast does
	// not deliver.
	Escalate Reason
	// Fail is the slow stage's refusal, route-missing or acl-deny; set
	// when Slow neither delivers nor errs.
	Fail telemetry.FailReason
	// RouteState and ACLState are the cache states the decision used.
	RouteState, ACLState cache.State
}

// QueueARN returns the route's queue ARN, "" if there is no route.
func (d *Decision) QueueARN() string {
	if d.Route == nil {
		return ""
	}
	return d.Route.QueueARN
}

// Cache is what a Router and Quotas read: the cached routes, ACLs and
// quotas, and their refreshes. *cache.Caches implements it.
type Cache interface {
	LookupRoute(k registry.RouteKey, now time.Time) (*registry.Route, cache.State, bool)
	LookupACL(k registry.ACLKey, now time.Time) (*registry.ACL, cache.State, bool)
	LookupQuota(k registry.ACLKey, now time.Time) (*registry.Quota, cache.State, bool)
	// RoutesLoaded reports whether the routes were ever loaded.
	RoutesLoaded() bool
	// Refresh refreshes one type and waits; RefreshAsync starts one.
	Refresh(ctx context.Context, t cache.Type) error
	RefreshAsync(t cache.Type)
}

var _ Cache = (*cache.Caches)(nil)

// Router decides from the caches, reading the registry on the slow path.
// Safe for concurrent use.
type Router struct {
	c      Cache
	reader registry.Reader
	clock  clock.Clock
}

// New returns a Router over caches c; reader is the registry the slow
// stage confirms misses and denials with (usually the one c refreshes
// from). clk defaults to the system clock.
func New(c Cache, reader registry.Reader, clk clock.Clock) (*Router, error) {
	if c == nil || reader == nil {
		return nil, errors.New("routing: caches and a registry reader are required")
	}
	if clk == nil {
		clk = clock.System()
	}
	return &Router{c: c, reader: reader, clock: clk}, nil
}

// Now reads the router's clock.
func (r *Router) Now() time.Time { return r.clock.Now() }

// Fast decides from memory only, at the router's clock. It neither
// blocks nor allocates. A stale route or ACL is used, and its background
// refresh started (package cache).
func (r *Router) Fast(source, target, command string) Decision {
	return r.FastAt(source, target, command, r.clock.Now())
}

// FastAt is Fast at a given time: the dispatcher passes the time the
// shield received the message, so the fast path reads the clock once.
func (r *Router) FastAt(source, target, command string, now time.Time) Decision {
	route, rst, ok := r.c.LookupRoute(registry.RouteKey{Target: target, Command: command}, now)
	d := Decision{RouteState: rst}
	switch {
	case !ok && rst == cache.Expired:
		if !r.c.RoutesLoaded() {
			d.Escalate = CacheCold
		} else {
			d.Escalate = RoutingStale
		}
		return d
	case rst == cache.Expired:
		d.Escalate = RoutingStale
		return d
	case !ok:
		d.Escalate = CacheMiss
		return d
	}
	acl, ast, ok := r.c.LookupACL(registry.ACLKey{Source: source, Target: target, Command: command}, now)
	d.ACLState = ast
	switch {
	case ast == cache.Expired:
		d.Escalate = ACLExpired
		return d
	case !ok:
		d.Escalate = ACLMissing
		return d
	case !acl.Allow:
		d.Escalate = ACLDenied
		return d
	}
	d.Route, d.Flow, d.Deliver = route, FlowRoute(route), true
	return d
}

// Slow decides authoritatively. It refreshes an expired routing or ACL
// cache first (joining a refresh already in flight), and confirms a
// missing route, a missing ACL entry or a cached revocation with a point
// read of the registry before refusing: the result then has Fail set to
// route-missing or acl-deny. When the point read finds what the cache
// lacked, it delivers on it and starts a background refresh so the fast
// stage learns it. An error means no decision could be made now (the
// registry is unavailable): the caller retries later.
func (r *Router) Slow(ctx context.Context, source, target, command string) (Decision, error) {
	now := r.clock.Now()
	rk := registry.RouteKey{Target: target, Command: command}
	route, rst, ok := r.c.LookupRoute(rk, now)
	if rst == cache.Expired {
		if err := r.c.Refresh(ctx, cache.Routing); err != nil {
			return Decision{}, fmt.Errorf("routing: refresh routes: %w", err)
		}
		now = r.clock.Now()
		route, rst, ok = r.c.LookupRoute(rk, now)
	}
	d := Decision{RouteState: rst}
	if !ok {
		it, err := r.reader.Get(ctx, registry.RouteID(target, command), now)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			d.Fail = telemetry.FailRouteMissing
			return d, nil
		case err != nil:
			return Decision{}, fmt.Errorf("routing: read route %s/%s: %w", target, command, err)
		case it.Route == nil:
			return Decision{}, fmt.Errorf("routing: read route %s/%s: store returned a %q record", target, command, it.Kind())
		}
		route = it.Route
		r.background(cache.Routing)
	}
	ak := registry.ACLKey{Source: source, Target: target, Command: command}
	acl, ast, ok := r.c.LookupACL(ak, now)
	if ast == cache.Expired {
		if err := r.c.Refresh(ctx, cache.ACL); err != nil {
			return Decision{}, fmt.Errorf("routing: refresh ACLs: %w", err)
		}
		now = r.clock.Now()
		acl, ast, ok = r.c.LookupACL(ak, now)
	}
	d.ACLState = ast
	if !ok || !acl.Allow {
		it, err := r.reader.Get(ctx, registry.ACLID(source, target, command), now)
		switch {
		case errors.Is(err, registry.ErrNotFound):
			d.Fail = telemetry.FailACLDeny
			return d, nil
		case err != nil:
			return Decision{}, fmt.Errorf("routing: read ACL %s -> %s/%s: %w", source, target, command, err)
		case it.ACL == nil || !it.ACL.Allow:
			d.Fail = telemetry.FailACLDeny
			return d, nil
		}
		r.background(cache.ACL)
	}
	d.Route, d.Flow, d.Deliver = route, FlowRoute(route), true
	return d, nil
}

// background refreshes t without waiting: the cache's own single flight
// and executor run it.
func (r *Router) background(t cache.Type) {
	r.c.RefreshAsync(t)
}

// FlowRoute returns the flow-control view of r. Zero fields stay zero so
// that flow control applies the dispatcher's defaults.
func FlowRoute(r *registry.Route) flow.Route {
	sec := func(s int64) time.Duration { return time.Duration(s) * time.Second }
	return flow.Route{
		Strict: r.Strict(),
		RateLimit: flow.RateLimit{
			Max: r.RateLimit.Max, Interval: sec(r.RateLimit.IntervalSeconds), Burst: r.RateLimit.Burst,
			Cooldown: sec(r.RateLimit.CooldownSeconds), PrefetchLeases: r.PrefetchLeases,
		},
		Fairness: flow.FairnessParams{
			Disabled: r.Fairness.Disabled, DominantShare: r.Fairness.DominantShare, CompetingShare: r.Fairness.CompetingShare,
			CompetingSources: r.Fairness.CompetingSources, Window: sec(r.Fairness.WindowSeconds), BanDuration: sec(r.Fairness.BanSeconds),
		},
	}
}

// Command identifies the command a failure event is about.
type Command struct {
	ID, Source, Target, Name string
	// Timestamp is the producer's metadata.timestamp, as sent.
	Timestamp string
	Replay    telemetry.Replay
}

// FailedEvent returns the snavio.command.failed event of a Slow decision
// that refused c (Fail set), with the spec's fields: command_id, source,
// target, command.name, timestamp, reason and the replay fields.
func FailedEvent(d Decision, c Command) telemetry.Failed {
	return telemetry.Failed{CommandID: c.ID, Source: c.Source, Target: c.Target, CommandName: c.Name,
		Timestamp: c.Timestamp, Reason: d.Fail, Replay: c.Replay}
}

// Quotas implements flow.Quotas from the quota cache, for the slow stage.
// The interface cannot wait for I/O, so an expired quota cache is still
// used while a background refresh runs (quotas only ever tighten what the
// slow stage allows; a stale quota errs on the side of the old limit).
type Quotas struct {
	c Cache
	// clock defaults to the system clock.
	clock clock.Clock
}

// NewQuotas returns the quota lookup over c.
func NewQuotas(c Cache, clk clock.Clock) *Quotas {
	if clk == nil {
		clk = clock.System()
	}
	return &Quotas{c: c, clock: clk}
}

var _ flow.Quotas = (*Quotas)(nil)

// SourceQuota implements flow.Quotas.
func (q *Quotas) SourceQuota(source, target, command string) (flow.RateLimit, bool) {
	v, st, ok := q.c.LookupQuota(registry.ACLKey{Source: source, Target: target, Command: command}, q.clock.Now())
	if st == cache.Expired {
		q.c.RefreshAsync(cache.Quotas)
	}
	if !ok {
		return flow.RateLimit{}, false
	}
	l := v.Limit
	return flow.RateLimit{Max: l.Max, Interval: l.Interval(), Burst: l.Burst, Cooldown: l.Cooldown()}, true
}
