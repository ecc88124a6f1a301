package cmdutil

import (
	"errors"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/platform"
)

func TestMap(t *testing.T) {
	tests := []struct {
		err      error
		code     int
		contains []string
	}{
		{&platform.APIError{Status: 400, Message: "invalid rate", Fix: "write 100/s"}, ExitUsage, []string{"invalid rate (HTTP 400): write 100/s"}},
		{&platform.APIError{Status: 422, Message: "queue q does not exist", Fix: "snavio queue create q"}, ExitError, []string{"queue q does not exist", "snavio queue create q"}},
		{&platform.APIError{Status: 400, Message: "bad"}, ExitUsage, []string{"--help"}},
		{&platform.APIError{Status: 401, Message: "unknown token"}, ExitError, []string{"SNAVIO_TOKEN", "operator.token"}},
		{&platform.APIError{Status: 403, Message: "tenant may not", Fix: "use the operator profile"}, ExitError, []string{"use the operator profile", "SNAVIO_TOKEN"}},
		{&platform.APIError{Status: 404, Message: "registry: not found", Fix: "GET /v1/registry"}, ExitError, []string{"`snavio route list`"}},
		{&platform.APIError{Status: 404, Message: "no keys", Fix: "snavio key create --service x/<service>"}, ExitError, []string{"snavio key create --service x/<service>; see what exists with `snavio route list`"}},
		{&platform.APIError{Status: 404, Message: "queue q does not exist", Fix: "list the queues with `snavio route list`"}, ExitError, []string{"(HTTP 404): list the queues with `snavio route list`"}},
		{&platform.APIError{Status: 409, Message: "registry: version conflict"}, ExitError, []string{"version conflict", "run the command again"}},
		{&platform.APIError{Status: 500, Message: "boom"}, ExitError, []string{"boom (HTTP 500)"}},
		{errors.New("plain"), ExitError, []string{"plain"}},
	}
	for _, tc := range tests {
		got := MapAPIError(tc.err, "snavio route list")
		if c := ExitCode(got); c != tc.code {
			t.Errorf("%v: exit %d, want %d", tc.err, c, tc.code)
		}
		for _, s := range tc.contains {
			if !strings.Contains(got.Error(), s) {
				t.Errorf("%v: %q lacks %q", tc.err, got, s)
			}
		}
		var ae *platform.APIError
		if _, isAPI := tc.err.(*platform.APIError); isAPI && !errors.As(got, &ae) {
			t.Errorf("%v: the API error is not in the chain", tc.err)
		}
	}
}

// A 401 or 403 says where the token comes from once, and does not repeat
// what the server's message already said.
func TestMapTokenErrorsSayItOnce(t *testing.T) {
	got := MapAPIError(&platform.APIError{Status: 401, Message: "unknown token"}, "snavio route list").Error()
	if want := "unknown token (HTTP 401): the token is SNAVIO_TOKEN when set"; !strings.HasPrefix(got, want) {
		t.Errorf("401: %q, want it to start %q", got, want)
	}
	got = MapAPIError(&platform.APIError{Status: 403, Message: "registry and key changes need the operator token", Fix: "run the command with the operator profile"}, "snavio route list").Error()
	if n := strings.Count(got, "need the operator token"); n != 1 {
		t.Errorf("403: %q says it %d times, want once", got, n)
	}
	if want := "(HTTP 403): run the command with the operator profile; the token is SNAVIO_TOKEN"; !strings.Contains(got, want) {
		t.Errorf("403: %q lacks %q", got, want)
	}
}

// A 404 whose fix already names the list command does not name it twice.
func TestNotFoundHintOnce(t *testing.T) {
	got := MapAPIError(&platform.APIError{Status: 404, Message: "queue q does not exist", Fix: "list the queues with `snavio queue list`, or create it with `snavio queue create`"}, "snavio queue list")
	if n := strings.Count(got.Error(), "snavio queue list"); n != 1 {
		t.Errorf("%q names `snavio queue list` %d times, want once", got, n)
	}
}

// An operation an aws profile cannot do yet exits 1 with its typed
// message, and never mentions `dispatch serve`.
func TestMapNotAvailable(t *testing.T) {
	err := MapAPIError(&platform.NotAvailableError{What: "route list"}, "snavio route list")
	if c := ExitCode(err); c != ExitError {
		t.Errorf("exit %d, want %d", c, ExitError)
	}
	if !strings.HasPrefix(err.Error(), "not available on aws yet: route list") || strings.Contains(err.Error(), "dispatch serve") {
		t.Errorf("%q", err)
	}
	var na *platform.NotAvailableError
	if !errors.As(err, &na) {
		t.Error("the typed error is not in the chain")
	}
}

// An operation that says what to do instead, and a 403 that says where
// an aws profile's IAM identity comes from, are reported as they are:
// no hint about local profiles or tokens.
func TestMapNotAvailableWithReason(t *testing.T) {
	err := MapAPIError(&platform.NotAvailableError{What: "token list", Reason: "IAM replaces tokens on aws"}, "snavio token list")
	if c := ExitCode(err); c != ExitError || err.Error() != "token list: IAM replaces tokens on aws" {
		t.Errorf("exit %d: %q", c, err)
	}
	err = MapAPIError(&platform.APIError{Status: 403, Message: "Forbidden", Fix: "assume the operator role", Credential: "the caller is the profile's IAM identity"}, "snavio route list")
	if c := ExitCode(err); c != ExitError || err.Error() != "Forbidden (HTTP 403): assume the operator role; the caller is the profile's IAM identity" {
		t.Errorf("exit %d: %q", c, err)
	}
}
