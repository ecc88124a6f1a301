package controlapi

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/server"
)

// Error is a refusal: its HTTP status, what went wrong (Msg) and what to
// do about it (Fix). Err, when set, is a sentinel callers test with
// errors.Is; Code, when set, is the envelope's code.
type Error struct {
	Status     int
	Code       string
	Msg, Fix   string
	RetryAfter time.Duration
	Err        error
}

func (e *Error) Error() string { return e.Msg }

// Unwrap returns the sentinel, if any.
func (e *Error) Unwrap() error { return e.Err }

// Refuse returns a refusal with status.
func Refuse(status int, msg, fix string) *Error { return &Error{Status: status, Msg: msg, Fix: fix} }

// BadRequest returns a 400 refusal.
func BadRequest(msg, fix string) *Error { return Refuse(http.StatusBadRequest, msg, fix) }

// Write answers with e: its status, Retry-After when set, and the error
// envelope.
func (e *Error) Write(w http.ResponseWriter) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	server.WriteAPIErrorCode(w, e.Status, e.Code, e.Msg, e.Fix)
}

// Errors maps the sentinel errors of one resource's store to refusals; it
// returns nil for an error it does not know.
type Errors func(err error) *Error

// fail answers err: an *Error as it is, a resource's sentinel as its
// Errors maps it, a cancelled request with 503, anything else as a
// logged 500.
func fail(w http.ResponseWriter, r *http.Request, log *slog.Logger, known Errors, err error) {
	var ae *Error
	if !errors.As(err, &ae) && known != nil {
		ae = known(err)
	}
	switch {
	case ae != nil:
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		ae = &Error{Status: http.StatusServiceUnavailable, Msg: "the request was cancelled: " + err.Error(), Fix: "retry", RetryAfter: time.Second}
	default:
		log.Error("control API failure", "method", r.Method, "path", r.URL.Path, "err", err)
		ae = Refuse(http.StatusInternalServerError, "internal error: "+err.Error(), "retry; if it persists, check the server log and the data directory")
	}
	ae.Write(w)
}
