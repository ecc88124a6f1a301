package route_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/output"
)

const routesFile = `kind: route
target: mailer
command: send
queue: arn:snavio:sqs:local:000000000000:mailer
dlq: arn:snavio:sqs:local:000000000000:mailer-dlq
sensitivity: critical
---
kind: acl
source: acme/billing
target: mailer
command: send
`

func writeFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "routes.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestApplyPlanIdempotenceExitCodesAndPrune(t *testing.T) {
	e := routetest.New(t, nil)
	d := e.Deps("op", output.JSON)
	f := writeFile(t, routesFile)
	var res route.Result
	decode := func() {
		t.Helper()
		res = route.Result{}
		if err := json.Unmarshal(e.Out.Bytes(), &res); err != nil {
			t.Fatalf("%v: %s", err, e.Out)
		}
	}
	// Dry run with pending changes: exit 3 with --detailed-exitcode.
	err := e.Run(t, route.NewCmdApply(d, nil), "-f", f, "--dry-run", "--detailed-exitcode")
	if cmdutil.ExitCode(err) != cmdutil.ExitChanges {
		t.Fatalf("dry run: %v", err)
	}
	decode()
	if !res.DryRun || res.Summary.Create != 2 {
		t.Fatalf("plan = %+v", res)
	}
	// Applying them with --detailed-exitcode exits 0: nothing is pending
	// afterwards.
	if err := e.Run(t, route.NewCmdApply(d, nil), "-f", f, "--detailed-exitcode"); err != nil {
		t.Fatalf("apply with --detailed-exitcode: %v", err)
	}
	decode()
	if res.Summary.Create != 2 || res.Changes[0].Version != 1 {
		t.Fatalf("apply = %+v", res)
	}
	// The ACL took its route's profile.
	if res.Changes[0].After.ACL.Profile != "critical" {
		t.Fatalf("acl = %+v", res.Changes[0].After.ACL)
	}
	// Again: nothing to do, exit 0 even with --detailed-exitcode.
	if err := e.Run(t, route.NewCmdApply(d, nil), "-f", f, "--detailed-exitcode"); err != nil {
		t.Fatalf("second apply: %v", err)
	}
	decode()
	if res.Summary.Pending() || res.Summary.Unchanged != 2 {
		t.Fatalf("second apply = %+v", res)
	}
	// Stdin, prune: the file without its ACL deletes the ACL.
	d.In = strings.NewReader(strings.SplitN(routesFile, "---", 2)[0])
	if err := e.Run(t, route.NewCmdApply(d, nil), "-f", "-", "--prune", "--dry-run"); err != nil {
		t.Fatal(err)
	}
	decode()
	if res.Summary.Delete != 1 || res.Changes[0].ID != "acl acme/billing mailer send" {
		t.Fatalf("prune plan = %+v", res)
	}
	// Table output with the summary on stderr.
	td := e.Deps("op", output.Table)
	if err := e.Run(t, route.NewCmdApply(td, nil), "-f", f, "--dry-run"); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(e.Out.String(), "unchanged   acl acme/billing mailer send") || !strings.Contains(e.Err.String(), "No changes: the registry already matches") {
		t.Fatalf("table:\n%s\n%s", e.Out, e.Err)
	}
}

func TestApplyBadInput(t *testing.T) {
	e := routetest.New(t, nil)
	d := e.Deps("op", output.JSON)
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"no file", nil, "missing -f FILE"},
		{"missing file", []string{"-f", filepath.Join(t.TempDir(), "nope.yaml")}, "does not exist"},
		{"unknown key", []string{"-f", writeFile(t, "kind: route\ntarget: mailer\ncommand: send\nqueue: x\ndlq: y\nrate_limit: 1/s\n")}, "unknown key rate_limit"},
		{"bad kind", []string{"-f", writeFile(t, "kind: routes\n")}, `unknown kind "routes"`},
		{"empty", []string{"-f", writeFile(t, "---\n")}, "declares no routes or ACLs"},
		{"positional", []string{"routes.yaml"}, "takes no arguments"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := e.Run(t, route.NewCmdApply(d, nil), tc.args...)
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v (exit %d), want %q", err, cmdutil.ExitCode(err), tc.want)
			}
			if len(e.Requests) != 0 {
				t.Fatalf("bad input reached the server: %v", e.Requests)
			}
		})
	}
}
