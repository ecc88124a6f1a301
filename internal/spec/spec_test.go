package spec

import (
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var now = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const q = "arn:aws:sqs:eu-west-1:123456789012:mailer"
const dlq = "arn:aws:sqs:eu-west-1:123456789012:mailer-dlq"

const good = `---
kind: route
target: mailer
command: send-receipt
queue: ` + q + `
dlq: ` + dlq + `
dedupe: strict
expected_drain: 5m
sensitivity: critical
rate: 100/s
burst: 10
cooldown: 30s
fairness: {dominant_share: 0.9, window: 20s, ban: 45s}
ttl: 1h
metadata: {owner: team-mail}
---
kind: acl
source: acme/billing
target: mailer
command: send-receipt
---
kind: ACL
source: acme/shop
target: mailer
command: send-receipt
sensitivity: low
fresh_ttl: 1s
stale_ttl: 3s
`

func TestParse(t *testing.T) {
	items, err := Parse("routes.yaml", strings.NewReader(good), now)
	if err != nil {
		t.Fatal(err)
	}
	if len(items) != 3 {
		t.Fatalf("%d items", len(items))
	}
	r := items[0].Route
	if r == nil || !r.Strict() || r.ExpectedDrainSeconds != 300 || r.Profile != registry.ProfileCritical ||
		r.RateLimit != (registry.RateLimit{Max: 100, IntervalSeconds: 1, Burst: 10, CooldownSeconds: 30}) ||
		r.Fairness.DominantShare != 0.9 || r.Fairness.WindowSeconds != 20 || r.Fairness.BanSeconds != 45 ||
		r.ExpiresAt != now.Unix()+3600 || r.Metadata["owner"] != "team-mail" {
		t.Fatalf("route = %+v", r)
	}
	if a := items[1].ACL; a == nil || !a.Allow || a.Profile != registry.ProfileCritical {
		t.Fatalf("acl inherits the route's profile: %+v", a)
	}
	if a := items[2].ACL; a.Profile != registry.ProfileLow || a.FreshTTLSeconds != 1 || a.StaleTTLSeconds != 3 {
		t.Fatalf("acl = %+v", a)
	}
}

func TestParseErrors(t *testing.T) {
	route := "kind: route\ntarget: mailer\ncommand: send\nqueue: " + q + "\ndlq: " + dlq + "\n"
	tests := map[string]string{
		"kind: route\ntarget: t\n  bad: [":                              "document 1",
		"target: mailer\n":                                              "missing kind: set kind: route or kind: acl",
		"kind: topic\n":                                                 `unknown kind "topic"`,
		route + "colour: red\n":                                         "unknown key colour",
		route + "---\n" + route:                                         "duplicate route key",
		route + "rate: fast\n":                                          `rate "fast"`,
		route + "rate: 10/s\nexpected_drain: 300\n":                     `"300" has no unit: write 300s`,
		route + "burst: 5\n":                                            "burst and cooldown need a rate",
		strings.Replace(route, q, q+".fifo", 1):                         "FIFO",
		strings.Replace(route, "dlq: "+dlq+"\n", "", 1):                 "dlq",
		route + "sensitivity: extreme\n":                                "extreme",
		"kind: acl\nsource: acme/x\ntarget: t\ncommand: c\nqueue: " + q: "belong to kind: route",
		"kind: acl\nsource: nope\ntarget: t\ncommand: c\n":              "source",
		route + "target: twice\n":                                       "key target appears twice",
		route + "fairness: {colour: red}\n":                             "unknown key fairness.colour",
		"- a\n- b\n":                                                    "must be a mapping",
	}
	for in, want := range tests {
		_, err := Parse("f.yaml", strings.NewReader(in), now)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", in, err, want)
		}
		if err != nil && !strings.HasPrefix(err.Error(), "f.yaml") {
			t.Errorf("error does not name the file: %v", err)
		}
	}
}

func TestParseLocatesTheDocument(t *testing.T) {
	in := "kind: acl\nsource: acme/a\ntarget: t\ncommand: c\n---\nkind: acl\nsource: acme/b\ntarget: t\ncommand: c\ncolour: red\n"
	_, err := Parse("f.yaml", strings.NewReader(in), now)
	if err == nil || !strings.Contains(err.Error(), "f.yaml:10 (document 2): unknown key colour") {
		t.Fatalf("err = %v", err)
	}
}

func TestParseRate(t *testing.T) {
	for in, want := range map[string][2]int64{"100/s": {100, 1}, "6000/m": {6000, 60}, "5/h": {5, 3600}, "10/5s": {10, 5}, " 7 / 2m ": {7, 120}} {
		m, iv, err := ParseRate(in)
		if err != nil || m != want[0] || iv != want[1] {
			t.Errorf("ParseRate(%q) = %d %d %v", in, m, iv, err)
		}
	}
	for _, bad := range []string{"100", "0/s", "-1/s", "x/s", "10/0s", "10/1.5s", "10/fortnight"} {
		if _, _, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) accepted", bad)
		}
	}
}

func stored(items []registry.Item) []registry.Item {
	out := make([]registry.Item, len(items))
	for i, it := range items {
		out[i] = it.Clone().WithVersion(int64(i + 1))
	}
	return out
}

func TestPlanIsIdempotent(t *testing.T) {
	items, err := Parse("f", strings.NewReader(good), now)
	if err != nil {
		t.Fatal(err)
	}
	p := MakePlan(items, nil, false)
	if p.Count(Create) != 3 || !p.Pending() {
		t.Fatalf("first plan = %+v", p)
	}
	// Re-parsed an hour later: the ttl moves, but a live record is not
	// touched, so the second apply changes nothing.
	again, _ := Parse("f", strings.NewReader(good), now.Add(time.Hour-time.Minute))
	p = MakePlan(again, stored(items), false)
	if p.Pending() || p.Count(Unchanged) != 3 {
		t.Fatalf("second plan = %+v", p)
	}
}

func TestPlanUpdatesAndPrunes(t *testing.T) {
	items, _ := Parse("f", strings.NewReader(good), now)
	cur := stored(items)
	other := registry.Item{Route: &registry.Route{Target: "billing", Command: "refund", QueueARN: q, DLQARN: dlq, Version: 9}}
	gone := registry.Item{ACL: &registry.ACL{Source: "acme/old", Target: "mailer", Command: "send-receipt", Allow: true, Version: 4}}
	revokedACL := registry.Item{ACL: &registry.ACL{Source: "acme/x", Target: "mailer", Command: "send-receipt", RevokedAt: now, Version: 5}}
	cur = append(cur, other, gone, revokedACL)
	edited := strings.Replace(good, "rate: 100/s", "rate: 200/s", 1)
	want, _ := Parse("f", strings.NewReader(edited), now)
	p := MakePlan(want, cur, false)
	if p.Count(Update) != 1 || p.Count(Delete) != 0 || p.Count(Unchanged) != 2 {
		t.Fatalf("plan without prune = %+v", p)
	}
	p = MakePlan(want, cur, true)
	if p.Count(Delete) != 1 {
		t.Fatalf("plan with prune = %+v", p)
	}
	for _, c := range p.Changes {
		if c.Action == Delete && c.ID != gone.ID() {
			t.Fatalf("prune deleted %s: it must keep other targets' records and revoked ACLs", c.ID)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte("kind: acl\nsource: a/b\ntarget: t\ncommand: c\n"))
	f.Add([]byte("---\n---\n"))
	f.Add([]byte("kind: route\nrate: 1/1s\n"))
	f.Add([]byte("a: &a [*a]\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		items, err := Parse("fuzz.yaml", strings.NewReader(string(b)), now)
		if err != nil {
			if !strings.Contains(err.Error(), "fuzz.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		var d registry.Data
		for _, it := range items {
			d.Add(it)
		}
		if err := registry.Validate(&d); err != nil {
			t.Fatalf("Parse accepted records the registry refuses: %v", err)
		}
		if p := MakePlan(items, stored(items), true); p.Pending() {
			t.Fatalf("applying a parsed file over itself plans changes: %+v", p)
		}
	})
}
