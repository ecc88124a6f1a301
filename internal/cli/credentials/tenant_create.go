package credentials

import (
	"context"
	"fmt"

	"github.com/spf13/pflag"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/secretcmd"
	"github.com/snavio/snavio/internal/cli/tenantaws"
	"github.com/snavio/snavio/internal/cli/token"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/output"
)

// TenantCreated is what `snavio tenant create` prints on a local profile:
// the tenant's token and ingress credential, each shown once, as `token
// create` and `tenant credentials create` show them.
type TenantCreated struct {
	Tenant     string        `json:"tenant"`
	Token      token.Created `json:"token"`
	Credential Created       `json:"credential"`
}

// TableHeader implements output.Tabular.
func (TenantCreated) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (t TenantCreated) TableRows() [][]string {
	rows := [][]string{{"tenant", t.Tenant}, {"token id", t.Token.ID}}
	if t.Token.TokenFile != "" {
		rows = append(rows, []string{"token written to", t.Token.TokenFile})
	} else {
		rows = append(rows, []string{"TOKEN (shown once)", t.Token.Token})
	}
	rows = append(rows, []string{"access key id", t.Credential.AccessKeyID})
	if t.Credential.CredentialsFile != "" {
		return append(rows, []string{"credential written to", t.Credential.CredentialsFile})
	}
	return append(rows, []string{"SECRET (shown once)", t.Credential.SecretAccessKey})
}

// tenantCreate holds the local flags of `snavio tenant create`.
type tenantCreate struct {
	d                                   secretcmd.Deps
	tokenFile, credentialsFile, section string
}

// localCreate is `snavio tenant create` on a local profile: it issues the
// tenant's token and ingress credential through the platform.
func localCreate(d secretcmd.Deps) tenantaws.LocalCreate {
	o := &tenantCreate{d: d}
	return tenantaws.LocalCreate{
		Bind: func(fs *pflag.FlagSet) {
			fs.StringVar(&o.tokenFile, "token-file", "", "local profile: write the tenant's token to this new file (mode 0600) instead of printing it")
			fs.StringVar(&o.credentialsFile, "credentials-file", "", "local profile: write the tenant's ingress credential to this new file (AWS shared-credentials format, mode 0600) instead of printing it")
			fs.StringVar(&o.section, "section", ingresscred.DefaultSection, "local profile: section (profile) name in --credentials-file")
		},
		Flags: []string{"token-file", "credentials-file", "section"},
		Run:   o.run,
	}
}

func (o *tenantCreate) run(ctx context.Context, tenant string) (err error) {
	if err := wire.CheckTenant("TENANT", tenant); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	if o.section == "" {
		return cmdutil.Usagef("--section is empty: name the credentials file's section, such as default")
	}
	if o.tokenFile != "" && o.tokenFile == o.credentialsFile {
		return cmdutil.Usagef("--token-file and --credentials-file are both %s: give each its own file", o.tokenFile)
	}
	// Both files are made before anything is issued, so that a path that
	// cannot be written fails before a secret exists that nobody holds.
	var tf, cf *secretcmd.SecretFile
	defer func() {
		if tf != nil {
			tf.Close(&err)
		}
		if cf != nil {
			cf.Close(&err)
		}
	}()
	if o.tokenFile != "" {
		if tf, err = secretcmd.CreateSecretFile("--token-file", "a token file", o.tokenFile); err != nil {
			return err
		}
	}
	if o.credentialsFile != "" {
		if cf, err = secretcmd.CreateSecretFile("--credentials-file", "a credentials file", o.credentialsFile); err != nil {
			return err
		}
	}
	api, err := o.d.Platform()
	if err != nil {
		return err
	}
	p, err := o.d.Printer()
	if err != nil {
		return err
	}
	iss, err := api.IssueToken(ctx, wire.TokenIssueRequest{Tenant: tenant})
	if err != nil {
		return fmt.Errorf("issuing a token for %s: %w", tenant, cmdutil.MapAPIError(err, "snavio token list"))
	}
	ts := token.Show(iss, o.tokenFile)
	if tf != nil {
		if err := tf.Write(ts.File, ts.Lost, o.d.ErrOut); err != nil {
			return err
		}
		// The token is kept whatever happens next.
		var kept error
		tf.Close(&kept)
		tf = nil
		if kept != nil {
			return kept
		}
	}
	out := TenantCreated{Tenant: tenant, Token: ts.Out.(token.Created)}
	c, err := api.CreateCredential(ctx, wire.CredentialCreateRequest{Tenant: tenant})
	if err != nil {
		// The token exists: show it, so that it is not lost.
		if perr := p.Print(out.Token); perr != nil {
			return perr
		}
		return fmt.Errorf("the token %s was issued (above), but creating %s's ingress credential failed: %w; retry with `snavio tenant credentials create --tenant %s`",
			iss.ID, tenant, mapErr(err), tenant)
	}
	cs := show(o.section)(c, o.credentialsFile)
	if cf != nil {
		if err := cf.Write(cs.File, cs.Lost, o.d.ErrOut); err != nil {
			return err
		}
	}
	out.Credential = cs.Out.(Created)
	if err := p.Print(out); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(o.d.ErrOut, "Note: %s.\nNote: %s.\n", ts.Notice, cs.Notice)
		return err
	}
	return nil
}
