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

func TestDetailListsCauses(t *testing.T) {
	root := errors.New("disk full")
	err := fmt.Errorf("write config: %w", fmt.Errorf("rename: %w", root))
	d := Detail(err)
	if len(d) != 2 || d[1] != "*errors.errorString: disk full" {
		t.Errorf("Detail = %q", d)
	}
}
