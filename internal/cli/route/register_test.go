package route_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

const (
	queue = "arn:snavio:sqs:local:000000000000:mailer"
	dlq   = "arn:snavio:sqs:local:000000000000:mailer-dlq"
)

var base = []string{"--target", "mailer", "--command", "send", "--queue", queue, "--dlq", dlq}

func TestRegisterFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  func(r registry.Route) bool
		usage string // a usage error containing this
	}{
		{"minimal", nil, func(r registry.Route) bool {
			return r.Target == "mailer" && r.QueueARN == queue && r.DLQARN == dlq && r.DedupeMode == "" && r.RateLimit.Max == 0
		}, ""},
		{"everything", []string{"--dedupe", "strict", "--expected-drain", "5m", "--sensitivity", "critical", "--rate", "6000/1m", "--burst", "10", "--cooldown", "30s",
			"--fairness-dominant-share", "0.9", "--fairness-competing-share", "0.05", "--fairness-competing-sources", "3", "--fairness-window", "1m", "--fairness-ban", "30s",
			"--prefetch-leases", "7", "--metadata", "owner=team-mail", "--ttl", "1h"}, func(r registry.Route) bool {
			return r.DedupeMode == registry.DedupeStrict && r.ExpectedDrainSeconds == 300 && r.Profile == registry.ProfileCritical &&
				r.RateLimit == registry.RateLimit{Max: 6000, IntervalSeconds: 60, Burst: 10, CooldownSeconds: 30} &&
				r.Fairness == registry.Fairness{DominantShare: 0.9, CompetingShare: 0.05, CompetingSources: 3, WindowSeconds: 60, BanSeconds: 30} &&
				r.PrefetchLeases == 7 && r.Metadata["owner"] == "team-mail" && r.ExpiresAt == t0.Unix()+3600
		}, ""},
		{"fairness off", []string{"--fairness-disabled"}, func(r registry.Route) bool { return r.Fairness.Disabled }, ""},
		{"bad dedupe", []string{"--dedupe", "loose"}, nil, `invalid --dedupe "loose": use strict or none`},
		{"bad sensitivity", []string{"--sensitivity", "high"}, nil, "use critical, moderate or low"},
		{"duration without unit", []string{"--expected-drain", "300"}, nil, "give a unit, e.g. 300s"},
		{"fractional seconds", []string{"--cooldown", "1500ms", "--rate", "1/s"}, nil, "whole number of seconds"},
		{"negative ttl", []string{"--ttl", "-1h"}, nil, "positive whole number"},
		{"bad rate", []string{"--rate", "fast"}, nil, "invalid --rate"},
		{"burst without rate", []string{"--burst", "5"}, nil, "--burst and --cooldown need --rate"},
		{"share out of range", []string{"--fairness-dominant-share", "2"}, nil, "dominant_share"},
		{"fifo queue", []string{"--queue", "arn:snavio:sqs:local:000000000000:q.fifo"}, nil, "FIFO"},
		{"same queue and dlq", []string{"--dlq", queue}, nil, "different queue"},
		{"bad target", []string{"--target", "Mailer"}, nil, "target"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := routetest.New(t, nil)
			var got *route.RegisterOptions
			cmd := route.NewCmdRegister(e.Deps("op", output.JSON), func(_ context.Context, o *route.RegisterOptions) error { got = o; return nil })
			err := e.Run(t, cmd, append(append([]string{}, base...), tc.args...)...)
			if tc.usage != "" {
				if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.usage) {
					t.Fatalf("err = %v (exit %d), want a usage error with %q", err, cmdutil.ExitCode(err), tc.usage)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !tc.want(got.Route) {
				t.Fatalf("route = %+v", got.Route)
			}
		})
	}
}

func TestRegisterRequiresFlags(t *testing.T) {
	e := routetest.New(t, nil)
	err := e.Run(t, route.NewCmdRegister(e.Deps("op", output.JSON), nil), "--target", "mailer")
	if err == nil || cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "required flag(s)") {
		t.Fatalf("err = %v", err)
	}
}

func TestRegisterIsIdempotentAndDryRunWritesNothing(t *testing.T) {
	e := routetest.New(t, nil)
	d := e.Deps("op", output.JSON)
	if err := e.Run(t, route.NewCmdRegister(d, nil), append(base, "--dry-run")...); err != nil {
		t.Fatal(err)
	}
	if len(e.Requests) != 1 || e.Requests[0] != "POST /v1/registry/apply" {
		t.Fatalf("requests = %v", e.Requests)
	}
	var res route.Result
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || !res.DryRun || res.Summary.Create != 1 {
		t.Fatalf("dry run = %s (%v)", e.Out, err)
	}
	if d, _ := e.Reg.Load(t.Context(), t0); d.Len() != 0 {
		t.Fatal("dry run wrote")
	}
	if err := e.Run(t, route.NewCmdRegister(d, nil), base...); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || res.DryRun || res.Summary.Create != 1 || res.Changes[0].Version != 1 {
		t.Fatalf("register = %s (%v)", e.Out, err)
	}
	if err := e.Run(t, route.NewCmdRegister(d, nil), base...); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil || res.Summary.Pending() || res.Summary.Unchanged != 1 {
		t.Fatalf("second register = %s (%v)", e.Out, err)
	}
	// Another rate updates, and the table names the changed field.
	td := e.Deps("op", output.Table)
	if err := e.Run(t, route.NewCmdRegister(td, nil), append(base, "--rate", "10/s")...); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), "update   route mailer send   2         rate_limit") || !strings.Contains(e.Err.String(), "Applied: 0 created, 1 updated") {
		t.Fatalf("update table:\n%s\n%s", e.Out, e.Err)
	}
}

func TestRegisterMapsServerErrors(t *testing.T) {
	e := routetest.New(t, controlapi.RouteQueuesFunc(func(context.Context, string) (controlapi.QueueInfo, error) {
		return controlapi.QueueInfo{}, controlapi.ErrNoQueue
	}))
	err := e.Run(t, route.NewCmdRegister(e.Deps("op", output.JSON), nil), base...)
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "queue "+queue+" does not exist") || !strings.Contains(err.Error(), "snavio queue create mailer --dlq mailer-dlq") {
		t.Fatalf("err = %v", err)
	}
	e2 := routetest.New(t, nil)
	err = e2.Run(t, route.NewCmdRegister(e2.Deps("acme", output.JSON), nil), base...)
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "HTTP 403") || !strings.Contains(err.Error(), "operator token") {
		t.Fatalf("tenant token: %v", err)
	}
	err = e2.Run(t, route.NewCmdRegister(e2.Deps("nope", output.JSON), nil), base...)
	if !strings.Contains(err.Error(), "HTTP 401") || !strings.Contains(err.Error(), "SNAVIO_TOKEN") {
		t.Fatalf("bad token: %v", err)
	}
}
