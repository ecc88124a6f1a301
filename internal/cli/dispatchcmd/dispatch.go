// Package dispatch implements `snavio dispatch`: running the dispatcher.
package dispatchcmd

import (
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
)

// NewCmd builds `snavio dispatch`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dispatch <command>",
		Short: "Run the dispatcher",
		Long: `Run the Snavio dispatcher: every stage (shield, fast, slow) and every
background job. "dispatch serve" runs them all on this machine, on an
embedded store, behind an EventBridge-compatible PutEvents endpoint.`,
		Example: `  snavio dispatch serve --demo
  snavio dispatch serve --ephemeral --listen 127.0.0.1:0`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	cmd.AddCommand(newServeCmd(f, nil), newDeployCmd(f, nil), newDestroyCmd(f, nil))
	return cmd
}
