// Package tenantconfig implements `snavio tenant-config [TENANT]`: the
// tenant configuration document producers poll for their signing keys and
// the rotation timeline.
package tenantconfig

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
)

// Options are the inputs of `snavio tenant-config`.
type Options struct {
	route.Deps
	// Tenant is the tenant to read; "" reads the token's own tenant.
	Tenant string
}

// NewCmd builds `snavio tenant-config`. runF replaces the run function in
// tests.
func NewCmd(f *cmdutil.Factory, runF func(context.Context, *Options) error) *cobra.Command {
	return NewCmdWith(route.NewDeps(f), runF)
}

// NewCmdWith builds the command over d.
func NewCmdWith(d route.Deps, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Deps: d}
	return &cobra.Command{
		Use:   "tenant-config [TENANT]",
		Short: "Show the tenant configuration producers poll for their keys",
		Long: `Show the tenant configuration document: for each of the tenant's services,
the key version to sign with now, the previous one still accepted during the
overlap, the next one scheduled, and when the platform rotates next.

A tenant token reads its own tenant's document (TENANT may be omitted); the
operator names the tenant. The table leaves the secrets out; -o json (or
yaml) prints the document as producers receive it, secrets included, so
treat that output as a secret.

` + cmdutil.ControlAPIHelp,
		Example: `  SNAVIO_TOKEN=$(cat acme.token) snavio tenant-config
  snavio tenant-config acme
  snavio tenant-config acme -o json > acme-tenant-config.json`,
		Args: cmdutil.MaximumArgs(1, "one TENANT"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Tenant = args[0]
				if !envelope.ValidTenant(opts.Tenant) {
					return cmdutil.Usagef("invalid TENANT %q: a tenant id is "+envelope.TenantRule, opts.Tenant)
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return Run(cmd.Context(), opts)
		},
	}
}

// Doc is the tenant configuration as printed: the document itself in
// structured formats, a table without secrets for people.
type Doc struct{ keys.TenantConfig }

// TableHeader implements output.Tabular.
func (Doc) TableHeader() []string {
	return []string{"source", "current", "since", "previous", "accepted until", "next", "from", "next rotation"}
}

// TableRows implements output.Tabular.
func (d Doc) TableRows() [][]string {
	rows := make([][]string, 0, len(d.Services))
	for _, s := range d.Services {
		rows = append(rows, []string{s.Source, id(s.Current), at(s.Current), id(s.Previous), until(s.Previous), id(s.Next), at(s.Next), ts(s.NextRotationAt)})
	}
	return rows
}

func id(k *keys.KeyInfo) string {
	if k == nil {
		return "-"
	}
	return k.VersionID
}

func at(k *keys.KeyInfo) string {
	if k == nil {
		return "-"
	}
	return ts(k.ActivatedAt)
}

func until(k *keys.KeyInfo) string {
	if k == nil || k.ExpiresAt == nil {
		return "-"
	}
	return ts(*k.ExpiresAt)
}

func ts(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// Run reads and prints the document.
func Run(ctx context.Context, opts *Options) error {
	a, err := opts.Platform()
	if err != nil {
		return err
	}
	tenant := opts.Tenant
	if tenant == "" {
		// A tenant token names its tenant; ask the server whose it is.
		who, err := a.Whoami(ctx)
		if err != nil {
			return fmt.Errorf("whose token is this: %w", cmdutil.MapAPIError(err, "snavio profile show"))
		}
		if who.Tenant == "" {
			return cmdutil.Usagef("the operator token belongs to no tenant: name one, `snavio tenant-config TENANT` (see the sources in `snavio key list`)")
		}
		tenant = who.Tenant
	}
	raw, err := a.TenantConfig(ctx, tenant)
	if err != nil {
		return fmt.Errorf("tenant configuration: %w", cmdutil.MapAPIError(err, "snavio key list"))
	}
	var doc Doc
	if err := json.Unmarshal(raw, &doc.TenantConfig); err != nil {
		return fmt.Errorf("tenant configuration: the server's answer is not the JSON this snavio expects (%v); check that snavio and the server are the same version (`snavio version`)", err)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	if err := p.Print(doc); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(opts.ErrOut, "Tenant %s: %d service(s); poll at least every %ds; overlap %ds. Secrets are left out of the table: -o json prints them.\n",
			doc.Tenant, len(doc.Services), doc.PollIntervalSeconds, doc.OverlapSeconds)
		return err
	}
	return nil
}
