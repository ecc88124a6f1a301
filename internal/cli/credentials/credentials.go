// Package credentials implements `snavio tenant credentials
// create|list|revoke`: the ingress credentials (an access key id and a
// secret) a tenant's producers sign PutEvents with on a `snavio dispatch
// serve` (internal/controlapi). The ingress accepts an entry only
// when its Source is <that tenant>/<service>. A secret is printed (or
// written to --credentials-file) once, by the command that created it.
package credentials

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/tenantaws"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
)

// Deps are what every credentials command needs, as lazy providers.
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

// NewTenantCmd builds `snavio tenant`, the group of tenant-scoped
// platform resources; credentials is its one subgroup today.
func NewTenantCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant <command>",
		Short: "Manage what the platform issues to a tenant",
		Long: `Manage what the platform issues to a tenant: its ingress credentials, which
its producers sign PutEvents with.`,
		Example: `  snavio tenant credentials create --tenant acme --credentials-file acme.credentials
  snavio tenant credentials list --tenant acme`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	cmd.AddCommand(NewCmd(f))
	cmd.AddCommand(tenantaws.Commands(f)...)
	return cmd
}

// NewCmd builds `snavio tenant credentials`.
func NewCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:     "credentials <command>",
		Aliases: []string{"creds"},
		Short:   "Create, list and revoke a tenant's ingress credentials (SigV4 keys)",
		Long: `The PutEvents ingress of "snavio dispatch serve" authenticates every request
as IAM does on AWS: it must be signed (SigV4) with an access key id and
secret the platform issued to a tenant, and each entry's Source must be
<that tenant>/<service>; other entries are refused with AccessDeniedException
and never reach the dispatcher.

"create" prints the secret once (or writes an AWS shared-credentials file
with --credentials-file, which the AWS CLI and SDKs read through
AWS_SHARED_CREDENTIALS_FILE). The server keeps the secret in its data
directory (mode 0600), because verifying SigV4 needs it. Rotate by
creating a new credential, switching the producers, and revoking the old
one. The operator token manages every tenant's credentials; a tenant token
its own tenant's.`,
		Example: `  snavio tenant credentials create --tenant acme --credentials-file acme.credentials
  AWS_SHARED_CREDENTIALS_FILE=acme.credentials aws events put-events \
      --endpoint-url http://127.0.0.1:8787 --region us-east-1 --entries file://entries.json
  snavio tenant credentials list --tenant acme
  snavio tenant credentials revoke SNVKABCDEFGHIJKLMNOP`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	d := NewDeps(f)
	cmd.AddCommand(NewCmdCreate(d, nil), NewCmdList(d, nil), NewCmdRevoke(d, nil))
	return cmd
}

func mapErr(err error) error { return cmdutil.MapAPIError(err, "snavio tenant credentials list") }

func checkTenant(tenant string) error {
	if err := wire.CheckTenant("--tenant", tenant); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	return nil
}

// Created is a new credential as printed: the only output with a secret.
type Created struct {
	AccessKeyID string    `json:"access_key_id"`
	Tenant      string    `json:"tenant"`
	Created     time.Time `json:"created"`
	// SecretAccessKey is empty when it went to CredentialsFile.
	SecretAccessKey string `json:"secret_access_key,omitempty"`
	CredentialsFile string `json:"credentials_file,omitempty"`
	Notice          string `json:"notice"`
}

// TableHeader implements output.Tabular.
func (Created) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (c Created) TableRows() [][]string {
	rows := [][]string{{"access key id", c.AccessKeyID}, {"tenant", c.Tenant}, {"created", c.Created.UTC().Format(time.RFC3339)}}
	if c.CredentialsFile != "" {
		return append(rows, []string{"written to", c.CredentialsFile})
	}
	return append(rows, []string{"SECRET (shown once)", c.SecretAccessKey})
}

// CreateOptions are the inputs of `snavio tenant credentials create`.
type CreateOptions struct {
	Deps
	Tenant string
	// CredentialsFile, when set, receives the credential in the AWS
	// shared-credentials format (mode 0600, must not exist) instead of
	// the output; Section names its section.
	CredentialsFile string
	Section         string
}

// NewCmdCreate builds `snavio tenant credentials create`. runF replaces
// the run function in tests.
func NewCmdCreate(d Deps, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "create --tenant TENANT [--credentials-file FILE]",
		Short: "Create a tenant's ingress credential and print its secret once",
		Long: `Create an access key id and secret that sign PutEvents for one tenant, and
print the secret once: it is never shown again. With --credentials-file the
credential is written to FILE in the AWS shared-credentials format (a new
file, mode 0600; an existing file is refused) and left out of the output.
"snavio send" reads such a file (--credentials-file, the profile's
credentials_file, or <data_dir>/<tenant>.credentials); the AWS CLI and SDKs
read it through AWS_SHARED_CREDENTIALS_FILE. Needs the operator token, or
the tenant's own token.`,
		Example: `  snavio tenant credentials create --tenant acme
  snavio tenant credentials create --tenant acme --credentials-file acme.credentials
  snavio tenant credentials create --tenant acme --credentials-file ~/.aws/snavio --section acme -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkTenant(opts.Tenant); err != nil {
				return err
			}
			if opts.Section == "" {
				return cmdutil.Usagef("--section is empty: name the credentials file's section, such as default")
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runCreate(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "tenant whose sources the credential may put: the part before '/' (required)")
	cmd.Flags().StringVar(&opts.CredentialsFile, "credentials-file", "", "write the credential to this new file (AWS shared-credentials format, mode 0600) instead of printing it")
	cmd.Flags().StringVar(&opts.Section, "section", ingresscred.DefaultSection, "section (profile) name in --credentials-file")
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

func runCreate(ctx context.Context, o *CreateOptions) error {
	// Checked before a credential exists that nobody would hold; the
	// exclusive write below still refuses a file made in between.
	if o.CredentialsFile != "" {
		if _, err := os.Lstat(o.CredentialsFile); err == nil {
			return cmdutil.Usagef("--credentials-file %s exists: a credentials file is never overwritten; remove it or pass another path", o.CredentialsFile)
		}
		if _, err := os.Stat(filepath.Dir(o.CredentialsFile)); err != nil {
			return cmdutil.Usagef("--credentials-file: %v; pass a path in a writable directory", err)
		}
	}
	api, err := o.Platform()
	if err != nil {
		return err
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	c, err := api.CreateCredential(ctx, wire.CredentialCreateRequest{Tenant: o.Tenant})
	if err != nil {
		return fmt.Errorf("creating a credential for %s: %w", o.Tenant, mapErr(err))
	}
	out := Created{AccessKeyID: c.AccessKeyID, Tenant: c.Tenant, Created: c.Created, SecretAccessKey: c.SecretAccessKey, Notice: wire.CredentialNotice}
	if o.CredentialsFile != "" {
		data := ingresscred.Format(o.Section, ingresscred.Key{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey})
		if err := atomicfile.WriteExclusive(o.CredentialsFile, data, 0o600); err != nil {
			revoke := fmt.Sprintf("the credential %s was not saved: revoke it with `snavio tenant credentials revoke %s`", c.AccessKeyID, c.AccessKeyID)
			if errors.Is(err, fs.ErrExist) {
				return cmdutil.Usagef("--credentials-file %s exists: a credentials file is never overwritten; pass another path (%s)", o.CredentialsFile, revoke)
			}
			return fmt.Errorf("writing --credentials-file %s: %w; %s", o.CredentialsFile, err, revoke)
		}
		out.SecretAccessKey, out.CredentialsFile = "", o.CredentialsFile
		if w := cmdutil.SecretFileWarning("--credentials-file", o.CredentialsFile); w != "" {
			fmt.Fprintln(o.ErrOut, w)
		}
		out.Notice = "the credential is in " + o.CredentialsFile + " (mode 0600) and nowhere else; use it with `snavio send --credentials-file " + o.CredentialsFile + "` or AWS_SHARED_CREDENTIALS_FILE=" + o.CredentialsFile
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

// Credentials is a list of credentials without secrets.
type Credentials []wire.Credential

// TableHeader implements output.Tabular.
func (Credentials) TableHeader() []string { return []string{"access key id", "tenant", "created"} }

// TableRows implements output.Tabular.
func (cs Credentials) TableRows() [][]string {
	rows := make([][]string, len(cs))
	for i, c := range cs {
		rows[i] = []string{c.AccessKeyID, c.Tenant, c.Created.UTC().Format(time.RFC3339)}
	}
	return rows
}

// ListOptions are the inputs of `snavio tenant credentials list`.
type ListOptions struct {
	Deps
	Tenant string
}

// NewCmdList builds `snavio tenant credentials list`. runF replaces the
// run function in tests.
func NewCmdList(d Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--tenant TENANT]",
		Aliases: []string{"ls"},
		Short:   "List ingress credentials: access key ids, tenants and dates, never secrets",
		Long: `List the ingress credentials, oldest first: access key ids (for revoke),
tenants and creation dates; never a secret. The operator sees every
tenant's; a tenant token its own tenant's.`,
		Example: `  snavio tenant credentials list
  snavio tenant credentials list --tenant acme -o json`,
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
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", "only this tenant's credentials")
	return cmd
}

func runList(ctx context.Context, o *ListOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	l, err := api.ListCredentials(ctx, o.Tenant)
	if err != nil {
		return mapErr(err)
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	out := Credentials(l.Credentials)
	if out == nil {
		out = Credentials{}
	}
	return p.Print(out)
}

// RevokeOptions are the inputs of `snavio tenant credentials revoke`.
type RevokeOptions struct {
	Deps
	AccessKeyID string
}

// Revoked is a revoked credential as printed.
type Revoked wire.CredentialRevoked

// TableHeader implements output.Tabular.
func (Revoked) TableHeader() []string { return []string{"access key id", "tenant", "revoked"} }

// TableRows implements output.Tabular.
func (r Revoked) TableRows() [][]string {
	return [][]string{{r.AccessKeyID, r.Tenant, fmt.Sprint(r.Revoked)}}
}

// NewCmdRevoke builds `snavio tenant credentials revoke`. runF replaces
// the run function in tests.
func NewCmdRevoke(d Deps, runF func(context.Context, *RevokeOptions) error) *cobra.Command {
	opts := &RevokeOptions{Deps: d}
	return &cobra.Command{
		Use:     "revoke ACCESS_KEY_ID",
		Aliases: []string{"rm"},
		Short:   "Revoke an ingress credential: requests signed with it fail at once",
		Long: `Revoke the ingress credential with ACCESS_KEY_ID (from "snavio tenant
credentials list"). The next PutEvents signed with it is refused
(UnrecognizedClientException). Revoking cannot be undone. Needs the
operator token, or the credential's tenant's token.`,
		Example: `  snavio tenant credentials revoke SNVKABCDEFGHIJKLMNOP
  snavio tenant credentials revoke SNVKABCDEFGHIJKLMNOP -o json`,
		Args: cmdutil.ExactArgs(1, "the ACCESS_KEY_ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.AccessKeyID = args[0]
			if err := wire.CheckAccessKeyID("ACCESS_KEY_ID", opts.AccessKeyID); err != nil {
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
	r, err := api.RevokeCredential(ctx, o.AccessKeyID)
	if err != nil {
		return fmt.Errorf("revoking %s: %w", o.AccessKeyID, mapErr(err))
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(Revoked(r))
}
