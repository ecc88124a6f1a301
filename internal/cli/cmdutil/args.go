package cmdutil

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// NoArgs rejects positional arguments with a usage error.
func NoArgs(cmd *cobra.Command, args []string) error {
	if len(args) > 0 {
		return Usagef("%q takes no arguments, got %q; see `%s --help`", cmd.CommandPath(), strings.Join(args, " "), cmd.CommandPath())
	}
	return nil
}

// ExactArgs requires n positional arguments, named in the error by what.
func ExactArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != n {
			return Usagef("%q needs %s (got %d arguments); see `%s --help`", cmd.CommandPath(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// MaximumArgs allows at most n positional arguments.
func MaximumArgs(n int, what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) > n {
			return Usagef("%q takes at most %s (got %d arguments); see `%s --help`", cmd.CommandPath(), what, len(args), cmd.CommandPath())
		}
		return nil
	}
}

// GroupRunE makes a command that only groups subcommands behave: with no
// arguments it prints its help; with an unknown subcommand it is a usage
// error that suggests the closest names (cobra alone would print help and
// exit 0, hiding the typo from scripts).
func GroupRunE(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return cmd.Help()
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2 // cobra's default, applied only on its own path
	}
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return &UsageError{Err: errors.New(msg)}
}
