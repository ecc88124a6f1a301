// Package dashboard implements `snavio dashboard`: the URL of the web
// dashboard of the profile's endpoint (docs/dashboard.md), checked and
// optionally opened in a browser.
package dashboardcmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	neturl "net/url"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// Timeout bounds the check that the dashboard answers.
const Timeout = 3 * time.Second

// Options are the inputs of `snavio dashboard`.
type Options struct {
	Settings func() (*config.Settings, error)
	Printer  func() (*output.Printer, error)
	Out      io.Writer
	// Open, with --open, shows url in a browser.
	Open   func(url string) error
	Client *http.Client
	// OpenBrowser is --open.
	OpenBrowser bool
}

// Info is what the command prints in JSON, YAML or NDJSON; a table is two
// lines for a person.
type Info struct {
	Profile string `json:"profile"`
	URL     string `json:"url"`
	// OperatorTokenFile is where the local platform keeps the operator's
	// sign-in token.
	OperatorTokenFile string `json:"operator_token_file"`
	Opened            bool   `json:"opened"`
}

// NewCmd builds `snavio dashboard`. runF replaces the run function in
// tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Settings: f.Settings, Printer: f.Printer, Out: f.IOStreams.Out, Open: openBrowser,
		Client: &http.Client{Timeout: Timeout, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
	cmd := &cobra.Command{
		Use:   "dashboard [--open]",
		Short: "Print (or open) the web dashboard's URL for this profile",
		Long: `Print the address of the web dashboard of the profile's platform, after
checking that it answers, and with --open show it in a browser.

Sign in on the page with a token: the operator token (the file printed
beside the URL) shows route health and every tenant; a tenant token from
"snavio token create --tenant T" shows that tenant's alerts, telemetry,
failures, grants and keys.

The dashboard needs a local profile for now: an aws profile exits 1 and
says so. Exit 1 also when nothing answers at the profile's endpoint.`,
		Example: `  snavio dashboard
  snavio dashboard --open
  snavio dashboard --profile staging -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts)
		},
	}
	cmd.Flags().BoolVar(&opts.OpenBrowser, "open", false, "show the dashboard in the default browser too")
	return cmd
}

func run(ctx context.Context, o *Options) error {
	s, err := o.Settings()
	if err != nil {
		return err
	}
	if s.Kind != config.KindLocal {
		return fmt.Errorf("profile %q is an aws profile, and the dashboard needs a local profile for now; choose one with --profile or `snavio profile use`, or run the platform on this machine with `snavio dispatch serve`", s.ProfileName)
	}
	info := Info{Profile: s.ProfileName, URL: strings.TrimSuffix(s.EndpointURL, "/") + "/",
		OperatorTokenFile: filepath.Join(s.DataDir, platform.OperatorTokenFile)}
	if err := check(ctx, o.Client, info.URL); err != nil {
		return err
	}
	if o.OpenBrowser {
		if err := o.Open(info.URL); err != nil {
			return fmt.Errorf("opening a browser failed (%w); open %s yourself", err, info.URL)
		}
		info.Opened = true
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(o.Out, "Dashboard: %s\nSign in with the operator token (%s) or a tenant token (snavio token create --tenant T).\n", info.URL, info.OperatorTokenFile)
		return err
	}
	return p.Print(info)
}

// check asks the dashboard's sign-in page, so that the URL printed is one
// that answers.
func check(ctx context.Context, c *http.Client, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"ui/signin", nil)
	if err != nil {
		return fmt.Errorf("endpoint %q: %w; fix the profile's endpoint (snavio profile show)", url, err)
	}
	resp, err := c.Do(req)
	if err != nil {
		var hint string
		if errors.Is(err, context.DeadlineExceeded) || strings.Contains(err.Error(), "Timeout") {
			hint = " in " + Timeout.String()
		}
		if ue := (*neturl.Error)(nil); errors.As(err, &ue) {
			err = ue.Err // the URL is in the message already
		}
		return fmt.Errorf("nothing answers at %s%s (%v): start the platform with `snavio dispatch serve`, or choose the profile of a running one with --profile", url, hint, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s answers %s, not the dashboard's sign-in page: is it a snavio platform of this version? Check with `snavio doctor`", url, resp.Status)
	}
	return nil
}

// openBrowser shows url with the desktop's opener.
func openBrowser(url string) error {
	var cmd *exec.Cmd
	switch runtime.GOOS {
	case "darwin":
		cmd = exec.Command("open", url)
	case "windows":
		cmd = exec.Command("rundll32", "url.dll,FileProtocolHandler", url)
	default:
		cmd = exec.Command("xdg-open", url)
	}
	return cmd.Run()
}
