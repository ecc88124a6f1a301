package dispatch_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const (
	source = "acme/billing"
	queue  = "arn:snavio:sqs:local:000000000000:mailer"
)

var secret = []byte("0123456789abcdef0123456789abcdef")

// routes is a test double of the Router port: a fixed table, always fresh.
// (The real router, with stale-tolerant caches, is package routing.)
type routes struct {
	m        map[[2]string]dispatch.Route
	escalate bool // Fast always escalates with cache_miss
}

func (r *routes) Fast(src, target, command string) (dispatch.Route, string, bool) {
	if r.escalate {
		return dispatch.Route{}, "cache_miss", false
	}
	rt, ok := r.m[[2]string{target, command}]
	if !ok {
		return dispatch.Route{}, "cache_miss", false
	}
	return rt, "", true
}

func (r *routes) Slow(_ context.Context, src, target, command string) (dispatch.Route, telemetry.FailReason, error) {
	rt, ok := r.m[[2]string{target, command}]
	if !ok {
		return dispatch.Route{}, telemetry.FailRouteMissing, nil
	}
	return rt, "", nil
}

// sink records deliveries; fail makes Send fail.
type sink struct {
	mu   sync.Mutex
	got  []dispatch.Delivery
	fail error
}

func (s *sink) Send(_ context.Context, d *dispatch.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	c := *d
	c.Body = append([]byte(nil), d.Body...)
	s.got = append(s.got, c)
	return nil
}

type fixture struct {
	d     *dispatch.Dispatcher
	clk   *clock.Fake
	key   *signing.Key
	tel   *telemetry.Memory
	out   *sink
	route *routes
}

func newFixture(t testing.TB, strict bool) *fixture {
	t.Helper()
	clk := clock.NewFake(t0)
	ring, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{
		source: {{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	tel := &telemetry.Memory{}
	sh, err := shield.New(shield.Config{SampleRate: -1}, shield.Deps{Clock: clk, Keys: ring, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	fl, err := flow.New(flow.Config{Instance: "test", Clock: clk, Executor: func(f func()) { f() }}, memstore.NewFlow(), tel, nil)
	if err != nil {
		t.Fatal(err)
	}
	r := &routes{m: map[[2]string]dispatch.Route{{"mailer", "send"}: {QueueARN: queue, Flow: flow.Route{Strict: strict}}}}
	out := &sink{}
	d, err := dispatch.New(dispatch.Deps{Shield: sh, Router: r, Flow: fl, Sender: out, Clock: clk, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	k, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{d: d, clk: clk, key: k, tel: tel, out: out, route: r}
}

func (f *fixture) message(t testing.TB, id, target, name, payload string) []byte {
	t.Helper()
	env := envelope.New(id, f.clk.Now(), target, name, []byte(payload))
	if err := f.key.SignEnvelope(&env, source); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func uuidN(n int) string { return fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n) }

func events(tel *telemetry.Memory, name string) []telemetry.Event {
	var out []telemetry.Event
	for _, e := range tel.Events() {
		if e.EventName() == name {
			out = append(out, e)
		}
	}
	return out
}

func TestFastDeliversWithDispatcherSetSource(t *testing.T) {
	f := newFixture(t, false)
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(1), "mailer", "send", `{"b":2, "a":1}`))
	if res.Outcome != dispatch.Delivered || res.Path != telemetry.PathFast || esc != nil {
		t.Fatalf("result = %+v, escalation %v", res, esc)
	}
	if len(f.out.got) != 1 {
		t.Fatalf("deliveries = %d", len(f.out.got))
	}
	d := f.out.got[0]
	if d.QueueARN != queue || d.Source != source || d.CommandID != uuidN(1) {
		t.Fatalf("delivery = %+v", d)
	}
	var body struct {
		Command struct {
			Source  string         `json:"source"`
			Payload map[string]int `json:"payload"`
		} `json:"command"`
	}
	if err := jsonv2.Unmarshal(d.Body, &body); err != nil {
		t.Fatal(err)
	}
	if body.Command.Source != source || body.Command.Payload["a"] != 1 {
		t.Fatalf("delivered body = %s", d.Body)
	}
	if !strings.Contains(string(d.Body), `"payload":{"a":1,"b":2}`) {
		t.Fatalf("payload not delivered in canonical form: %s", d.Body)
	}
	del := events(f.tel, telemetry.NameDelivered)
	if len(del) != 1 || del[0].(telemetry.Delivered).Path != telemetry.PathFast || del[0].(telemetry.Delivered).Source != source {
		t.Fatalf("delivered events = %+v", del)
	}
}

func TestEscalationRoundTripsToSlow(t *testing.T) {
	f := newFixture(t, false)
	f.route.escalate = true
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(2), "mailer", "send", `{}`))
	if res.Outcome != dispatch.Escalated || res.Reason != "cache_miss" || esc == nil {
		t.Fatalf("fast = %+v", res)
	}
	escs := events(f.tel, flow.EventNameEscalated)
	if len(escs) != 1 || escs[0].(flow.Escalated).Reason != "cache_miss" || escs[0].(flow.Escalated).CommandID != uuidN(2) {
		t.Fatalf("escalation telemetry = %+v", escs)
	}
	wire, err := esc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	back, err := dispatch.UnmarshalEscalation(wire)
	if err != nil {
		t.Fatal(err)
	}
	f.clk.Advance(40 * time.Millisecond)
	res, err = f.d.Slow(context.Background(), back)
	if err != nil || res.Outcome != dispatch.Delivered || res.Path != telemetry.PathSlow {
		t.Fatalf("slow = %+v %v", res, err)
	}
	del := events(f.tel, telemetry.NameDelivered)
	if len(del) != 1 || del[0].(telemetry.Delivered).DispatchLatencyMS != 40 {
		t.Fatalf("delivered = %+v", del)
	}
	if _, err := dispatch.UnmarshalEscalation([]byte(`{"reason":"x"}`)); err == nil {
		t.Fatal("an incomplete escalation was accepted")
	}
}

func TestSlowRouteMissingFails(t *testing.T) {
	f := newFixture(t, false)
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(3), "nobody", "send", `{}`))
	if res.Outcome != dispatch.Escalated {
		t.Fatalf("fast = %+v", res)
	}
	res, err := f.d.Slow(context.Background(), esc)
	if err != nil || res.Outcome != dispatch.Failed || res.Reason != string(telemetry.FailRouteMissing) {
		t.Fatalf("slow = %+v %v", res, err)
	}
	failed := events(f.tel, telemetry.NameFailed)
	if len(failed) != 1 || failed[0].(telemetry.Failed).Reason != telemetry.FailRouteMissing || failed[0].(telemetry.Failed).Target != "nobody" {
		t.Fatalf("failed = %+v", failed)
	}
}

func TestTamperedMessageIsInvalid(t *testing.T) {
	f := newFixture(t, false)
	msg := f.message(t, uuidN(4), "mailer", "send", `{"amount":1}`)
	tampered := []byte(strings.Replace(string(msg), `"amount":1`, `"amount":9`, 1))
	res, esc := f.d.Fast(context.Background(), source, tampered)
	if res.Outcome != dispatch.Invalid || res.Reason == "" || esc != nil || len(f.out.got) != 0 {
		t.Fatalf("tampered = %+v", res)
	}
	forged := []byte(strings.Replace(string(msg), `"command":{`, `"command":{"source":"evil/x",`, 1))
	if res, _ := f.d.Fast(context.Background(), source, forged); res.Outcome != dispatch.Invalid {
		t.Fatalf("forged command.source = %+v", res)
	}
}

func TestStrictRouteDeliversOnce(t *testing.T) {
	f := newFixture(t, true)
	msg := f.message(t, uuidN(5), "mailer", "send", `{}`)
	var delivered, duplicates int
	for range 5 {
		res, esc := f.d.Fast(context.Background(), source, msg)
		if res.Outcome == dispatch.Escalated {
			if res.Reason != string(flow.EscalateDedupeRequired) {
				t.Fatalf("escalation = %q", res.Reason)
			}
			res, _ = f.d.Slow(context.Background(), esc)
		}
		switch res.Outcome {
		case dispatch.Delivered:
			delivered++
		case dispatch.Duplicate:
			duplicates++
		default:
			t.Fatalf("outcome %+v", res)
		}
	}
	if delivered != 1 || duplicates != 4 || len(f.out.got) != 1 {
		t.Fatalf("delivered %d, duplicates %d", delivered, duplicates)
	}
}

func TestDeliveryFailures(t *testing.T) {
	f := newFixture(t, false)
	f.out.fail = errors.New("queue unavailable")
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(6), "mailer", "send", `{}`))
	if res.Outcome != dispatch.Escalated || res.Reason != string(dispatch.EscalateDeliveryRetry) {
		t.Fatalf("fast with a failing queue = %+v", res)
	}
	if _, err := f.d.Slow(context.Background(), esc); err == nil {
		t.Fatal("slow with a failing queue reported success")
	}
	if n := len(events(f.tel, telemetry.NameFailed)); n != 0 {
		t.Fatalf("a retryable failure emitted %d failed events", n)
	}
	f.out.fail = nil
	if res, err := f.d.Slow(context.Background(), esc); err != nil || res.Outcome != dispatch.Delivered {
		t.Fatalf("retry = %+v %v", res, err)
	}
	res = f.d.GiveUp(esc)
	failed := events(f.tel, telemetry.NameFailed)
	if res.Reason != string(telemetry.FailDeliveryFailure) || len(failed) != 1 || failed[0].(telemetry.Failed).Reason != telemetry.FailDeliveryFailure {
		t.Fatalf("give up = %+v %+v", res, failed)
	}
}

func newKey() (*signing.Key, error) { return signing.NewKey("hmac-v1", secret) }
