package key

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// DeliveryNotice is said with a delivery key in a table.
const DeliveryNotice = "give this key to the team consuming the target's queue, through a secrets manager: it verifies that a message came from the dispatcher (docs/security/delivery-signature.md)"

// DeliveryOptions are the inputs of `snavio key delivery`.
type DeliveryOptions struct {
	route.Deps
	Target string
}

// DeliveryKey is a target's delivery verification key as printed.
type DeliveryKey wire.DeliveryKey

// TableHeader implements output.Tabular.
func (DeliveryKey) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (k DeliveryKey) TableRows() [][]string {
	return [][]string{{"target", k.Target}, {"key_id", k.KeyID}, {"KEY (base64url)", k.Key}, {"scheme", k.Scheme}, {"routes", strconv.Itoa(k.Routes)}}
}

// NewCmdDelivery builds `snavio key delivery`. runF replaces the run
// function in tests.
func NewCmdDelivery(d route.Deps, runF func(context.Context, *DeliveryOptions) error) *cobra.Command {
	opts := &DeliveryOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "delivery --target TARGET",
		Short: "Print the key a target's consumer verifies delivered messages with",
		Long: `Print a target's delivery verification key. Every message the dispatcher
delivers carries a signature (attributes snavio.signature and
snavio.signature_key) made with its target's key; the team consuming the
target's queue verifies it to know the message came from the dispatcher
and was not put into the queue by anyone else. The key verifies that
target's messages only and cannot sign another target's.

The key is derived from the platform's master secret, so it is the same on
every call until the master is replaced (the key id changes then). Needs
the operator token. See docs/security/delivery-signature.md for the scheme,
test vectors and code to copy into a consumer.`,
		Example: `  snavio key delivery --target orders
  snavio key delivery --target orders -o json > orders-delivery.key.json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if !envelope.ValidTarget(opts.Target) {
				return cmdutil.Usagef("invalid --target %q: a target is 1-64 of [a-z0-9._-], starting with a letter or digit, e.g. orders", opts.Target)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunDelivery(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Target, "target", "", "the target whose key to print (required)")
	_ = cmd.MarkFlagRequired("target")
	return cmd
}

// RunDelivery fetches and prints the target's key.
func RunDelivery(ctx context.Context, opts *DeliveryOptions) error {
	a, err := opts.Platform()
	if err != nil {
		return err
	}
	k, err := a.DeliveryKey(ctx, opts.Target)
	if err != nil {
		return fmt.Errorf("delivery key of %s: %w", opts.Target, cmdutil.MapAPIError(err, "snavio route list"))
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(DeliveryKey(k)); err != nil {
		return err
	}
	if p.Format() == output.Table {
		return warn(opts.ErrOut, "Note: "+DeliveryNotice+".")
	}
	return nil
}
