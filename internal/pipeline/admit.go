package pipeline

import (
	"fmt"
	"strings"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
)

// Admission to the hand-off (docs/server/README.md, "One tenant cannot
// hold up another"): a command the fast stage escalates waits in the one
// shared hand-off only within its tenant's and its route's bounds, and
// only while its target queue has room for it. Otherwise the entry is
// refused at once with a retryable ThrottlingException and a retry hint:
// nothing is acknowledged that is then left to fail minutes later, and a
// tenant's backlog never takes the room another tenant needs.

// Defaults of the admission bounds.
const (
	DefaultHandoffCapacity = 100_000
	DefaultTenantWaiting   = 250
	DefaultRouteWaiting    = 1_000
	DefaultRetryAfter      = time.Second
	DefaultLightWaiting    = 16
)

// routeKey is a route's key in the waiting counts (no allocation).
type routeKey struct{ target, command string }

// waiting counts the hand-offs this process put and the slow stage has
// not finished, per tenant and per route. Keys at zero are deleted, so the
// maps hold only tenants and routes with work waiting. Hand-offs left by a
// previous process are not counted (they are bounded by the capacity).
type waiting struct {
	total   int
	tenants map[string]int
	routes  map[routeKey]int
}

func tenantOf(source string) string {
	t, _, _ := strings.Cut(source, "/")
	return t
}

// admit reserves a place in the hand-off for esc, or says why not in an
// entry error message for the producer; light says esc goes to the light
// tenants' hand-off. queueARN is its route's queue, if the fast stage
// routed it. Called with n.mu unlocked.
func (n *Node) admit(esc *dispatch.Escalation, queueARN string) (refusal string, light bool) {
	c := &esc.Envelope.Command
	tenant, rk := tenantOf(c.Source), routeKey{c.Target, c.Name}
	room, known := 0, false
	if n.o.Room != nil && queueARN != "" {
		room, known = n.o.Room(queueARN)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := &n.wait
	mine, route := w.tenants[tenant], w.routes[rk]
	// A tenant holds at most half the room the other tenants leave, so
	// however many tenants flood, a quiet one finds room.
	tenantLimit := min(n.o.TenantWaiting, (n.o.HandoffCapacity-(w.total-mine))/2)
	switch {
	case known && route >= room:
		refusal = fmt.Sprintf("the queue of route %s/%s is full (its max depth, counting %d commands on their way to it); retry after %s with the same id, once its consumers catch up",
			c.Target, c.Name, route, n.retryHint())
	case route >= n.o.RouteWaiting:
		refusal = fmt.Sprintf("route %s/%s has %d commands waiting for the slow stage, its bound; retry after %s with the same id", c.Target, c.Name, route, n.retryHint())
	case mine >= tenantLimit:
		refusal = fmt.Sprintf("tenant %s has %d commands waiting for the slow stage, its bound; retry after %s with the same id", tenant, mine, n.retryHint())
	default:
		if w.tenants == nil {
			w.tenants, w.routes = map[string]int{}, map[routeKey]int{}
		}
		w.total++
		w.tenants[tenant]++
		w.routes[rk]++
		return "", mine < n.o.LightWaiting
	}
	n.stats.Throttled++
	return refusal, false
}

// admission is the node's dispatch.Admission: admit, onto the light
// tenants' hand-off or the shared one.
type admission struct{ n *Node }

func (a admission) Admit(esc *dispatch.Escalation, queueARN string) (dispatch.Handoff, string) {
	why, light := a.n.admit(esc, queueARN)
	if why != "" {
		return nil, why
	}
	return a.n.lane(light), ""
}

func (a admission) Release(esc *dispatch.Escalation) { a.n.release(esc) }

// release gives back esc's place in the hand-off: its hand-off was not
// put, or the slow stage is done with it.
func (n *Node) release(esc *dispatch.Escalation) {
	c := &esc.Envelope.Command
	tenant, rk := tenantOf(c.Source), routeKey{c.Target, c.Name}
	n.mu.Lock()
	defer n.mu.Unlock()
	w := &n.wait
	if w.tenants[tenant] == 0 || w.routes[rk] == 0 {
		return // put by a previous process: never counted
	}
	w.total--
	if w.tenants[tenant]--; w.tenants[tenant] == 0 {
		delete(w.tenants, tenant)
	}
	if w.routes[rk]--; w.routes[rk] == 0 {
		delete(w.routes, rk)
	}
}

// retryHint is the retry hint of a throttled entry, in whole seconds like
// the Retry-After header.
func (n *Node) retryHint() string {
	return fmt.Sprintf("%ds", int((n.o.RetryAfter+time.Second-1)/time.Second))
}

// Waiting returns how many hand-offs this process put that the slow stage
// has not finished: in all, and of tenant.
func (n *Node) Waiting(tenant string) (total, ofTenant int) {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.wait.total, n.wait.tenants[tenant]
}
