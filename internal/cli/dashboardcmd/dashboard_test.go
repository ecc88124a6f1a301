package dashboardcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
)

// fixture runs the command against settings s, printing format.
type fixture struct {
	out     bytes.Buffer
	opened  []string
	openErr error
}

func (f *fixture) run(t *testing.T, s *config.Settings, format output.Format, args ...string) error {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	cmd := NewCmd(&cmdutil.Factory{IOStreams: ios}, func(ctx context.Context, o *Options) error {
		o.Settings = func() (*config.Settings, error) { return s, nil }
		o.Printer = func() (*output.Printer, error) {
			return output.NewPrinter(&f.out, format, output.NewStyles(&f.out, false)), nil
		}
		o.Out = &f.out
		o.Open = func(url string) error { f.opened = append(f.opened, url); return f.openErr }
		return run(ctx, o)
	})
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	return cmd.ExecuteContext(t.Context())
}

// dashboardServer answers the sign-in page as serve does.
func dashboardServer(t *testing.T, status int) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ui/signin" {
			http.NotFound(w, r)
			return
		}
		w.WriteHeader(status)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func local(endpoint string) *config.Settings {
	return &config.Settings{ProfileName: "default", Kind: config.KindLocal, EndpointURL: endpoint, DataDir: "/data"}
}

func TestPrintsTheURLOfALocalProfile(t *testing.T) {
	url := dashboardServer(t, http.StatusOK)
	var f fixture
	if err := f.run(t, local(url), output.Table); err != nil {
		t.Fatal(err)
	}
	want := "Dashboard: " + url + "/\nSign in with the operator token (/data/operator.token) or a tenant token (snavio token create --tenant T).\n"
	if f.out.String() != want || len(f.opened) != 0 {
		t.Fatalf("out %q, opened %v; want %q and no browser", f.out.String(), f.opened, want)
	}

	f = fixture{}
	if err := f.run(t, local(url+"/"), output.JSON, "--open"); err != nil {
		t.Fatal(err)
	}
	var got Info
	if err := json.Unmarshal(f.out.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	if got != (Info{Profile: "default", URL: url + "/", OperatorTokenFile: "/data/operator.token", Opened: true}) || len(f.opened) != 1 || f.opened[0] != url+"/" {
		t.Fatalf("json %+v, opened %v", got, f.opened)
	}
}

func TestAnAWSProfileNeedsALocalOne(t *testing.T) {
	var f fixture
	err := f.run(t, &config.Settings{ProfileName: "prod", Kind: config.KindAWS}, output.Table)
	if err == nil || !strings.Contains(err.Error(), `profile "prod" is an aws profile, and the dashboard needs a local profile for now`) || cmdutil.ExitCode(err) != cmdutil.ExitError {
		t.Fatalf("err %v (exit %d); want the local-profile message, exit 1", err, cmdutil.ExitCode(err))
	}
	if f.out.Len() != 0 {
		t.Fatalf("printed %q", f.out.String())
	}
}

func TestNothingAnswering(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	var f fixture
	err = f.run(t, local(url), output.Table, "--open")
	if err == nil || !strings.Contains(err.Error(), "nothing answers at "+url+"/") || !strings.Contains(err.Error(), "snavio dispatch serve") || len(f.opened) != 0 {
		t.Fatalf("err %v, opened %v", err, f.opened)
	}

	// Something that is not a snavio platform.
	err = f.run(t, local(dashboardServer(t, http.StatusNotFound)), output.Table)
	if err == nil || !strings.Contains(err.Error(), "404 Not Found, not the dashboard's sign-in page") {
		t.Fatalf("err %v", err)
	}
}

func TestABrowserThatCannotOpen(t *testing.T) {
	url := dashboardServer(t, http.StatusOK)
	f := fixture{openErr: errors.New("exec: \"xdg-open\": executable file not found in $PATH")}
	err := f.run(t, local(url), output.Table, "--open")
	if err == nil || !strings.Contains(err.Error(), "opening a browser failed") || !strings.Contains(err.Error(), "open "+url+"/ yourself") {
		t.Fatalf("err %v", err)
	}
}

func TestArguments(t *testing.T) {
	var f fixture
	err := f.run(t, local("http://127.0.0.1:1"), output.Table, "extra")
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("an argument: %v (exit %d); want a usage error", err, cmdutil.ExitCode(err))
	}
}
