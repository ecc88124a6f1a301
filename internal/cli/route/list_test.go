package route_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/cli/route/routetest"
	"github.com/snavio/snavio/internal/output"
)

func TestListGetHistoryDelete(t *testing.T) {
	e := routetest.New(t, nil)
	d := e.Deps("op", output.JSON)
	if err := e.Run(t, route.NewCmdRegister(d, nil), base...); err != nil {
		t.Fatal(err)
	}
	if err := e.Run(t, route.NewCmdRegister(d, nil), append(base, "--rate", "100/s", "--burst", "10")...); err != nil {
		t.Fatal(err)
	}
	other := []string{"--target", "ledger", "--command", "post", "--queue", "arn:snavio:sqs:local:000000000000:ledger", "--dlq", dlq}
	if err := e.Run(t, route.NewCmdRegister(d, nil), other...); err != nil {
		t.Fatal(err)
	}

	// A tenant token may read.
	td := e.Deps("acme", output.Table)
	if err := e.Run(t, route.NewCmdList(td, nil), "--target", "mailer"); err != nil {
		t.Fatal(err)
	}
	if e.Requests[0] != "GET /v1/registry?kind=route&target=mailer" {
		t.Fatalf("request = %v", e.Requests)
	}
	if !strings.Contains(e.Out.String(), "mailer   send      "+queue) || strings.Contains(e.Out.String(), "ledger") || !strings.Contains(e.Out.String(), "100/s") {
		t.Fatalf("list:\n%s", e.Out)
	}
	if err := e.Run(t, route.NewCmdList(d, nil)); err != nil {
		t.Fatal(err)
	}
	var routes []map[string]any
	if err := json.Unmarshal(e.Out.Bytes(), &routes); err != nil || len(routes) != 2 {
		t.Fatalf("list json: %s %v", e.Out, err)
	}

	if err := e.Run(t, route.NewCmdGet(td, nil), "--target", "mailer", "--command", "send"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"queue            " + queue, "rate             100/s", "burst            10", "version          2"} {
		if !strings.Contains(e.Out.String(), want) {
			t.Fatalf("get lacks %q:\n%s", want, e.Out)
		}
	}
	if err := e.Run(t, route.NewCmdGet(d, nil), "--target", "mailer", "--command", "send"); err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(e.Out.Bytes(), &got); err != nil || got["queue_arn"] != queue || got["version"] != 2.0 {
		t.Fatalf("get json: %s", e.Out)
	}
	err := e.Run(t, route.NewCmdGet(d, nil), "--target", "mailer", "--command", "nope")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "HTTP 404") || !strings.Contains(err.Error(), "snavio route list") {
		t.Fatalf("get missing: %v", err)
	}

	if err := e.Run(t, route.NewCmdHistory(td, nil), "--target", "mailer", "--command", "send"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(e.Out.String()), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[1], "2         put   operator") || !strings.HasSuffix(lines[1], "rate_limit") {
		t.Fatalf("history:\n%s", e.Out)
	}
	if err := e.Run(t, route.NewCmdHistory(td, nil), "--target", "mailer", "--command", "send", "--limit", "0"); cmdutil.ExitCode(err) != cmdutil.ExitUsage {
		t.Fatalf("limit 0: %v", err)
	}

	// Delete with a stale --version is a conflict; without, it reads the current.
	err = e.Run(t, route.NewCmdDelete(d, nil), "--target", "mailer", "--command", "send", "--version", "1")
	if cmdutil.ExitCode(err) != cmdutil.ExitError || !strings.Contains(err.Error(), "version conflict") {
		t.Fatalf("stale delete: %v", err)
	}
	if err := e.Run(t, route.NewCmdDelete(d, nil), "--target", "mailer", "--command", "send"); err != nil {
		t.Fatal(err)
	}
	var del map[string]any
	if err := json.Unmarshal(e.Out.Bytes(), &del); err != nil || del["op"] != "delete" || del["version"] != 3.0 {
		t.Fatalf("delete json: %s", e.Out)
	}
	if err := e.Run(t, route.NewCmdHistory(d, nil), "--target", "mailer", "--command", "send"); err != nil {
		t.Fatalf("history after delete: %v", err)
	}
	err = e.Run(t, route.NewCmdHistory(d, nil), "--target", "nobody", "--command", "send")
	if err == nil || !strings.Contains(err.Error(), "never registered") {
		t.Fatalf("history of nothing: %v", err)
	}
}
