// Package root assembles the snavio command tree.
package root

import (
	"strings"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/acl"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/completion"
	"github.com/snavio/snavio/internal/cli/dispatch"
	"github.com/snavio/snavio/internal/cli/doctor"
	"github.com/snavio/snavio/internal/cli/key"
	"github.com/snavio/snavio/internal/cli/profile"
	"github.com/snavio/snavio/internal/cli/queue"
	"github.com/snavio/snavio/internal/cli/replay"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/send"
	"github.com/snavio/snavio/internal/cli/snapshot"
	"github.com/snavio/snavio/internal/cli/tail"
	"github.com/snavio/snavio/internal/cli/tenantconfig"
	"github.com/snavio/snavio/internal/cli/token"
	"github.com/snavio/snavio/internal/cli/version"
	"github.com/snavio/snavio/internal/output"
)

// NewCmd builds the root command. It binds the global flags into g, which
// the factory's providers read once flags are parsed.
func NewCmd(f *cmdutil.Factory, g *cmdutil.Globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "snavio <command> <subcommand> [flags]",
		Short: "Send, route and watch signed commands on the Snavio platform",
		Long: `snavio is the command-line tool for tenants and operators of Snavio, a
multi-tenant command-messaging platform. Producers sign commands with
HMAC-SHA256 and put them on an EventBridge bus; the dispatcher validates
them, enforces ACLs, rate limits, fairness and write-once dedupe, and routes
them to target teams' SQS queues. Every outcome is telemetry.

Settings resolve with the precedence flag > SNAVIO_* environment variable >
profile > default; see "snavio help config" and "snavio help environment".

Exit codes: 0 ok, 1 error, 2 usage error, 3 changes pending (commands that
compare state); see "snavio help exit-codes".`,
		Example: `  snavio version
  snavio profile set local --kind local --endpoint-url http://127.0.0.1:8787
  snavio profile show -o yaml`,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          cobra.ArbitraryArgs,
		RunE:          cmdutil.GroupRunE,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if _, err := output.ParseFormat(g.Output); err != nil {
				return &cmdutil.UsageError{Err: err}
			}
			return nil
		},
	}
	cmd.CompletionOptions.DisableDefaultCmd = true

	pf := cmd.PersistentFlags()
	pf.StringVar(&g.Profile, "profile", "", "profile to use from the config file (env SNAVIO_PROFILE)")
	pf.StringVar(&g.Config, "config", "", "config file (env SNAVIO_CONFIG; default $XDG_CONFIG_HOME/snavio/config.yaml)")
	pf.StringVarP(&g.Output, "output", "o", "", "output format: "+strings.Join(output.Formats, "|")+" (default table on a terminal, json otherwise)")
	pf.String("endpoint-url", "", "endpoint of the platform API (env SNAVIO_ENDPOINT_URL)")
	pf.String("region", "", "AWS region for aws profiles (env SNAVIO_REGION)")
	pf.Bool("no-color", false, "disable colour (also NO_COLOR, SNAVIO_NO_COLOR)")
	pf.BoolVarP(&g.Verbose, "verbose", "v", false, "write debug logs and error details to stderr")
	g.Flags = pf

	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(output.Formats, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("profile", func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		file, err := f.Config()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return file.ProfileNames(), cobra.ShellCompDirectiveNoFileComp
	})

	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return &cmdutil.UsageError{Err: err}
	})

	cmd.AddCommand(
		version.NewCmd(f, nil),
		completion.NewCmd(f),
		profile.NewCmd(f),
		route.NewCmd(f),
		acl.NewCmd(f),
		key.NewCmd(f),
		tenantconfig.NewCmd(f, nil),
		token.NewCmd(f),
		dispatch.NewCmd(f),
		queue.NewCmd(f),
		send.NewCmd(f, nil),
		snapshot.NewCmd(f),
		doctor.NewCmd(f, nil),
		tail.NewCmd(f, nil),
		replay.NewCmd(f, nil),
	)
	for _, t := range helpTopics() {
		cmd.AddCommand(t)
	}
	return cmd
}
