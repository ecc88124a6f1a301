package route

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// RouteFlags are register's flags as typed; Route turns them into the
// record.
type RouteFlags struct {
	Target, Command, Queue, DLQ string
	Dedupe, Sensitivity         string
	ExpectedDrain               string
	Rate                        string
	Burst                       int64
	Cooldown                    string
	FairnessDisabled            bool
	DominantShare               float64
	CompetingShare              float64
	CompetingSources            int
	FairnessWindow, FairnessBan string
	PrefetchLeases              int
	Metadata                    map[string]string
	TTL                         string
}

// Route builds the route the flags declare, at now (for --ttl), and
// validates it as the server will. Errors name the flag and are usage
// errors.
func (fl *RouteFlags) Route(now time.Time) (registry.Route, error) {
	r := registry.Route{
		Target: fl.Target, Command: fl.Command, QueueARN: fl.Queue, DLQARN: fl.DLQ,
		DedupeMode: registry.DedupeMode(fl.Dedupe), Profile: registry.Profile(fl.Sensitivity),
		PrefetchLeases: fl.PrefetchLeases, Metadata: fl.Metadata,
	}
	switch fl.Dedupe {
	case "", "none", "strict":
	default:
		return r, cmdutil.Usagef("invalid --dedupe %q: use strict or none", fl.Dedupe)
	}
	if !r.Profile.Valid() {
		return r, cmdutil.Usagef("invalid --sensitivity %q: use critical, moderate or low", fl.Sensitivity)
	}
	var err error
	if r.ExpectedDrainSeconds, err = Seconds("--expected-drain", fl.ExpectedDrain); err != nil {
		return r, err
	}
	if fl.Rate != "" {
		if r.RateLimit.Max, r.RateLimit.IntervalSeconds, err = spec.ParseRate(fl.Rate); err != nil {
			return r, cmdutil.Usagef("invalid --rate: %v", err)
		}
	}
	if (fl.Burst != 0 || fl.Cooldown != "") && fl.Rate == "" {
		return r, cmdutil.Usagef("--burst and --cooldown need --rate, e.g. --rate 100/s")
	}
	r.RateLimit.Burst = fl.Burst
	if r.RateLimit.CooldownSeconds, err = Seconds("--cooldown", fl.Cooldown); err != nil {
		return r, err
	}
	r.Fairness = registry.Fairness{Disabled: fl.FairnessDisabled, DominantShare: fl.DominantShare,
		CompetingShare: fl.CompetingShare, CompetingSources: fl.CompetingSources}
	if r.Fairness.WindowSeconds, err = Seconds("--fairness-window", fl.FairnessWindow); err != nil {
		return r, err
	}
	if r.Fairness.BanSeconds, err = Seconds("--fairness-ban", fl.FairnessBan); err != nil {
		return r, err
	}
	if r.ExpiresAt, err = Expiry(fl.TTL, now); err != nil {
		return r, err
	}
	if err := registry.ValidateItem(registry.Item{Route: &r}); err != nil {
		return r, cmdutil.Usagef("%s; see `snavio route register --help`", err)
	}
	return r, nil
}

// Seconds parses the duration flag named flag as whole seconds ("" is 0).
func Seconds(flag, s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		if n, err2 := strconv.ParseInt(s, 10, 64); err2 == nil {
			return 0, cmdutil.Usagef("invalid %s %q: give a unit, e.g. %ds", flag, s, n)
		}
		return 0, cmdutil.Usagef("invalid %s %q: use a duration such as 30s, 5m or 1h", flag, s)
	}
	if d <= 0 || d%time.Second != 0 {
		return 0, cmdutil.Usagef("invalid %s %q: use a positive whole number of seconds, e.g. 30s", flag, s)
	}
	return int64(d / time.Second), nil
}

// Expiry turns --ttl into an absolute expiry (epoch seconds; 0: none).
func Expiry(ttl string, now time.Time) (int64, error) {
	s, err := Seconds("--ttl", ttl)
	if err != nil || s == 0 {
		return 0, err
	}
	return now.Unix() + s, nil
}

// RegisterOptions are the inputs of `snavio route register`.
type RegisterOptions struct {
	Deps
	Route  registry.Route
	DryRun bool
}

// NewCmdRegister builds `snavio route register`. runF replaces the run
// function in tests.
func NewCmdRegister(d Deps, runF func(context.Context, *RegisterOptions) error) *cobra.Command {
	opts := &RegisterOptions{Deps: d}
	fl := &RouteFlags{}
	cmd := &cobra.Command{
		Use:   "register --target T --command C --queue ARN --dlq ARN [flags]",
		Short: "Register (create or replace) one route",
		Long: `Register one route. The flags declare the whole route: a flag left out takes
its default, as a key left out of a file does with "snavio route apply", so
registering a route again with the same flags changes nothing, and with
other flags updates it.

Before writing, the dispatcher test-routes the route: the queue must exist,
be a Standard queue (not FIFO) and redrive to the DLQ given, which must
exist. --dry-run runs every check and writes nothing.

Durations take a unit (30s, 5m, 1h) and must be whole seconds. --rate is
N/s, N/m, N/h or N/<duration> (e.g. 6000/1m). Fairness flags left at zero
take the dispatcher's defaults.`,
		Example: `  snavio route register --target mailer --command send-receipt \
      --queue arn:snavio:sqs:local:000000000000:mailer \
      --dlq arn:snavio:sqs:local:000000000000:mailer-dlq \
      --dedupe strict --sensitivity critical --rate 100/s --burst 10
  snavio route register --target mailer --command send-receipt \
      --queue arn:snavio:sqs:local:000000000000:mailer \
      --dlq arn:snavio:sqs:local:000000000000:mailer-dlq --dry-run -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			r, err := fl.Route(opts.Now())
			if err != nil {
				return err
			}
			opts.Route = r
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunRegister(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVar(&fl.Target, "target", "", "target service (required)")
	f.StringVar(&fl.Command, "command", "", "command name (required)")
	f.StringVar(&fl.Queue, "queue", "", "ARN of the SQS Standard queue commands go to (required)")
	f.StringVar(&fl.DLQ, "dlq", "", "ARN of the queue's dead-letter queue (required)")
	f.StringVar(&fl.Dedupe, "dedupe", "", "dedupe mode: strict or none (default none)")
	f.StringVar(&fl.ExpectedDrain, "expected-drain", "", "typical time consumers take to drain the queue (default 300s)")
	f.StringVar(&fl.Sensitivity, "sensitivity", "", "sensitivity profile: critical, moderate or low (default moderate)")
	f.StringVar(&fl.Rate, "rate", "", "rate limit of the route, e.g. 100/s (default none)")
	f.Int64Var(&fl.Burst, "burst", 0, "tokens one dispatcher instance takes per prefetch (needs --rate)")
	f.StringVar(&fl.Cooldown, "cooldown", "", "how long a source stays denied past an exhausted window (needs --rate)")
	f.BoolVar(&fl.FairnessDisabled, "fairness-disabled", false, "turn warm-path fairness off for the route")
	f.Float64Var(&fl.DominantShare, "fairness-dominant-share", 0, "share in (0,1] above which a source may leave the warm path (default 0.8)")
	f.Float64Var(&fl.CompetingShare, "fairness-competing-share", 0, "others' share in (0,1) needed for a fairness ban (default 0.1)")
	f.IntVar(&fl.CompetingSources, "fairness-competing-sources", 0, "number of other sources that also allow a fairness ban")
	f.StringVar(&fl.FairnessWindow, "fairness-window", "", "fairness usage window (default 30s)")
	f.StringVar(&fl.FairnessBan, "fairness-ban", "", "how long a dominant source leaves the warm path")
	f.IntVar(&fl.PrefetchLeases, "prefetch-leases", 0, "instances that may prefetch rate tokens per second (default 5)")
	f.StringToStringVar(&fl.Metadata, "metadata", nil, "free-form key=value metadata for the target team (repeatable)")
	f.StringVar(&fl.TTL, "ttl", "", "make the route ephemeral: it expires this long from now")
	f.BoolVar(&opts.DryRun, "dry-run", false, "run every check and print the plan; write nothing")
	for _, n := range []string{"target", "command", "queue", "dlq"} {
		_ = cmd.MarkFlagRequired(n)
	}
	_ = cmd.RegisterFlagCompletionFunc("dedupe", cobra.FixedCompletions([]string{"none", "strict"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("sensitivity", cobra.FixedCompletions(profiles(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func profiles() []string {
	var out []string
	for _, p := range registry.Profiles() {
		out = append(out, string(p))
	}
	return out
}

// RunRegister registers opts.Route through the apply endpoint.
func RunRegister(ctx context.Context, opts *RegisterOptions) error {
	r := opts.Route
	res, err := Apply(ctx, opts.Platform, wire.ApplyRequest{Items: []registry.Item{{Route: &r}}, DryRun: opts.DryRun}, "snavio route list")
	if err != nil {
		return fmt.Errorf("register route %s %s: %w", r.Target, r.Command, err)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return Print(p, opts.ErrOut, res)
}
