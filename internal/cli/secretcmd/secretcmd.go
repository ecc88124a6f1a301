// Package secretcmd holds the command plumbing shared by the secrets the
// platform issues to a tenant (`snavio token`, `snavio tenant
// credentials`): a secret is created and shown once (or written to a new
// 0600 file), listed without the secret, and revoked by its id.
package secretcmd

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

// Deps are what every command of an issued secret needs, as lazy
// providers.
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

// CheckTenant checks the --tenant flag's value, as a usage error.
func CheckTenant(tenant string) error {
	if err := wire.CheckTenant("--tenant", tenant); err != nil {
		return &cmdutil.UsageError{Err: err}
	}
	return nil
}

// Pick returns runF when a test gave one, else run.
func Pick[O any](runF, run func(context.Context, *O) error) func(context.Context, *O) error {
	if runF != nil {
		return runF
	}
	return run
}

// CreateCmd completes cmd (its texts set) as a `create --tenant TENANT`
// command: the required --tenant flag into *tenant, checked, then run.
func CreateCmd(cmd *cobra.Command, tenant *string, tenantUsage string, run func(context.Context) error) *cobra.Command {
	cmd.Args = cmdutil.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if err := CheckTenant(*tenant); err != nil {
			return err
		}
		return run(c.Context())
	}
	cmd.Flags().StringVar(tenant, "tenant", "", tenantUsage)
	_ = cmd.MarkFlagRequired("tenant")
	return cmd
}

// ListCmd completes cmd (its texts set) as a `list [--tenant TENANT]`
// command: the --tenant flag into *tenant, checked when given, then run.
func ListCmd(cmd *cobra.Command, tenant *string, tenantUsage string, run func(context.Context) error) *cobra.Command {
	cmd.Aliases = []string{"ls"}
	cmd.Args = cmdutil.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if c.Flags().Changed("tenant") {
			if err := CheckTenant(*tenant); err != nil {
				return err
			}
		}
		return run(c.Context())
	}
	cmd.Flags().StringVar(tenant, "tenant", "", tenantUsage)
	return cmd
}

// RevokeCmd completes cmd (its texts set) as a `revoke ID` command: the
// one argument, named arg and checked by check, into *id, then run.
func RevokeCmd(cmd *cobra.Command, arg string, check func(name, id string) error, id *string, run func(context.Context) error) *cobra.Command {
	cmd.Aliases = []string{"rm"}
	cmd.Args = cmdutil.ExactArgs(1, "the "+arg)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		*id = args[0]
		if err := check(arg, *id); err != nil {
			return &cmdutil.UsageError{Err: err}
		}
		return run(c.Context())
	}
	return cmd
}

// Fetch asks the platform with call and prints what view makes of the
// answer. call wraps its own errors.
func Fetch[R any](ctx context.Context, d Deps, call func(context.Context, platform.Platform) (R, error), view func(R) any) error {
	api, err := d.Platform()
	if err != nil {
		return err
	}
	r, err := call(ctx, api)
	if err != nil {
		return err
	}
	p, err := d.Printer()
	if err != nil {
		return err
	}
	return p.Print(view(r))
}

// Row is a table row of an issued secret without the secret.
func Row(id, tenant string, created time.Time) []string {
	return []string{id, tenant, created.UTC().Format(time.RFC3339)}
}

// Rows makes the table rows of items with row.
func Rows[T any](items []T, row func(T) []string) [][]string {
	rows := make([][]string, len(items))
	for i, it := range items {
		rows[i] = row(it)
	}
	return rows
}

// PrintCreated prints a created secret, and under a table the notice as a
// note on ErrOut.
func PrintCreated(d Deps, p *output.Printer, out any, notice string) error {
	if err := p.Print(out); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(d.ErrOut, "Note: %s.\n", notice)
		return err
	}
	return nil
}

// SecretFile is a new file (mode 0600) that receives an issued secret in
// place of the output. It is made before the secret is issued, so that a
// path that cannot be written fails before a secret exists that nobody
// holds.
type SecretFile struct {
	flag, path string
	f          *os.File
}

// CreateSecretFile makes path for the secret of flag; an existing file is
// refused: noun ("a token file") names it in the error.
func CreateSecretFile(flag, noun, path string) (*SecretFile, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, cmdutil.Usagef("%s %s exists: %s is never overwritten; remove it or pass another path", flag, path, noun)
		}
		return nil, cmdutil.Usagef("%s: %v; pass a path in a writable directory", flag, err)
	}
	return &SecretFile{flag: flag, path: path, f: f}, nil
}

// Write writes data and syncs it; lost ("the token x is lost: revoke it
// with ...") ends the error. It warns on errOut when the file is inside a
// git work tree.
func (s *SecretFile) Write(data []byte, lost string, errOut io.Writer) error {
	if _, err := s.f.Write(data); err != nil {
		return fmt.Errorf("writing %s %s: %w; %s", s.flag, s.path, err, lost)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("writing %s %s: %w; %s", s.flag, s.path, err, lost)
	}
	if w := cmdutil.SecretFileWarning(s.flag, s.path); w != "" {
		fmt.Fprintln(errOut, w)
	}
	return nil
}

// Close closes the file and, when *err is set (by the command or by the
// close), removes it: a file is left only with a secret in it.
func (s *SecretFile) Close(err *error) {
	if cerr := s.f.Close(); *err == nil && cerr != nil {
		*err = fmt.Errorf("writing %s %s: %w", s.flag, s.path, cerr)
	}
	if *err != nil {
		_ = os.Remove(s.path)
	}
}
