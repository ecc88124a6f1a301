// Package token implements `snavio token create|list|revoke`: the bearer
// tokens of tenants on a `snavio dispatch serve` (internal/controlapi).
// A tenant token reads only its own tenant's telemetry, tenant
// configuration and key material; the operator token does everything. A
// new token is printed (or written to --token-file) once, by the command
// that issued it; the server keeps only its digest.
package token

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/secretcmd"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
)

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
is revoked and issued again. Creating and revoking need the operator token.

An aws profile has no tenant tokens: IAM replaces them. A tenant calls the
control API as its control role snavio-<env>-tenant-<tenant>, set as the
profile's role_arn; these commands say so and exit 1.`,
		Example: `  snavio token create --tenant acme --token-file acme.token
  SNAVIO_TOKEN=$(cat acme.token) snavio tail --tenant acme --follow=false
  snavio token list --tenant acme
  snavio token revoke tok_3f2a9c01d4e5`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := secretcmd.NewDeps(f)
	cmd.AddCommand(NewCmdCreate(d, nil), NewCmdList(d, nil), NewCmdRevoke(d, nil))
	return cmd
}

func mapErr(err error) error { return cmdutil.MapAPIError(err, "snavio token list") }

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
	secretcmd.Deps
	Tenant string
	// TokenFile, when set, receives the token (mode 0600, must not exist)
	// instead of the output.
	TokenFile string
}

// NewCmdCreate builds `snavio token create`. runF replaces the run
// function in tests.
func NewCmdCreate(d secretcmd.Deps, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Deps: d}
	cmd := secretcmd.CreateCmd(&cobra.Command{
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
	}, &opts.Tenant, "tenant the token acts as: the part of its sources before '/' (required)", func(ctx context.Context) error {
		return secretcmd.Pick(runF, runCreate)(ctx, opts)
	})
	cmd.Flags().StringVar(&opts.TokenFile, "token-file", "", "write the token to this new file (mode 0600) instead of printing it")
	return cmd
}

func runCreate(ctx context.Context, o *CreateOptions) error {
	file := secretcmd.SecretFileFlag{Flag: "--token-file", Noun: "a token file", Path: o.TokenFile}
	return secretcmd.Create(ctx, o.Deps, file, func(ctx context.Context, api platform.Platform) (wire.TokenIssued, error) {
		iss, err := api.IssueToken(ctx, wire.TokenIssueRequest{Tenant: o.Tenant})
		if err != nil {
			return iss, fmt.Errorf("issuing a token for %s: %w", o.Tenant, mapErr(err))
		}
		return iss, nil
	}, Show)
}

// Show is how a new token is shown: printed, or written to path ("" to
// print it). `snavio tenant create` on a local profile shows its token so too.
func Show(iss wire.TokenIssued, path string) secretcmd.Shown {
	out := Created{ID: iss.ID, Tenant: iss.Tenant, Created: iss.Created, Token: iss.Secret, Notice: wire.TokenNotice}
	if path != "" {
		out.Token, out.TokenFile = "", path
		out.Notice = "the token is in " + path + " (mode 0600) and nowhere else; use it as SNAVIO_TOKEN=$(cat " + path + ")"
	}
	return secretcmd.Shown{Out: out, Notice: out.Notice, File: []byte(iss.Secret + "\n"),
		Lost: fmt.Sprintf("the token %s is lost: revoke it with `snavio token revoke %s`", iss.ID, iss.ID)}
}

// Tokens is a list of tokens without secrets.
type Tokens []wire.Token

// TableHeader implements output.Tabular.
func (Tokens) TableHeader() []string { return []string{"id", "tenant", "created"} }

// TableRows implements output.Tabular.
func (ts Tokens) TableRows() [][]string {
	return secretcmd.Rows(ts, func(t wire.Token) (string, string, time.Time) { return t.ID, t.Tenant, t.Created })
}

// NewCmdList builds `snavio token list`. runF replaces the run function in
// tests.
func NewCmdList(d secretcmd.Deps, runF func(context.Context, *secretcmd.ListOptions) error) *cobra.Command {
	return secretcmd.NewListCmd(&cobra.Command{
		Short: "List issued tenant tokens: ids, tenants and dates, never the tokens",
		Long: `List the issued tenant tokens, oldest first: their ids (for revoke), tenants
and creation dates. Tokens themselves are never listed: the server does not
keep them. The operator sees every tenant's; a tenant token sees its own
tenant's.`,
		Example: `  snavio token list
  snavio token list --tenant acme -o json`,
	}, d, runF, "only this tenant's tokens", func(ctx context.Context, api platform.Platform, tenant string) (any, error) {
		l, err := api.ListTokens(ctx, tenant)
		return secretcmd.NonNil(Tokens(l.Tokens)), mapErr(err)
	})
}

// NewCmdRevoke builds `snavio token revoke`. runF replaces the run
// function in tests.
func NewCmdRevoke(d secretcmd.Deps, runF func(context.Context, *secretcmd.RevokeOptions) error) *cobra.Command {
	return secretcmd.NewRevokeCmd(&cobra.Command{
		Use:   "revoke ID",
		Short: "Revoke a tenant token: it stops working at once",
		Long: `Revoke the tenant token with ID (from "snavio token list"). The next request
made with it is refused (HTTP 401). Revoking cannot be undone; issue a new
token with "snavio token create". Needs the operator token.`,
		Example: `  snavio token revoke tok_3f2a9c01d4e5
  snavio token revoke tok_3f2a9c01d4e5 -o json`,
	}, d, runF, "token ID", wire.CheckTokenID, func(ctx context.Context, api platform.Platform, id string) (any, error) {
		r, err := api.RevokeToken(ctx, id)
		return r, mapErr(err)
	})
}
