// Package routetest runs registry commands (route, acl, key,
// tenant-config) against a real control API over a memory registry,
// behind the fake bearer tokens of servertest.
package routetest

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

// T0 is the fake clock's start.
var T0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// Env is a control API server and what the commands run against it wrote.
type Env struct {
	Srv *httptest.Server
	Reg *memstore.Registry
	Clk *clock.Fake
	// Out and Err are the last Run's output and errors.
	Out, Err *bytes.Buffer
	// Requests records "METHOD PATH?QUERY" of each call of the last Run.
	Requests []string
}

// New serves the control API, with queues (nil for none), behind
// servertest.OperatorAndAcme ("op" is the operator, "acme" the tenant
// acme); each mount adds handlers to the same mux, for the routes other
// packages serve.
func New(t *testing.T, queues controlapi.RouteQueues, mount ...func(mux *http.ServeMux, e *Env)) *Env {
	t.Helper()
	e := &Env{Reg: memstore.NewRegistry(), Clk: clock.NewFake(T0), Out: &bytes.Buffer{}, Err: &bytes.Buffer{}}
	api, err := controlapi.NewRegistryAPI(controlapi.RegistryOptions{Registry: e.Reg, Clock: e.Clk, Queues: queues, Auth: controlapi.ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	for _, m := range mount {
		m(mux, e)
	}
	authed := servertest.OperatorAndAcme().Handler(mux)
	e.Srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.Requests = append(e.Requests, r.Method+" "+r.URL.RequestURI())
		authed.ServeHTTP(w, r)
	}))
	t.Cleanup(e.Srv.Close)
	return e
}

// Deps are a command's dependencies that call the server with token and
// print in format f.
func (e *Env) Deps(token string, f output.Format) route.Deps {
	return route.Deps{
		Platform: func() (platform.Platform, error) {
			return platform.NewLocal(e.Srv.URL, func() (string, error) { return token, nil }, nil), nil
		},
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(e.Out, f, output.NewStyles(e.Out, false)), nil
		},
		ErrOut: e.Err, In: strings.NewReader(""), Now: e.Clk.Now,
	}
}

// Run runs cmd with args, after clearing the last run's output and
// requests.
func (e *Env) Run(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	e.Out.Reset()
	e.Err.Reset()
	e.Requests = nil
	cmd.SetArgs(args)
	cmd.SetOut(e.Err)
	cmd.SetErr(e.Err)
	cmd.SilenceErrors, cmd.SilenceUsage = true, true
	return cmd.ExecuteContext(t.Context())
}
