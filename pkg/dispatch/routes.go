package dispatch

import (
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// FlowRoute is the flow-control view of a registered route: dedupe mode,
// rate limit, fairness parameters and prefetch leases. Zero registry
// fields stay zero so that flow's defaults apply.
func FlowRoute(r *registry.Route) flow.Route {
	return flow.Route{
		Strict:    r.Strict(),
		RateLimit: FlowLimit(r.RateLimit, r.PrefetchLeases),
		Fairness: flow.FairnessParams{
			Disabled:         r.Fairness.Disabled,
			DominantShare:    r.Fairness.DominantShare,
			CompetingShare:   r.Fairness.CompetingShare,
			CompetingSources: r.Fairness.CompetingSources,
			Window:           time.Duration(r.Fairness.WindowSeconds) * time.Second,
			BanDuration:      time.Duration(r.Fairness.BanSeconds) * time.Second,
		},
	}
}

// FlowLimit converts a registry rate limit (a route's or a per-source
// quota's) for flow control.
func FlowLimit(l registry.RateLimit, prefetchLeases int) flow.RateLimit {
	return flow.RateLimit{
		Max: l.Max, Interval: l.Interval(), Burst: l.Burst, Cooldown: l.Cooldown(),
		PrefetchLeases: prefetchLeases,
	}
}
