// Package controlapi is the CLI side of the control API of `snavio dispatch
// serve`: the client provider commands take, and the mapping of its errors
// into the CLI's typed errors, so that every command reports them the same
// way and with the same exit codes: a refused input (HTTP 400, 422) is a
// usage error (exit 2) carrying the server's fix; 401 and 403 say where the
// token comes from; 404 says what to list; 409 says the record changed
// under the command.
package controlapi

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/platform"
)

// Client returns the provider of the control-API client of f's profile.
func Client(f *cmdutil.Factory) func() (*platform.API, error) {
	return func() (*platform.API, error) {
		c, err := f.Platform()
		if err != nil {
			return nil, err
		}
		return c.API()
	}
}

// MapError returns err as the CLI reports it. list is the command that shows
// what exists (e.g. "snavio route list"), named in a 404's hint.
func MapError(err error, list string) error {
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
		return &cmdutil.UsageError{Err: &Error{API: ae, msg: with("check the flags and the input file against the command's --help")}}
	case http.StatusUnprocessableEntity:
		// Well-formed, but the platform cannot act on it (a route's queue
		// failed the test routing): not a usage error, so no usage line.
		return &Error{API: ae, msg: with("fix what the message names, then run the command again")}
	case http.StatusUnauthorized, http.StatusForbidden:
		// Where the token comes from, and (unless the server said so
		// already) what needs the operator's.
		hint := "the token is " + platform.TokenEnv + " when set, else " + platform.OperatorTokenFile + " in the profile's data_dir"
		if !strings.Contains(msg, "operator token") {
			hint += "; registry and key changes need the operator token"
		}
		if ae.Fix != "" {
			hint = ae.Fix + "; " + hint
		}
		return &Error{API: ae, msg: fmt.Sprintf("%s (HTTP %d): %s", msg, ae.Status, hint)}
	case http.StatusNotFound:
		// The server's fix is kept when it names a CLI command; its
		// generic ones name HTTP endpoints, which the list command replaces.
		hint := fmt.Sprintf("see what exists with `%s`", list)
		if strings.Contains(ae.Fix, "`"+list+"`") {
			hint = ae.Fix
		} else if strings.Contains(ae.Fix, "snavio ") {
			hint = ae.Fix + "; " + hint
		}
		return &Error{API: ae, msg: fmt.Sprintf("%s (HTTP 404): %s", msg, hint)}
	case http.StatusConflict:
		return &Error{API: ae, msg: with("") + "; the record changed since it was read (version conflict): run the command again"}
	}
	return err
}

// Error is a mapped control-API error; it unwraps to the *platform.APIError.
type Error struct {
	API *platform.APIError
	msg string
}

func (e *Error) Error() string { return e.msg }

// Unwrap returns the API error.
func (e *Error) Unwrap() error { return e.API }
