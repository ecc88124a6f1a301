// Package version implements `snavio version`.
package version

import (
	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/cli/cmdutil"
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
built with "go install" reports the module version and VCS data instead.`,
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
	return p.Print(opts.Info())
}
