package key

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/output"
)

var t0 = routetest.T0

func TestRotateFlags(t *testing.T) {
	tests := []struct {
		args  []string
		want  time.Time
		usage string
	}{
		{nil, time.Time{}, ""},
		{[]string{"--activate-in", "1h"}, t0.Add(time.Hour), ""},
		{[]string{"--activate-at", "2026-12-01T00:00:00Z"}, time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC), ""},
		{[]string{"--activate-at", "tomorrow"}, time.Time{}, "use RFC 3339"},
		{[]string{"--activate-at", "2020-01-01T00:00:00Z"}, time.Time{}, "not in the future"},
		{[]string{"--activate-at", "2026-12-01T00:00:00Z", "--activate-in", "1h"}, time.Time{}, "not both"},
		{[]string{"--activate-in", "90"}, time.Time{}, "give a unit"},
		{[]string{"--service", "billing"}, time.Time{}, `invalid --service "billing"`},
	}
	for _, tc := range tests {
		e := routetest.New(t, nil)
		var got *Options
		err := e.Run(t, NewCmdRotate(e.Deps("op", output.JSON), func(_ context.Context, o *Options) error { got = o; return nil }), append([]string{"--service", "acme/billing"}, tc.args...)...)
		if tc.usage != "" {
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.usage) {
				t.Errorf("%v: err = %v, want usage error with %q", tc.args, err, tc.usage)
			}
			continue
		}
		if err != nil || !got.ActivateAt.Equal(tc.want) {
			t.Errorf("%v: err %v, activate at %v, want %v", tc.args, err, got.ActivateAt, tc.want)
		}
	}
}

func TestCreateShowsTheSecretOnceRotateAndList(t *testing.T) {
	e := routetest.New(t, nil)
	// Table: the secret is labelled, and stderr says it is shown once.
	if err := e.Run(t, NewCmdCreate(e.Deps("op", output.Table), nil), "--service", "acme/billing"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), "SECRET (base64, shown once)") || !strings.Contains(e.Err.String(), "shown once and never again") {
		t.Fatalf("create table:\n%s\n%s", e.Out, e.Err)
	}
	line := e.Out.String()[strings.Index(e.Out.String(), "SECRET (base64, shown once)"):]
	secret := strings.TrimSpace(strings.TrimPrefix(strings.SplitN(line, "\n", 2)[0], "SECRET (base64, shown once)"))
	if b, err := base64.StdEncoding.DecodeString(secret); err != nil || len(b) < 32 {
		t.Fatalf("secret %q: %v", secret, err)
	}
	err := e.Run(t, NewCmdCreate(e.Deps("op", output.JSON), nil), "--service", "acme/billing")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "already has keys") || !strings.Contains(err.Error(), "snavio key rotate --service acme/billing") {
		t.Fatalf("second create: %v", err)
	}

	// JSON: the secret once, with the notice.
	e.Clk.Advance(time.Hour)
	if err := e.Run(t, NewCmdRotate(e.Deps("op", output.JSON), nil), "--service", "acme/billing"); err != nil {
		t.Fatal(err)
	}
	var s Secret
	if err := json.Unmarshal(e.Out.Bytes(), &s); err != nil || s.VersionID != "hmac-v2" || len(s.Secret) < 32 || s.Notice != Notice || e.Err.Len() != 0 {
		t.Fatalf("rotate json: %s (%v) stderr %q", e.Out, err, e.Err)
	}
	if strings.Count(e.Out.String(), base64.StdEncoding.EncodeToString(s.Secret)) != 1 {
		t.Fatalf("the secret appears more than once:\n%s", e.Out)
	}

	// List: never a secret, in any format; a tenant may list.
	for _, f := range []output.Format{output.Table, output.JSON, output.YAML} {
		if err := e.Run(t, NewCmdList(e.Deps("acme", f), nil), "--tenant", "acme"); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(strings.ToLower(e.Out.String()), "secret") || strings.Contains(e.Out.String(), base64.StdEncoding.EncodeToString(s.Secret)) {
			t.Fatalf("list %s shows a secret:\n%s", f, e.Out)
		}
		if !strings.Contains(e.Out.String(), "hmac-v2") {
			t.Fatalf("list %s:\n%s", f, e.Out)
		}
	}
	if e.Requests[0] != "GET /v1/registry?kind=key&tenant=acme" {
		t.Fatalf("list request = %v", e.Requests)
	}
	if err := e.Run(t, NewCmdList(e.Deps("op", output.Table), nil)); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), "acme/billing   hmac-v2   hmac-v1,hmac-v2") {
		t.Fatalf("list table:\n%s", e.Out)
	}

	err = e.Run(t, NewCmdRotate(e.Deps("op", output.JSON), nil), "--service", "acme/none")
	if !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "snavio key list") {
		t.Fatalf("rotate missing: %v", err)
	}
	if err := e.Run(t, NewCmdCreate(e.Deps("acme", output.JSON), nil), "--service", "acme/shop"); !strings.Contains(err.Error(), "HTTP 403") {
		t.Fatalf("tenant create: %v", err)
	}
}
