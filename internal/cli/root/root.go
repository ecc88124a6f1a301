// Package root assembles the snavio command tree.
package root

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/acl"
	"github.com/snavio/snavio/internal/cli/bench"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/completion"
	"github.com/snavio/snavio/internal/cli/credentials"
	"github.com/snavio/snavio/internal/cli/dashboardcmd"
	"github.com/snavio/snavio/internal/cli/dispatchcmd"
	"github.com/snavio/snavio/internal/cli/doctor"
	"github.com/snavio/snavio/internal/cli/key"
	"github.com/snavio/snavio/internal/cli/profile"
	"github.com/snavio/snavio/internal/cli/queue"
	"github.com/snavio/snavio/internal/cli/replaycmd"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/send"
	"github.com/snavio/snavio/internal/cli/snapshotcmd"
	"github.com/snavio/snavio/internal/cli/tailcmd"
	"github.com/snavio/snavio/internal/cli/tenantconfig"
	"github.com/snavio/snavio/internal/cli/token"
	"github.com/snavio/snavio/internal/cli/version"
	"github.com/snavio/snavio/internal/output"
)

// command is a top-level command: the names argv may call it by, and how
// to build it with its subtree.
type command struct {
	names []string // name, then aliases
	build func(*cmdutil.Factory) *cobra.Command
	// tree: the command reads the whole tree (completion scripts walk
	// cmd.Root()), so naming it builds every command.
	tree bool
}

// commands are snavio's top-level commands, in the order help lists them.
// TestCommandTableMatchesTheTree checks names against what build returns.
func commands() []command {
	return []command{
		{names: []string{"version"}, build: func(f *cmdutil.Factory) *cobra.Command { return version.NewCmd(f, nil) }},
		{names: []string{"completion"}, build: completion.NewCmd, tree: true},
		{names: []string{"profile"}, build: profile.NewCmd},
		{names: []string{"route"}, build: route.NewCmd},
		{names: []string{"acl"}, build: acl.NewCmd},
		{names: []string{"key"}, build: key.NewCmd},
		{names: []string{"tenant-config"}, build: func(f *cmdutil.Factory) *cobra.Command { return tenantconfig.NewCmd(f, nil) }},
		{names: []string{"token"}, build: token.NewCmd},
		{names: []string{"tenant"}, build: credentials.NewTenantCmd},
		{names: []string{"dispatch"}, build: dispatchcmd.NewCmd},
		{names: []string{"queue"}, build: queue.NewCmd},
		{names: []string{"send"}, build: func(f *cmdutil.Factory) *cobra.Command { return send.NewCmd(f, nil) }},
		{names: []string{"bench"}, build: func(f *cmdutil.Factory) *cobra.Command { return bench.NewCmd(f, nil) }},
		{names: []string{"snapshot"}, build: snapshotcmd.NewCmd},
		{names: []string{"doctor"}, build: func(f *cmdutil.Factory) *cobra.Command { return doctor.NewCmd(f, nil) }},
		{names: []string{"tail"}, build: func(f *cmdutil.Factory) *cobra.Command { return tailcmd.NewCmd(f, nil) }},
		{names: []string{"replay"}, build: func(f *cmdutil.Factory) *cobra.Command { return replaycmd.NewCmd(f, nil) }},
		{names: []string{"dashboard"}, build: func(f *cmdutil.Factory) *cobra.Command { return dashboardcmd.NewCmd(f, nil) }},
	}
}

// NewCmd builds the root command with the whole command tree, for help,
// completion scripts and man pages. It binds the global flags into g,
// which the factory's providers read once flags are parsed.
func NewCmd(f *cmdutil.Factory, g *cmdutil.Globals) *cobra.Command {
	cmd := newRoot(f, g)
	addAll(cmd, f)
	return cmd
}

// NewCmdFor builds the root command for one invocation with arguments
// args (without the program name). When args name a top-level command,
// only that command and its subtree are built: `snavio version` does not
// construct the flags of every other command, which was most of its own
// start-up (docs/startup.md). Anything else (no command, help, a help
// topic, completion and cobra's __complete, an unknown command or flag,
// "--") builds the whole tree, so help, suggestions and completion see
// every command. The result executes args exactly as NewCmd's would:
// TestNewCmdForRunsLikeTheFullTree compares them.
func NewCmdFor(f *cmdutil.Factory, g *cmdutil.Globals, args []string) *cobra.Command {
	cmd := newRoot(f, g)
	name, ok := commandName(cmd, args)
	if ok {
		for _, c := range commands() {
			if !c.tree && slices.Contains(c.names, name) {
				cmd.AddCommand(c.build(f))
				return cmd
			}
		}
	}
	addAll(cmd, f)
	return cmd
}

// addAll adds every top-level command and help topic.
func addAll(cmd *cobra.Command, f *cmdutil.Factory) {
	for _, c := range commands() {
		cmd.AddCommand(c.build(f))
	}
	for _, t := range helpTopics() {
		cmd.AddCommand(t)
	}
	completion.NewNames(f.Platform).Register(cmd)
}

// commandName returns the first argument that is not a global flag or a
// global flag's value: the top-level command args name. ok is false when
// that cannot be told without the full tree: an unknown flag (say -h),
// "--", or no command at all.
func commandName(root *cobra.Command, args []string) (string, bool) {
	pf := root.PersistentFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--" || a == "-":
			return "", false
		case strings.HasPrefix(a, "--"):
			name, _, inline := strings.Cut(a[2:], "=")
			fl := pf.Lookup(name)
			if fl == nil {
				return "", false
			}
			if !inline && fl.NoOptDefVal == "" {
				i++ // the flag's value is the next argument
			}
		case strings.HasPrefix(a, "-"):
			// Shorthands, possibly combined (-vo json, -ojson).
			for j := 1; j < len(a); j++ {
				fl := pf.ShorthandLookup(a[j : j+1])
				if fl == nil {
					return "", false
				}
				if fl.NoOptDefVal == "" {
					if j == len(a)-1 {
						i++ // the value is the next argument
					}
					break // the rest of a is the value
				}
			}
		default:
			return a, true
		}
	}
	return "", false
}

// newRoot builds the root command with the global flags and no children.
func newRoot(f *cmdutil.Factory, g *cmdutil.Globals) *cobra.Command {
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

	cmd.SetFlagErrorFunc(cmdutil.FlagError)

	return cmd
}
