package controlapi

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// newQueueEnv is an API whose test routing sees the local queues of an
// ephemeral embedded store: mailer (redriving to mailer-dlq), mailer-dlq
// and lonely (no DLQ).
func newQueueEnv(t *testing.T) *registryEnv {
	t.Helper()
	clk := clock.NewFake(t0)
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for _, q := range []localqueue.QueueConfig{{Name: "mailer-dlq"}, {Name: "mailer", DeadLetterQueue: "mailer-dlq", MaxReceives: 5}, {Name: "lonely"}, {Name: "other-dlq"}} {
		if _, err := st.CreateQueue(t.Context(), q); err != nil {
			t.Fatal(err)
		}
	}
	reg := memstore.NewRegistry()
	api, err := NewRegistryAPI(RegistryOptions{Registry: reg, Clock: clk, Queues: EmbeddedRouteQueues(st), Auth: ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	// Mount through Register on an outside mux, as `dispatch serve` does.
	mux := http.NewServeMux()
	api.Register(mux)
	srv := httptest.NewServer(servertest.OperatorAndAcme().Handler(mux))
	t.Cleanup(srv.Close)
	return &registryEnv{srv: srv, clk: clk, reg: reg}
}

func localRoute(target, command, queue, dlq string) registry.Item {
	return registry.Item{Route: &registry.Route{Target: target, Command: command,
		QueueARN: embedded.QueueARN(queue), DLQARN: embedded.QueueARN(dlq)}}
}

func TestTestRouting(t *testing.T) {
	tests := []struct {
		name       string
		item       registry.Item
		want, wfix string
	}{
		{"ok", localRoute("mailer", "send", "mailer", "mailer-dlq"), "", ""},
		{"missing queue", localRoute("mailer", "send", "nope", "mailer-dlq"), "queue arn:snavio:sqs:local:000000000000:nope does not exist", "snavio queue create nope --dlq mailer-dlq --max-receives 5"},
		{"missing dlq", localRoute("mailer", "send", "mailer", "gone-dlq"), "dead-letter queue arn:snavio:sqs:local:000000000000:gone-dlq does not exist", "snavio queue create gone-dlq"},
		{"queue without a dlq", localRoute("mailer", "send", "lonely", "mailer-dlq"), "has no dead-letter queue", "recreate lonely with --dlq mailer-dlq --max-receives N"},
		{"another dlq", localRoute("mailer", "send", "mailer", "other-dlq"), "redrives to arn:snavio:sqs:local:000000000000:mailer-dlq, not to the route's DLQ", "register the route with the queue's DLQ"},
		{"not a local queue", registry.Item{Route: func() *registry.Route { r := dispatchtest.RegistryRoute("mailer", "send"); return &r }()}, "mailer-commands does not exist", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for _, dry := range []bool{true, false} {
				e := newQueueEnv(t)
				if tc.want == "" {
					var res wire.ApplyResult
					if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{tc.item}, DryRun: dry}, &res); st != 200 || res.Plan.Count("create") != 1 {
						t.Fatalf("dry=%v: %d %+v", dry, st, res)
					}
					continue
				}
				var er map[string]string
				st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{tc.item}, DryRun: dry}, &er)
				if st != 422 || !strings.Contains(er["error"], tc.want) || !strings.Contains(er["fix"], tc.wfix) || !strings.Contains(er["fix"], "nothing was written") {
					t.Fatalf("dry=%v: %d %v", dry, st, er)
				}
				if d, _ := e.reg.Load(t.Context(), t0); d.Len() != 0 {
					t.Fatalf("dry=%v: a refused registration wrote %+v", dry, d)
				}
				// PUT, the raw write, test-routes too.
				if st := e.do(t, "op", "PUT", "/v1/registry/item", wire.RegistryPutRequest{Item: tc.item}, &er); st != 422 {
					t.Fatalf("put: %d %v", st, er)
				}
			}
		})
	}
}

func TestTestRoutingListsEveryProblemAndSkipsUnchanged(t *testing.T) {
	e := newQueueEnv(t)
	good := localRoute("mailer", "send", "mailer", "mailer-dlq")
	var res wire.ApplyResult
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{good}}, &res); st != 200 || len(res.Applied) != 1 {
		t.Fatalf("apply: %d %+v", st, res)
	}
	var er map[string]string
	its := []registry.Item{good, localRoute("mailer", "a", "x1", "mailer-dlq"), localRoute("mailer", "b", "x2", "mailer-dlq")}
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: its}, &er); st != 422 || !strings.Contains(er["error"], "x1") || !strings.Contains(er["error"], "x2") {
		t.Fatalf("two bad routes: %d %v", st, er)
	}
	if strings.Contains(er["error"], "route mailer send") {
		t.Fatalf("an unchanged route was re-checked: %v", er)
	}
}

type failingQueues struct{}

func (failingQueues) Queue(context.Context, string) (QueueInfo, error) {
	return QueueInfo{}, errors.New("disk on fire")
}

func fifo(context.Context, string) (QueueInfo, error) {
	return QueueInfo{FIFO: true, DeadLetterARN: "arn:aws:sqs:eu-west-1:123456789012:mailer-dlq"}, nil
}

func TestTestRoutingPortFailures(t *testing.T) {
	for name, q := range map[string]RouteQueues{"failing": failingQueues{}, "fifo": RouteQueuesFunc(fifo)} {
		t.Run(name, func(t *testing.T) {
			api, err := NewRegistryAPI(RegistryOptions{Registry: memstore.NewRegistry(), Clock: clock.NewFake(t0), Queues: q, Auth: ContextAuth{}})
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewServer(servertest.OperatorAndAcme().Handler(api.Handler()))
			defer srv.Close()
			e := &registryEnv{srv: srv}
			r := dispatchtest.RegistryRoute("mailer", "send")
			r.DLQARN = "arn:aws:sqs:eu-west-1:123456789012:mailer-dlq"
			var er map[string]string
			st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{{Route: &r}}}, &er)
			switch name {
			case "failing":
				if st != 500 || !strings.Contains(er["error"], "disk on fire") {
					t.Fatalf("%d %v", st, er)
				}
			case "fifo":
				if st != 422 || !strings.Contains(er["error"], "FIFO") {
					t.Fatalf("%d %v", st, er)
				}
			}
		})
	}
}

func TestACLInheritsTheRouteProfile(t *testing.T) {
	e := newRegistryEnv(t)
	r := dispatchtest.RegistryRoute("mailer", "send")
	r.Profile = registry.ProfileCritical
	var res wire.ApplyResult
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{{Route: &r}}}, &res); st != 200 {
		t.Fatalf("route: %d", st)
	}
	grant := registry.Item{ACL: &registry.ACL{Source: "acme/billing", Target: "mailer", Command: "send", Allow: true}}
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{grant}}, &res); st != 200 || len(res.Applied) != 1 {
		t.Fatalf("grant: %d %+v", st, res)
	}
	if p := res.Applied[0].After.ACL.Profile; p != registry.ProfileCritical {
		t.Fatalf("grant profile = %q, want the route's", p)
	}
	// Granting again plans nothing.
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{grant}}, &res); st != 200 || res.Plan.Pending() {
		t.Fatalf("second grant: %d %+v", st, res)
	}
	// A grant without a route keeps no profile (moderate by default).
	other := registry.Item{ACL: &registry.ACL{Source: "acme/billing", Target: "ledger", Command: "post", Allow: true}}
	if st := e.do(t, "op", "POST", "/v1/registry/apply", wire.ApplyRequest{Items: []registry.Item{other}}, &res); st != 200 || res.Applied[0].After.ACL.Profile != "" {
		t.Fatalf("grant without route: %d %+v", st, res)
	}
}

func TestListFilters(t *testing.T) {
	e := newRegistryEnv(t)
	by := registry.Actor{Who: "t", At: t0}
	put := func(it registry.Item) {
		if _, err := e.reg.Put(t.Context(), by, it); err != nil {
			t.Fatal(err)
		}
	}
	for _, a := range []registry.ACL{
		dispatchtest.RegistryACL("acme/billing", "mailer", "send"),
		dispatchtest.RegistryACL("acme/shop", "mailer", "send"),
		dispatchtest.RegistryACL("globex/app", "ledger", "post"),
	} {
		put(registry.Item{ACL: &a})
	}
	put(route("mailer", "send"))
	// The filters as the operator sees them (a tenant's view is scoped:
	// TestTenantReadsOnlyItsOwnRecords).
	count := func(q url.Values) int {
		var its wire.RegistryItems
		if st := e.do(t, "op", "GET", "/v1/registry?"+q.Encode(), nil, &its); st != 200 {
			t.Fatalf("%v: %d", q, st)
		}
		return len(its.Items)
	}
	tests := []struct {
		q    url.Values
		want int
	}{
		{url.Values{}, 4},
		{url.Values{"kind": {"acl"}}, 3},
		{url.Values{"kind": {"acl"}, "target": {"mailer"}}, 2},
		{url.Values{"target": {"mailer"}}, 3},
		{url.Values{"source": {"acme/shop"}}, 1},
		{url.Values{"tenant": {"acme"}}, 2},
		{url.Values{"kind": {"route"}, "source": {"acme/shop"}}, 0},
		{url.Values{"command": {"post"}, "tenant": {"globex"}}, 1},
	}
	for _, tc := range tests {
		if got := count(tc.q); got != tc.want {
			t.Errorf("list %v: %d items, want %d", tc.q, got, tc.want)
		}
	}
	var er map[string]string
	if st := e.do(t, "op", "GET", "/v1/registry?source=a+b", nil, &er); st != 400 {
		t.Fatalf("bad filter: %d %v", st, er)
	}
	// An empty list is an empty array, not null.
	var raw map[string]any
	e.do(t, "op", "GET", "/v1/registry?tenant=nobody", nil, &raw)
	if l, ok := raw["items"].([]any); !ok || len(l) != 0 {
		t.Fatalf("empty list = %#v", raw["items"])
	}
}

func TestTenantConfigWithoutKeys(t *testing.T) {
	e := newRegistryEnv(t)
	var er map[string]string
	if st := e.do(t, "op", "GET", "/v1/tenants/globex/config", nil, &er); st != 404 || !strings.Contains(er["fix"], "snavio key create --service globex/") {
		t.Fatalf("tenant without keys: %d %v", st, er)
	}
	if st := e.do(t, "op", "POST", "/v1/keys/create", wire.KeyRequest{Source: "not a source"}, &er); st != 400 {
		t.Fatalf("bad source: %d %v", st, er)
	}
}
