// Package app runs the snavio command line: it builds the factory and the
// command tree, executes them, and turns the result into an exit code and at
// most one line of error on stderr. It is the only package that decides the
// process's exit code.
package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/root"
	"github.com/snavio/snavio/internal/iostreams"
	_ "github.com/snavio/snavio/internal/startgc" // no collection during start-up
)

// Main runs snavio with the process's arguments, streams and environment
// and returns the exit code.
func Main() int {
	env := iostreams.OSEnv{}
	return Run(context.Background(), os.Args[1:], iostreams.System(env), env)
}

// Run executes snavio with args and returns the exit code.
//
// Run installs no signal handler: for a short command the default action of
// SIGINT (exit at once) is right, and installing one costs more than the
// rest of `snavio version` (measured: 140 us). Long-running commands wrap
// their context with cmdutil.InterruptContext to stop cleanly.
func Run(ctx context.Context, args []string, ios *iostreams.IOStreams, env iostreams.Env) int {
	g := &cmdutil.Globals{}
	f := cmdutil.New(ios, env, g)
	cmd := root.NewCmdFor(f, g, args) // only the command args name, not the whole tree
	cmd.SetArgs(args)
	cmd.SetIn(ios.In)
	cmd.SetOut(ios.Out)
	cmd.SetErr(ios.ErrOut)

	failed, err := cmd.ExecuteContextC(ctx)
	if err == nil {
		return cmdutil.ExitOK
	}
	code := cmdutil.ExitCode(err)
	if errors.Is(err, cmdutil.ErrSilent) {
		return cmdutil.ExitError
	}
	var ec *cmdutil.ExitCodeError
	if errors.As(err, &ec) && ec.Err == nil {
		return code
	}
	styles := f.Styles()
	fmt.Fprintln(ios.ErrOut, styles.Failure("Error:")+" "+err.Error())
	if g.Verbose {
		for _, d := range cmdutil.Detail(err) {
			fmt.Fprintln(ios.ErrOut, styles.Muted("  caused by: "+d))
		}
	}
	if code == cmdutil.ExitUsage && failed != nil && !strings.Contains(err.Error(), failed.CommandPath()+" --help") {
		fmt.Fprintf(ios.ErrOut, "Run '%s --help' for usage.\n", failed.CommandPath())
	}
	return code
}
