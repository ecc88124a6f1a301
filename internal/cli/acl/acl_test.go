package acl

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var t0 = routetest.T0

var triple = []string{"--source", "acme/billing", "--target", "mailer", "--command", "send"}

func TestGrantFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  func(a registry.ACL) bool
		usage string
	}{
		{"plain", nil, func(a registry.ACL) bool { return a.Allow && a.Profile == "" && a.ExpiresAt == 0 }, ""},
		{"profile", []string{"--sensitivity", "low"}, func(a registry.ACL) bool { return a.Profile == registry.ProfileLow }, ""},
		{"ttls", []string{"--fresh-ttl", "1s", "--stale-ttl", "3s", "--ttl", "1h"}, func(a registry.ACL) bool {
			return a.FreshTTLSeconds == 1 && a.StaleTTLSeconds == 3 && a.ExpiresAt == t0.Unix()+3600
		}, ""},
		{"bad source", []string{"--source", "billing"}, nil, `invalid --source "billing"`},
		{"bad profile", []string{"--sensitivity", "high"}, nil, "use critical, moderate or low"},
		{"profile and ttls", []string{"--sensitivity", "low", "--fresh-ttl", "1s", "--stale-ttl", "2s"}, nil, "not both"},
		{"fresh only", []string{"--fresh-ttl", "1s"}, nil, "fresh_ttl"},
		{"fresh above stale", []string{"--fresh-ttl", "5s", "--stale-ttl", "2s"}, nil, "fresh"},
		{"ttl without unit", []string{"--ttl", "60"}, nil, "give a unit"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := routetest.New(t, nil)
			var got *GrantOptions
			err := e.Run(t, NewCmdGrant(e.Deps("op", output.JSON), func(_ context.Context, o *GrantOptions) error { got = o; return nil }), append(append([]string{}, triple...), tc.args...)...)
			if tc.usage != "" {
				if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("err = %v, want usage error with %q", err, tc.usage)
				}
				return
			}
			if err != nil || !tc.want(got.ACL) {
				t.Fatalf("err %v, acl %+v", err, got)
			}
		})
	}
}

func TestGrantRevokeList(t *testing.T) {
	e := routetest.New(t, nil)
	r := dispatchtest.RegistryRoute("mailer", "send")
	r.Profile = registry.ProfileCritical
	if _, err := e.Reg.Put(t.Context(), registry.Actor{Who: "t", At: t0}, registry.Item{Route: &r}); err != nil {
		t.Fatal(err)
	}
	d := e.Deps("op", output.JSON)
	if err := e.Run(t, NewCmdGrant(d, nil), triple...); err != nil {
		t.Fatal(err)
	}
	var res route.Result
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || res.Summary.Create != 1 || res.Changes[0].After.ACL.Profile != registry.ProfileCritical {
		t.Fatalf("grant: %s", e.Out)
	}
	if e.Requests[0] != "POST /v1/registry/apply" {
		t.Fatalf("grant went to %v", e.Requests)
	}
	if err := e.Run(t, NewCmdGrant(d, nil), triple...); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || res.Summary.Pending() {
		t.Fatalf("second grant changed something: %s", e.Out)
	}
	if err := e.Run(t, NewCmdGrant(d, nil), "--source", "globex/app", "--target", "ledger", "--command", "post"); err != nil {
		t.Fatal(err)
	}

	// A tenant may list; filters go to the server.
	td := e.Deps("acme", output.Table)
	if err := e.Run(t, NewCmdList(td, nil), "--tenant", "acme", "--target", "mailer"); err != nil {
		t.Fatal(err)
	}
	if e.Requests[0] != "GET /v1/registry?command=&kind=acl&source=&target=mailer&tenant=acme" && e.Requests[0] != "GET /v1/registry?kind=acl&target=mailer&tenant=acme" {
		t.Fatalf("list request = %v", e.Requests)
	}
	if !strings.Contains(e.Out.String(), "acme/billing   mailer   send      granted   critical") || strings.Contains(e.Out.String(), "globex") {
		t.Fatalf("list:\n%s", e.Out)
	}

	e.Clk.Advance(time.Minute)
	if err := e.Run(t, NewCmdRevoke(d, nil), triple...); err != nil {
		t.Fatal(err)
	}
	var ch map[string]any
	if err := json.Unmarshal(e.Out.Bytes(), &ch); err != nil || ch["op"] != "put" || !strings.Contains(e.Out.String(), `"allow": false`) {
		t.Fatalf("revoke: %s", e.Out)
	}
	err := e.Run(t, NewCmdRevoke(d, nil), triple...)
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "already revoked") {
		t.Fatalf("second revoke: %v", err)
	}
	err = e.Run(t, NewCmdRevoke(d, nil), "--source", "acme/x", "--target", "mailer", "--command", "send")
	if !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "snavio acl list") {
		t.Fatalf("revoke missing: %v", err)
	}
	if err := e.Run(t, NewCmdList(td, nil), "--source", "acme/billing"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), "revoked 2026-11-21T12:01:00Z") {
		t.Fatalf("list after revoke:\n%s", e.Out)
	}
	// Granting a revoked grant again restores it.
	if err := e.Run(t, NewCmdGrant(d, nil), triple...); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || res.Summary.Update != 1 {
		t.Fatalf("regrant: %s", e.Out)
	}
	if err := e.Run(t, NewCmdList(d, nil), "--source", "bad"); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("bad filter: %v", err)
	}
	if err := e.Run(t, NewCmdGrant(e.Deps("acme", output.JSON), nil), triple...); !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("tenant grant: %v", err)
	}
}
