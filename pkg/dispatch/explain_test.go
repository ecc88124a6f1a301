package dispatch_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// stepOf returns the trace's step stage/check, failing if absent.
func stepOf(t *testing.T, tr dispatch.Trace, stage, check string) trace.Step {
	t.Helper()
	for _, s := range tr.Steps {
		if s.Stage == stage && s.Check == check {
			return s
		}
	}
	t.Fatalf("trace has no %s/%s step: %+v", stage, check, tr.Steps)
	return trace.Step{}
}

// actual runs the command for real (fast, then slow if escalated) and
// returns its outcome and reason.
func actual(t *testing.T, f *fixture, msg []byte) (dispatch.Outcome, string) {
	t.Helper()
	res, esc := f.d.Fast(context.Background(), source, msg)
	if res.Outcome == dispatch.Escalated {
		var err error
		res, err = f.d.Slow(context.Background(), esc)
		if err != nil {
			t.Fatalf("slow: %v", err)
		}
	}
	return res.Outcome, res.Reason
}

// TestExplainEachCheck explains a command in each situation the
// dispatcher decides, checks the deciding step and the cache state it
// reports, checks that explaining changed nothing (no telemetry, no
// delivery, no token or claim), and then sends the same command for real:
// the real outcome must be the one the trace predicted.
func TestExplainEachCheck(t *testing.T) {
	type tc struct {
		name    string
		strict  bool
		build   func(t *testing.T) *fixture
		setup   func(t *testing.T, f *fixture)
		message func(t *testing.T, f *fixture) []byte
		outcome dispatch.Outcome
		reason  string
		path    telemetry.Path
		check   func(t *testing.T, tr dispatch.Trace)
	}
	cases := []tc{
		{
			name:    "delivered on the fast path",
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(1), "mailer", "send", `{"a":1}`) },
			outcome: dispatch.Delivered, path: telemetry.PathFast,
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "fast", "route"); s.Result != trace.Pass || s.Cache != "fresh" || s.Detail != queue {
					t.Errorf("route step = %+v", s)
				}
				if s := stepOf(t, tr, "fast", "acl"); s.Result != trace.Pass || s.Cache != "fresh" {
					t.Errorf("acl step = %+v", s)
				}
				for _, c := range []string{"bus_source", "envelope", "replay_window", "key_version", "hmac", "ban"} {
					if s := stepOf(t, tr, "shield", c); s.Result != trace.Pass {
						t.Errorf("shield %s = %+v", c, s)
					}
				}
				if tr.CommandID != uuidN(1) || tr.Target != "mailer" || tr.Command != "send" {
					t.Errorf("trace ids = %+v", tr)
				}
			},
		},
		{
			name: "tampered payload",
			message: func(t *testing.T, f *fixture) []byte {
				return []byte(strings.Replace(string(f.message(t, uuidN(2), "mailer", "send", `{"amount":1}`)), `"amount":1`, `"amount":9`, 1))
			},
			outcome: dispatch.Invalid, reason: "bad_signature",
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "shield", "hmac"); s.Result != trace.Fail {
					t.Errorf("hmac step = %+v", s)
				}
				if s := stepOf(t, tr, "shield", "ban"); s.Result != trace.Skip {
					t.Errorf("ban step = %+v, want skipped", s)
				}
			},
		},
		{
			name: "stale timestamp",
			message: func(t *testing.T, f *fixture) []byte {
				msg := f.message(t, uuidN(3), "mailer", "send", `{}`)
				f.clk.Advance(2 * time.Minute)
				return msg
			},
			outcome: dispatch.Invalid, reason: "timestamp_too_old",
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "shield", "replay_window"); s.Result != trace.Fail {
					t.Errorf("replay_window step = %+v", s)
				}
				if s := stepOf(t, tr, "shield", "envelope"); s.Result != trace.Pass {
					t.Errorf("envelope step = %+v", s)
				}
			},
		},
		{
			name:    "forged command.source",
			message: func(t *testing.T, f *fixture) []byte { return forge(t, f.message(t, uuidN(4), "mailer", "send", `{}`)) },
			outcome: dispatch.Invalid, reason: "command_source_present",
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "shield", "envelope"); s.Result != trace.Fail {
					t.Errorf("envelope step = %+v", s)
				}
			},
		},
		{
			name: "unknown key version",
			message: func(t *testing.T, f *fixture) []byte {
				k, err := signing.NewKey("hmac-v9", secret)
				if err != nil {
					t.Fatal(err)
				}
				f.key = k
				return f.message(t, uuidN(5), "mailer", "send", `{}`)
			},
			outcome: dispatch.Invalid, reason: "unknown_key_version",
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "shield", "key_version"); s.Result != trace.Fail {
					t.Errorf("key_version step = %+v", s)
				}
			},
		},
		{
			name:    "missing route",
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(6), "nobody", "send", `{}`) },
			outcome: dispatch.Failed, reason: string(telemetry.FailRouteMissing),
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "fast", "route"); s.Result != trace.Escalate || s.Detail != "cache_miss" || s.Cache != "fresh" {
					t.Errorf("route step = %+v", s)
				}
				if s := stepOf(t, tr, "slow", "route_acl"); s.Result != trace.Fail {
					t.Errorf("slow step = %+v", s)
				}
				if tr.Escalation != "cache_miss" {
					t.Errorf("escalation = %q", tr.Escalation)
				}
			},
		},
		{
			name: "missing ACL",
			setup: func(t *testing.T, f *fixture) {
				route := dispatchtest.RegistryRoute("accounts", "delete-user")
				if _, err := f.reg.Put(context.Background(), registry.Actor{Who: "test", At: t0}, registry.Item{Route: &route}); err != nil {
					t.Fatal(err)
				}
			},
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(7), "accounts", "delete-user", `{}`) },
			outcome: dispatch.Failed, reason: string(telemetry.FailACLDeny),
		},
		{
			name:    "strict route, first copy",
			strict:  true,
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(8), "mailer", "send", `{}`) },
			outcome: dispatch.Delivered, path: telemetry.PathSlow,
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "fast", "dedupe"); s.Result != trace.Escalate {
					t.Errorf("fast dedupe step = %+v", s)
				}
				if s := stepOf(t, tr, "slow", "dedupe"); s.Result != trace.Deferred {
					t.Errorf("slow dedupe step = %+v", s)
				}
			},
		},
		{
			name:   "strict route, a copy of a delivered command",
			strict: true,
			setup: func(t *testing.T, f *fixture) {
				if o, _ := actual(t, f, f.message(t, uuidN(9), "mailer", "send", `{}`)); o != dispatch.Delivered {
					t.Fatalf("first copy: %s", o)
				}
			},
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(9), "mailer", "send", `{}`) },
			outcome: dispatch.Duplicate,
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "fast", "dedupe"); s.Result != trace.Drop {
					t.Errorf("dedupe step = %+v", s)
				}
			},
		},
		{
			name: "rate limited",
			build: func(t *testing.T) *fixture {
				route := dispatchtest.RegistryRoute("mailer", "send")
				route.RateLimit = registry.RateLimit{Max: 1, IntervalSeconds: 60}
				tel, out := &telemetry.Memory{}, &sink{}
				d, clk, reg := buildStack(t, route, cache.Config{Jitter: -1}, tel, out, func(f func()) { f() })
				k, err := signing.NewKey("hmac-v1", secret)
				if err != nil {
					t.Fatal(err)
				}
				return &fixture{d: d, clk: clk, key: k, tel: tel, out: out, reg: reg}
			},
			setup: func(t *testing.T, f *fixture) {
				// The first command's prefetch takes the window's only unit,
				// which its own slow take then spends; the second finds the
				// window spent and denies it, so the explained third is
				// refused by the fast stage's denylist.
				if o, _ := actual(t, f, f.message(t, uuidN(10), "mailer", "send", `{}`)); o != dispatch.Delivered {
					t.Fatalf("first command: %s", o)
				}
				if o, _ := actual(t, f, f.message(t, uuidN(12), "mailer", "send", `{}`)); o != dispatch.Failed {
					t.Fatalf("second command: %s", o)
				}
			},
			message: func(t *testing.T, f *fixture) []byte { return f.message(t, uuidN(11), "mailer", "send", `{}`) },
			outcome: dispatch.Failed, reason: string(telemetry.FailRateLimitExceeded),
			check: func(t *testing.T, tr dispatch.Trace) {
				if s := stepOf(t, tr, "fast", "rate_limit"); s.Result != trace.Reject {
					t.Errorf("rate_limit step = %+v", s)
				}
				if tr.RetryAfterMS <= 0 || tr.ThrottleUntil.IsZero() {
					t.Errorf("retry hints = %d %v", tr.RetryAfterMS, tr.ThrottleUntil)
				}
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFixture(t, c.strict)
			if c.build != nil {
				f = c.build(t)
			}
			if c.setup != nil {
				c.setup(t, f)
			}
			msg := c.message(t, f)
			events, sent := commandEvents(f.tel), len(f.out.got)
			tr := f.d.Explain(context.Background(), source, msg)
			tr2 := f.d.Explain(context.Background(), source, msg)
			if tr.Outcome != c.outcome || tr.Reason != c.reason || tr.Path != c.path {
				t.Fatalf("trace outcome %s reason %q path %q, want %s %q %q; steps %+v", tr.Outcome, tr.Reason, tr.Path, c.outcome, c.reason, c.path, tr.Steps)
			}
			if tr2.Outcome != tr.Outcome || len(tr2.Steps) != len(tr.Steps) {
				t.Fatalf("explaining twice differs: %+v then %+v", tr, tr2)
			}
			if n := commandEvents(f.tel); n != events {
				t.Fatalf("Explain emitted %d command telemetry events: %+v", n-events, f.tel.Events())
			}
			if len(f.out.got) != sent {
				t.Fatal("Explain delivered")
			}
			if tr.At != t0.Add(f.clk.Now().Sub(t0)).UTC() {
				t.Errorf("trace at %v, clock %v", tr.At, f.clk.Now())
			}
			if c.check != nil {
				c.check(t, tr)
			}
			o, r := actual(t, f, msg)
			if o != c.outcome || (c.outcome != dispatch.Duplicate && r != c.reason) {
				t.Fatalf("real outcome %s %q, trace predicted %s %q", o, r, c.outcome, c.reason)
			}
		})
	}
}

// commandEvents counts the telemetry about commands: every event but the
// caches' own refresh records (a stale cache read by Explain refreshes as
// it would for any command).
func commandEvents(tel *telemetry.Memory) int {
	n := 0
	for _, e := range tel.Events() {
		if e.EventName() != cache.EventNameRefreshed {
			n++
		}
	}
	return n
}

// forge adds a producer-sent command.source, which the dispatcher refuses.
func forge(t *testing.T, msg []byte) []byte {
	t.Helper()
	out := strings.Replace(string(msg), `"command":{`, `"command":{"source":"evil/x",`, 1)
	if out == string(msg) {
		t.Fatal("could not forge the message")
	}
	return []byte(out)
}

// TestExplainColdCache reports the cache state a cold start leaves: the
// route lookup escalates with cache_cold on an expired cache, and the
// slow stage decides from the registry.
func TestExplainColdCache(t *testing.T) {
	f := newFixture(t, false)
	f.clk.Advance(24 * time.Hour)
	k, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		t.Fatal(err)
	}
	f.key = k
	tr := f.d.Explain(context.Background(), source, f.message(t, uuidN(20), "mailer", "send", `{}`))
	s := stepOf(t, tr, "fast", "route")
	if s.Cache != cache.Expired.String() || s.Result != trace.Escalate {
		t.Fatalf("route step on an expired cache = %+v (trace %+v)", s, tr)
	}
	if tr.Outcome != dispatch.Delivered || tr.Path != telemetry.PathSlow {
		t.Fatalf("outcome = %s %s", tr.Outcome, tr.Path)
	}
}
