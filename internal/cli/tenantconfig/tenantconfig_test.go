package tenantconfig

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server"
)

// newEnv serves the control API and, as serve does, GET /v1/whoami, which
// the command asks for the token's tenant.
func newEnv(t *testing.T) *routetest.Env {
	return routetest.New(t, nil, func(mux *http.ServeMux, _ *routetest.Env) {
		mux.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, r *http.Request) {
			p, ok := server.PrincipalFrom(r.Context())
			if !ok {
				http.Error(w, `{"error":"unknown token"}`, http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"operator": p.Operator, "tenant": p.Tenant})
		})
	})
}

func TestArgs(t *testing.T) {
	e := newEnv(t)
	for args, want := range map[string]string{"": "", "acme": "acme", "a.b-c_1": "a.b-c_1", "-x": "usage", "a/b": "usage", "a b": "usage", strings.Repeat("a", 65): "usage"} {
		var got *Options
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		err := e.Run(t, NewCmdWith(e.Deps("op", output.JSON), func(_ context.Context, o *Options) error { got = o; return nil }), argv...)
		if want == "usage" {
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage {
				t.Errorf("%q: err %v", args, err)
			}
			continue
		}
		if err != nil || got.Tenant != want {
			t.Errorf("%q: err %v, tenant %+v", args, err, got)
		}
	}
	if err := e.Run(t, NewCmdWith(e.Deps("op", output.JSON), nil), "a", "b"); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("two args: %v", err)
	}
}

func TestTenantConfig(t *testing.T) {
	e := newEnv(t)
	a := platform.NewLocal(e.Srv.URL, func() (string, error) { return "op", nil }, nil)
	k, err := a.CreateKey(t.Context(), wire.KeyRequest{Source: "acme/billing"})
	if err != nil {
		t.Fatal(err)
	}
	secret := base64.StdEncoding.EncodeToString(k.Secret)

	// A tenant reads its own without naming it; the table hides secrets.
	if err := e.Run(t, NewCmdWith(e.Deps("acme", output.Table), nil)); err != nil {
		t.Fatal(err)
	}
	if len(e.Requests) != 2 || e.Requests[0] != "GET /v1/whoami" || e.Requests[1] != "GET /v1/tenants/acme/config" {
		t.Fatalf("request = %v", e.Requests)
	}
	if !strings.Contains(e.Out.String(), "acme/billing   hmac-v1   2026-11-21T12:00:00Z") || strings.Contains(e.Out.String(), secret) || !strings.Contains(e.Err.String(), "Secrets are left out") {
		t.Fatalf("table:\n%s\n%s", e.Out, e.Err)
	}
	// JSON is the document as producers get it, secret included.
	if err := e.Run(t, NewCmdWith(e.Deps("acme", output.JSON), nil), "acme"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Tenant   string `json:"tenant"`
		Services []struct {
			Source  string `json:"source"`
			Current struct {
				Secret string `json:"secret"`
			} `json:"current"`
		} `json:"services"`
	}
	if err := json.Unmarshal(e.Out.Bytes(), &doc); err != nil || doc.Tenant != "acme" || len(doc.Services) != 1 || doc.Services[0].Current.Secret != secret {
		t.Fatalf("json: %s (%v)", e.Out, err)
	}
	// Another tenant's: 403 with the token hint.
	err = e.Run(t, NewCmdWith(e.Deps("acme", output.JSON), nil), "globex")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "SNAVIO_TOKEN") {
		t.Fatalf("other tenant: %v", err)
	}
	// The operator must name one.
	err = e.Run(t, NewCmdWith(e.Deps("op", output.JSON), nil))
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "snavio tenant-config TENANT") {
		t.Fatalf("operator without tenant: %v", err)
	}
	err = e.Run(t, NewCmdWith(e.Deps("op", output.Table), nil), "globex")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "snavio key create --service globex/<service>") {
		t.Fatalf("tenant without keys: %v", err)
	}
}
