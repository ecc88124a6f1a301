package route

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// DeleteOptions are the inputs of `snavio route delete`.
type DeleteOptions struct {
	Deps
	Target, Command string
	// Version, when set, is the stored version the caller expects to
	// delete; 0 reads the current one.
	Version int64
}

// NewCmdDelete builds `snavio route delete`. runF replaces the run function
// in tests.
func NewCmdDelete(d Deps, runF func(context.Context, *DeleteOptions) error) *cobra.Command {
	opts := &DeleteOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "delete --target T --command C [--version N]",
		Aliases: []string{"rm"},
		Short:   "Delete a route",
		Long: `Delete a route. Commands for it are then refused (route not found) once the
dispatcher's route cache expires. --version deletes only if the stored route
is still that version (a guard against deleting a route someone just
changed); without it the current version is read first.`,
		Example: `  snavio route delete --target mailer --command send-receipt
  snavio route delete --target mailer --command send-receipt --version 3 -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Version < 0 {
				return cmdutil.Usagef("invalid --version %d: give a stored version (see `snavio route get`)", opts.Version)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunDelete(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Target, "target", "", "target service (required)")
	cmd.Flags().StringVar(&opts.Command, "command", "", "command name (required)")
	cmd.Flags().Int64Var(&opts.Version, "version", 0, "delete only if the stored version is this one")
	_ = cmd.MarkFlagRequired("target")
	_ = cmd.MarkFlagRequired("command")
	return cmd
}

// DeleteItem deletes id at version (0: the current one).
func DeleteItem(ctx context.Context, d Deps, id registry.ID, version int64, list string) (HistoryEntry, error) {
	if version == 0 {
		it, err := GetItem(ctx, d.Platform, id, list)
		if err != nil {
			return HistoryEntry{}, err
		}
		version = it.Version()
	}
	a, err := d.Platform()
	if err != nil {
		return HistoryEntry{}, err
	}
	ch, err := a.DeleteRegistryItem(ctx, id, version)
	if err != nil {
		return HistoryEntry{}, cmdutil.MapAPIError(err, list)
	}
	return HistoryEntry{Change: ch, Fields: ChangedFields(ch.Before, ch.After)}, nil
}

// RunDelete deletes a route.
func RunDelete(ctx context.Context, opts *DeleteOptions) error {
	e, err := DeleteItem(ctx, opts.Deps, registry.RouteID(opts.Target, opts.Command), opts.Version, "snavio route list")
	if err != nil {
		return fmt.Errorf("delete route %s %s: %w", opts.Target, opts.Command, err)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(e)
}
