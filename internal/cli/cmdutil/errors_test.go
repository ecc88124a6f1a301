package cmdutil

import (
	"errors"
	"fmt"
	"testing"
)

func TestExitCode(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{nil, ExitOK},
		{errors.New("boom"), ExitError},
		{Usagef("bad flag"), ExitUsage},
		{fmt.Errorf("wrapped: %w", Usagef("bad")), ExitUsage},
		{&ExitCodeError{Code: ExitChanges}, ExitChanges},
		{fmt.Errorf("x: %w", &ExitCodeError{Code: 7, Err: errors.New("y")}), 7},
		{errors.New(`unknown command "x" for "snavio"`), ExitUsage},
		{errors.New("unknown flag: --x"), ExitUsage},
		{errors.New("accepts 1 arg(s), received 2"), ExitUsage},
		{ErrSilent, ExitError},
	}
	for _, tt := range tests {
		if got := ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// hinted is an error whose line replaces its cause's text with advice.
type hinted struct{ cause error }

func (h hinted) Error() string {
	return "cannot save the profile: check the config directory's permissions"
}
func (h hinted) Unwrap() error { return h.cause }

func TestDetailListsCauses(t *testing.T) {
	root := errors.New("disk full")
	err := hinted{fmt.Errorf("rename: %w", root)}
	d := Detail(err)
	if len(d) != 2 || d[0] != "*fmt.wrapError: rename: disk full" || d[1] != "*errors.errorString: disk full" {
		t.Errorf("Detail = %q", d)
	}
}

// A cause the error's own line already shows is not repeated under -v.
func TestDetailSkipsWhatTheLineShows(t *testing.T) {
	api := errors.New("route billing/charge does not exist")
	err := fmt.Errorf("%w; list the routes with `snavio route list`", api)
	if d := Detail(err); len(d) != 0 {
		t.Errorf("Detail = %q, want nothing: the line shows the cause", d)
	}
}
