// Package doctor implements `snavio doctor`: a table of checks of the
// configuration, the profile, the dispatcher's reachability and health,
// the credentials, and the local clock's skew against the dispatcher; on
// an aws profile, of the AWS credentials and the deployment (aws.go).
package doctor

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Statuses of a check.
const (
	OK   = "ok"
	Warn = "warn"
	Fail = "fail"
	// Skip: not run, because a check it depends on failed or it does not
	// apply to the profile's kind.
	Skip = "skip"
)

// DefaultReplayWindow is the dispatcher's default replay window: a
// command's timestamp must be within ±60 s of the dispatcher's clock.
const DefaultReplayWindow = 60 * time.Second

// Skew thresholds, as fractions of the replay window: warn from half of
// it, fail from 0.8 of it (where the dispatcher's
// snavio.telemetry.skew_near_limit fires).
const (
	WarnFraction = 0.5
	FailFraction = 0.8
)

// Check is one line of the report.
type Check struct {
	Name   string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// Report is what doctor prints.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// TableHeader implements output.Tabular.
func (Report) TableHeader() []string { return []string{"check", "status", "detail", "fix"} }

// TableRows implements output.Tabular.
func (r Report) TableRows() [][]string {
	rows := make([][]string, len(r.Checks))
	for i, c := range r.Checks {
		rows[i] = []string{c.Name, c.Status, c.Detail, c.Fix}
	}
	return rows
}

// Options are the inputs of `snavio doctor`.
type Options struct {
	Paths    func() (config.Paths, error)
	Config   func() (*config.File, error)
	Settings func() (*config.Settings, error)
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	// Clock times the requests for the skew estimate.
	Clock clock.Clock
	// Timeout bounds each request.
	Timeout time.Duration
	// ReplayWindow is the dispatcher's replay window, when the server
	// does not say (--replay-window).
	ReplayWindow time.Duration
	// AWSConfig loads an aws profile's SDK configuration (nil:
	// platform.AWSConfig in the profile's region).
	AWSConfig func(context.Context, platform.Target) (aws.Config, error)
}

// NewCmd builds `snavio doctor`. runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Paths: f.Paths, Config: f.Config, Settings: f.Settings, Platform: f.Platform, Printer: f.Printer, Clock: clock.System()}
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check the config, profile, dispatcher or AWS deployment, credentials and clock skew",
		Long: `Run the checks that explain most "it does not work" reports. On a local
profile, in order:

  config        the config file parses (or there is none: the built-in profile)
  profile       the selected profile resolves (flags, SNAVIO_* env, file)
  reachable     the dispatcher answers GET /healthz
  ready         GET /readyz says it takes traffic
  credentials   GET /v1/whoami accepts the token (SNAVIO_TOKEN, or
                operator.token in the profile's data_dir)
  clock skew    the local clock against the dispatcher's: the dispatcher
                rejects commands whose timestamp is outside its replay
                window (±60 s by default), so skew warns from half the window
                and fails from 0.8 of it

The skew is estimated from one request: the server read its clock at about
the midpoint of the round trip, so the estimate is within ± half the round
trip. Checks that depend on a failed one are skipped.

On an aws profile, after config and profile:

  credentials   STS GetCallerIdentity: who the AWS credentials are, which
                account, which region
  role          the profile's role_arn assumed (skipped without one)
  clock skew    the local clock against STS's Date header, as above
  bus           EventBridge DescribeEventBus of bus_name, or the env's bus
  tables        DynamoDB DescribeTable and DescribeTimeToLive: the env's
                (or table_prefix's) flow, registry, changelog and outbox
                tables ACTIVE, TTL on expires_at for flow and outbox
  snapshot      S3 HeadBucket of snapshot_bucket (or the env's) and
                HeadObject of the latest full snapshot: ok up to 3m old,
                a warning up to 30m, past which cold starts refuse it
  control api   who the control API says the caller is (control_url)
  emit role     STS AssumeRole of emit_role_arn with external_id (skipped
                without one)

Exit codes: 0 no check failed (warnings allowed); 1 a check failed; 2 bad
flags.`,
		Example: `  snavio doctor
  snavio doctor --profile prod -o json
  snavio doctor --endpoint-url http://127.0.0.1:8787`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.Timeout <= 0 || opts.Timeout > time.Minute {
				return cmdutil.Usagef("--timeout %v: must be above 0 and at most 1m", opts.Timeout)
			}
			if opts.ReplayWindow < time.Second || opts.ReplayWindow > time.Hour {
				return cmdutil.Usagef("--replay-window %v: must be 1s to 1h (the dispatcher's default is 60s)", opts.ReplayWindow)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
	cmd.Flags().DurationVar(&opts.Timeout, "timeout", 5*time.Second, "time limit of each request")
	cmd.Flags().DurationVar(&opts.ReplayWindow, "replay-window", DefaultReplayWindow, "the dispatcher's replay window, when the server does not report it")
	return cmd
}

// EstimateSkew estimates how far the local clock is ahead of the server's
// (negative: behind) from one request sent at local time sent and
// answered at local time received, in which the server read its clock as
// server. Assuming symmetric latency, the server read its clock at the
// local midpoint of the round trip; the estimate is within ±uncertainty,
// half the round trip.
func EstimateSkew(sent, received, server time.Time) (skew, uncertainty time.Duration) {
	rtt := received.Sub(sent)
	mid := sent.Add(rtt / 2)
	return mid.Sub(server), rtt / 2
}

// JudgeSkew classifies skew against the replay window.
func JudgeSkew(skew, uncertainty, window time.Duration) Check {
	return judgeSkew(skew, uncertainty, window, "the dispatcher")
}

// judgeSkew is JudgeSkew against a named clock.
func judgeSkew(skew, uncertainty, window time.Duration, against string) Check {
	abs := skew
	if abs < 0 {
		abs = -abs
	}
	dir := "ahead of"
	if skew < 0 {
		dir = "behind"
	}
	c := Check{Name: "clock skew", Status: OK}
	c.Detail = fmt.Sprintf("local clock %s %s %s (±%s); replay window ±%s", fmtDur(abs), dir, against, fmtDur(uncertainty), window)
	ntp := "sync this machine's clock with NTP (e.g. `timedatectl set-ntp true`, or check chronyd/ntpd); on EC2 use the Amazon Time Sync Service at 169.254.169.123"
	switch {
	case float64(abs) >= FailFraction*float64(window):
		c.Status = Fail
		c.Detail += fmt.Sprintf(": at or past %.0f%% of the window; commands signed here are rejected (or about to be) as outside the replay window", FailFraction*100)
		c.Fix = ntp
	case float64(abs) >= WarnFraction*float64(window):
		c.Status = Warn
		c.Detail += fmt.Sprintf(": past %.0f%% of the window; a little more drift and commands signed here will be rejected", WarnFraction*100)
		c.Fix = ntp
	}
	return c
}

func firstSet(v, otherwise string) string {
	if v != "" {
		return v
	}
	return otherwise
}

func fmtDur(d time.Duration) string {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond).String()
	case d >= time.Millisecond:
		return d.Round(100 * time.Microsecond).String()
	}
	return d.String()
}

func (o *Options) get(ctx context.Context, pc platform.Platform, path platform.ProbePath, auth bool) platform.Probe {
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	return pc.Probe(ctx, path, auth, o.Clock.Now)
}

// Run runs the checks, prints the report, and fails if a check failed.
func Run(ctx context.Context, o *Options) error {
	r := check(ctx, o)
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(r); err != nil {
		return err
	}
	if !r.OK {
		n := 0
		for _, c := range r.Checks {
			if c.Status == Fail {
				n++
			}
		}
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitError, Err: fmt.Errorf("%d of %d checks failed; each failed check says how to fix it", n, len(r.Checks))}
	}
	return nil
}

func check(ctx context.Context, o *Options) (r Report) {
	add := func(c Check) { r.Checks = append(r.Checks, c) }
	skipRest := func(from int, why string) {
		for _, n := range []string{"config", "profile", "reachable", "ready", "credentials", "clock skew"}[from:] {
			add(Check{Name: n, Status: Skip, Detail: why})
		}
	}
	defer func() {
		r.OK = true
		for _, c := range r.Checks {
			r.OK = r.OK && c.Status != Fail
		}
	}()

	// config
	paths, err := o.Paths()
	if err != nil {
		add(Check{Name: "config", Status: Fail, Detail: err.Error(), Fix: "set HOME or XDG_CONFIG_HOME, or pass --config FILE"})
		skipRest(1, "needs the config")
		return r
	}
	if _, err := o.Config(); err != nil {
		add(Check{Name: "config", Status: Fail, Detail: err.Error(), Fix: "fix the YAML (see `snavio help config`), or move the file away to use the built-in profile"})
		skipRest(1, "needs the config")
		return r
	}
	if _, err := os.Stat(paths.ConfigFile); errors.Is(err, os.ErrNotExist) {
		add(Check{Name: "config", Status: OK, Detail: "no config file at " + paths.ConfigFile + ": the built-in local profile applies"})
	} else {
		add(Check{Name: "config", Status: OK, Detail: paths.ConfigFile + " parses"})
	}

	// profile
	s, err := o.Settings()
	if err != nil {
		add(Check{Name: "profile", Status: Fail, Detail: err.Error(), Fix: "list the profiles with `snavio profile list` and select one with --profile or `snavio profile use`"})
		skipRest(2, "needs a profile")
		return r
	}
	pc, err := o.Platform()
	if err != nil {
		add(Check{Name: "profile", Status: Fail, Detail: err.Error(), Fix: "complete the profile with `snavio profile set " + s.ProfileName + "`"})
		skipRest(2, "needs a profile")
		return r
	}
	tgt := pc.Target()
	if s.Kind == config.KindAWS {
		add(Check{Name: "profile", Status: OK, Detail: fmt.Sprintf("%s (kind aws, region %s, env %s, from %s)", s.ProfileName, firstSet(tgt.Region, "from the AWS config"), firstSet(tgt.Env, "unset"), s.ProfileOrigin)})
		checkAWS(ctx, o, s, pc, add)
		return r
	}
	add(Check{Name: "profile", Status: OK, Detail: fmt.Sprintf("%s (kind local, endpoint %s, data_dir %s, from %s)", s.ProfileName, tgt.Endpoint, tgt.DataDir, s.ProfileOrigin)})
	// reachable
	h := o.get(ctx, pc, platform.ProbeHealth, false)
	switch {
	case h.Err != nil:
		add(Check{Name: "reachable", Status: Fail, Detail: fmt.Sprintf("GET %s/healthz: %v", tgt.Endpoint, h.Err),
			Fix: "start it with `snavio dispatch serve`, or point the profile at it (`--endpoint-url`, `snavio profile set " + s.ProfileName + " --endpoint-url URL`)"})
		skipRest(3, "needs the dispatcher")
		return r
	case h.Status != http.StatusOK:
		add(Check{Name: "reachable", Status: Fail, Detail: fmt.Sprintf("GET %s/healthz answered HTTP %d: %.200s", tgt.Endpoint, h.Status, h.Body),
			Fix: "check that the endpoint is a `snavio dispatch serve`, not another service"})
		skipRest(3, "needs the dispatcher")
		return r
	}
	add(Check{Name: "reachable", Status: OK, Detail: fmt.Sprintf("%s/healthz ok in %s", tgt.Endpoint, fmtDur(h.Received.Sub(h.Sent)))})

	// ready
	rd := o.get(ctx, pc, platform.ProbeReady, false)
	switch {
	case rd.Err != nil:
		add(Check{Name: "ready", Status: Fail, Detail: "GET /readyz: " + rd.Err.Error(), Fix: "retry; check the server log"})
	case rd.Status == http.StatusOK:
		add(Check{Name: "ready", Status: OK, Detail: "the dispatcher takes traffic"})
	default:
		add(Check{Name: "ready", Status: Warn, Detail: fmt.Sprintf("GET /readyz answered HTTP %d: %.200s", rd.Status, rd.Body),
			Fix: "wait for it to finish starting (or restart it if it is draining); the server log says what it waits for"})
	}

	// credentials
	window := o.ReplayWindow
	var skewCheck *Check
	if err := pc.CheckCredential(); err != nil {
		add(Check{Name: "credentials", Status: Fail, Detail: err.Error(), Fix: "set " + platform.TokenEnv + ", or the profile's data_dir to the server's data directory"})
	} else {
		w := o.get(ctx, pc, platform.ProbeWhoami, true)
		var who wire.Whoami
		switch {
		case w.Err != nil:
			add(Check{Name: "credentials", Status: Fail, Detail: "GET /v1/whoami: " + w.Err.Error(), Fix: "retry; check the server log"})
		case w.Status == http.StatusUnauthorized || w.Status == http.StatusForbidden:
			add(Check{Name: "credentials", Status: Fail, Detail: fmt.Sprintf("the token was refused (HTTP %d): %.200s", w.Status, w.Body),
				Fix: "the token is " + platform.TokenEnv + " when set, else " + platform.OperatorTokenFile + " in the profile's data_dir (" + tgt.DataDir + "); it must be from this server's data directory"})
		case w.Status != http.StatusOK:
			add(Check{Name: "credentials", Status: Fail, Detail: fmt.Sprintf("GET /v1/whoami answered HTTP %d: %.200s", w.Status, w.Body), Fix: "upgrade the server to this snavio's version (`snavio version`)"})
		case json.Unmarshal(w.Body, &who) != nil || who.ServerTime.IsZero():
			add(Check{Name: "credentials", Status: Fail, Detail: fmt.Sprintf("GET /v1/whoami: an answer this snavio does not understand: %.200s", w.Body), Fix: "use the same version of snavio and the server"})
		default:
			add(Check{Name: "credentials", Status: OK, Detail: describeWho(who.Principal, who.Operator, who.Tenant)})
			if who.ReplayWindowSeconds > 0 {
				window = time.Duration(who.ReplayWindowSeconds * float64(time.Second))
			}
			skew, unc := EstimateSkew(w.Sent, w.Received, who.ServerTime)
			c := JudgeSkew(skew, unc, window)
			skewCheck = &c
		}
	}

	// clock skew: from whoami's server_time, else from /healthz's Date
	// header (one-second resolution).
	if skewCheck == nil {
		if t, err := http.ParseTime(h.Date); err == nil {
			skew, unc := EstimateSkew(h.Sent, h.Received, t.Add(500*time.Millisecond))
			c := JudgeSkew(skew, unc+500*time.Millisecond, window)
			c.Detail += " (from the HTTP Date header, to the second)"
			skewCheck = &c
		} else {
			skewCheck = &Check{Name: "clock skew", Status: Skip, Detail: "the server reported no time (no whoami, no Date header)"}
		}
	}
	add(*skewCheck)
	return r
}
