// Package token implements `snavio token create|list|revoke`: the bearer
// tokens of tenants on a `snavio dispatch serve` (internal/controlapi).
// A tenant token reads only its own tenant's telemetry, tenant
// configuration and key material; the operator token does everything. A
// new token is printed (or written to --token-file) once, by the command
// that issued it; the server keeps only its digest.
package token

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// Deps are what every token command needs, as lazy providers.
type Deps struct {
	Platform func() (platform.Platform, error)
	Printer  func() (*output.Printer, error)
	// ErrOut receives human notes (never results).
	ErrOut io.Writer
}

// NewDeps returns the production dependencies of f.
func NewDeps(f *cmdutil.Factory) Deps {
	return Deps{Platform: f.Platform, Printer: f.Printer, ErrOut: f.IOStreams.ErrOut}
}

// NewCmd builds `snavio token`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "token <command>",
		Short: "Issue, list and revoke tenants' API tokens",
		Long: `A tenant token lets a tenant's people and producers use the control API of
"snavio dispatch serve" as that tenant: read its own telemetry (snavio tail),
its tenant configuration and key material (snavio tenant-config), and list
queues. Everything else, and every other tenant's data, needs the operator
token (operator.token in the server's data directory).

The CLI sends the token in SNAVIO_TOKEN when set, else the profile's
operator token. "token create" prints a new token once (or writes it to
--token-file); the server keeps only its SHA-256 digest, so a lost token
is revoked and issued again. Creating and revoking need the operator token.`,
		Example: `  snavio token create --tenant acme --token-file acme.token
  SNAVIO_TOKEN=$(cat acme.token) snavio tail --tenant acme --follow=false
  snavio token list --tenant acme
  snavio token revoke tok_3f2a9c01d4e5`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := NewDeps(f)
	cmd.AddCommand(NewCmdCreate(d, nil), NewCmdList(d, nil), NewCmdRevoke(d, nil))
	return cmd
}

func mapErr(err error) error { return cmdutil.MapAPIError(err, "snavio token list") }

func checkTenant(tenant string) error {
	if err := wire.CheckTenant("--tenant", tenant); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	return nil
}

// Created is a new token as printed: the only output that carries one.
type Created struct {
	ID      string    `json:"id"`
	Tenant  string    `json:"tenant"`
	Created time.Time `json:"created"`
	// Token is the bearer token, empty when it went to TokenFile.
	Token     string `json:"token,omitempty"`
	TokenFile string `json:"token_file,omitempty"`
	Notice    string `json:"notice"`
}

// TableHeader implements output.Tabular: one row, with columns like
// `token list`'s (the printer upper-cases them).
func (c Created) TableHeader() []string {
	if c.TokenFile != "" {
		return []string{"id", "tenant", "created", "token written to"}
	}
	return []string{"id", "tenant", "created", "token (shown once)"}
}

// TableRows implements output.Tabular.
func (c Created) TableRows() [][]string {
	last := c.Token
	if c.TokenFile != "" {
		last = c.TokenFile
	}
	return [][]string{{c.ID, c.Tenant, c.Created.UTC().Format(time.RFC3339), last}}
}

// CreateOptions are the inputs of `snavio token create`.
type CreateOptions struct {
	Deps
	Tenant string
	// TokenFile, when set, receives the token (mode 0600, must not exist)
	// instead of the output.
	TokenFile string
}

// NewCmdCreate builds `snavio token create`. runF replaces the run
// function in tests.
func NewCmdCreate(d Deps, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "create --tenant TENANT [--token-file FILE]",
		Short: "Issue a tenant's token and print it once",
		Long: `Issue a bearer token that acts as one tenant, and print it once: it is never
shown again, so hand it over now (it goes in SNAVIO_TOKEN). With
--token-file the token is written to FILE (created with mode 0600; an
existing file is refused) and left out of the output, so it never reaches
a terminal or a log. A tenant may hold several tokens (one per producer or
person); revoke each on its own. Needs the operator token.`,
		Example: `  snavio token create --tenant acme
  snavio token create --tenant acme --token-file acme.token
  snavio token create --tenant acme -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTenant(opts.Tenant); err != nil {
				return err
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runCreate(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "tenant the token acts as: the part of its sources before '/' (required)")
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "write the token to this new file (mode 0600) instead of printing it")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

func runCreate(ctx context.Context, o *CreateOptions) (err error) {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	// The file is made before the token, so that a path that cannot be
	// written fails before a token exists that nobody holds.
	var file *os.File
	if o.TokenFile != "" {
		file, err = os.OpenFile(o.TokenFile, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			if errors.Is(err, fs.ErrExist) {
				return cmdutil.Usagef("--token-file %s exists: a token file is never overwritten; remove it or pass another path", o.TokenFile)
			}
			return cmdutil.Usagef("--token-file: %v; pass a path in a writable directory", err)
		}
		defer func() {
			if cerr := file.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("writing --token-file %s: %w", o.TokenFile, cerr)
			}
			if err != nil {
				_ = os.Remove(o.TokenFile)
			}
		}()
	}
	iss, err := api.IssueToken(ctx, wire.TokenIssueRequest{Tenant: o.Tenant})
	if err != nil {
		return fmt.Errorf("issuing a token for %s: %w", o.Tenant, mapErr(err))
	}
	out := Created{ID: iss.ID, Tenant: iss.Tenant, Created: iss.Created, Token: iss.Secret, Notice: wire.TokenNotice}
	if file != nil {
		if _, err := file.WriteString(iss.Secret + "\n"); err != nil {
			return fmt.Errorf("writing --token-file %s: %w; the token %s is lost: revoke it with `snavio token revoke %s`", o.TokenFile, err, iss.ID, iss.ID)
		}
		if err := file.Sync(); err != nil {
			return fmt.Errorf("writing --token-file %s: %w; the token %s is lost: revoke it with `snavio token revoke %s`", o.TokenFile, err, iss.ID, iss.ID)
		}
		out.Token, out.TokenFile = "", o.TokenFile
		out.Notice = "the token is in " + o.TokenFile + " (mode 0600) and nowhere else; use it as SNAVIO_TOKEN=$(cat " + o.TokenFile + ")"
	}
	if w := cmdutil.SecretFileWarning("--token-file", o.TokenFile); w != "" && file != nil {
		fmt.Fprintln(o.ErrOut, w)
	}
	if err := p.Print(out); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(o.ErrOut, "Note: %s.\n", out.Notice)
		return err
	}
	return nil
}

// Tokens is a list of tokens without secrets.
type Tokens []wire.Token

// TableHeader implements output.Tabular.
func (Tokens) TableHeader() []string { return []string{"id", "tenant", "created"} }

// TableRows implements output.Tabular.
func (ts Tokens) TableRows() [][]string {
	rows := make([][]string, len(ts))
	for i, t := range ts {
		rows[i] = []string{t.ID, t.Tenant, t.Created.UTC().Format(time.RFC3339)}
	}
	return rows
}

// ListOptions are the inputs of `snavio token list`.
type ListOptions struct {
	Deps
	Tenant string
}

// NewCmdList builds `snavio token list`. runF replaces the run function in
// tests.
func NewCmdList(d Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--tenant TENANT]",
		Aliases: []string{"ls"},
		Short:   "List issued tenant tokens: ids, tenants and dates, never the tokens",
		Long: `List the issued tenant tokens, oldest first: their ids (for revoke), tenants
and creation dates. Tokens themselves are never listed: the server does not
keep them. The operator sees every tenant's; a tenant token sees its own
tenant's.`,
		Example: `  snavio token list
  snavio token list --tenant acme -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if cmd.Flags().Changed("tenant") {
				if err := checkTenant(opts.Tenant); err != nil {
					return err
				}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runList(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant's tokens")
	return cmd
}

func runList(ctx context.Context, o *ListOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	l, err := api.ListTokens(ctx, o.Tenant)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	out := Tokens(l.Tokens)
	if out == nil {
		out = Tokens{}
	}
	return p.Print(out)
}

// RevokeOptions are the inputs of `snavio token revoke`.
type RevokeOptions struct {
	Deps
	ID string
}

// NewCmdRevoke builds `snavio token revoke`. runF replaces the run
// function in tests.
func NewCmdRevoke(d Deps, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{Deps: d}
	return &cobra.Command{
		Use:     "revoke ID",
		Aliases: []string{"rm"},
		Short:   "Revoke a tenant token: it stops working at once",
		Long: `Revoke the tenant token with ID (from "snavio token list"). The next request
made with it is refused (HTTP 401). Revoking cannot be undone; issue a new
token with "snavio token create". Needs the operator token.`,
		Example: `  snavio token revoke tok_3f2a9c01d4e5
  snavio token revoke tok_3f2a9c01d4e5 -o json`,
		Args: cmdutil.ExactArgs(1, "the token ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.ID = args[0]
			if err := wire.CheckTokenID("token ID", opts.ID); err != nil {
				return &cmdutil.UsageError{Err: err}
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runRevoke(cmd.Context(), opts)
		},
	}
}

func runRevoke(ctx context.Context, o *RevokeOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	r, err := api.RevokeToken(ctx, o.ID)
	if err != nil {
		return fmt.Errorf("revoking %s: %w", o.ID, mapErr(err))
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(r)
}
