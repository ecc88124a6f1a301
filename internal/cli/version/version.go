// Package version implements `snavio version`.
package version

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/output"
)

// Options are the inputs of `snavio version`.
type Options struct {
	Info func() build.Info
}

// NewCmd builds `snavio version`. runF replaces the run function in tests.
func NewCmd(f *cmdutil.Factory, runF func(*Options) error) *cobra.Command {
	opts := &Options{Info: build.Current}
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version, commit, build date and Go version",
		Long: `Print the version, commit, build date and Go version of this binary.

Release builds carry the values goreleaser stamps with -ldflags; a binary
built with "go install" reports the module version and VCS data instead.
On a terminal (-o table) it is one line, like "gh --version"; the other
formats give each field.`,
		Example: `  snavio version
  snavio version -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(opts)
			}
			return run(f, opts)
		},
	}
}

func run(f *cmdutil.Factory, opts *Options) error {
	p, err := f.Printer()
	if err != nil {
		return err
	}
	info := opts.Info()
	if p.Format() == output.Table {
		_, err := fmt.Fprintln(f.IOStreams.Out, Line(info))
		return err
	}
	return p.Print(info)
}

// Line is the one-line form: "snavio version V (commit C, built D) GO PLATFORM".
func Line(i build.Info) string {
	commit := i.Commit
	if len(commit) > 12 {
		commit = commit[:12]
	}
	return fmt.Sprintf("snavio version %s (commit %s, built %s) %s %s", i.Version, commit, i.Date, i.GoVersion, i.Platform)
}
