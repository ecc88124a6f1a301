package cmdutil

import (
	"errors"
	"fmt"
	"strings"
)

// Exit codes. Every command documents which of these it returns; `snavio
// help exit-codes` lists them all.
const (
	ExitOK    = 0
	ExitError = 1
	ExitUsage = 2
	// ExitChanges means "differences found / changes pending" for commands
	// that compare state (apply --detailed-exitcode, snapshot diff).
	ExitChanges = 3
	// ExitInvalid: the dispatcher rejected the command as invalid
	// (snavio.command.invalid: schema, signature, replay window, key,
	// ban, dedupe conflict). Resending the same message will not help.
	ExitInvalid = 4
	// ExitFailed: the command was valid but not dispatched
	// (snavio.command.failed: no route, no ACL, rate limit, fairness,
	// delivery failure). The message says when a retry may succeed.
	ExitFailed = 5
	// ExitDuplicate: strict dedupe dropped the command: its id was
	// already delivered (snavio.command.duplicate).
	ExitDuplicate = 6
	// ExitTimeout: the command was put on the bus but no outcome arrived
	// within --wait. Its fate is unknown; follow it with snavio tail.
	ExitTimeout = 7
	// ExitNotAccepted: the bus refused the PutEvents entry (nothing was
	// put); a retry with the same --id is safe.
	ExitNotAccepted = 8
)

// UsageError is a problem with how the command was invoked: a bad flag, a
// missing argument, an unknown subcommand. It exits with ExitUsage.
type UsageError struct{ Err error }

func (e *UsageError) Error() string { return e.Err.Error() }
func (e *UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return &UsageError{Err: fmt.Errorf(format, args...)}
}

// ExitCodeError carries a specific exit code. Err may be nil when the
// command has already told the user what happened.
type ExitCodeError struct {
	Code int
	Err  error
}

func (e *ExitCodeError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}
func (e *ExitCodeError) Unwrap() error { return e.Err }

// ErrSilent exits with ExitError without printing anything: the command
// already printed why.
var ErrSilent = errors.New("silent error")

// cobraUsagePrefixes are the messages cobra itself returns for usage
// mistakes (it has no typed errors for them).
var cobraUsagePrefixes = []string{
	"unknown command ",
	"unknown flag: ",
	"unknown shorthand flag: ",
	"flag needs an argument: ",
	"invalid argument ",
	"required flag(s) ",
	"accepts ",
	"requires at least ",
	"requires at most ",
	"if any flags in the group ",
}

// ExitCode maps an error returned by a command to the process exit code.
func ExitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var ec *ExitCodeError
	if errors.As(err, &ec) {
		return ec.Code
	}
	var ue *UsageError
	if errors.As(err, &ue) {
		return ExitUsage
	}
	if IsCobraUsage(err) {
		return ExitUsage
	}
	return ExitError
}

// IsCobraUsage reports whether err is one of cobra's own usage errors.
func IsCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range cobraUsagePrefixes {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// Detail returns the chain of wrapped errors below err, outermost first,
// for -v output. It omits err itself and every cause whose message begins
// err's own line (a wrapper that only appends a hint adds nothing to show).
func Detail(err error) []string {
	var out []string
	line := err.Error()
	for e := errors.Unwrap(err); e != nil; e = errors.Unwrap(e) {
		if msg := e.Error(); !strings.HasPrefix(line, msg) {
			out = append(out, fmt.Sprintf("%T: %s", e, msg))
		}
	}
	return out
}
