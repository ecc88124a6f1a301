// Package acl implements `snavio acl grant|revoke|list`: which sources may
// send which commands to which targets. Deny is the default: a triple
// without a grant is refused.
package acl

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// NewCmd builds `snavio acl`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "acl <command>",
		Short: "Grant, revoke and list who may send which commands",
		Long: `An ACL grant lets a source (<tenant>/<service>) send a command to a target.
Deny is the default: a command without a grant is refused. The dispatcher
caches grants for the TTLs of their sensitivity profile (critical 2s/4s,
moderate 10s/20s, low 30s/90s, fresh/stale), so a revocation takes effect
within the stale TTL. Changes need the operator token; a tenant token lists
its own tenant's grants, the operator's every grant.

` + cmdutil.ControlAPIHelp,
		Example: `  snavio acl grant --source acme/billing --target mailer --command send-receipt
  snavio acl list --target mailer
  snavio acl revoke --source acme/billing --target mailer --command send-receipt`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := route.NewDeps(f)
	cmd.AddCommand(NewCmdGrant(d, nil), NewCmdRevoke(d, nil), NewCmdList(d, nil))
	return cmd
}

// Triple is the (source, target, command) an ACL names.
type Triple struct{ Source, Target, Command string }

func (t *Triple) flags(cmd *cobra.Command) {
	cmd.Flags().StringVar(&t.Source, "source", "", "producing service, <tenant>/<service> (required)")
	cmd.Flags().StringVar(&t.Target, "target", "", "target service (required)")
	cmd.Flags().StringVar(&t.Command, "command", "", "command name (required)")
	for _, n := range []string{"source", "target", "command"} {
		_ = cmd.MarkFlagRequired(n)
	}
}

func (t Triple) check() error {
	if !envelope.ValidSource(t.Source) {
		return cmdutil.Usagef("invalid --source %q: use <tenant>/<service>, e.g. acme/billing", t.Source)
	}
	return nil
}

// GrantOptions are the inputs of `snavio acl grant`.
type GrantOptions struct {
	route.Deps
	ACL    registry.ACL
	DryRun bool
}

// NewCmdGrant builds `snavio acl grant`. runF replaces the run function in
// tests.
func NewCmdGrant(d route.Deps, runF func(context.Context, *GrantOptions) error) *cobra.Command {
	opts := &GrantOptions{Deps: d}
	var t Triple
	var sensitivity, fresh, stale, ttl string
	cmd := &cobra.Command{
		Use:   "grant --source S --target T --command C [--sensitivity P | --fresh-ttl D --stale-ttl D] [--ttl D]",
		Short: "Let a source send a command to a target",
		Long: `Grant source the right to send command to target. Granting again with the
same flags changes nothing; with other flags it updates the grant; a
revoked grant is granted again.

Without --sensitivity the grant takes its route's profile. --fresh-ttl and
--stale-ttl (both or neither, fresh < stale, at most 1 day) override the
profile's cache TTLs. --ttl makes the grant expire.`,
		Example: `  snavio acl grant --source acme/billing --target mailer --command send-receipt
  snavio acl grant --source acme/billing --target mailer --command send-receipt --sensitivity critical
  snavio acl grant --source acme/ops --target mailer --command send-receipt --ttl 1h --dry-run -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := t.check(); err != nil {
				return err
			}
			a := registry.ACL{Source: t.Source, Target: t.Target, Command: t.Command, Allow: true, Profile: registry.Profile(sensitivity)}
			if !a.Profile.Valid() {
				return cmdutil.Usagef("invalid --sensitivity %q: use critical, moderate or low", sensitivity)
			}
			if sensitivity != "" && (fresh != "" || stale != "") {
				return cmdutil.Usagef("give --sensitivity or --fresh-ttl/--stale-ttl, not both")
			}
			var err error
			if a.FreshTTLSeconds, err = route.Seconds("--fresh-ttl", fresh); err != nil {
				return err
			}
			if a.StaleTTLSeconds, err = route.Seconds("--stale-ttl", stale); err != nil {
				return err
			}
			if a.ExpiresAt, err = route.Expiry(ttl, opts.Now()); err != nil {
				return err
			}
			if err := registry.ValidateItem(registry.Item{ACL: &a}); err != nil {
				return cmdutil.Usagef("%s; see `snavio acl grant --help`", err)
			}
			opts.ACL = a
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunGrant(cmd.Context(), opts)
		},
	}
	t.flags(cmd)
	cmd.Flags().StringVar(&sensitivity, "sensitivity", "", "sensitivity profile: critical, moderate or low (default: the route's)")
	cmd.Flags().StringVar(&fresh, "fresh-ttl", "", "how long caches use the grant without re-reading it (with --stale-ttl)")
	cmd.Flags().StringVar(&stale, "stale-ttl", "", "how long caches may still use it while re-reading (with --fresh-ttl)")
	cmd.Flags().StringVar(&ttl, "ttl", "", "make the grant expire this long from now")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "print the plan and write nothing")
	_ = cmd.RegisterFlagCompletionFunc("sensitivity", cobra.FixedCompletions([]string{"critical", "moderate", "low"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

// RunGrant grants through the one registration code path.
func RunGrant(ctx context.Context, opts *GrantOptions) error {
	a := opts.ACL
	res, err := route.Apply(ctx, opts.Platform, wire.ApplyRequest{Items: []registry.Item{{ACL: &a}}, DryRun: opts.DryRun}, "snavio acl list")
	if err != nil {
		return fmt.Errorf("grant %s -> %s %s: %w", a.Source, a.Target, a.Command, err)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return route.Print(p, opts.ErrOut, res)
}

// RevokeOptions are the inputs of `snavio acl revoke`.
type RevokeOptions struct {
	route.Deps
	Triple
}

// NewCmdRevoke builds `snavio acl revoke`. runF replaces the run function
// in tests.
func NewCmdRevoke(d route.Deps, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "revoke --source S --target T --command C",
		Short: "Revoke a grant",
		Long: `Revoke a grant. The record stays, marked revoked, until every dispatcher
cache has seen the revocation (so commands sent after it are audited as
executed_after_acl_revoked if a stale cache let one through), then expires.
Revoking a grant that is already revoked is an error (exit 1).`,
		Example: `  snavio acl revoke --source acme/billing --target mailer --command send-receipt
  snavio acl revoke --source acme/billing --target mailer --command send-receipt -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := opts.check(); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunRevoke(cmd.Context(), opts)
		},
	}
	opts.Triple.flags(cmd)
	return cmd
}

// RunRevoke revokes a grant.
func RunRevoke(ctx context.Context, opts *RevokeOptions) error {
	a, err := opts.Platform()
	if err != nil {
		return err
	}
	ch, err := a.RevokeACL(ctx, wire.ACLRevokeRequest{Source: opts.Source, Target: opts.Target, Command: opts.Command})
	if err != nil {
		return fmt.Errorf("revoke %s -> %s %s: %w", opts.Source, opts.Target, opts.Command, cmdutil.MapAPIError(err, "snavio acl list"))
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(route.HistoryEntry{Change: ch, Fields: route.ChangedFields(ch.Before, ch.After)})
}

// ListOptions are the inputs of `snavio acl list`.
type ListOptions struct {
	route.Deps
	Source, Tenant, Target, Command string
}

// ACLs is a list of grants as printed.
type ACLs []registry.ACL

// TableHeader implements output.Tabular.
func (ACLs) TableHeader() []string {
	return []string{"source", "target", "command", "status", "sensitivity", "ttls", "version", "expires"}
}

// TableRows implements output.Tabular.
func (as ACLs) TableRows() [][]string {
	rows := make([][]string, 0, len(as))
	for _, a := range as {
		status := "granted"
		if !a.Allow {
			status = "revoked " + a.RevokedAt.UTC().Format(time.RFC3339)
		}
		ttls := "profile"
		if a.FreshTTLSeconds > 0 {
			ttls = strconv.FormatInt(a.FreshTTLSeconds, 10) + "s/" + strconv.FormatInt(a.StaleTTLSeconds, 10) + "s"
		}
		rows = append(rows, []string{a.Source, a.Target, a.Command, status, string(a.Profile.OrDefault()), ttls,
			strconv.FormatInt(a.Version, 10), route.Expires(a.ExpiresAt)})
	}
	return rows
}

// NewCmdList builds `snavio acl list`. runF replaces the run function in
// tests.
func NewCmdList(d route.Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--source S | --tenant T] [--target T] [--command C]",
		Aliases: []string{"ls"},
		Short:   "List grants, and revocations not yet expired",
		Example: `  snavio acl list
  snavio acl list --target mailer --command send-receipt
  snavio acl list --tenant acme -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Source != "" && !envelope.ValidSource(opts.Source) {
				return cmdutil.Usagef("invalid --source %q: use <tenant>/<service>, e.g. acme/billing", opts.Source)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunList(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Source, "source", "", "only this source's grants")
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only the grants of this tenant's sources")
	cmd.Flags().StringVar(&opts.Target, "target", "", "only grants to this target")
	cmd.Flags().StringVar(&opts.Command, "command", "", "only grants of this command")
	return cmd
}

// RunList lists grants.
func RunList(ctx context.Context, opts *ListOptions) error {
	its, err := route.ListItems(ctx, opts.Platform, registry.KindACL, platform.RegistryFilter{Source: opts.Source, Tenant: opts.Tenant,
		Target: opts.Target, Command: opts.Command}, "snavio acl list")
	if err != nil {
		return err
	}
	out := ACLs{}
	for _, it := range its {
		if it.ACL != nil {
			out = append(out, *it.ACL)
		}
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(out)
}
