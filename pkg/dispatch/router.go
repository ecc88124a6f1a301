package dispatch

import (
	"context"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/routing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// NewRouter adapts the cache-backed router of package routing to the
// Router port.
func NewRouter(r *routing.Router) Router { return routingRouter{r} }

type routingRouter struct{ r *routing.Router }

func (a routingRouter) Fast(source, target, command string) (Route, string, bool) {
	return a.FastAt(source, target, command, a.r.Now())
}

// FastAt implements RouterAt: the decision at the time the shield
// received the message, without another clock read.
func (a routingRouter) FastAt(source, target, command string, now time.Time) (Route, string, bool) {
	return a.fastTrace(source, target, command, now, nil)
}

// fastTrace is FastAt recording the route and ACL checks, with the cache
// states they read, into tr (nil: none).
func (a routingRouter) fastTrace(source, target, command string, now time.Time, tr *trace.Trace) (Route, string, bool) {
	d := a.r.FastAt(source, target, command, now)
	if !d.Deliver {
		if tr != nil {
			traceRoute(tr, d)
		}
		return Route{}, string(d.Escalate), false
	}
	r := Route{QueueARN: d.QueueARN(), Flow: d.Flow}
	if tr != nil {
		tr.AddCache(trace.Fast, CheckRoute, trace.Pass, r.QueueARN, d.RouteState.String())
		tr.AddCache(trace.Fast, CheckACL, trace.Pass, "granted", d.ACLState.String())
	}
	return r, "", true
}

// The routing checks of the fast stage, as a trace names them.
const (
	CheckRoute = "route"
	CheckACL   = "acl"
)

// traceRoute records a fast decision that escalates: on the route when
// the routing cache could not answer (cold, stale or missing), else on
// the ACL.
func traceRoute(tr *trace.Trace, d routing.Decision) {
	why := string(d.Escalate)
	if d.Escalate == routing.CacheCold || d.Escalate == routing.RoutingStale || d.Escalate == routing.CacheMiss {
		tr.AddCache(trace.Fast, CheckRoute, trace.Escalate, why, d.RouteState.String())
		tr.Add(trace.Fast, CheckACL, trace.Skip, "")
		return
	}
	tr.AddCache(trace.Fast, CheckRoute, trace.Pass, "found in the routing cache", d.RouteState.String())
	tr.AddCache(trace.Fast, CheckACL, trace.Escalate, why, d.ACLState.String())
}

func (a routingRouter) Slow(ctx context.Context, source, target, command string) (Route, telemetry.FailReason, error) {
	d, err := a.r.Slow(ctx, source, target, command)
	if err != nil {
		return Route{}, "", err
	}
	if !d.Deliver {
		return Route{}, d.Fail, nil
	}
	return Route{QueueARN: d.QueueARN(), Flow: d.Flow}, "", nil
}
