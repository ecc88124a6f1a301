// Package key implements `snavio key create|rotate|list`: the HMAC keys
// producing services sign commands with. A new secret is printed once, by
// the command that made it; nothing lists it again. Producers read their
// keys with their tenant's token from the tenant configuration (`snavio
// tenant-config`).
package key

import (
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Notice is said with every new secret.
const Notice = "this secret is shown once and never again: store it now (e.g. in a secrets manager); producers can also fetch their current keys with their tenant token: snavio tenant-config"

// NewCmd builds `snavio key`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "key <command>",
		Short: "Create, rotate and list the HMAC keys of producing services",
		Long: `Each producing service (bus source <tenant>/<service>) signs its commands
with an HMAC-SHA256 secret. "key create" makes a service's first secret,
"key rotate" its next one (the previous stays accepted for the overlap);
both print the new secret once. "key list" shows versions and dates, never
secrets. Creating and rotating need the operator token. "key delivery"
prints the key a target's consumer verifies delivered messages with.

` + cmdutil.ControlAPIHelp,
		Example: `  snavio key create --service acme/billing
  snavio key rotate --service acme/billing --activate-in 1h
  snavio key list --tenant acme
  snavio key delivery --target orders`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := route.NewDeps(f)
	cmd.AddCommand(NewCmdCreate(d, nil), NewCmdRotate(d, nil), NewCmdList(d, nil), NewCmdDelivery(d, nil))
	return cmd
}

// Secret is a new key version as printed: the only output that carries a
// secret.
type Secret struct {
	Source      string    `json:"source"`
	VersionID   string    `json:"version_id"`
	ActivatedAt time.Time `json:"activated_at"`
	// Secret is base64 in JSON, as the tenant configuration carries it.
	Secret []byte `json:"secret"`
	Notice string `json:"notice"`
}

// TableHeader implements output.Tabular.
func (Secret) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (s Secret) TableRows() [][]string {
	return [][]string{{"source", s.Source}, {"version_id", s.VersionID}, {"activated_at", s.ActivatedAt.UTC().Format(time.RFC3339)},
		// encoding/json writes []byte as standard base64; so does this.
		{"SECRET (base64, shown once)", base64.StdEncoding.EncodeToString(s.Secret)}}
}

func checkService(s string) error {
	if !envelope.ValidSource(s) {
		return cmdutil.Usagef("invalid --service %q: use <tenant>/<service>, e.g. acme/billing", s)
	}
	return nil
}

// Options are the inputs of `snavio key create` and `key rotate`.
type Options struct {
	route.Deps
	Service string
	// ActivateAt, for rotate, is when the new version becomes current
	// (zero: now).
	ActivateAt time.Time
}

// NewCmdCreate builds `snavio key create`. runF replaces the run function
// in tests.
func NewCmdCreate(d route.Deps, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Deps: d}
	cmd := &cobra.Command{
		Use:   "create --service TENANT/SERVICE",
		Short: "Create a service's first HMAC key and print its secret once",
		Long: `Create the first HMAC key of a producing service and print its secret, once.
It is never printed again: store it now. A service that has keys already
is an error (rotate instead).`,
		Example: `  snavio key create --service acme/billing
  (umask 077; snavio key create --service acme/billing -o json > acme-billing.key.json)
  snavio send --source acme/billing --target mailer --command send-receipt \
      --payload '{}' --secret-file acme-billing.key.json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkService(opts.Service); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts, "create")
		},
	}
	cmd.Flags().StringVar(&opts.Service, "service", "", "producing service, <tenant>/<service> (required)")
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

// NewCmdRotate builds `snavio key rotate`. runF replaces the run function
// in tests.
func NewCmdRotate(d route.Deps, runF func(context.Context, *Options) error) *cobra.Command {
	opts := &Options{Deps: d}
	var at, in string
	cmd := &cobra.Command{
		Use:   "rotate --service TENANT/SERVICE [--activate-at TIME | --activate-in D]",
		Short: "Make a service's next HMAC key and print its secret once",
		Long: `Make the next version of a service's HMAC key and print its secret, once.
The new version becomes current at --activate-at (RFC 3339) or after
--activate-in, default now; producers polling the tenant configuration
switch to it then, and the previous version stays accepted for the overlap.
The current version stays until the new one activates, and the previous
one through its overlap. Older versions are kept for the key history (the
overlap plus the archive's retention, 7 days by default) so that a replay
can verify an archived command again, then dropped.`,
		Example: `  snavio key rotate --service acme/billing
  snavio key rotate --service acme/billing --activate-in 1h
  snavio key rotate --service acme/billing --activate-at 2026-12-01T00:00:00Z -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkService(opts.Service); err != nil {
				return err
			}
			switch {
			case at != "" && in != "":
				return cmdutil.Usagef("give --activate-at or --activate-in, not both")
			case at != "":
				t, err := time.Parse(time.RFC3339, at)
				if err != nil {
					return cmdutil.Usagef("invalid --activate-at %q: use RFC 3339, e.g. 2026-12-01T00:00:00Z", at)
				}
				if !t.After(opts.Now()) {
					return cmdutil.Usagef("--activate-at %s is not in the future: omit it to activate now", at)
				}
				opts.ActivateAt = t
			case in != "":
				s, err := route.Seconds("--activate-in", in)
				if err != nil {
					return err
				}
				opts.ActivateAt = opts.Now().Add(time.Duration(s) * time.Second).Truncate(time.Second)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return run(cmd.Context(), opts, "rotate")
		},
	}
	cmd.Flags().StringVar(&opts.Service, "service", "", "producing service, <tenant>/<service> (required)")
	cmd.Flags().StringVar(&at, "activate-at", "", "when the new version becomes current, RFC 3339 (default now)")
	cmd.Flags().StringVar(&in, "activate-in", "", "make the new version current this long from now, e.g. 1h")
	_ = cmd.MarkFlagRequired("service")
	return cmd
}

// run creates (verb "create") or rotates (verb "rotate") the key.
func run(ctx context.Context, opts *Options, verb string) error {
	a, err := opts.Platform()
	if err != nil {
		return err
	}
	req := wire.KeyRequest{Source: opts.Service, ActivateAt: opts.ActivateAt}
	op := a.CreateKey
	if verb == "rotate" {
		op = a.RotateKey
	}
	res, err := op(ctx, req)
	if err != nil {
		return fmt.Errorf("%s key of %s: %w", verb, opts.Service, cmdutil.MapAPIError(err, "snavio key list"))
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	out := Secret{Source: res.Source, VersionID: res.VersionID, ActivatedAt: res.Activated, Secret: res.Secret, Notice: Notice}
	if err := p.Print(out); err != nil {
		return err
	}
	if p.Format() == output.Table {
		return warn(opts.ErrOut, "Note: "+Notice+".")
	}
	return nil
}

func warn(w io.Writer, msg string) error {
	_, err := fmt.Fprintln(w, msg)
	return err
}

// ListOptions are the inputs of `snavio key list`.
type ListOptions struct {
	route.Deps
	Tenant, Service string
}

// Version is a key version without its secret.
type Version struct {
	ID          string    `json:"id"`
	ActivatedAt time.Time `json:"activated_at"`
	NotAfter    time.Time `json:"not_after,omitzero"`
}

// Keyset is a service's keys as listed: versions and dates, no secret.
type Keyset struct {
	Source   string    `json:"source"`
	Current  string    `json:"current,omitempty"`
	Versions []Version `json:"versions"`
	Version  int64     `json:"version"`
}

// Keysets is a list of keysets.
type Keysets []Keyset

// TableHeader implements output.Tabular.
func (Keysets) TableHeader() []string {
	return []string{"source", "current", "versions", "latest activation", "version"}
}

// TableRows implements output.Tabular.
func (ks Keysets) TableRows() [][]string {
	rows := make([][]string, 0, len(ks))
	for _, k := range ks {
		ids := make([]string, len(k.Versions))
		var latest time.Time
		for i, v := range k.Versions {
			ids[i] = v.ID
			if v.ActivatedAt.After(latest) {
				latest = v.ActivatedAt
			}
		}
		cur := k.Current
		if cur == "" {
			cur = "-"
		}
		rows = append(rows, []string{k.Source, cur, strings.Join(ids, ","), latest.UTC().Format(time.RFC3339), strconv.FormatInt(k.Version, 10)})
	}
	return rows
}

// NewKeyset lists k's versions at now without their secrets: current is
// the latest version activated by now and not past its NotAfter.
func NewKeyset(k registry.ServiceKey, now time.Time) Keyset {
	out := Keyset{Source: k.Source, Version: k.Version, Versions: []Version{}}
	var curAt time.Time
	for _, v := range k.Versions {
		out.Versions = append(out.Versions, Version{ID: v.ID, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter})
		live := !v.ActivatedAt.After(now) && (v.NotAfter.IsZero() || now.Before(v.NotAfter))
		if live && (out.Current == "" || v.ActivatedAt.After(curAt)) {
			out.Current, curAt = v.ID, v.ActivatedAt
		}
	}
	return out
}

// NewCmdList builds `snavio key list`. runF replaces the run function in
// tests.
func NewCmdList(d route.Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--tenant T | --service TENANT/SERVICE]",
		Aliases: []string{"ls"},
		Short:   "List services' key versions and dates (never secrets)",
		Example: `  snavio key list
  snavio key list --tenant acme -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Service != "" {
				if err := checkService(opts.Service); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunList(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant's services")
	cmd.Flags().StringVar(&opts.Service, "service", "", "only this service")
	return cmd
}

// RunList lists keysets.
func RunList(ctx context.Context, opts *ListOptions) error {
	its, err := route.ListItems(ctx, opts.Platform, registry.KindKey, platform.RegistryFilter{Tenant: opts.Tenant, Source: opts.Service}, "snavio key list")
	if err != nil {
		return err
	}
	now := opts.Now()
	out := Keysets{}
	for _, it := range its {
		if it.Key != nil {
			out = append(out, NewKeyset(*it.Key, now))
		}
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(out)
}
