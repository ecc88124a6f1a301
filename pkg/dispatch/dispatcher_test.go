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
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const source = "acme/billing"

var secret = []byte("0123456789abcdef0123456789abcdef")

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
	d   *dispatch.Dispatcher
	clk *clock.Fake
	key *signing.Key
	tel *telemetry.Memory
	out *sink
	reg *memstore.Registry
}

var queue = dispatchtest.RegistryRoute("mailer", "send").QueueARN

// newFixture builds the real stack (see buildStack) around mailer/send.
func newFixture(t testing.TB, strict bool) *fixture {
	t.Helper()
	route := dispatchtest.RegistryRoute("mailer", "send")
	if strict {
		route.DedupeMode = registry.DedupeStrict
	}
	tel := &telemetry.Memory{}
	out := &sink{}
	d, clk, reg := buildStack(t, route, cache.Config{Jitter: -1}, tel, out, func(f func()) { f() })
	k, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	return &fixture{d: d, clk: clk, key: k, tel: tel, out: out, reg: reg}
}

// buildStack builds the real stack: an in-memory registry holding the
// source's key, route and its ACL, and the Dispatcher Assemble builds
// over it and the in-memory flow store (background work on exec),
// delivering to out.
func buildStack(t testing.TB, route registry.Route, cc cache.Config, tel telemetry.Sink, out dispatch.Sender, exec func(func())) (*dispatch.Dispatcher, *clock.Fake, *memstore.Registry) {
	t.Helper()
	return buildStackRouter(t, route, cc, tel, out, exec, nil)
}

// buildStackRouter is buildStack with the router wrapped by wrap (if not
// nil).
func buildStackRouter(t testing.TB, route registry.Route, cc cache.Config, tel telemetry.Sink, out dispatch.Sender, exec func(func()), wrap func(dispatch.Router) dispatch.Router) (*dispatch.Dispatcher, *clock.Fake, *memstore.Registry) {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	reg := memstore.NewRegistry()
	by := registry.Actor{Who: "test", At: t0}
	acl := dispatchtest.RegistryACL(source, route.Target, route.Command)
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: source, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}}}},
		{Route: &route},
		{ACL: &acl},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	a, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: memstore.NewFlow(), Sender: out,
		Telemetry: tel, Clock: clk, Executor: exec, Cache: cc,
		Shield: shield.Config{SampleRate: -1}, Flow: flow.Config{Instance: "test"}})
	if err != nil {
		t.Fatal(err)
	}
	d := a.Dispatcher
	if wrap != nil {
		deps := a.Deps
		deps.Router = wrap(deps.Router)
		if d, err = dispatch.New(deps); err != nil {
			t.Fatal(err)
		}
	}
	return d, clk, reg
}

// plainRouter hides the RouterAt capability of the router it wraps.
type plainRouter struct{ dispatch.Router }

// atRouter records the times FastAt is called with.
type atRouter struct {
	dispatch.Router
	at []time.Time
}

func (r *atRouter) FastAt(source, target, command string, now time.Time) (dispatch.Route, string, bool) {
	r.at = append(r.at, now)
	return r.Router.(dispatch.RouterAt).FastAt(source, target, command, now)
}

// TestRouterAtIsOptional: a router with FastAt is asked at the time the
// shield received the message; one without it is asked through Fast, and
// both deliver.
func TestRouterAtIsOptional(t *testing.T) {
	route := dispatchtest.RegistryRoute("mailer", "send")
	var rec *atRouter
	for name, wrap := range map[string]func(dispatch.Router) dispatch.Router{
		"plain": func(r dispatch.Router) dispatch.Router { return plainRouter{r} },
		"at":    func(r dispatch.Router) dispatch.Router { rec = &atRouter{Router: r}; return rec },
	} {
		t.Run(name, func(t *testing.T) {
			out := &sink{}
			d, clk, _ := buildStackRouter(t, route, cache.Config{}, &telemetry.Memory{}, out, func(f func()) { f() }, wrap)
			f := &fixture{clk: clk}
			f.key, _ = newKey()
			msg := f.message(t, uuidN(8), "mailer", "send", `{}`)
			res, _ := d.Fast(context.Background(), source, msg)
			if res.Outcome == dispatch.Escalated && res.Reason == string(flow.EscalateTokenRequired) {
				res, _ = d.Fast(context.Background(), source, f.message(t, uuidN(9), "mailer", "send", `{}`))
			}
			if res.Outcome != dispatch.Delivered {
				t.Fatalf("result = %+v", res)
			}
			if name == "at" && (len(rec.at) == 0 || !rec.at[0].Equal(clk.Now())) {
				t.Fatalf("FastAt called at %v, the shield received at %v", rec.at, clk.Now())
			}
		})
	}
}

// register adds a route and its ACL after the caches loaded: the fast
// path misses them and the slow path finds them in the registry.
func (f *fixture) register(t testing.TB, target, command string) {
	t.Helper()
	route := dispatchtest.RegistryRoute(target, command)
	acl := dispatchtest.RegistryACL(source, target, command)
	for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
		if _, err := f.reg.Put(context.Background(), registry.Actor{Who: "test", At: t0}, it); err != nil {
			t.Fatal(err)
		}
	}
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
	f.register(t, "mailer", "notify")
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(2), "mailer", "notify", `{}`))
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

func TestMissingACLIsDenied(t *testing.T) {
	f := newFixture(t, false)
	route := dispatchtest.RegistryRoute("accounts", "delete-user")
	if _, err := f.reg.Put(context.Background(), registry.Actor{Who: "test", At: t0}, registry.Item{Route: &route}); err != nil {
		t.Fatal(err)
	}
	res, esc := f.d.Fast(context.Background(), source, f.message(t, uuidN(7), "accounts", "delete-user", `{}`))
	if res.Outcome != dispatch.Escalated {
		t.Fatalf("fast = %+v", res)
	}
	res, err := f.d.Slow(context.Background(), esc)
	if err != nil || res.Outcome != dispatch.Failed || res.Reason != string(telemetry.FailACLDeny) || len(f.out.got) != 0 {
		t.Fatalf("slow = %+v %v", res, err)
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

// TestStrictIDReusedWithOtherPayload: once an id is delivered, a message
// reusing it with another payload is not dropped as a duplicate by the fast
// stage's seen-set: it is escalated and the slow stage refuses it as a
// dedupe conflict (snavio.command.invalid), while a true copy is dropped
// on the fast path.
func TestStrictIDReusedWithOtherPayload(t *testing.T) {
	f := newFixture(t, true)
	first := f.message(t, uuidN(7), "mailer", "send", `{"amount":1}`)
	res, esc := f.d.Fast(context.Background(), source, first)
	if res.Outcome != dispatch.Escalated {
		t.Fatalf("first fast = %+v", res)
	}
	if res, err := f.d.Slow(context.Background(), esc); err != nil || res.Outcome != dispatch.Delivered {
		t.Fatalf("first slow = %+v %v", res, err)
	}
	if res, _ := f.d.Fast(context.Background(), source, first); res.Outcome != dispatch.Duplicate {
		t.Fatalf("true copy on the fast path = %+v, want duplicate", res)
	}
	reused := f.message(t, uuidN(7), "mailer", "send", `{"amount":1000}`)
	res, esc = f.d.Fast(context.Background(), source, reused)
	if res.Outcome != dispatch.Escalated || res.Reason != string(flow.EscalateDedupeRequired) {
		t.Fatalf("reused id on the fast path = %+v, want escalated dedupe_required", res)
	}
	res, err := f.d.Slow(context.Background(), esc)
	if err != nil || res.Outcome != dispatch.Failed {
		t.Fatalf("reused id on the slow path = %+v %v, want refused", res, err)
	}
	inv := events(f.tel, telemetry.NameInvalid)
	if len(inv) != 1 || inv[0].(telemetry.Invalid).Reason != flow.ReasonDedupeConflict {
		t.Fatalf("invalid events = %+v", inv)
	}
	if n := len(events(f.tel, telemetry.NameDuplicate)); n != 1 {
		t.Fatalf("%d duplicate events, want 1 (the true copy)", n)
	}
	if len(f.out.got) != 1 {
		t.Fatalf("%d deliveries, want 1", len(f.out.got))
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

// completingSink completes strict claims itself, like the embedded
// store's SendAndComplete: the dispatcher must then not complete them
// again, and the claim must still count as delivered.
type completingSink struct {
	sink
	claims []*flow.Completion
}

func (s *completingSink) Send(ctx context.Context, d *dispatch.Delivery) error {
	s.claims = append(s.claims, d.Claim)
	if err := s.sink.Send(ctx, d); err != nil {
		return err
	}
	d.Completed = d.Claim != nil
	return nil
}

func TestStrictClaimCompletedBySender(t *testing.T) {
	route := dispatchtest.RegistryRoute("mailer", "send")
	route.DedupeMode = registry.DedupeStrict
	tel := &telemetry.Memory{}
	out := &completingSink{}
	d, clk, _ := buildStack(t, route, cache.Config{Jitter: -1}, tel, out, func(f func()) { f() })
	k, err := newKey()
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{d: d, clk: clk, key: k, tel: tel}
	msg := f.message(t, uuidN(9), "mailer", "send", `{}`)
	_, esc := d.Fast(context.Background(), source, msg)
	if esc == nil {
		t.Fatal("a strict first sighting must escalate")
	}
	res, err := d.Slow(context.Background(), esc)
	if err != nil || res.Outcome != dispatch.Delivered {
		t.Fatalf("slow = %+v, %v", res, err)
	}
	if len(out.claims) != 1 || out.claims[0] == nil || out.claims[0].Key != flow.ClaimKey("acme", uuidN(9)) || out.claims[0].Owner == "" ||
		!out.claims[0].ExpiresAt.Equal(clk.Now().Add(300*time.Second)) {
		t.Fatalf("the sender got claim %+v; want the command's claim expiring after the dedupe TTL", out.claims)
	}
	// This sender only says it completed the claim (a real one completes
	// it in its transaction), so the record is still in progress: proof
	// that the dispatcher did not complete it a second time.
	if _, err := d.Slow(context.Background(), esc); !errors.Is(err, flow.ErrClaimInProgress) {
		t.Fatalf("copy on the slow path: %v, want ErrClaimInProgress (the dispatcher completed the claim itself)", err)
	}
	// The fast path's seen-set learned the delivery all the same.
	if res, _ := d.Fast(context.Background(), source, msg); res.Outcome != dispatch.Duplicate {
		t.Fatalf("copy on the fast path = %+v", res)
	}
	if len(out.got) != 1 {
		t.Fatalf("%d deliveries", len(out.got))
	}
}

// outboxSender writes each delivery's event with its message, like the
// embedded store's Deliver (the transactional outbox).
type outboxSender struct {
	sink
	events []telemetry.Delivered
}

func (s *outboxSender) Send(ctx context.Context, d *dispatch.Delivery) error {
	if err := s.sink.Send(ctx, d); err != nil {
		return err
	}
	s.events = append(s.events, d.Event)
	d.EventWritten = true
	return nil
}

func TestDeliveredEventWrittenBySender(t *testing.T) {
	route := dispatchtest.RegistryRoute("mailer", "send")
	for _, strict := range []bool{false, true} {
		if strict {
			route.DedupeMode = registry.DedupeStrict
		}
		tel := &telemetry.Memory{}
		out := &outboxSender{}
		d, clk, _ := buildStack(t, route, cache.Config{Jitter: -1}, tel, out, func(f func()) { f() })
		k, err := newKey()
		if err != nil {
			t.Fatal(err)
		}
		f := &fixture{d: d, clk: clk, key: k, tel: tel}
		res, esc := d.Fast(context.Background(), source, f.message(t, uuidN(7), "mailer", "send", `{}`))
		if esc != nil {
			if res, err = d.Slow(context.Background(), esc); err != nil {
				t.Fatal(err)
			}
		}
		if res.Outcome != dispatch.Delivered {
			t.Fatalf("strict=%v: %+v", strict, res)
		}
		if len(out.events) != 1 {
			t.Fatalf("strict=%v: the sender got %d events", strict, len(out.events))
		}
		ev := out.events[0]
		if ev.CommandID != uuidN(7) || ev.Source != source || ev.Target != "mailer" || ev.CommandName != "send" || ev.Path != res.Path {
			t.Fatalf("strict=%v: the sender's event %+v does not describe the delivery %+v", strict, ev, res)
		}
		// Written with the message, so never emitted a second time.
		for _, e := range tel.Events() {
			if _, ok := e.(telemetry.Delivered); ok {
				t.Fatalf("strict=%v: the dispatcher emitted %+v as well", strict, e)
			}
		}
	}
}
