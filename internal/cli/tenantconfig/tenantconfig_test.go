package tenantconfig

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/control"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type env struct {
	srv      *httptest.Server
	reg      *memstore.Registry
	clk      *clock.Fake
	out, err *bytes.Buffer
	requests []string
}

func newEnv(t *testing.T) *env {
	e := &env{reg: memstore.NewRegistry(), clk: clock.NewFake(t0), out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	api, err := control.New(control.Options{Registry: e.reg, Clock: e.clk, Auth: control.ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	e.srv = httptest.NewServer(servertest.OperatorAndAcme().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests = append(e.requests, r.Method+" "+r.URL.RequestURI())
		if r.URL.Path == "/v1/whoami" { // serve's, for the token's tenant
			p, ok := server.PrincipalFrom(r.Context())
			if !ok {
				http.Error(w, `{"error":"unknown token"}`, http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]any{"operator": p.Operator, "tenant": p.Tenant})
			return
		}
		api.Handler().ServeHTTP(w, r)
	})))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *env) deps(token string, f output.Format) route.Deps {
	return route.Deps{
		API: func() (*platform.API, error) {
			return platform.NewAPI(e.srv.URL, func() (string, error) { return token, nil }, nil), nil
		},
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(e.out, f, output.NewStyles(e.out, false)), nil
		},
		ErrOut: e.err, In: strings.NewReader(""), Now: e.clk.Now,
	}
}

func (e *env) run(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.err.Reset()
	e.requests = nil
	cmd.SetArgs(args)
	cmd.SetOut(e.err)
	cmd.SetErr(e.err)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.ExecuteContext(t.Context())
}

func TestArgs(t *testing.T) {
	e := newEnv(t)
	for args, want := range map[string]string{"": "", "acme": "acme", "a.b-c_1": "a.b-c_1", "-x": "usage", "a/b": "usage", "a b": "usage", strings.Repeat("a", 65): "usage"} {
		var got *Options
		var argv []string
		if args != "" {
			argv = []string{args}
		}
		err := e.run(t, NewCmdWith(e.deps("op", output.JSON), func(_ context.Context, o *Options) error { got = o; return nil }), argv...)
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
	if err := e.run(t, NewCmdWith(e.deps("op", output.JSON), nil), "a", "b"); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("two args: %v", err)
	}
}

func TestTenantConfig(t *testing.T) {
	e := newEnv(t)
	var k control.KeyResult
	a := platform.NewAPI(e.srv.URL, func() (string, error) { return "op", nil }, nil)
	if err := a.Do(t.Context(), "POST", "/v1/keys/create", nil, control.KeyRequest{Source: "acme/billing"}, &k); err != nil {
		t.Fatal(err)
	}
	secret := base64.StdEncoding.EncodeToString(k.Secret)

	// A tenant reads its own without naming it; the table hides secrets.
	if err := e.run(t, NewCmdWith(e.deps("acme", output.Table), nil)); err != nil {
		t.Fatal(err)
	}
	if len(e.requests) != 2 || e.requests[0] != "GET /v1/whoami" || e.requests[1] != "GET /v1/tenants/acme/config" {
		t.Fatalf("request = %v", e.requests)
	}
	if !strings.Contains(e.out.String(), "acme/billing   hmac-v1   2026-11-21T12:00:00Z") || strings.Contains(e.out.String(), secret) || !strings.Contains(e.err.String(), "Secrets are left out") {
		t.Fatalf("table:\n%s\n%s", e.out, e.err)
	}
	// JSON is the document as producers get it, secret included.
	if err := e.run(t, NewCmdWith(e.deps("acme", output.JSON), nil), "acme"); err != nil {
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
	if err := json.Unmarshal(e.out.Bytes(), &doc); err != nil || doc.Tenant != "acme" || len(doc.Services) != 1 || doc.Services[0].Current.Secret != secret {
		t.Fatalf("json: %s (%v)", e.out, err)
	}
	// Another tenant's: 403 with the token hint.
	err := e.run(t, NewCmdWith(e.deps("acme", output.JSON), nil), "globex")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "SNAVIO_TOKEN") {
		t.Fatalf("other tenant: %v", err)
	}
	// The operator must name one.
	err = e.run(t, NewCmdWith(e.deps("op", output.JSON), nil))
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "snavio tenant-config TENANT") {
		t.Fatalf("operator without tenant: %v", err)
	}
	err = e.run(t, NewCmdWith(e.deps("op", output.Table), nil), "globex")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "snavio key create --service globex/<service>") {
		t.Fatalf("tenant without keys: %v", err)
	}
}
