// Package route implements `snavio route register|apply|list|get|delete|
// history`: the routes of the registry, registered one at a time or
// declared in YAML files, through the control API of `snavio dispatch
// serve`.
//
// Registration has one code path, server side: register sends its one
// route, and apply its file's routes and ACLs, to POST /v1/registry/apply,
// which plans, validates, test-routes (the queue exists, is Standard and
// has its DLQ) and writes with a changelog entry. The plan types here
// (Result) are also what `snavio acl grant` prints.
package route

import (
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// Deps are what every route command needs, as lazy providers so that
// tests replace them and nothing is built before it is used.
type Deps struct {
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	// ErrOut receives the human summary lines (never the results).
	ErrOut io.Writer
	// In is stdin, for apply -f -.
	In  io.Reader
	Now func() time.Time
}

// NewDeps returns the production dependencies of f.
func NewDeps(f *cmdutil.Factory) Deps {
	return Deps{Platform: f.Platform, Printer: f.Printer, ErrOut: f.IOStreams.ErrOut, In: f.IOStreams.In, Now: time.Now}
}

// NewCmd builds `snavio route`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "route <command>",
		Short: "Register, apply, list and inspect routes",
		Long: `A route sends the commands (target, command) to an SQS Standard queue, with
its dead-letter queue, dedupe mode, rate limit, fairness parameters and
sensitivity profile. Register one route with flags, or declare routes and
ACLs in YAML and apply the file (idempotent, with a plan and --prune).

Registration test-routes every route it creates or changes: the queue must
exist, be a Standard queue and redrive to the route's DLQ. Registry changes
need the operator token; any token may read.

` + cmdutil.ControlAPIHelp,
		Example: `  snavio route register --target mailer --command send-receipt \
      --queue arn:snavio:sqs:local:000000000000:mailer \
      --dlq arn:snavio:sqs:local:000000000000:mailer-dlq
  snavio route apply -f routes.yaml --dry-run
  snavio route list
  snavio route history --target mailer --command send-receipt`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := NewDeps(f)
	cmd.AddCommand(
		NewCmdRegister(d, nil),
		NewCmdApply(d, nil),
		NewCmdList(d, nil),
		NewCmdGet(d, nil),
		NewCmdDelete(d, nil),
		NewCmdHistory(d, nil),
	)
	return cmd
}
