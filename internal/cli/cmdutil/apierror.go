package cmdutil

// The control API's errors as the CLI reports them, so that every command
// reports them the same way and with the same exit codes: a refused input
// (HTTP 400, 422) is a usage error (exit 2) carrying the server's fix; 401
// and 403 say where the token comes from; 404 says what to list; 409 says
// the record changed under the command. An operation the profile's
// platform cannot do (*platform.NotAvailableError) exits 1 with its
// reason, or a hint to use a local profile.

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/platform"
)

// MapAPIError returns err as the CLI reports it. list is the command that
// shows what exists (e.g. "snavio route list"), named in a 404's hint.
func MapAPIError(err error, list string) error {
	var na *platform.NotAvailableError
	if errors.As(err, &na) {
		if na.Reason != "" { // it says what to do instead
			return &APIError{msg: err.Error(), err: err}
		}
		return &APIError{msg: err.Error() + "; the profile is kind aws: run this command with a local profile (`snavio profile list`)", err: err}
	}
	var ae *platform.APIError
	if !errors.As(err, &ae) {
		return err
	}
	msg := ae.Message
	if msg == "" {
		msg = http.StatusText(ae.Status)
	}
	with := func(hint string) string {
		if ae.Fix != "" {
			return fmt.Sprintf("%s (HTTP %d): %s", msg, ae.Status, ae.Fix)
		}
		return fmt.Sprintf("%s (HTTP %d): %s", msg, ae.Status, hint)
	}
	switch ae.Status {
	case http.StatusBadRequest:
		return &UsageError{Err: &APIError{err: ae, msg: with("check the flags and the input file against the command's --help")}}
	case http.StatusUnprocessableEntity:
		// Well-formed, but the platform cannot act on it (a route's queue
		// failed the test routing): not a usage error, so no usage line.
		return &APIError{err: ae, msg: with("fix what the message names, then run the command again")}
	case http.StatusUnauthorized, http.StatusForbidden:
		// Where the token (an aws profile: its IAM identity) comes from,
		// and (unless the server said so already) what needs the operator's.
		hint := ae.Credential
		if hint == "" {
			hint = "the token is " + platform.TokenEnv + " when set, else " + platform.OperatorTokenFile + " in the profile's data_dir"
			if !strings.Contains(msg, "operator token") {
				hint += "; registry and key changes need the operator token"
			}
		}
		if ae.Fix != "" {
			hint = ae.Fix + "; " + hint
		}
		return &APIError{err: ae, msg: fmt.Sprintf("%s (HTTP %d): %s", msg, ae.Status, hint)}
	case http.StatusNotFound:
		// The server's fix is kept when it names a CLI command; its
		// generic ones name HTTP endpoints, which the list command replaces.
		hint := fmt.Sprintf("see what exists with `%s`", list)
		if strings.Contains(ae.Fix, "`"+list+"`") {
			hint = ae.Fix
		} else if strings.Contains(ae.Fix, "snavio ") {
			hint = ae.Fix + "; " + hint
		}
		return &APIError{err: ae, msg: fmt.Sprintf("%s (HTTP 404): %s", msg, hint)}
	case http.StatusConflict:
		return &APIError{err: ae, msg: with("") + "; the record changed since it was read (version conflict): run the command again"}
	}
	return err
}

// APIError is a mapped platform error; it unwraps to the
// *platform.APIError or *platform.NotAvailableError.
type APIError struct {
	err error
	msg string
}

func (e *APIError) Error() string { return e.msg }

// Unwrap returns the platform's error.
func (e *APIError) Unwrap() error { return e.err }
