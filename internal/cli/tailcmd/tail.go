// Package tail implements `snavio tail`: the telemetry of a running
// `snavio dispatch serve`, or of a tenant's SNS topic on aws, live. On a terminal it is the bubbletea UI of
// internal/tui/tail; otherwise (or with -o ndjson|json|yaml) one event per
// line. Reading is a Follower: it long-polls GET /v1/telemetry, hands each
// record over once, reports sequence gaps, and after a server restart
// retries with backoff and backfills from the last record it read.
package tailcmd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/colorprofile"
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	tuitail "github.com/snavio/snavio/internal/tui/tail"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// pollWait is the long-poll wait of a read: the server answers at least
// this often, and the UI calls the stream stale after three missed.
const pollWait = 10 * time.Second

// Options are the inputs of `snavio tail`.
type Options struct {
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	IO       *iostreams.IOStreams
	Now      func() time.Time
	// Context is the run's context (cancelled by SIGINT/SIGTERM).
	Context func() (context.Context, context.CancelFunc)
	// RunUI runs the terminal UI until it quits (replaced in tests);
	// color false turns colour off.
	RunUI func(ctx context.Context, m tea.Model, in io.Reader, out io.Writer, color bool) error
	// Backoff and Sleep pace reconnection (replaced in tests).
	Backoff func(attempt int) time.Duration
	Sleep   func(ctx context.Context, d time.Duration) error
	// AWSTelemetryOptions adjusts the aws reader's options (tests).
	AWSTelemetryOptions func(*platform.AWSTelemetryOptions)

	Tenant     string
	Filters    Filters
	Since      string
	Follow     bool
	Scrollback int
	// Ack acknowledges what was read as consumed (the tenant's consumer
	// cursor), so it raises no snavio.telemetry.dropped when it ages out.
	Ack bool

	// Set by validation.
	expr  string
	since time.Time
}

// NewCmd builds `snavio tail`. runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{
		Platform: f.Platform, Printer: f.Printer, IO: f.IOStreams, Now: time.Now,
		Context: func() (context.Context, context.CancelFunc) { return cmdutil.InterruptContext(context.Background()) },
		RunUI:   runProgram,
	}
	cmd := &cobra.Command{
		Use:   "tail",
		Short: "Watch telemetry events live",
		Long: `Watch the telemetry of a running "snavio dispatch serve": every delivered,
invalid, failed and duplicate command, fairness, secret and skew events, and
dropped-telemetry notices.

On a terminal, tail is an interactive view: events coloured by kind, a
filter bar (/), pause and resume (space) without losing events, the full
event (enter), per-type counts and a rate line, a connection and staleness
indicator, and help (?). Off a terminal, or with -o ndjson or -o json, it
prints one JSON object per line: {"seq","tenant","at","event":{...}}, where
seq is the event's number in its tenant's stream and event is the telemetry
event (the catalog: docs/security/telemetry.md). -o yaml prints one YAML document per event, and
-o table off a terminal one aligned text line per event.

Filters combine: every filter flag given must match, and the values of one
flag (repeated, or comma-separated) are alternatives. Values match as
case-insensitive substrings; --type takes a kind (delivered, invalid,
failed, duplicate, fairness, secret, skew, dropped) or an event name.

tail starts at the oldest event the server retains, or at --since, and
follows new events until interrupted; --follow=false prints what is retained
and exits. A tenant token reads its own tenant's events; the operator reads
every tenant's, or one with --tenant. If the server restarts, tail retries
with backoff (notices on stderr) and resumes after the last event it read:
nothing is skipped or repeated. Events that aged out of the server's
retention before tail read them are reported as a gap on stderr.

On an aws profile tail follows one tenant (--tenant, or the tenant of the
profile's emit_role_arn) without touching the tenant's own telemetry
queue: it creates a temporary SQS queue snavio-tail-<random>, lets only the
tenant's SNS telemetry topic send to it, subscribes it, and deletes it on
exit (Ctrl-C included). Queues of tails that crashed are deleted by the
next tail once unrefreshed for 30 minutes. It sees the events published
while it runs, in sequence order (an event waits up to 2 s for the ones
before it; those that never come are reported as a gap), so --since,
--follow=false and --ack are for local profiles only. See docs/aws-cli.md.`,
		Example: `  snavio tail
  snavio tail --type failed,invalid --source acme/billing
  snavio tail --since 10m --follow=false -o ndjson | jq -r .event.command_id
  snavio tail --tenant acme --target mailer --command send-receipt --reason rate
  snavio tail --profile prod-acme -o ndjson   # aws: through a temporary queue`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return Run(opts)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&opts.Tenant, "tenant", "", "tenant whose events to read (operator; default: every tenant, or the token's own)")
	fl.StringSliceVar(&opts.Filters.Types, "type", nil, "event kinds or names to show (delivered, invalid, failed, duplicate, fairness, secret, skew, dropped)")
	fl.StringSliceVar(&opts.Filters.Sources, "source", nil, "show events whose source contains this")
	fl.StringSliceVar(&opts.Filters.Targets, "target", nil, "show events whose target contains this")
	fl.StringSliceVar(&opts.Filters.Commands, "command", nil, "show events whose command name contains this")
	fl.StringSliceVar(&opts.Filters.Reasons, "reason", nil, "show events whose reason contains this")
	fl.StringVar(&opts.Since, "since", "", "start at events appended this long ago (10m, 2h) or since an RFC 3339 time")
	fl.BoolVar(&opts.Follow, "follow", true, "keep reading new events; --follow=false prints what is retained and exits")
	fl.BoolVar(&opts.Ack, "ack", false, "acknowledge what was read as consumed by the --tenant's consumer (plain output only)")
	fl.IntVar(&opts.Scrollback, "scrollback", 1000, "events the terminal view keeps (100 to 100000)")
	_ = cmd.RegisterFlagCompletionFunc("type", cobra.FixedCompletions(typeNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

func (o *Options) validate() error {
	if o.Tenant != "" && !telemetry.ValidStream(o.Tenant) {
		return cmdutil.Usagef("invalid --tenant %q: give the part of a source before '/' (%s)", o.Tenant, telemetry.StreamRule)
	}
	expr, err := o.Filters.Expr()
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	since, err := ParseSince(o.Since, o.Now())
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	if o.Ack && o.Tenant == "" {
		return cmdutil.Usagef("--ack needs --tenant: name the tenant whose consumer has read the events")
	}
	if o.Scrollback < 100 || o.Scrollback > 100_000 {
		return cmdutil.Usagef("invalid --scrollback %d: give 100 to 100000 events", o.Scrollback)
	}
	o.expr, o.since = expr, since
	return nil
}

// Run runs tail with validated options.
func Run(o *Options) (err error) {
	p, err := o.Printer()
	if err != nil {
		return err
	}
	api, err := o.Platform()
	if err != nil {
		return err
	}
	ctx, stop := o.Context()
	defer stop()
	useUI := o.useUI(p.Format()) && !o.Ack
	fetch, tenant, where := api.ReadTelemetry, o.Tenant, api.Target().Endpoint
	gapWhy := ""
	if t := api.Target(); t.Kind == config.KindAWS {
		src, err := o.openAWS(ctx, t, useUI)
		if err != nil || src == nil {
			return err // src nil: interrupted while setting up
		}
		defer func() {
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
			defer cancel()
			err = errors.Join(err, src.close(cctx))
		}()
		fetch, tenant, where = src.tel.ReadTelemetry, src.tenant, "temporary queue "+src.tel.Queue()
		gapWhy = fmt.Sprintf("did not reach tail's queue within %s of the events after them", platform.DefaultReorderWindow)
	}
	f := &Follower{Fetch: fetch, Tenant: tenant, Since: o.since, Follow: o.Follow, Wait: pollWait, Backoff: o.Backoff, Sleep: o.Sleep}
	filter, _ := tuitail.ParseFilter(o.expr) // validated
	var runErr error
	if useUI {
		runErr = o.runUI(ctx, f)
	} else {
		ps := &printSink{p: p, out: o.IO.Out, errOut: o.IO.ErrOut, filter: filter, endpoint: where, gapWhy: gapWhy}
		if o.Ack {
			ps.acks = &acker{now: o.Now, ack: func(seq uint64) error {
				return api.AckTelemetry(context.WithoutCancel(ctx), wire.TelemetryAck{Tenant: o.Tenant, Seq: seq})
			}}
		}
		f.Sink = ps
		runErr = f.Run(ctx)
		if ps.acks != nil {
			runErr = errors.Join(runErr, ps.acks.flush())
		}
	}
	if platform.StatusOf(runErr) == http.StatusNotFound {
		return fmt.Errorf("the server at %s has no telemetry API (HTTP 404): run a `snavio dispatch serve` of this snavio's version (`snavio version`)", api.Target().Endpoint)
	}
	return cmdutil.MapAPIError(runErr, "snavio tail")
}

// awsSource is tail's reader on an aws profile: a temporary queue
// subscribed to the tenant's telemetry topic (docs/aws-cli.md).
type awsSource struct {
	tel    *platform.AWSTelemetry
	tenant string
	errOut io.Writer
	// quiet holds notices while the terminal UI owns the screen.
	quiet   bool
	dropped int
}

// openAWS checks the flags an aws profile cannot honour, then sweeps and
// subscribes. Notices go to stderr off the UI and are counted under it.
func (o *Options) openAWS(ctx context.Context, t platform.Target, useUI bool) (*awsSource, error) {
	switch {
	case o.Ack:
		return nil, cmdutil.Usagef("--ack acknowledges a local server's stream; on aws the tenant's consumer acknowledges by deleting from its own telemetry queue, which tail never reads: drop --ack")
	case o.Since != "":
		return nil, cmdutil.Usagef("--since reads what a local server retains; on aws tail sees the events published while it runs (its own queue is subscribed when it starts): drop --since")
	case !o.Follow:
		return nil, cmdutil.Usagef("--follow=false prints what a local server retains; on aws tail sees only the events published while it runs: drop --follow=false, and stop it with Ctrl-C")
	}
	tenant := o.Tenant
	if tenant == "" {
		r, err := platform.EmitRoleOf(t)
		if err != nil || r.Tenant == "" {
			return nil, cmdutil.Usagef("give --tenant: on aws tail follows one tenant's telemetry topic, and the profile's emit_role_arn does not name the tenant")
		}
		tenant = r.Tenant
	}
	src := &awsSource{tenant: tenant, errOut: o.IO.ErrOut, quiet: useUI}
	opts := platform.AWSTelemetryOptions{Clock: clock.Func(o.Now), Notice: src.notice}
	if o.AWSTelemetryOptions != nil {
		o.AWSTelemetryOptions(&opts)
	}
	tel, err := platform.OpenAWSTelemetry(ctx, t, tenant, opts)
	if err != nil {
		if ctx.Err() != nil {
			return nil, nil
		}
		return nil, fmt.Errorf("tail: following tenant %s's telemetry: %w", tenant, err)
	}
	src.tel = tel
	if len(tel.Swept) > 0 {
		fmt.Fprintf(o.IO.ErrOut, "tail: deleted %d temporary queue(s) left by tails that stopped without removing them: %s\n", len(tel.Swept), strings.Join(tel.Swept, ", "))
	}
	fmt.Fprintf(o.IO.ErrOut, "tail: following tenant %s's telemetry topic through the temporary queue %s (deleted on exit)\n", tenant, tel.Queue())
	return src, nil
}

func (s *awsSource) notice(msg string) {
	if s.quiet {
		s.dropped++
		return
	}
	fmt.Fprintln(s.errOut, "tail:", msg)
}

// close removes the queue and reports what the UI held back.
func (s *awsSource) close(ctx context.Context) error {
	if s.dropped > 0 {
		st := s.tel.Stats()
		fmt.Fprintf(s.errOut, "tail: %d message(s) were dropped while the view was open: %d not telemetry events of tenant %s, %d arrived after they were reported missing\n", s.dropped, st.Rejected, s.tenant, st.Late)
	}
	return s.tel.Close(ctx)
}

// useUI reports whether to start the terminal UI: only when following,
// in table format, with a terminal on stdin and stdout. Without a
// terminal it never starts (a CI job must not hang on it).
func (o *Options) useUI(format output.Format) bool {
	return o.Follow && format == output.Table && o.IO.CanPrompt()
}

func runProgram(ctx context.Context, m tea.Model, in io.Reader, out io.Writer, color bool) error {
	opts := []tea.ProgramOption{tea.WithContext(ctx), tea.WithInput(in), tea.WithOutput(out)}
	if !color {
		opts = append(opts, tea.WithColorProfile(colorprofile.Ascii))
	}
	_, err := tea.NewProgram(m, opts...).Run()
	if errors.Is(err, tea.ErrProgramKilled) && ctx.Err() != nil {
		return nil // interrupted by a signal: a clean exit
	}
	return err
}

// runUI runs the terminal UI fed by f on another goroutine. A failure of
// the follower closes the UI and is returned.
func (o *Options) runUI(ctx context.Context, f *Follower) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	ch := make(chan tea.Msg, 256)
	f.Sink = &uiSink{ctx: ctx, ch: ch, now: o.Now}
	m := tuitail.New(tuitail.Config{Scrollback: o.Scrollback, HeartbeatInterval: pollWait, Filter: o.expr, Events: ch, Now: o.Now})
	ferr := make(chan error, 1)
	uiCtx, uiCancel := context.WithCancel(ctx)
	defer uiCancel()
	go func() {
		err := f.Run(ctx)
		if err != nil {
			uiCancel() // a fatal error closes the UI
		}
		ferr <- err
	}()
	uerr := o.RunUI(uiCtx, m, o.IO.In, o.IO.Out, o.IO.ColorEnabled())
	cancel()
	if err := <-ferr; err != nil {
		return err
	}
	return uerr
}

// uiSink feeds the UI's channel; it blocks while the UI is behind (the
// next read waits), so nothing is dropped.
type uiSink struct {
	ctx context.Context
	ch  chan<- tea.Msg
	now func() time.Time
}

func (s *uiSink) send(m tea.Msg) {
	select {
	case s.ch <- m:
	case <-s.ctx.Done():
	}
}

func (s *uiSink) Record(r wire.TelemetryRecord) error {
	s.send(tuitail.EventMsg(DecodeEvent(r)))
	return nil
}

// Heartbeat is stamped with the local clock: staleness is measured on one
// clock, whatever the skew to the server.
func (s *uiSink) Heartbeat(time.Time) { s.send(tuitail.HeartbeatMsg{At: s.now()}) }

func (s *uiSink) Connection(connected bool, err error, retryIn time.Duration) {
	if connected {
		s.send(tuitail.ConnMsg{State: tuitail.Connected})
		return
	}
	s.send(tuitail.ConnMsg{State: tuitail.Reconnecting, Err: fmt.Errorf("%s; retrying in %s", short(err), retryIn)})
}

// Gap is shown by the model, which sees the same sequence numbers.
func (s *uiSink) Gap(string, uint64, uint64) {}

func (s *uiSink) Reset(at uint64) {
	s.send(tuitail.ResetMsg{Note: fmt.Sprintf("the server's stream restarted (was past #%d); reading it from its beginning", at)})
}

// short is an error's message without the fix: the UI's status line is
// one line.
func short(err error) string {
	var ue *platform.UnreachableError
	if errors.As(err, &ue) {
		return "cannot reach " + ue.Endpoint
	}
	var ae *platform.APIError
	if errors.As(err, &ae) {
		return fmt.Sprintf("HTTP %d %s", ae.Status, ae.Message)
	}
	return err.Error()
}

// DecodeEvent returns the UI's view of a record. Fields the event does
// not carry, or carries with another type, are left empty.
func DecodeEvent(r wire.TelemetryRecord) tuitail.Event {
	e := tuitail.Event{Tenant: r.Tenant, Seq: r.Seq, Time: r.At, Raw: r.Event}
	var m map[string]json.RawMessage
	if json.Unmarshal(r.Event, &m) != nil {
		e.Name = "(undecodable event)"
		return e
	}
	str := func(k string) string {
		var s string
		if json.Unmarshal(m[k], &s) != nil {
			return ""
		}
		return s
	}
	e.Name, e.CommandID, e.Source, e.Target, e.Command, e.Reason = str("event"), str("command_id"), str("source"), str("target"), str("command_name"), str("reason")
	return e
}
