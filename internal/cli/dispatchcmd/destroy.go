package dispatchcmd

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/deploy/stack"
)

// DestroyOptions are the inputs of `snavio dispatch destroy`.
type DestroyOptions struct {
	Env    string
	Region string
	Yes    bool
}

func newDestroyCmd(f *cmdutil.Factory, runF func(context.Context, *DestroyOptions) error) *cobra.Command {
	opts := &DestroyOptions{}
	cmd := &cobra.Command{
		Use:   "destroy --env ENV [--yes]",
		Short: "Delete an environment's platform stack from AWS",
		Long: `Delete the platform stack snavio-<env> that "dispatch deploy" made, and wait
until CloudFormation has deleted it, printing its events. The DynamoDB
tables (registry, changelog, flow, outbox) and the snapshot bucket are
retained: they hold the registry and its history; delete them by hand if
the environment is gone for good (docs/deploy.md). Tenants' emit roles,
topics and queues are data, not part of the stack.

On a terminal it asks you to type the environment's name; elsewhere it
needs --yes and never prompts. Exit status: 0 deleted or no stack, 1
failed, 2 bad usage.`,
		Example: `  snavio dispatch destroy --env staging
  snavio dispatch destroy --env pr-123 --yes -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := stack.CheckEnv(opts.Env); err != nil {
				return cmdutil.Usagef("--env: %v", err)
			}
			if !opts.Yes && !f.IOStreams.CanPrompt() {
				return cmdutil.Usagef("destroy deletes stack snavio-%s: pass --yes to confirm (there is no prompt without a terminal)", opts.Env)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runDestroy(cmd.Context(), f, opts)
		},
	}
	cmd.Flags().StringVar(&opts.Env, "env", "", "environment whose stack to delete (required)")
	cmd.Flags().StringVar(&opts.Region, "region", "", "AWS region (default: the SDK's, from AWS_REGION or the AWS profile)")
	cmd.Flags().BoolVarP(&opts.Yes, "yes", "y", false, "delete without asking")
	_ = cmd.MarkFlagRequired("env")
	return cmd
}

// DestroyResult is what destroy prints.
type DestroyResult struct {
	Stack    string   `json:"stack"`
	Deleted  bool     `json:"deleted"`
	Retained []string `json:"retained"`
}

func runDestroy(ctx context.Context, f *cmdutil.Factory, o *DestroyOptions) error {
	ios := f.IOStreams
	p, err := f.Printer()
	if err != nil {
		return err
	}
	n := stack.Names{Env: o.Env}
	if !o.Yes {
		ok, err := confirm(ios.In, ios.ErrOut, fmt.Sprintf("Delete stack %s? Tables and the snapshot bucket are kept. Type the env (%s) to confirm: ", n.Stack(), o.Env), o.Env)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("not destroyed: the typed name did not match %q; nothing was deleted", o.Env)
		}
	}
	d, err := awsClients(ctx, o.Region)
	if err != nil {
		return err
	}
	d.Progress = progressPrinter(ios.ErrOut)
	deleted, err := d.Destroy(ctx, o.Env)
	if err != nil {
		return err
	}
	res := DestroyResult{Stack: n.Stack(), Deleted: deleted, Retained: []string{}}
	if deleted {
		for _, t := range []string{stack.TableRegistry, stack.TableChangelog, stack.TableFlow, stack.TableOutbox} {
			res.Retained = append(res.Retained, n.Table(t))
		}
		res.Retained = append(res.Retained, "the snapshot bucket (output SnapshotBucket)")
	} else {
		fmt.Fprintf(ios.ErrOut, "There is no stack %s: nothing to delete.\n", n.Stack())
	}
	return p.Print(res)
}
