package key

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

func TestRotateFlags(t *testing.T) {
	tests := []struct {
		args  []string
		want  time.Time
		usage string
	}{
		{nil, time.Time{}, ""},
		{[]string{"--activate-in", "1h"}, t0.Add(time.Hour), ""},
		{[]string{"--activate-at", "2026-12-01T00:00:00Z"}, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), ""},
		{[]string{"--activate-at", "tomorrow"}, time.Time{}, "use RFC 3339"},
		{[]string{"--activate-at", "2020-01-01T00:00:00Z"}, time.Time{}, "not in the future"},
		{[]string{"--activate-at", "2026-12-01T00:00:00Z", "--activate-in", "1h"}, time.Time{}, "not both"},
		{[]string{"--activate-in", "90"}, time.Time{}, "give a unit"},
		{[]string{"--service", "billing"}, time.Time{}, `invalid --service "billing"`},
	}
	for _, tc := range tests {
		e := newEnv(t)
		var got *Options
		err := e.run(t, NewCmdRotate(e.deps("op", output.JSON), func(_ context.Context, o *Options) error { got = o; return nil }), append([]string{"--service", "acme/billing"}, tc.args...)...)
		if tc.usage != "" {
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.usage) {
				t.Errorf("%v: err = %v, want usage error with %q", tc.args, err, tc.usage)
			}
			continue
		}
		if err != nil || !got.ActivateAt.Equal(tc.want) {
			t.Errorf("%v: err %v, activate at %v, want %v", tc.args, err, got.ActivateAt, tc.want)
		}
	}
}

func TestCreateShowsTheSecretOnceRotateAndList(t *testing.T) {
	e := newEnv(t)
	// Table: the secret is labelled, and stderr says it is shown once.
	if err := e.run(t, NewCmdCreate(e.deps("op", output.Table), nil), "--service", "acme/billing"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.out.String(), "SECRET (base64, shown once)") || !strings.Contains(e.err.String(), "shown once and never again") {
		t.Fatalf("create table:\n%s\n%s", e.out, e.err)
	}
	line := e.out.String()[strings.Index(e.out.String(), "SECRET (base64, shown once)"):]
	secret := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(line, "\n", 2)[0], "SECRET (base64, shown once)"))
	if b, err := base64.StdEncoding.DecodeString(secret); err != nil || len(b) < 32 {
		t.Fatalf("secret %q: %v", secret, err)
	}
	err := e.run(t, NewCmdCreate(e.deps("op", output.JSON), nil), "--service", "acme/billing")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "already has keys") || !strings.Contains(err.Error(), "snavio key rotate --service acme/billing") {
		t.Fatalf("second create: %v", err)
	}

	// JSON: the secret once, with the notice.
	e.clk.Advance(time.Hour)
	if err := e.run(t, NewCmdRotate(e.deps("op", output.JSON), nil), "--service", "acme/billing"); err != nil {
		t.Fatal(err)
	}
	var s Secret
	if err := json.Unmarshal(e.out.Bytes(), &s); err != nil || s.VersionID != "hmac-v2" || len(s.Secret) < 32 || s.Notice != Notice || e.err.Len() != 0 {
		t.Fatalf("rotate json: %s (%v) stderr %q", e.out, err, e.err)
	}
	if strings.Count(e.out.String(), base64.StdEncoding.EncodeToString(s.Secret)) != 1 {
		t.Fatalf("the secret appears more than once:\n%s", e.out)
	}

	// List: never a secret, in any format; a tenant may list.
	for _, f := range []output.Format{output.Table, output.JSON, output.YAML} {
		if err := e.run(t, NewCmdList(e.deps("acme", f), nil), "--tenant", "acme"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(e.out.String()), "secret") || strings.Contains(e.out.String(), base64.StdEncoding.EncodeToString(s.Secret)) {
			t.Fatalf("list %s shows a secret:\n%s", f, e.out)
		}
		if !strings.Contains(e.out.String(), "hmac-v2") {
			t.Fatalf("list %s:\n%s", f, e.out)
		}
	}
	if e.requests[0] != "GET /v1/registry?kind=key&tenant=acme" {
		t.Fatalf("list request = %v", e.requests)
	}
	if err := e.run(t, NewCmdList(e.deps("op", output.Table), nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.out.String(), "acme/billing   hmac-v2   hmac-v1,hmac-v2") {
		t.Fatalf("list table:\n%s", e.out)
	}

	err = e.run(t, NewCmdRotate(e.deps("op", output.JSON), nil), "--service", "acme/none")
	if !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "snavio key list") {
		t.Fatalf("rotate missing: %v", err)
	}
	if err := e.run(t, NewCmdCreate(e.deps("acme", output.JSON), nil), "--service", "acme/shop"); !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("tenant create: %v", err)
	}
}
