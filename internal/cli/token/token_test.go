package token

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/secretcmd"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

type fixture struct {
	store       *server.FileTokenStore
	out, errOut *bytes.Buffer
	format      output.Format
	// tenant, when set, makes requests a tenant's.
	tenant   string
	requests int
	deps     secretcmd.Deps
}

// newFixture serves the real token API over a real token store.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	fx := &fixture{out: &bytes.Buffer{}, errOut: &bytes.Buffer{}, format: output.JSON}
	var err error
	fx.store, err = server.OpenFileTokenStore(filepath.Join(t.TempDir(), server.TenantTokensFile), clock.NewFake(t0))
	if err != nil {
		t.Fatal(err)
	}
	api, err := controlapi.NewTokenAPI(controlapi.TokenOptions{Tokens: fx.store})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	authed := servertest.Authenticated(mux, servertest.Tenant(&fx.tenant))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fx.requests++
		authed.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	client := platform.NewLocal(srv.URL, nil, nil)
	fx.deps = secretcmd.Deps{
		Platform: func() (platform.Platform, error) { return client, nil },
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(fx.out, fx.format, output.NewStyles(fx.out, false)), nil
		},
		ErrOut: fx.errOut,
	}
	return fx
}

func (fx *fixture) run(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	fx.out.Reset()
	fx.errOut.Reset()
	cmd.SetArgs(args)
	cmd.SetOut(fx.errOut)
	cmd.SetErr(fx.errOut)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	cmd.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return &cmdutil.UsageError{Err: err} })
	return cmd.ExecuteContext(context.Background())
}

func TestCreateListRevoke(t *testing.T) {
	fx := newFixture(t)
	if err := fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	var c Created
	if err := json.Unmarshal(fx.out.Bytes(), &c); err != nil {
		t.Fatalf("%s: %v", fx.out, err)
	}
	if c.Tenant != "acme" || !strings.HasPrefix(c.Token, "snvt_") || c.TokenFile != "" || !strings.Contains(c.Notice, "shown once") {
		t.Fatalf("created %+v", c)
	}
	if p, err := fx.store.Authenticate(t.Context(), c.Token); err != nil || p.Tenant != "acme" {
		t.Fatalf("the printed token authenticates as %v, %v", p, err)
	}
	if fx.errOut.Len() != 0 {
		t.Errorf("JSON output wrote a note: %s", fx.errOut)
	}

	// Table: one row under upper-case headers, like every other table;
	// the notice on stderr.
	fx.format = output.Table
	if err := fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "globex"); err != nil {
		t.Fatal(err)
	}
	if !regexpMatch(t, `\A(ID +TENANT +CREATED +TOKEN \(SHOWN ONCE\))\ntok_[0-9a-f]{12} +globex +2026-11-21T12:00:00Z +snvt_[A-Za-z0-9_-]{43}\n\z`, fx.out.String()) || !strings.Contains(fx.errOut.String(), "Note: this token is shown once") {
		t.Fatalf("table:\n%s\nstderr: %s", fx.out, fx.errOut)
	}

	if err := fx.run(t, NewCmdList(fx.deps, nil), "--tenant", "acme"); err != nil {
		t.Fatal(err)
	}
	if !regexpMatch(t, `(?m)^ID +TENANT +CREATED\n`+c.ID+` +acme +2026-11-21T12:00:00Z\n$`, fx.out.String()) {
		t.Fatalf("list table:\n%s", fx.out)
	}
	if strings.Contains(fx.out.String(), "snvt_") {
		t.Fatal("list shows a token")
	}

	fx.format = output.NDJSON
	if err := fx.run(t, NewCmdRevoke(fx.deps, nil), c.ID); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(fx.out.String(), `"revoked":true`) || !strings.Contains(fx.out.String(), `"id":"`+c.ID+`"`) {
		t.Fatalf("revoke: %s", fx.out)
	}
	if _, err := fx.store.Authenticate(t.Context(), c.Token); !errors.Is(err, server.ErrUnknownToken) {
		t.Fatalf("revoked token authenticates: %v", err)
	}
	// Again: 404 with the list command as the fix, exit 1.
	err := fx.run(t, NewCmdRevoke(fx.deps, nil), c.ID)
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "snavio token list") || !strings.Contains(err.Error(), "HTTP 404") {
		t.Fatalf("second revoke: %v (exit %d)", err, cmdutil.ExitCode(err))
	}

	// An empty list is [] in JSON.
	fx.format = output.JSON
	if err := fx.run(t, NewCmdList(fx.deps, nil), "--tenant", "nobody"); err != nil {
		t.Fatal(err)
	}
	if strings.TrimSpace(fx.out.String()) != "[]" {
		t.Fatalf("empty list: %q", fx.out)
	}
}

func regexpMatch(t *testing.T, re, s string) bool {
	t.Helper()
	return mustCompile(t, re).MatchString(s)
}

func TestTokenFile(t *testing.T) {
	fx := newFixture(t)
	path := filepath.Join(t.TempDir(), "acme.token")
	if err := fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "acme", "--token-file", path); err != nil {
		t.Fatal(err)
	}
	var c Created
	if err := json.Unmarshal(fx.out.Bytes(), &c); err != nil {
		t.Fatal(err)
	}
	if c.Token != "" || c.TokenFile != path || strings.Contains(fx.out.String(), "snvt_") {
		t.Fatalf("with --token-file the output carries the token: %s", fx.out)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v", fi.Mode())
	}
	if p, err := fx.store.Authenticate(t.Context(), strings.TrimSpace(string(b))); err != nil || p.Tenant != "acme" {
		t.Fatalf("the file's token authenticates as %v, %v", p, err)
	}
	// An existing file is never overwritten, and nothing is issued.
	before, n := len(fx.store.List()), fx.requests
	err = fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "acme", "--token-file", path)
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "exists") {
		t.Fatalf("existing file: %v", err)
	}
	if len(fx.store.List()) != before || fx.requests != n {
		t.Fatal("a token was issued for a file that cannot be written")
	}
	if b2, _ := os.ReadFile(path); !bytes.Equal(b, b2) {
		t.Fatal("the existing token file changed")
	}
	// A directory that does not exist: usage error, nothing issued.
	err = fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "acme", "--token-file", filepath.Join(t.TempDir(), "no", "such", "dir", "f"))
	if cmdutil.ExitCode(err) != cmdutil.ExitUsage || len(fx.store.List()) != before {
		t.Fatalf("missing directory: %v", err)
	}
	// The server refuses (a tenant issuing): the file made for it is removed.
	fx.tenant = "acme"
	other := filepath.Join(t.TempDir(), "x.token")
	err = fx.run(t, NewCmdCreate(fx.deps, nil), "--tenant", "acme", "--token-file", other)
	if err == nil || !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("tenant issuing: %v", err)
	}
	if _, serr := os.Stat(other); !os.IsNotExist(serr) {
		t.Fatalf("the token file of a refused request is left behind: %v", serr)
	}
}

func TestTenantSeesItsOwn(t *testing.T) {
	fx := newFixture(t)
	for _, tenant := range []string{"acme", "globex"} {
		if _, _, err := fx.store.Issue(tenant); err != nil {
			t.Fatal(err)
		}
	}
	fx.tenant = "acme"
	if err := fx.run(t, NewCmdList(fx.deps, nil)); err != nil {
		t.Fatal(err)
	}
	var l []wire.Token
	if err := json.Unmarshal(fx.out.Bytes(), &l); err != nil || len(l) != 1 || l[0].Tenant != "acme" {
		t.Fatalf("acme's list: %s %v", fx.out, err)
	}
	err := fx.run(t, NewCmdList(fx.deps, nil), "--tenant", "globex")
	if err == nil || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "SNAVIO_TOKEN") {
		t.Fatalf("acme listing globex: %v", err)
	}
	err = fx.run(t, NewCmdRevoke(fx.deps, nil), fx.store.List()[1].ID)
	if err == nil || !strings.Contains(err.Error(), "may not revoke") {
		t.Fatalf("acme revoking: %v", err)
	}
	if len(fx.store.List()) != 2 {
		t.Fatal("a tenant revoked a token")
	}
}

func TestBadInputSendsNothing(t *testing.T) {
	fx := newFixture(t)
	tests := []struct {
		cmd      *cobra.Command
		args     []string
		contains string
	}{
		{NewCmdCreate(fx.deps, nil), nil, "required flag"},
		{NewCmdCreate(fx.deps, nil), []string{"--tenant", ""}, "--tenant is empty"},
		{NewCmdCreate(fx.deps, nil), []string{"--tenant", "acme/billing"}, "not a tenant id"},
		{NewCmdCreate(fx.deps, nil), []string{"--tenant", "acme", "extra"}, "takes no arguments"},
		{NewCmdList(fx.deps, nil), []string{"--tenant", "-x"}, "not a tenant id"},
		{NewCmdList(fx.deps, nil), []string{"--tenant", ""}, "--tenant is empty"},
		{NewCmdRevoke(fx.deps, nil), nil, "ID"},
		{NewCmdRevoke(fx.deps, nil), []string{"snvt_abc"}, "not a token id"},
		{NewCmdRevoke(fx.deps, nil), []string{"tok_1", "tok_2"}, "ID"},
	}
	for _, tc := range tests {
		err := fx.run(t, tc.cmd, tc.args...)
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.contains) {
			t.Errorf("%s %v: %v (exit %d), want usage error with %q", tc.cmd.Name(), tc.args, err, cmdutil.ExitCode(err), tc.contains)
		}
	}
	if fx.requests != 0 {
		t.Fatalf("bad input sent %d requests", fx.requests)
	}
}

// TestRunFReceivesOptions: flags land in the options given to runF.
func TestRunFReceivesOptions(t *testing.T) {
	fx := newFixture(t)
	var got *CreateOptions
	cmd := NewCmdCreate(fx.deps, func(_ context.Context, o *CreateOptions) error { got = o; return nil })
	if err := fx.run(t, cmd, "--tenant", "acme", "--token-file", "f"); err != nil {
		t.Fatal(err)
	}
	if got.Tenant != "acme" || got.TokenFile != "f" {
		t.Fatalf("options %+v", got)
	}
}

func mustCompile(t *testing.T, re string) *regexp.Regexp {
	t.Helper()
	r, err := regexp.Compile(re)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
