package dispatch_test

import (
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func TestFlowRoute(t *testing.T) {
	r := &registry.Route{
		Target: "mailer", Command: "send", DedupeMode: registry.DedupeStrict,
		RateLimit:      registry.RateLimit{Max: 100, IntervalSeconds: 60, Burst: 10, CooldownSeconds: 5},
		Fairness:       registry.Fairness{DominantShare: 0.9, CompetingShare: 0.05, CompetingSources: 4, WindowSeconds: 20, BanSeconds: 45},
		PrefetchLeases: 3,
	}
	got := dispatch.FlowRoute(r)
	want := flow.Route{
		Strict:    true,
		RateLimit: flow.RateLimit{Max: 100, Interval: time.Minute, Burst: 10, Cooldown: 5 * time.Second, PrefetchLeases: 3},
		Fairness:  flow.FairnessParams{DominantShare: 0.9, CompetingShare: 0.05, CompetingSources: 4, Window: 20 * time.Second, BanDuration: 45 * time.Second},
	}
	if got != want {
		t.Fatalf("FlowRoute = %+v\nwant        %+v", got, want)
	}
	if z := dispatch.FlowRoute(&registry.Route{}); z != (flow.Route{}) {
		t.Fatalf("an empty route must map to flow's defaults, got %+v", z)
	}
}
