// Package iostreams owns the process's standard streams and everything that
// depends on what they are connected to: TTY detection, colour, and whether
// the user can be prompted. No command writes to os.Stdout itself.
package iostreams

import (
	"bytes"
	"io"
	"os"

	"github.com/mattn/go-isatty"
)

// IOStreams is the set of streams a command reads and writes.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	stdinTTY  bool
	stdoutTTY bool
	stderrTTY bool
	// colorDisabled is set by NO_COLOR or --no-color.
	colorDisabled bool
}

// Env is the part of the environment the streams depend on, so that tests
// can pass their own.
type Env interface {
	LookupEnv(key string) (string, bool)
}

// OSEnv reads the process environment.
type OSEnv struct{}

// LookupEnv calls os.LookupEnv.
func (OSEnv) LookupEnv(key string) (string, bool) { return os.LookupEnv(key) }

// System returns streams bound to the process's stdin, stdout and stderr.
// SNAVIO_FORCE_TTY=1 makes stdout and stderr count as terminals (for tests
// and for piping into a pager that understands colour); NO_COLOR (any
// non-empty value, see no-color.org) turns colour off.
func System(env Env) *IOStreams {
	s := &IOStreams{
		In:        os.Stdin,
		Out:       os.Stdout,
		ErrOut:    os.Stderr,
		stdinTTY:  isTerminal(os.Stdin),
		stdoutTTY: isTerminal(os.Stdout),
		stderrTTY: isTerminal(os.Stderr),
	}
	if v, ok := env.LookupEnv("SNAVIO_FORCE_TTY"); ok && v != "" && v != "0" && v != "false" {
		s.stdoutTTY = true
		s.stderrTTY = true
	}
	if v, ok := env.LookupEnv("NO_COLOR"); ok && v != "" {
		s.colorDisabled = true
	}
	return s
}

func isTerminal(f *os.File) bool {
	return isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd())
}

// Test returns streams backed by buffers, none of them a TTY.
func Test() (s *IOStreams, in, out, errOut *bytes.Buffer) {
	in, out, errOut = &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// IsStdoutTTY reports whether stdout is a terminal.
func (s *IOStreams) IsStdoutTTY() bool { return s.stdoutTTY }

// IsStderrTTY reports whether stderr is a terminal.
func (s *IOStreams) IsStderrTTY() bool { return s.stderrTTY }

// IsStdinTTY reports whether stdin is a terminal.
func (s *IOStreams) IsStdinTTY() bool { return s.stdinTTY }

// SetStdoutTTY overrides TTY detection for stdout (tests).
func (s *IOStreams) SetStdoutTTY(v bool) { s.stdoutTTY = v }

// SetStderrTTY overrides TTY detection for stderr (tests).
func (s *IOStreams) SetStderrTTY(v bool) { s.stderrTTY = v }

// SetStdinTTY overrides TTY detection for stdin (tests).
func (s *IOStreams) SetStdinTTY(v bool) { s.stdinTTY = v }

// DisableColor turns colour off (--no-color).
func (s *IOStreams) DisableColor() { s.colorDisabled = true }

// ColorEnabled reports whether stdout output may carry colour: only on a
// TTY, and never with NO_COLOR or --no-color.
func (s *IOStreams) ColorEnabled() bool { return s.stdoutTTY && !s.colorDisabled }

// CanPrompt reports whether the user can answer a question: both stdin and
// stdout must be terminals. CI never hangs on a prompt.
func (s *IOStreams) CanPrompt() bool { return s.stdinTTY && s.stdoutTTY }
