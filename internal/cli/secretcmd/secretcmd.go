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

// ListOptions are the inputs of a `list` command.
type ListOptions struct {
	Deps
	Tenant string
}

// NewListCmd builds the `list [--tenant TENANT]` command whose help texts
// cmd holds. list asks api for tenant's secrets (every tenant's when tenant
// is empty) and returns what is printed; runF replaces the run function
// in tests.
func NewListCmd(cmd *cobra.Command, d Deps, runF func(context.Context, *ListOptions) error, tenantUsage string,
	list func(ctx context.Context, api platform.Platform, tenant string) (any, error)) *cobra.Command {
	opts := &ListOptions{Deps: d}
	run := Pick(runF, func(ctx context.Context, o *ListOptions) error {
		return fetch(ctx, o.Deps, func(ctx context.Context, api platform.Platform) (any, error) { return list(ctx, api, o.Tenant) })
	})
	cmd.Use, cmd.Aliases = "list [--tenant TENANT]", []string{"ls"}
	cmd.Args = cmdutil.NoArgs
	cmd.RunE = func(c *cobra.Command, _ []string) error {
		if c.Flags().Changed("tenant") {
			if err := CheckTenant(opts.Tenant); err != nil {
				return err
			}
		}
		return run(c.Context(), opts)
	}
	cmd.Flags().StringVar(&opts.Tenant, "tenant", "", tenantUsage)
	return cmd
}

// RevokeOptions are the inputs of a `revoke ID` command.
type RevokeOptions struct {
	Deps
	ID string
}

// NewRevokeCmd builds the `revoke ID` command whose texts cmd holds: its
// one argument, named arg, is checked by check, then revoke revokes it
// and returns what is printed. runF replaces the run function in tests.
func NewRevokeCmd(cmd *cobra.Command, d Deps, runF func(context.Context, *RevokeOptions) error, arg string, check func(name, id string) error,
	revoke func(ctx context.Context, api platform.Platform, id string) (any, error)) *cobra.Command {
	opts := &RevokeOptions{Deps: d}
	run := Pick(runF, func(ctx context.Context, o *RevokeOptions) error {
		return fetch(ctx, o.Deps, func(ctx context.Context, api platform.Platform) (any, error) {
			r, err := revoke(ctx, api, o.ID)
			if err != nil {
				return nil, fmt.Errorf("revoking %s: %w", o.ID, err)
			}
			return r, nil
		})
	})
	cmd.Aliases = []string{"rm"}
	cmd.Args = cmdutil.ExactArgs(1, "the "+arg)
	cmd.RunE = func(c *cobra.Command, args []string) error {
		opts.ID = args[0]
		if err := check(arg, opts.ID); err != nil {
			return &cmdutil.UsageError{Err: err}
		}
		return run(c.Context(), opts)
	}
	return cmd
}

// fetch asks the platform with call and prints the answer.
func fetch(ctx context.Context, d Deps, call func(context.Context, platform.Platform) (any, error)) error {
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
	return p.Print(r)
}

// NonNil returns s, or an empty S for nil, so that an empty list prints
// as [] rather than null.
func NonNil[S ~[]E, E any](s S) S {
	if s == nil {
		return S{}
	}
	return s
}

// Rows makes the table rows of listed secrets: id, tenant, creation time.
func Rows[T any](items []T, fields func(T) (id, tenant string, created time.Time)) [][]string {
	rows := make([][]string, len(items))
	for i, it := range items {
		id, tenant, created := fields(it)
		rows[i] = []string{id, tenant, created.UTC().Format(time.RFC3339)}
	}
	return rows
}

// SecretFileFlag names the flag of a create command that sends the
// secret to a new file, and its value ("" to print the secret).
type SecretFileFlag struct {
	Flag string // "--token-file"
	Noun string // "a token file", in errors
	Path string
}

// Shown is a new secret as a create command shows it.
type Shown struct {
	Out    any    // printed
	Notice string // noted on ErrOut under a table
	File   []byte // the secret file's content, when there is one
	Lost   string // ends an error writing the file: how to revoke the secret
}

// Create runs a create command: it makes the secret file (when asked),
// issues the secret with issue, writes it, and prints what show makes of
// it; path is "" when the secret is printed. The file is removed again
// when the command fails.
func Create[T any](ctx context.Context, d Deps, file SecretFileFlag, issue func(context.Context, platform.Platform) (T, error), show func(secret T, path string) Shown) (err error) {
	var f *SecretFile
	if file.Path != "" {
		if f, err = CreateSecretFile(file.Flag, file.Noun, file.Path); err != nil {
			return err
		}
		defer f.Close(&err)
	}
	api, err := d.Platform()
	if err != nil {
		return err
	}
	p, err := d.Printer()
	if err != nil {
		return err
	}
	secret, err := issue(ctx, api)
	if err != nil {
		return err
	}
	shown := show(secret, file.Path)
	if f != nil {
		if err := f.Write(shown.File, shown.Lost, d.ErrOut); err != nil {
			return err
		}
	}
	if err := p.Print(shown.Out); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintf(d.ErrOut, "Note: %s.\n", shown.Notice)
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
