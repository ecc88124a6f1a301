// Package bench implements `snavio bench`: a load generator that signs
// and puts commands like `snavio send` (same key lookup, ingress
// credentials and bus client) at a rate and a concurrency, shows live
// progress on a terminal, and prints a summary of outcomes, throughput and
// latency percentiles.
package bench

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/send"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Bounds of the flags.
const (
	// MaxCount bounds --count (every latency is kept for the percentiles).
	MaxCount = 10_000_000
	// MaxConcurrency bounds --concurrency.
	MaxConcurrency = 1000
	// MaxDuration bounds --duration.
	MaxDuration = 24 * time.Hour
	// DefaultCount is --count when neither it nor --duration is given.
	DefaultCount = 1000
)

// Options are the inputs of `snavio bench`.
type Options struct {
	send.Options
	Count       int
	Rate        string
	Concurrency int
	Batch       int
	Duration    time.Duration

	rate float64
	// ProgressTTY reports whether stderr is a terminal (live progress).
	ProgressTTY func() bool
	Clock       clock.Clock
}

// NewCmd builds `snavio bench`. runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{ProgressTTY: f.IOStreams.IsStderrTTY, Clock: clock.System()}
	o.In, o.Now, o.Getenv = f.IOStreams.In, time.Now, os.Getenv
	cmd := &cobra.Command{
		Use:   "bench --source S --target T --command C [--count N] [--rate R/s] [--concurrency C] [--wait]",
		Short: "Load-test the bus: send many signed commands and measure them",
		Long: `Sign and put --count commands (or as many as --duration allows) from
--source to --target, at most --rate per second, with --concurrency
PutEvents calls in flight and --batch entries per call, exactly as "snavio
send" builds, signs and puts them (the same signing key lookup and ingress
credentials; see "snavio send --help"). Each command gets a new id and the
same --payload (default {}).

On a local profile it puts on "snavio dispatch serve"'s PutEvents ingress;
on an aws profile on the EventBridge bus the profile names, with the AWS
SDK's credentials: real load on a real bus, so mind the target's rate
limits and the bill.

On a terminal a progress line on stderr shows sent, accepted, refused, the
rate and the elapsed time; nothing is drawn when stderr is not a terminal.
The summary goes to stdout in the -o format: sent, accepted, refused by the
bus's error code, throughput, and PutEvents latency percentiles (p50, p90,
p99, max) per call.

--wait follows the tenant's telemetry (one reader for all commands, local
profiles) and adds each command's outcome (delivered, failed and invalid
by reason, duplicate, no outcome) and its latency from put to outcome. It
waits up to the given time after the last put (--wait alone: 30s). The
dispatcher's own rate limit for the route applies: sending faster than the
route allows shows up as failed rate-limit-exceeded.

Ctrl-C stops sending and prints the summary of what was sent.

Exit codes: 0 every command was accepted (and, with --wait, delivered);
8 the bus refused some entries or some calls failed; with --wait, 4 some
were invalid, 5 some failed, 6 some were duplicates, 7 some had no outcome
in time (the first that applies, in this order); 1 interrupted or
following telemetry failed; 2 a bad flag.`,
		Example: `  # local: 200 commands at 100/s through "dispatch serve --demo", with outcomes
  snavio bench --source demo/app --target orders --command create \
      --count 200 --rate 100/s --concurrency 4 --wait
  # as fast as possible for 30 s, 10 entries per PutEvents, JSON for CI
  snavio bench --source demo/app --target orders --command create \
      --duration 30s --concurrency 16 --batch 10 -o json
  # aws: on the EventBridge bus of the profile "prod", key from a file
  snavio bench --profile prod --source acme/billing --target mailer \
      --command send-receipt --payload @order.json \
      --secret-file ~/.config/snavio/acme-billing.key --count 500 --rate 50/s`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := o.validate(cmd); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return run(cmd.Context(), f, o)
		},
	}
	send.AddCommandFlags(cmd, &o.Options)
	fl := cmd.Flags()
	fl.StringVar(&o.Payload, "payload", "{}", "payload of every command: JSON, @FILE, or @- for standard input")
	fl.IntVar(&o.Count, "count", DefaultCount, "commands to send (with --duration alone: no count limit)")
	fl.StringVar(&o.Rate, "rate", "", "at most this many commands per unit: 100/s, 600/m (default: no limit)")
	fl.IntVar(&o.Concurrency, "concurrency", 1, "PutEvents calls in flight")
	fl.IntVar(&o.Batch, "batch", 1, "entries per PutEvents call, 1 to 10")
	fl.DurationVar(&o.Duration, "duration", 0, "stop sending after this long (such as 30s)")
	fl.DurationVar(&o.Wait, "wait", 0, "follow telemetry for the outcomes, up to this long after the last put (--wait alone: 30s)")
	fl.Lookup("wait").NoOptDefVal = send.DefaultWait.String()
	return cmd
}

func (o *Options) validate(cmd *cobra.Command) error {
	if err := send.ValidateCommand(o.Source, o.Target, o.Command); err != nil {
		return err
	}
	fl := cmd.Flags()
	if fl.Changed("duration") && !fl.Changed("count") {
		o.Count = 0
	}
	switch {
	case fl.Changed("count") && (o.Count < 1 || o.Count > MaxCount):
		return cmdutil.Usagef("invalid --count %d: give 1 to %d commands", o.Count, MaxCount)
	case fl.Changed("duration") && (o.Duration <= 0 || o.Duration > MaxDuration):
		return cmdutil.Usagef("invalid --duration %s: give a duration from 1s to %s, such as --duration 30s", o.Duration, MaxDuration)
	case o.Concurrency < 1 || o.Concurrency > MaxConcurrency:
		return cmdutil.Usagef("invalid --concurrency %d: give 1 to %d calls in flight", o.Concurrency, MaxConcurrency)
	case o.Batch < 1 || o.Batch > platform.MaxEntries:
		return cmdutil.Usagef("invalid --batch %d: PutEvents takes 1 to %d entries per call", o.Batch, platform.MaxEntries)
	}
	if fl.Changed("wait") {
		if err := send.ValidateWait(o.Wait); err != nil {
			return err
		}
	}
	if o.Rate != "" {
		r, err := wire.ParseReplayRate(o.Rate)
		if err != nil {
			return &cmdutil.UsageError{Err: err}
		}
		o.rate = r
	}
	return nil
}

func run(ctx context.Context, f *cmdutil.Factory, o *Options) error {
	p, err := f.Printer()
	if err != nil {
		return err
	}
	payload, err := send.ReadPayload(o.Payload, o.In)
	if err != nil {
		return err
	}
	client, err := f.Platform()
	if err != nil {
		return err
	}
	key, from, err := send.ResolveKey(ctx, &o.Options, client, o.Now())
	if err != nil {
		return err
	}
	f.Logger().Debug("signing key", "from", from, "version", key.VersionID())
	// One command built up front: a payload the dispatcher would refuse
	// stops here, before anything is put.
	if _, err := send.Build(o.Source, o.Target, o.Command, "", payload, key, o.Now()); err != nil {
		return err
	}
	tenant, _, _ := strings.Cut(o.Source, "/")
	bus, err := send.OpenBus(f, client, &o.Options, tenant)
	if err != nil {
		return err
	}
	r := &Runner{Bus: bus, Clock: o.Clock, Limiter: NewLimiter(o.rate, o.Clock, clock.Sleep)}
	if o.Wait > 0 {
		if r.Cursor, err = send.StartCursor(ctx, client, tenant); err != nil {
			return fmt.Errorf("--wait: reading %s's telemetry stream: %w", tenant, cmdutil.MapAPIError(err, "snavio tail"))
		}
		r.Telemetry = client
	}
	plan := Plan{Source: o.Source, Target: o.Target, Command: o.Command, Payload: payload, Key: key,
		Count: o.Count, Duration: o.Duration, Concurrency: o.Concurrency, Batch: o.Batch, Wait: o.Wait}

	ctx, stop := cmdutil.InterruptContext(ctx)
	defer stop()
	var pv *progress
	if o.ProgressTTY() {
		pv = startProgress(f.IOStreams.ErrOut, r, plan, progressEvery)
	}
	sum, ferr := r.Run(ctx, plan)
	if pv != nil {
		pv.stop()
	}
	if err := p.Print(sum); err != nil {
		return err
	}
	if ferr != nil {
		return fmt.Errorf("--wait: following %s's telemetry failed, so some outcomes are missing: %w", tenant, cmdutil.MapAPIError(ferr, "snavio tail"))
	}
	return ExitError(sum)
}

// ExitError is the summary's exit status as an error (nil: all accepted
// and, with --wait, delivered).
func ExitError(s Summary) error {
	if s.Interrupted {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitError, Err: fmt.Errorf("interrupted after sending %d command(s)", s.Sent)}
	}
	if n := total(s.Refused) + s.RequestErrors; n > 0 {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitNotAccepted, Err: fmt.Errorf("%d of %d command(s) were not accepted by the bus (see refused and request_errors in the summary)", n, s.Sent)}
	}
	o := s.Outcomes
	if o == nil {
		return nil
	}
	switch {
	case total(o.Invalid) > 0:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitInvalid, Err: fmt.Errorf("%d command(s) were invalid (%s)", total(o.Invalid), byReason(o.Invalid))}
	case total(o.Failed) > 0:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitFailed, Err: fmt.Errorf("%d command(s) failed (%s)", total(o.Failed), byReason(o.Failed))}
	case o.Duplicate > 0:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitDuplicate, Err: fmt.Errorf("%d command(s) were duplicates", o.Duplicate)}
	case o.Timeout > 0:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitTimeout, Err: fmt.Errorf("%d command(s) had no outcome within --wait: wait longer, or follow them with snavio tail", o.Timeout)}
	}
	return nil
}

// byReason lists counts by reason: "rate-limit-exceeded 5, acl-deny 1".
func byReason(m map[string]int) string {
	var parts []string
	for _, r := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", r, m[r]))
	}
	return strings.Join(parts, ", ")
}

// progressEvery is how often the live progress line is redrawn.
const progressEvery = 200 * time.Millisecond

// progress redraws one line on a terminal until stopped.
type progress struct {
	w    io.Writer
	r    *Runner
	p    Plan
	quit chan struct{}
	done chan struct{}
}

func startProgress(w io.Writer, r *Runner, p Plan, every time.Duration) *progress {
	pv := &progress{w: w, r: r, p: p, quit: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(pv.done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(w, "\r\x1b[K%s", progressLine(r.Counts(), p))
			case <-pv.quit:
				fmt.Fprintf(w, "\r\x1b[K%s\n", progressLine(r.Counts(), p))
				return
			}
		}
	}()
	return pv
}

func (pv *progress) stop() {
	close(pv.quit)
	<-pv.done
}

// progressLine is the text of the live progress line.
func progressLine(c Counts, p Plan) string {
	sent := fmt.Sprintf("sent %d", c.Sent)
	if p.Count > 0 {
		sent += fmt.Sprintf("/%d", p.Count)
	}
	rate := 0.0
	if c.Elapsed > 0 {
		rate = float64(c.Sent) / c.Elapsed.Seconds()
	}
	s := fmt.Sprintf("%s  accepted %d  refused %d", sent, c.Accepted, c.Refused)
	if p.Wait > 0 {
		s += fmt.Sprintf("  decided %d", c.Decided)
	}
	return s + fmt.Sprintf("  %.1f/s  %s", rate, c.Elapsed.Round(100*time.Millisecond))
}
