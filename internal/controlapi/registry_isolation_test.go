package controlapi

import (
	"net/url"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// TestTenantReadsOnlyItsOwnRecords: a tenant token lists routes (shared)
// and its own tenant's ACLs, keys, bans and quotas; another tenant's are
// left out of lists, and naming one (filter, id, history) is a 403 given
// before any lookup. The operator sees everything.
func TestTenantReadsOnlyItsOwnRecords(t *testing.T) {
	e := newRegistryEnv(t)
	ctx := t.Context()
	by := registry.Actor{Who: "test", At: t0}
	acl := func(src string) registry.Item {
		a := dispatchtest.RegistryACL(src, "mailer", "send")
		return registry.Item{ACL: &a}
	}
	ban := func(src string) registry.Item {
		return registry.Item{Ban: &registry.Ban{Source: src, Kind: registry.BanColdOnly, Reason: "test"}}
	}
	key := func(src string) registry.Item {
		return registry.Item{Key: &registry.ServiceKey{Source: src, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: []byte(strings.Repeat("s", 32)), ActivatedAt: t0}}}}
	}
	for _, it := range []registry.Item{route("mailer", "send"), acl("acme/app"), acl("globex/app"), ban("acme/app"), ban("globex/app"), key("acme/app"), key("globex/app")} {
		if _, err := e.reg.Put(ctx, by, it); err != nil {
			t.Fatalf("%v: %v", it.ID(), err)
		}
	}
	ids := func(token, query string) []string {
		t.Helper()
		var out wire.RegistryItems
		if st := e.do(t, token, "GET", "/v1/registry"+query, nil, &out); st != 200 {
			t.Fatalf("%s list%s: %d", token, query, st)
		}
		var s []string
		for _, it := range out.Items {
			s = append(s, string(it.ID()))
		}
		return s
	}
	all := strings.Join(ids("op", ""), ",")
	for _, want := range []string{"globex/app", "acme/app", "route mailer send"} {
		if !strings.Contains(all, want) {
			t.Errorf("the operator's list lacks %s: %s", want, all)
		}
	}
	mine := strings.Join(ids("acme", ""), ",")
	if strings.Contains(mine, "globex") {
		t.Errorf("acme lists globex's records: %s", mine)
	}
	for _, want := range []string{"route mailer send", "acl acme/app mailer send", "key acme/app", "ban acme/app"} {
		if !strings.Contains(mine, want) {
			t.Errorf("acme's list lacks %s: %s", want, mine)
		}
	}
	if got := ids("acme", "?kind=key&tenant=acme"); len(got) != 1 || got[0] != "key acme/app" {
		t.Errorf("acme's keys: %v", got)
	}

	for _, path := range []string{
		"/v1/registry?tenant=globex",
		"/v1/registry?kind=key&source=globex/app",
		"/v1/registry/item?id=" + url.QueryEscape(string(registry.KeyID("globex/app"))),
		"/v1/registry/item?id=" + url.QueryEscape(string(registry.ACLID("globex/app", "mailer", "send"))),
		"/v1/registry/item?id=" + url.QueryEscape(string(registry.ACLID("globex/nothing", "x", "y"))), // absent: still 403
		"/v1/registry/history?id=" + url.QueryEscape(string(registry.BanID("globex/app", registry.BanColdOnly))),
	} {
		var er map[string]string
		if st := e.do(t, "acme", "GET", path, nil, &er); st != 403 || !strings.Contains(er["error"], `tenant "globex"`) || er["fix"] == "" {
			t.Errorf("acme GET %s: %d %v", path, st, er)
		}
		if st := e.do(t, "op", "GET", path, nil, nil); st != 200 && !strings.Contains(path, "nothing") {
			t.Errorf("operator GET %s: %d", path, st)
		}
	}
	// Own records and shared routes by id.
	for _, id := range []registry.ID{registry.KeyID("acme/app"), registry.RouteID("mailer", "send")} {
		if st := e.do(t, "acme", "GET", "/v1/registry/item?id="+url.QueryEscape(string(id)), nil, nil); st != 200 {
			t.Errorf("acme GET %s: %d", id, st)
		}
		if st := e.do(t, "acme", "GET", "/v1/registry/history?id="+url.QueryEscape(string(id)), nil, nil); st != 200 {
			t.Errorf("acme history %s: %d", id, st)
		}
	}
}
