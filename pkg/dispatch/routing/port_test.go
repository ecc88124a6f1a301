package routing_test

import (
	"context"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/routing"
)

// mapCache is a routing.Cache other than *cache.Caches: one route and one
// ACL, expired until Refresh of their type.
type mapCache struct {
	route     registry.Route
	acl       registry.ACL
	refreshed map[cache.Type]bool
}

func (m *mapCache) state(t cache.Type) cache.State {
	if m.refreshed[t] {
		return cache.Fresh
	}
	return cache.Expired
}

func (m *mapCache) LookupRoute(k registry.RouteKey, _ time.Time) (*registry.Route, cache.State, bool) {
	ok := k == registry.RouteKey{Target: m.route.Target, Command: m.route.Command}
	return &m.route, m.state(cache.Routing), ok
}

func (m *mapCache) LookupACL(k registry.ACLKey, _ time.Time) (*registry.ACL, cache.State, bool) {
	ok := k == registry.ACLKey{Source: m.acl.Source, Target: m.acl.Target, Command: m.acl.Command}
	return &m.acl, m.state(cache.ACL), ok
}

func (m *mapCache) LookupQuota(registry.ACLKey, time.Time) (*registry.Quota, cache.State, bool) {
	return nil, cache.Fresh, false
}

func (m *mapCache) RoutesLoaded() bool { return true }

func (m *mapCache) Refresh(_ context.Context, t cache.Type) error {
	m.refreshed[t] = true
	return nil
}

func (m *mapCache) RefreshAsync(cache.Type) {}

// TestRouterOverAnotherCache: the router decides from any routing.Cache.
// The fast stage escalates on an expired route; the slow stage refreshes
// the routes and the ACLs through the port and then delivers.
func TestRouterOverAnotherCache(t *testing.T) {
	m := &mapCache{route: dispatchtest.RegistryRoute("mailer", "send"),
		acl: dispatchtest.RegistryACL("acme/billing", "mailer", "send"), refreshed: map[cache.Type]bool{}}
	r, err := routing.New(m, memstore.NewRegistry(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := r.Fast("acme/billing", "mailer", "send"); d.Deliver || d.Escalate != routing.RoutingStale {
		t.Fatalf("Fast = %+v, want an escalation %s", d, routing.RoutingStale)
	}
	d, err := r.Slow(context.Background(), "acme/billing", "mailer", "send")
	if err != nil || !d.Deliver || d.QueueARN() != m.route.QueueARN {
		t.Fatalf("Slow = %+v, %v; want delivery to %s", d, err, m.route.QueueARN)
	}
	if !m.refreshed[cache.Routing] || !m.refreshed[cache.ACL] {
		t.Fatalf("refreshed %v, want routing and ACL", m.refreshed)
	}
}
