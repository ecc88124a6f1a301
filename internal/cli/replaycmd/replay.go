// Package replay implements `snavio replay`, `snavio replay list` and
// `snavio replay show` over the replay API of a running `snavio dispatch
// serve` (internal/controlapi; docs/replay.md). The replay itself runs
// in the server, which holds the keys it re-signs with and the audits; this
// command starts or resumes it, shows its progress, and stops it cleanly on
// Ctrl-C.
package replaycmd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// Deps are what the replay commands need, as lazy providers.
type Deps struct {
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	// ErrOut receives progress and notes (never results).
	ErrOut io.Writer
	// ProgressTTY reports whether ErrOut is a terminal (progress bar) or
	// not (plain progress lines).
	ProgressTTY func() bool
	Clock       clock.Clock
	// Interrupt returns the context Ctrl-C cancels.
	Interrupt func(context.Context) (context.Context, context.CancelFunc)
}

// NewDeps returns the production dependencies of f.
func NewDeps(f *cmdutil.Factory) Deps {
	return Deps{
		Platform: f.Platform, Printer: f.Printer, ErrOut: f.IOStreams.ErrOut,
		ProgressTTY: f.IOStreams.IsStderrTTY, Clock: clock.System(), Interrupt: cmdutil.InterruptContext,
	}
}

// Options are the inputs of `snavio replay`.
type Options struct {
	Deps
	From, Start, End        string
	Source, Target, Command string
	FailureReason, Reason   string
	Dedupe, Rate, Resume    string
	Limit                   int
	DryRun                  bool
	setFilters              []string
}

// NewCmd builds `snavio replay` with its list and show subcommands.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	d := NewDeps(f)
	cmd := newCmdReplay(d, runF)
	cmd.AddCommand(NewCmdList(d, nil), NewCmdShow(d, nil))
	return cmd
}

func newCmdReplay(d Deps, runF func(context.Context, *Options) error) *cobra.Command {
	o := &Options{Deps: d}
	cmd := &cobra.Command{
		Use:   "replay --from dlq:QUEUE|archive --reason-text WHY [flags]",
		Short: "Replay dead-lettered or archived commands, audited and resumable",
		Long: `Replay commands from a dead-letter queue or from the archive of accepted
events. The dispatcher re-timestamps each command, re-signs it with the
platform's copy of its source's key (the key never leaves the server), sets
replay: true, replay_reason and replay_id, and puts it through the normal
pipeline: HMAC, timestamp, ACL and rate limits apply as to live traffic,
and its snavio.command.delivered or .failed event carries the replay
fields. A DLQ message is deleted only once its replay was accepted.

Every replay is audited on the server (origin, reason, operator, filters,
counts, start and end): see "snavio replay list" and "snavio replay show".
Ctrl-C stops a replay cleanly after the batch in hand; --resume ID
continues it without re-sending what was sent. --limit N pauses after N
commands (to check a few first); --resume continues.

Strict-mode dedupe (--dedupe): keep-id (the default) keeps each command's
id and holds back commands of strict routes still inside their dedupe TTL
(left in the DLQ; replay them after the TTL, when the spec says a replay is
valid); new-id runs them again now under new ids, stable across resumes.
--dry-run prints the plan and warns about held commands.

Only commands the shield accepted are ever replayed: the archive records
its verdict, and a replay verifies each command's original signature
again, against the key version valid when it was received, before it
re-signs it. Everything else (rejected by the shield, not a command, a bad
or unknown key, a timestamp outside the window) is listed as refused, by
reason, and never sent; refused records do not change the exit code.

Times (--start, --end) are RFC 3339 or how long ago (90m, 2h, 3d). The
archive needs --start; its end defaults to the start of the replay.

Where it runs: on a local profile, snavio dispatch serve replays and keeps
the audits. On an aws profile (with env and control_url set) this command
replays itself, with your AWS credentials as the operator: it receives
the DLQ from SQS (each message's delivery signature is verified with its
target's key from the control API), reads the archive through an
EventBridge replay into a capture rule and queue it creates and deletes,
has the control API verify and re-sign each batch (the tenants' keys
never leave it) and keep the audit, and puts on the env's bus. Flags,
output and exit codes are the same on both.

Exit codes: 0 the replay finished (or paused at --limit); 1 it was
interrupted or failed, or the bus refused some commands (they stay in the
DLQ); 2 a bad flag.`,
		Example: `  snavio replay --from dlq:mailer-dlq --reason-text "INC-42: mailer fixed" --dry-run
  snavio replay --from dlq:mailer-dlq --reason-text "INC-42: mailer fixed" --rate 50/s
  snavio replay --from archive --start 2h --end 1h --target mailer --reason-text "INC-42" --dedupe new-id
  snavio replay --from dlq:mailer-dlq --reason-text "canary" --limit 5
  snavio replay --resume 2f1c0b7e-6a53-4b1e-9d0a-8f4e2c1b3a55
  snavio replay list`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return cmdutil.GroupRunE(cmd, args)
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			fl := cmd.Flags()
			for _, n := range []string{"from", "start", "end", "source", "target", "command", "reason", "reason-text", "dedupe", "rate", "dry-run"} {
				if fl.Changed(n) {
					o.setFilters = append(o.setFilters, "--"+n)
				}
			}
			if err := o.validate(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return run(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.From, "from", "", "where to read: dlq:QUEUE or archive")
	fl.StringVar(&o.Start, "start", "", "only commands received (archive) or queued (DLQ) at or after this time: RFC 3339 or how long ago (2h)")
	fl.StringVar(&o.End, "end", "", "only commands before this time: RFC 3339 or how long ago (1h)")
	fl.StringVar(&o.Source, "source", "", "only commands of this bus source (<tenant>/<service>)")
	fl.StringVar(&o.Target, "target", "", "only commands to this target")
	fl.StringVar(&o.Command, "command", "", "only commands with this name")
	fl.StringVar(&o.FailureReason, "reason", "", "only DLQ messages with this failure reason (such as max_receives_exceeded)")
	fl.StringVar(&o.Reason, "reason-text", "", "why you replay: audited, and carried in telemetry as replay_reason (required)")
	fl.StringVar(&o.Dedupe, "dedupe", "keep-id", "strict-mode routes: keep-id (hold commands inside their dedupe TTL) or new-id (run them again now)")
	fl.StringVar(&o.Rate, "rate", "", "at most this many commands per unit: 50/s, 600/m, 1000/h (default: no limit)")
	fl.StringVar(&o.Resume, "resume", "", "continue the interrupted or paused replay `ID` with its original settings")
	fl.IntVar(&o.Limit, "limit", 0, "pause after sending this many commands (0: no limit); --resume continues")
	fl.BoolVar(&o.DryRun, "dry-run", false, "print the plan (counts by target and command, id range, warnings) and change nothing")
	_ = cmd.RegisterFlagCompletionFunc("dedupe", cobra.FixedCompletions([]string{"keep-id", "new-id"}, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("from", cobra.FixedCompletions([]string{"archive", "dlq:"}, cobra.ShellCompDirectiveNoFileComp|cobra.ShellCompDirectiveNoSpace))
	return cmd
}

// validate checks the flags; every mistake is a usage error naming the
// flag and the fix.
func (o *Options) validate() error {
	if o.Limit < 0 {
		return cmdutil.Usagef("invalid --limit %d: use 0 (no limit) or a positive count", o.Limit)
	}
	if o.Resume != "" {
		if !envelope.ValidID(o.Resume) {
			return cmdutil.Usagef("invalid --resume %.60q: give the replay id `snavio replay list` shows (a UUID)", o.Resume)
		}
		if len(o.setFilters) > 0 {
			return cmdutil.Usagef("--resume continues a replay with its original settings: drop %s (only --limit may change)", strings.Join(o.setFilters, ", "))
		}
		return nil
	}
	if o.From == "" {
		return cmdutil.Usagef("say where to replay from: --from dlq:QUEUE or --from archive (or --resume ID)")
	}
	origin, err := wire.ParseReplayOrigin(o.From)
	if err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	if o.Reason == "" {
		return cmdutil.Usagef("a replay needs a reason: give --reason-text \"why\" (it is audited and carried in telemetry)")
	}
	if _, _, err := wire.ParseReplayRange(o.Start, o.End, o.Clock.Now()); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	if origin.IsArchive() {
		if o.Start == "" {
			return cmdutil.Usagef("--from archive needs --start: give the start of the range, such as --start 2h or --start 2026-11-21T12:00:00Z")
		}
		if o.FailureReason != "" {
			return cmdutil.Usagef("--reason filters a DLQ by failure reason; archived events have none: drop --reason")
		}
	}
	if o.Rate != "" {
		if _, err := wire.ParseReplayRate(o.Rate); err != nil {
			return &cmdutil.UsageError{Err: err}
		}
	}
	if _, err := wire.ParseReplayDedupeMode(o.Dedupe); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	f := wire.ReplayFilter{Source: o.Source, Target: o.Target, Command: o.Command, Reason: o.FailureReason}
	if err := f.Validate(); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	if o.DryRun && o.Limit > 0 {
		return cmdutil.Usagef("--dry-run sends nothing, so --limit does not apply: drop one of them")
	}
	return nil
}

// request builds the API request from validated flags.
func (o *Options) request() wire.ReplayRequest {
	start, end, _ := wire.ParseReplayRange(o.Start, o.End, o.Clock.Now())
	rate := 0.0
	if o.Rate != "" {
		rate, _ = wire.ParseReplayRate(o.Rate)
	}
	return wire.ReplayRequest{
		From: o.From, Start: start, End: end, Source: o.Source, Target: o.Target, Command: o.Command,
		FailureReason: o.FailureReason, Reason: o.Reason, Dedupe: o.Dedupe, Rate: rate, Limit: o.Limit,
	}
}

func mapErr(err error, origin string) error {
	list := "snavio replay list"
	if strings.HasPrefix(origin, "dlq:") {
		list = "snavio queue list"
	}
	return cmdutil.MapAPIError(err, list)
}

func run(ctx context.Context, o *Options) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	if o.DryRun {
		pr, err := api.PlanReplay(ctx, o.request())
		if err != nil {
			return mapErr(err, o.From)
		}
		return p.Print(PlanView{ReplayPlan: pr.Plan, End: pr.End})
	}
	ctx, stop := o.Interrupt(ctx)
	defer stop()
	start := func() (platform.ReplayStream, error) { return api.StartReplay(ctx, o.request()) }
	origin := o.From
	if o.Resume != "" {
		start = func() (platform.ReplayStream, error) {
			return api.ResumeReplay(ctx, o.Resume, wire.ReplayResumeRequest{Limit: o.Limit})
		}
		origin = ""
	}
	fin, err := o.stream(ctx, api, start, origin)
	if err != nil {
		return err
	}
	if err := p.Print(AuditView(fin.Replay)); err != nil {
		return err
	}
	return outcome(o.ErrOut, fin)
}

// outcome turns the finished update into the exit status, with a note.
func outcome(w io.Writer, fin wire.ReplayUpdate) error {
	a := fin.Replay
	if a.Held > 0 {
		fmt.Fprintf(w, "%d strict-mode command(s) were held back inside their dedupe TTL until %s and left in place: replay again after that time, or use --dedupe new-id\n",
			a.Held, a.HeldUntil.UTC().Format(time.RFC3339))
	}
	if a.Refused > 0 {
		fmt.Fprintf(w, "%d record(s) were refused and never sent: they are not commands the dispatcher accepted, or fail re-verification (see `snavio replay show %s`)\n", a.Refused, a.ID)
	}
	switch a.Status {
	case wire.ReplayPaused:
		fmt.Fprintf(w, "replay %s paused after --limit: continue it with `snavio replay --resume %s`\n", a.ID, a.ID)
		return nil
	case wire.ReplayDone:
		if a.Failed > 0 {
			return fmt.Errorf("replay %s: the bus refused %d command(s), left in place (last: %s): fix the cause and replay again", a.ID, a.Failed, a.LastError)
		}
		return nil
	}
	msg := fin.Error
	if msg == "" {
		msg = fmt.Sprintf("replay %s ended %s: resume it with --resume %s", a.ID, a.Status, a.ID)
	}
	return errors.New(msg)
}

// stream starts a replay run and follows its updates to the end.
func (o *Options) stream(ctx context.Context, api platform.Platform, start func() (platform.ReplayStream, error), origin string) (wire.ReplayUpdate, error) {
	st, err := start()
	if err != nil {
		if ctx.Err() != nil {
			return wire.ReplayUpdate{}, errors.New("interrupted before the replay started: nothing was sent")
		}
		return wire.ReplayUpdate{}, mapErr(err, origin)
	}
	defer func() { _ = st.Close() }()
	pv := newProgress(o.ErrOut, o.ProgressTTY(), o.Clock)
	var id string
	var readErr error
	for {
		u, err := st.Next()
		if err != nil {
			var ue *platform.UnreachableError
			if !errors.Is(err, io.EOF) && !errors.As(err, &ue) {
				return wire.ReplayUpdate{}, err
			}
			if ue != nil {
				readErr = ue.Err
			}
			break
		}
		id = u.Replay.ID
		switch u.Event {
		case wire.ReplayEventStarted:
			pv.start(u.Replay)
		case wire.ReplayEventProgress:
			pv.update(u.Replay)
		case wire.ReplayEventFinished:
			pv.finish(u.Replay)
			return u, nil
		}
	}
	pv.finish(wire.ReplayAudit{})
	if id == "" {
		return wire.ReplayUpdate{}, errors.New("the server ended the replay request before it started: run `snavio replay list` to check, then try again")
	}
	if ctx.Err() != nil {
		// Ctrl-C closed the connection: the server finishes the batch in
		// hand and records the replay as interrupted.
		fmt.Fprintf(o.ErrOut, "stopping replay %s after the batch in hand...\n", id)
		a, err := waitStopped(api, id, o.Clock)
		if err != nil {
			return wire.ReplayUpdate{}, fmt.Errorf("replay %s was interrupted; its final state is unknown (%v): see `snavio replay show %s`, and continue it with --resume %s", id, err, id, id)
		}
		return wire.ReplayUpdate{Event: wire.ReplayEventFinished, Replay: a,
			Error: fmt.Sprintf("replay %s interrupted after %d of %d command(s): resume it with --resume %s", id, a.SentCount, a.Planned, id)}, nil
	}
	return wire.ReplayUpdate{}, fmt.Errorf("lost the connection to the server during replay %s (%v): see `snavio replay show %s`, and continue it with --resume %s", id, readErr, id, id)
}

// waitStopped polls the audit until the run has stopped (at most 30 s).
func waitStopped(api platform.Platform, id string, clk clock.Clock) (wire.ReplayAudit, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for {
		a, err := api.GetReplay(ctx, id)
		if err != nil {
			return a, err
		}
		if a.Status != wire.ReplayRunning {
			return a, nil
		}
		t := time.NewTimer(100 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return a, fmt.Errorf("still running at %s", clk.Now().UTC().Format(time.RFC3339))
		case <-t.C:
		}
	}
}
