package dashboard

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

func TestHourGroupsFailuresByReasonWithHints(t *testing.T) {
	h := newHour(t0)
	at := t0.Add(5 * time.Minute)
	for _, ev := range []string{
		`{"event":"snavio.command.invalid","source":"demo/app","reason":"bad_signature"}`,
		`{"event":"snavio.command.invalid","source":"demo/batch","reason":"bad_signature"}`,
		`{"event":"snavio.command.invalid","source":"demo/app","reason":"timestamp_too_old"}`,
		`{"event":"snavio.command.failed","source":"demo/app","target":"orders","command_name":"create","reason":"rate-limit-exceeded","retry_after_ms":30000,"throttle_until":"2026-11-21T12:06:00Z"}`,
		`{"event":"snavio.command.failed","source":"demo/app","target":"orders","command_name":"create","reason":"rate-limit-exceeded","quota":"source-quota"}`,
		`{"event":"snavio.command.failed","source":"demo/app","reason":"no-such-reason"}`,
		`not json`,
	} {
		h.add(at, json.RawMessage(ev))
	}
	h.add(t0.Add(-time.Minute), json.RawMessage(`{"event":"snavio.command.invalid","reason":"too_large"}`)) // before the hour
	rows := h.failureRows()
	if len(rows) != 5 {
		t.Fatalf("%d rows, want 5: %+v", len(rows), rows)
	}
	top := rows[0]
	if top.Reason != "bad_signature" || top.Count != 2 || !strings.Contains(top.Hint, "with the right secret") || strings.Join(top.Sources, ",") != "demo/app,demo/batch" {
		t.Fatalf("top row %+v; want bad_signature twice from both sources, with its hint", top)
	}
	var rate, quota, unknown *Failure
	for i := range rows {
		switch rows[i].Reason {
		case "rate-limit-exceeded":
			rate = &rows[i]
		case "rate-limit-exceeded: source-quota":
			quota = &rows[i]
		case "no-such-reason":
			unknown = &rows[i]
		}
	}
	if rate == nil || rate.RetryAfter != 30*time.Second || !rate.ThrottleUntil.Equal(time.Date(2026, 11, 21, 12, 6, 0, 0, time.UTC)) || !strings.Contains(rate.Hint, "retry_after_ms") {
		t.Fatalf("rate-limit row %+v; want its retry hints", rate)
	}
	if quota == nil || quota.Count != 1 || unknown == nil || unknown.Hint != "" {
		t.Fatalf("quota row %+v, unknown row %+v", quota, unknown)
	}
	// The same pass counts the route's outcomes (failed twice on
	// orders/create; the refusals name no route).
	routes := h.routeRows()
	if len(routes) != 1 || routes[0].Target != "orders" || routes[0].Totals[2] != 2 || !strings.Contains(string(routes[0].Chart), `id="route-chart-0"`) {
		t.Fatalf("routes %+v", routes)
	}
}

func TestHourSkewAndFairness(t *testing.T) {
	h := newHour(t0)
	for i, ev := range []string{
		`{"event":"snavio.telemetry.skew_sample","source":"demo/app","skew_seconds":1.5}`,
		`{"event":"snavio.telemetry.skew_near_limit","source":"demo/app","skew_seconds":-50}`,
		`{"event":"snavio.telemetry.skew_sample","source":"demo/app","skew_seconds":2}`,
		`{"event":"snavio.telemetry.skew_sample","source":"demo/batch","skew_seconds":0.1}`,
		`{"event":"snavio.fairness.warm-path-ban","source":"demo/app","target":"orders","command_name":"create","source_share":0.91,"competing_share":0.12,"retry_after_ms":30000,"throttle_until":"2026-11-21T12:10:00Z"}`,
		`{"event":"snavio.fairness.abuse_detected","source":"demo/app","affected_targets":["orders","billing"],"total_violations":7,"ban_applied_until":"2026-11-21T13:00:00Z"}`,
	} {
		h.add(t0.Add(time.Duration(i)*time.Minute), json.RawMessage(ev))
	}
	skews := h.skewRows()
	if len(skews) != 2 || skews[0].Source != "demo/app" || skews[0].Samples != 3 || skews[0].Last != 2 || skews[0].Worst != -50 || skews[0].NearLimit != 1 {
		t.Fatalf("skews %+v", skews)
	}
	f := h.fairnessRows()
	if len(f) != 2 || f[0].Event != "snavio.fairness.abuse_detected" || f[0].Where != "orders, billing" || f[0].Detail != "7 violations" ||
		f[1].Detail != "share 91% against 12%; retry after 30s" || f[1].Where != "orders create" {
		t.Fatalf("fairness %+v", f)
	}
}

// panelFixture is the fixture with registry, keys, snapshots and
// replays to show.
func panelFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	now := f.clk.Now()
	f.api.registry = []registry.Item{
		{Route: &registry.Route{Target: "orders", Command: "create", QueueARN: "arn:snavio:sqs:local:000000000000:demo-orders", DedupeMode: "strict"}},
		{ACL: &registry.ACL{Source: "demo/app", Target: "orders", Command: "create", Allow: true}},
		{ACL: &registry.ACL{Source: "demo/app", Target: "billing", Command: "charge", Allow: true}},
		{ACL: &registry.ACL{Source: "other/app", Target: "orders", Command: "create", Allow: true}},
		{Ban: &registry.Ban{Source: "other/app", Kind: registry.BanGlobal, Reason: "abuse", ExpiresAt: now.Add(time.Hour).Unix()}},
	}
	soon := now.Add(24 * time.Hour).UTC().Format(time.RFC3339)
	f.api.keys = `{"tenant":"demo","services":[
		{"source":"demo/app","current":{"version_id":"hmac-v2","secret":"U0VDUkVULVNFQ1JFVC1TRUNSRVQtU0VDUkVULVNFQ1JFVA==","activated_at":"2026-11-01T00:00:00Z"},
		 "previous":{"version_id":"hmac-v1","secret":"c2VjcmV0","activated_at":"2026-10-01T00:00:00Z","expires_at":"` + soon + `"},
		 "next_rotation_at":"2026-11-20T00:00:00Z"},
		{"source":"demo/batch","next_rotation_at":"2027-01-01T00:00:00Z"}]}`
	f.api.ops = map[string]string{
		"/v1/snapshots": `{"key_id":"k","documents":[{"kind":"full","latest":"` + snapshot.VersionIDAt(now.Add(-10*time.Minute)) + `","bytes":2048,"versions":3},{"kind":"acl","versions":0}]}`,
		"/v1/replays":   `{"replays":[{"id":"r-1","origin":"dlq:demo-orders-dlq","reason":"INC-7","operator":"operator","status":"completed","planned":4,"sent":4,"started_at":"2026-11-21T12:00:00Z"}]}`,
	}
	f.api.telem["demo"] = append(f.api.telem["demo"], wire.TelemetryRecord{Seq: 3, Tenant: "demo", At: now.Add(-time.Minute),
		Event: json.RawMessage(`{"event":"snavio.command.invalid","source":"demo/app","reason":"bad_signature"}`)})
	return f
}

func TestTenantPanels(t *testing.T) {
	f := panelFixture(t)
	c, _ := f.signIn(t, "demo-token")
	w := f.do("GET", "/", nil, c, nil)
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET /: %d %s", w.Code, body)
	}
	for _, want := range []string{
		`<tr data-reason="bad_signature"><td>snavio.command.invalid</td>`, "with the right secret and source",
		"<td>demo/app</td><td>orders</td><td>create</td><td>allowed</td><td>arn:snavio:sqs:local:000000000000:demo-orders</td><td>strict</td>",
		"<td>billing</td><td>charge</td><td>allowed</td><td><span class=\"error\">no route: commands fail route-missing</span>",
		"previous version hmac-v1 stops being accepted in 24h0m0s", "rotation overdue since 2026-11-20 00:00:00 UTC",
		"no current key: its producers cannot sign",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the tenant page lacks %q", want)
		}
	}
	for _, leak := range []string{"other/app", "U0VDUkVU", "c2VjcmV0", `id="snapshots"`, `id="replays"`, `id="fairness"`, "reading it failed"} {
		if strings.Contains(body, leak) {
			t.Errorf("the tenant page shows %q", leak)
		}
	}
}

func TestOperatorPanels(t *testing.T) {
	f := panelFixture(t)
	c, _ := f.signIn(t, "op-token")
	w := f.do("GET", "/", nil, c, nil)
	body := w.Body.String()
	if w.Code != 200 {
		t.Fatalf("GET /: %d %s", w.Code, body)
	}
	for _, want := range []string{
		"<td>full</td><td>" + snapshot.VersionIDAt(f.clk.Now().Add(-10*time.Minute)) + "</td><td>10m0s</td><td>2048 bytes</td><td>3</td>",
		"<td>acl</td><td>none yet</td><td>-</td><td>-</td><td>0</td>",
		"<td>r-1</td><td>dlq:demo-orders-dlq</td><td>INC-7</td><td>operator</td><td>completed</td><td>4</td><td>4</td><td>0</td>",
		"<td>other/app</td><td>global</td><td>abuse</td>",
		`id="failures"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the operator page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="keys"`) || strings.Contains(body, "reading it failed") {
		t.Error("the operator page shows a tenant's keys panel, or a panel failed")
	}
}

func TestAPanelThatCannotBeReadSaysSo(t *testing.T) {
	f := newFixture(t) // no snapshot or replay answers: the fake says 404
	c, _ := f.signIn(t, "op-token")
	w := f.do("GET", "/", nil, c, nil)
	if w.Code != 200 || !strings.Contains(w.Body.String(), "reading it failed: control API answered 404") {
		t.Fatalf("%d; want the page, with the failed panel saying why", w.Code)
	}
}

// FuzzHourAdd: any telemetry record is counted or ignored, never a panic,
// and the hour's totals stay the sums of its minutes.
func FuzzHourAdd(f *testing.F) {
	for _, s := range []string{
		`{"event":"snavio.command.delivered","target":"orders","command_name":"create"}`,
		`{"event":"snavio.command.failed","reason":"rate-limit-exceeded","retry_after_ms":-5,"throttle_until":"x"}`,
		`{"event":"snavio.telemetry.skew_sample","source":"a/b","skew_seconds":1e308}`,
		`{"event":"snavio.fairness.abuse_detected","affected_targets":null}`,
		`[]`, `null`, `{"event":1}`, ``,
	} {
		f.Add([]byte(s), int64(5))
	}
	f.Fuzz(func(t *testing.T, raw []byte, minute int64) {
		h := newHour(t0)
		h.add(t0.Add(time.Duration(minute)*time.Minute), json.RawMessage(raw))
		h.add(t0.Add(time.Duration(minute)*time.Minute), json.RawMessage(raw))
		for o := range Outcomes {
			sum := 0
			for _, n := range h.all.Counts[o] {
				sum += n
			}
			if sum != h.all.Totals[o] {
				t.Fatalf("outcome %d: minutes sum to %d, total %d", o, sum, h.all.Totals[o])
			}
		}
		_ = h.failureRows()
		_ = h.skewRows()
		_ = h.routeRows()
		_ = h.fairnessRows()
	})
}
