package route

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// ApplyOptions are the inputs of `snavio route apply`.
type ApplyOptions struct {
	Deps
	// File is the spec file's path, or "-" for stdin.
	File             string
	DryRun           bool
	Prune            bool
	DetailedExitcode bool
}

// NewCmdApply builds `snavio route apply`. runF replaces the run function
// in tests.
func NewCmdApply(d Deps, runF func(context.Context, *ApplyOptions) error) *cobra.Command {
	opts := &ApplyOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "apply -f FILE|- [--dry-run] [--prune] [--detailed-exitcode]",
		Short: "Make the registry match a YAML file of routes and ACLs",
		Long: `Apply a file of routes and ACLs: multi-document YAML, one record per
document. The dispatcher plans the changes (create, update, unchanged; with
--prune also delete), test-routes every route it creates or changes, and
writes them with a changelog entry. Applying the same file twice changes
nothing the second time.

--prune deletes the routes and ACLs of the targets the file names that the
file no longer lists; other teams' targets are never touched, and revoked
ACLs are kept for the revocation audit.

Exit codes: 0 ok; 1 error, such as a queue that failed the test routing
(nothing was written); 2 invalid input (a bad flag, or a file or record the
CLI or the dispatcher refused as malformed: nothing was written). With
--detailed-exitcode, as terraform plan's: 0 when nothing is left to do, 3
when changes are pending. A dry run with changes exits 3; an apply that
made them exits 0, since nothing is pending afterwards (its summary says
what changed).

File format (durations take a unit; every key but kind, target and command
is optional, and queue and dlq are required for routes):

  kind: route
  target: mailer
  command: send-receipt
  queue: arn:snavio:sqs:local:000000000000:mailer
  dlq: arn:snavio:sqs:local:000000000000:mailer-dlq
  dedupe: strict               # none (default) | strict
  expected_drain: 5m           # default 300s
  sensitivity: critical        # critical | moderate (default) | low
  rate: 100/s                  # N/s, N/m, N/h or N/<duration>
  burst: 10
  cooldown: 30s
  fairness: {dominant_share: 0.9, competing_share: 0.05, competing_sources: 3, window: 30s, ban: 30s}
  prefetch_leases: 5
  ttl: 24h                     # an ephemeral route
  metadata: {owner: team-mail}
  ---
  kind: acl
  source: acme/billing
  target: mailer
  command: send-receipt
  sensitivity: critical        # default: the route's
  fresh_ttl: 1s                # both or neither
  stale_ttl: 3s`,
		Example: `  snavio route apply -f routes.yaml --dry-run
  snavio route apply -f routes.yaml
  snavio route apply -f routes.yaml --prune -o json
  cat routes.yaml | snavio route apply -f - --dry-run --detailed-exitcode`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.File == "" {
				return cmdutil.Usagef("missing -f FILE: name the routes file, or - for stdin")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunApply(cmd.Context(), opts)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&opts.File, "file", "f", "", "YAML file of routes and ACLs, or - for stdin (required)")
	f.BoolVar(&opts.DryRun, "dry-run", false, "print the plan and write nothing")
	f.BoolVar(&opts.Prune, "prune", false, "delete the routes and ACLs of the file's targets that the file no longer lists")
	f.BoolVar(&opts.DetailedExitcode, "detailed-exitcode", false, "exit 3 when changes are pending (a dry run with changes), 0 when none are")
	_ = cmd.MarkFlagFilename("file", "yaml", "yml")
	return cmd
}

// ReadFile parses the spec file (or stdin for "-") at now. Every problem
// is a usage error naming the file.
func ReadFile(name string, stdin io.Reader, now time.Time) ([]registry.Item, error) {
	var r io.Reader
	display := name
	if name == "-" {
		r, display = stdin, "<stdin>"
	} else {
		f, err := os.Open(name)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return nil, cmdutil.Usagef("routes file %s does not exist: check the path given to -f", name)
			}
			return nil, cmdutil.Usagef("cannot read routes file: %v", err)
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	its, err := spec.Parse(display, r, now)
	if err != nil {
		if strings.Contains(err.Error(), "snavio route apply --help") {
			return nil, &cmdutil.UsageError{Err: err}
		}
		return nil, &cmdutil.UsageError{Err: fmt.Errorf("%w; see `snavio route apply --help` for the format", err)}
	}
	if len(its) == 0 {
		return nil, cmdutil.Usagef("%s declares no routes or ACLs: nothing to apply", display)
	}
	return its, nil
}

// RunApply applies opts.File.
func RunApply(ctx context.Context, opts *ApplyOptions) error {
	its, err := ReadFile(opts.File, opts.In, opts.Now())
	if err != nil {
		return err
	}
	res, err := Apply(ctx, opts.Platform, wire.ApplyRequest{Items: its, Prune: opts.Prune, DryRun: opts.DryRun}, "snavio route list")
	if err != nil {
		return fmt.Errorf("apply %s: %w", opts.File, err)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	if err := Print(p, opts.ErrOut, res); err != nil {
		return err
	}
	if opts.DetailedExitcode && res.DryRun && res.Summary.Pending() {
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitChanges}
	}
	return nil
}
