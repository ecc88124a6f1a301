// Package credentials implements `snavio tenant credentials
// create|list|revoke`: the ingress credentials (an access key id and a
// secret) a tenant's producers sign PutEvents with on a `snavio dispatch
// serve` (internal/controlapi). The ingress accepts an entry only
// when its Source is <that tenant>/<service>. A secret is printed (or
// written to --credentials-file) once, by the command that created it.
package credentials

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/secretcmd"
	"github.com/snavio/snavio/internal/cli/tenantaws"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/platform"
)

// NewTenantCmd builds `snavio tenant`, the group of tenant-scoped
// platform resources: credentials, and the AWS commands of tenantaws,
// whose create issues a token and a credential on a local profile.
func NewTenantCmd(f *cmdutil.Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tenant <command>",
		Short: "Manage what the platform issues to a tenant",
		Long: `Manage what the platform issues to a tenant.

On a local profile ("snavio dispatch serve"): create issues a new
tenant's token and ingress credential at once; tenant credentials manages
the ingress credentials, the SigV4 keys its producers sign PutEvents with.

On AWS (--env, or an aws profile): create, show, list, delete, add-service
and remove-service make and undo, with the SDK's credentials, what a
tenant needs in an environment that "snavio dispatch deploy" made: its
emit role, bound to its own sources, its control role for the control
API, its telemetry topic and queue, and the subscription (docs/deploy.md).`,
		Example: `  # local
  snavio tenant create acme --token-file acme.token --credentials-file acme.credentials
  snavio tenant credentials list --tenant acme

  # AWS
  snavio tenant create acme --env prod --service billing=arn:aws:iam::123456789012:role/BillingSender
  snavio tenant show acme --env prod -o yaml`,
		Args: cobra.ArbitraryArgs,
		RunE: cmdutil.GroupRunE,
	}
	cmd.AddCommand(NewCmd(f))
	cmd.AddCommand(tenantaws.Commands(f, localCreate(secretcmd.NewDeps(f)))...)
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
	d := secretcmd.NewDeps(f)
	cmd.AddCommand(NewCmdCreate(d, nil), NewCmdList(d, nil), NewCmdRevoke(d, nil))
	return cmd
}

func mapErr(err error) error { return cmdutil.MapAPIError(err, "snavio tenant credentials list") }

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
	secretcmd.Deps
	Tenant string
	// CredentialsFile, when set, receives the credential in the AWS
	// shared-credentials format (mode 0600, must not exist) instead of
	// the output; Section names its section.
	CredentialsFile string
	Section         string
}

// NewCmdCreate builds `snavio tenant credentials create`. runF replaces
// the run function in tests.
func NewCmdCreate(d secretcmd.Deps, runF func(context.Context, *CreateOptions) error) *cobra.Command {
	opts := &CreateOptions{Deps: d}
	cmd := secretcmd.CreateCmd(&cobra.Command{
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
	}, &opts.Tenant, "tenant whose sources the credential may put: the part before '/' (required)", func(ctx context.Context) error {
		if opts.Section == "" {
			return cmdutil.Usagef("--section is empty: name the credentials file's section, such as default")
		}
		return secretcmd.Pick(runF, runCreate)(ctx, opts)
	})
	cmd.Flags().StringVar(&opts.CredentialsFile, "credentials-file", "", "write the credential to this new file (AWS shared-credentials format, mode 0600) instead of printing it")
	cmd.Flags().StringVar(&opts.Section, "section", ingresscred.DefaultSection, "section (profile) name in --credentials-file")
	return cmd
}

func runCreate(ctx context.Context, o *CreateOptions) error {
	file := secretcmd.SecretFileFlag{Flag: "--credentials-file", Noun: "a credentials file", Path: o.CredentialsFile}
	return secretcmd.Create(ctx, o.Deps, file, func(ctx context.Context, api platform.Platform) (wire.CredentialCreated, error) {
		c, err := api.CreateCredential(ctx, wire.CredentialCreateRequest{Tenant: o.Tenant})
		if err != nil {
			return c, fmt.Errorf("creating a credential for %s: %w", o.Tenant, mapErr(err))
		}
		return c, nil
	}, show(o.Section))
}

// show is how a new credential is shown: printed, or written to path (""
// to print it) in section of an AWS shared-credentials file.
func show(section string) func(wire.CredentialCreated, string) secretcmd.Shown {
	return func(c wire.CredentialCreated, path string) secretcmd.Shown {
		out := Created{AccessKeyID: c.AccessKeyID, Tenant: c.Tenant, Created: c.Created, SecretAccessKey: c.SecretAccessKey, Notice: wire.CredentialNotice}
		if path != "" {
			out.SecretAccessKey, out.CredentialsFile = "", path
			out.Notice = "the credential is in " + path + " (mode 0600) and nowhere else; use it with `snavio send --credentials-file " + path + "` or AWS_SHARED_CREDENTIALS_FILE=" + path
		}
		return secretcmd.Shown{Out: out, Notice: out.Notice,
			File: ingresscred.Format(section, ingresscred.Key{AccessKeyID: c.AccessKeyID, SecretAccessKey: c.SecretAccessKey}),
			Lost: fmt.Sprintf("the credential %s was not saved: revoke it with `snavio tenant credentials revoke %s`", c.AccessKeyID, c.AccessKeyID)}
	}
}

// Credentials is a list of credentials without secrets.
type Credentials []wire.Credential

// TableHeader implements output.Tabular.
func (Credentials) TableHeader() []string { return []string{"access key id", "tenant", "created"} }

// TableRows implements output.Tabular.
func (cs Credentials) TableRows() [][]string {
	return secretcmd.Rows(cs, func(c wire.Credential) (string, string, time.Time) { return c.AccessKeyID, c.Tenant, c.Created })
}

// NewCmdList builds `snavio tenant credentials list`. runF replaces the
// run function in tests.
func NewCmdList(d secretcmd.Deps, runF func(context.Context, *secretcmd.ListOptions) error) *cobra.Command {
	return secretcmd.NewListCmd(&cobra.Command{
		Short: "List ingress credentials: access key ids, tenants and dates, never secrets",
		Long: `List the ingress credentials, oldest first: access key ids (for revoke),
tenants and creation dates; never a secret. The operator sees every
tenant's; a tenant token its own tenant's.`,
		Example: `  snavio tenant credentials list
  snavio tenant credentials list --tenant acme -o json`,
	}, d, runF, "only this tenant's credentials", func(ctx context.Context, api platform.Platform, tenant string) (any, error) {
		l, err := api.ListCredentials(ctx, tenant)
		return secretcmd.NonNil(Credentials(l.Credentials)), mapErr(err)
	})
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
func NewCmdRevoke(d secretcmd.Deps, runF func(context.Context, *secretcmd.RevokeOptions) error) *cobra.Command {
	return secretcmd.NewRevokeCmd(&cobra.Command{
		Use:   "revoke ACCESS_KEY_ID",
		Short: "Revoke an ingress credential: requests signed with it fail at once",
		Long: `Revoke the ingress credential with ACCESS_KEY_ID (from "snavio tenant
credentials list"). The next PutEvents signed with it is refused
(UnrecognizedClientException). Revoking cannot be undone. Needs the
operator token, or the credential's tenant's token.`,
		Example: `  snavio tenant credentials revoke SNVKABCDEFGHIJKLMNOP
  snavio tenant credentials revoke SNVKABCDEFGHIJKLMNOP -o json`,
	}, d, runF, "ACCESS_KEY_ID", wire.CheckAccessKeyID, func(ctx context.Context, api platform.Platform, id string) (any, error) {
		r, err := api.RevokeCredential(ctx, id)
		return Revoked(r), mapErr(err)
	})
}
