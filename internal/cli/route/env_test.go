package route

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/control"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// testEnv is a control API over a memory registry, and the Deps of
// commands that talk to it with token.
type testEnv struct {
	srv      *httptest.Server
	reg      *memstore.Registry
	out, err *bytes.Buffer
	// requests records "METHOD PATH?QUERY" of each call.
	requests []string
}

func newTestEnv(t *testing.T, queues control.Queues) *testEnv {
	t.Helper()
	e := &testEnv{reg: memstore.NewRegistry(), out: &bytes.Buffer{}, err: &bytes.Buffer{}}
	api, err := control.New(control.Options{Registry: e.reg, Clock: clock.NewFake(t0), Queues: queues, Auth: control.ContextAuth{}})
	if err != nil {
		t.Fatal(err)
	}
	h := api.Handler()
	e.srv = httptest.NewServer(servertest.OperatorAndAcme().Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.requests = append(e.requests, r.Method+" "+r.URL.RequestURI())
		h.ServeHTTP(w, r)
	})))
	t.Cleanup(e.srv.Close)
	return e
}

func (e *testEnv) deps(token string, format output.Format) Deps {
	return Deps{
		API: func() (*platform.API, error) {
			return platform.NewAPI(e.srv.URL, func() (string, error) { return token, nil }, nil), nil
		},
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(e.out, format, output.NewStyles(e.out, false)), nil
		},
		ErrOut: e.err,
		In:     strings.NewReader(""),
		Now:    func() time.Time { return t0 },
	}
}

// run executes cmd with args and returns its error; output is in e.out
// and e.err (reset first).
func (e *testEnv) run(t *testing.T, cmd *cobra.Command, args ...string) error {
	t.Helper()
	e.out.Reset()
	e.err.Reset()
	e.requests = nil
	cmd.SetArgs(args)
	cmd.SetOut(e.err)
	cmd.SetErr(e.err)
	cmd.SilenceErrors = true
	cmd.SilenceUsage = true
	return cmd.ExecuteContext(t.Context())
}
