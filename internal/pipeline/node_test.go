package pipeline

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/server"
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

// handoff is an in-memory stand-in for the embedded store's queue, with
// visibility timeouts on the fake clock.
type handoff struct {
	mu    sync.Mutex
	clk   *clock.Fake
	items map[string]*held
	seq   int
	fail  error
}

type held struct {
	payload  []byte
	visible  time.Time
	receives int
}

func (h *handoff) Put(_ context.Context, p []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail != nil {
		return h.fail
	}
	h.seq++
	h.items[strconv.Itoa(h.seq)] = &held{payload: append([]byte(nil), p...)}
	return nil
}

func (h *handoff) Take(_ context.Context, n int, vis time.Duration) ([]dispatch.HandoffItem, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []dispatch.HandoffItem
	for k, it := range h.items {
		if len(out) == n {
			break
		}
		if h.clk.Now().Before(it.visible) {
			continue
		}
		it.receives++
		it.visible = h.clk.Now().Add(vis)
		out = append(out, dispatch.HandoffItem{Handle: k, Payload: it.payload, Receives: it.receives})
	}
	return out, nil
}

func (h *handoff) Done(_ context.Context, it dispatch.HandoffItem) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.items, it.Handle)
	return nil
}

func (h *handoff) Retry(_ context.Context, it dispatch.HandoffItem, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if held, ok := h.items[it.Handle]; ok {
		held.visible = h.clk.Now().Add(d)
	}
	return nil
}

func (h *handoff) len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.items)
}

type archive struct {
	mu   sync.Mutex
	got  []dispatch.Archived
	fail error
	// lastCtx is the context of the last Append.
	lastCtx context.Context
}

func (a *archive) Append(ctx context.Context, events []dispatch.Archived) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.lastCtx = ctx
	if a.fail != nil {
		return a.fail
	}
	a.got = append(a.got, events...)
	return nil
}

type sender struct {
	mu   sync.Mutex
	n    int
	fail error
}

func (s *sender) Send(context.Context, *dispatch.Delivery) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return s.fail
	}
	s.n++
	return nil
}

type env struct {
	node *Node
	clk  *clock.Fake
	reg  *memstore.Registry
	ho   *handoff
	arch *archive
	out  *sender
	tel  *telemetry.Memory
	key  *signing.Key
}

func newEnv(t *testing.T) *env {
	t.Helper()
	return newEnvSending(t, &sender{})
}

// newEnvSending is newEnv delivering through snd (env.out is set when snd
// is a *sender).
func newEnvSending(t *testing.T, snd dispatch.Sender) *env {
	t.Helper()
	ctx := context.Background()
	clk := clock.NewFake(t0)
	reg := memstore.NewRegistry()
	route := dispatchtest.RegistryRoute("mailer", "send")
	acl := dispatchtest.RegistryACL(source, "mailer", "send")
	by := registry.Actor{Who: "test", At: t0}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: source, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-time.Hour)}}}},
		{Route: &route}, {ACL: &acl},
	} {
		if _, err := reg.Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	tel := &telemetry.Memory{}
	a, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: memstore.NewFlow(), Sender: snd,
		Telemetry: tel, Clock: clk, Executor: func(f func()) { f() }, Cache: cache.Config{Jitter: -1},
		Shield: shield.Config{SampleRate: -1}, Flow: flow.Config{Instance: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	d := a.Dispatcher
	out, _ := snd.(*sender)
	ho := &handoff{clk: clk, items: map[string]*held{}}
	arch := &archive{}
	n, err := New(Options{Dispatcher: d, Handoff: ho, Archive: arch, Clock: clk, MaxReceives: 3})
	if err != nil {
		t.Fatal(err)
	}
	k, _ := signing.NewKey("hmac-v1", secret)
	return &env{node: n, clk: clk, reg: reg, ho: ho, arch: arch, out: out, tel: tel, key: k}
}

// rebuild makes e.node anew from its options, after a test changed them.
func (e *env) rebuild(t *testing.T) {
	t.Helper()
	n, err := New(e.node.o)
	if err != nil {
		t.Fatal(err)
	}
	e.node = n
}

func (e *env) entry(t *testing.T, n int, target, name string) server.Entry {
	t.Helper()
	env := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), e.clk.Now(), target, name, []byte(`{}`))
	if err := e.key.SignEnvelope(&env, source); err != nil {
		t.Fatal(err)
	}
	b, _ := env.AppendJSON(nil)
	return server.Entry{Source: source, DetailType: envelope.EventType, Detail: b}
}

func names(tel *telemetry.Memory, name string) int {
	n := 0
	for _, e := range tel.Events() {
		if e.EventName() == name {
			n++
		}
	}
	return n
}

func TestIngestDeliversFastAndArchives(t *testing.T) {
	e := newEnv(t)
	res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 1, "mailer", "send"), {Source: source, DetailType: "other", Detail: []byte(`{}`)}})
	if res[0].EventID == "" || res[1].EventID == "" || e.out.n != 1 || len(e.arch.got) != 2 || e.ho.len() != 0 {
		t.Fatalf("results %+v deliveries %d archived %d handoffs %d", res, e.out.n, len(e.arch.got), e.ho.len())
	}
	if e.arch.got[0].EventID != res[0].EventID {
		t.Fatal("the archive does not record the acknowledged event id")
	}
}

func TestEscalationIsDurableBeforeTheAck(t *testing.T) {
	e := newEnv(t)
	route := dispatchtest.RegistryRoute("mailer", "notify")
	acl := dispatchtest.RegistryACL(source, "mailer", "notify")
	for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
		e.reg.Put(context.Background(), registry.Actor{Who: "t", At: t0}, it)
	}
	res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 2, "mailer", "notify")})
	if res[0].EventID == "" || e.ho.len() != 1 || e.out.n != 0 {
		t.Fatalf("result %+v handoffs %d", res, e.ho.len())
	}
	if n, err := e.node.SlowOnce(context.Background()); n != 1 || err != nil {
		t.Fatalf("SlowOnce = %d %v", n, err)
	}
	if e.out.n != 1 || e.ho.len() != 0 || e.node.Stats().SlowDone != 1 {
		t.Fatalf("after slow: deliveries %d handoffs %d stats %+v", e.out.n, e.ho.len(), e.node.Stats())
	}
}

func TestHandoffFailureRefusesSoTheProducerRetries(t *testing.T) {
	e := newEnv(t)
	e.ho.fail = errors.New("disk full")
	res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 3, "nobody", "x")})
	if res[0].ErrorCode != server.EntryErrInternal || res[0].EventID != "" {
		t.Fatalf("result %+v", res[0])
	}
	// The archive write runs beside the fast stage: when it fails, the
	// entries are refused (not acknowledged) even if delivered, and the
	// producer's retry is delivered again (at least once).
	e.arch.fail = errors.New("disk full")
	res = e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 4, "mailer", "send"), {Source: source, DetailType: "other", Detail: []byte(`{}`)}})
	for i, r := range res {
		if r.ErrorCode != server.EntryErrInternal || r.EventID != "" {
			t.Fatalf("archive failure: entry %d %+v", i, r)
		}
	}
	if st := e.node.Stats(); st.Refused != 3 || st.Accepted != 0 {
		t.Fatalf("stats %+v, want 3 refused", st)
	}
	e.arch.fail = nil
	if res = e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 4, "mailer", "send")}); res[0].EventID == "" || e.out.n != 2 {
		t.Fatalf("retry: %+v, deliveries %d", res[0], e.out.n)
	}
}

func TestSlowRetriesThenGivesUp(t *testing.T) {
	e := newEnv(t)
	e.out.fail = errors.New("queue unavailable")
	e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 5, "mailer", "send")}) // fast fails -> delivery_retry
	if e.ho.len() != 1 {
		t.Fatalf("handoffs %d", e.ho.len())
	}
	for attempt := 1; attempt <= 3; attempt++ {
		if n, _ := e.node.SlowOnce(context.Background()); n != 1 {
			t.Fatalf("attempt %d took %d", attempt, n)
		}
		if n, _ := e.node.SlowOnce(context.Background()); n != 0 {
			t.Fatalf("attempt %d: the item was visible again inside its visibility timeout", attempt)
		}
		e.clk.Advance(31 * time.Second)
	}
	st := e.node.Stats()
	if st.SlowRetries != 2 || st.GaveUp != 1 || e.ho.len() != 0 || names(e.tel, telemetry.NameFailed) != 1 {
		t.Fatalf("stats %+v handoffs %d failed events %d", st, e.ho.len(), names(e.tel, telemetry.NameFailed))
	}
}

func TestRunSlowStopsOnCancel(t *testing.T) {
	e := newEnv(t)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.node.RunSlow(ctx); close(done) }()
	cancel()
	<-done
}

// TestEventIDsAreTimeOrderedUUIDs checks the default event ids follow the
// node's clock.
func TestEventIDsAreTimeOrderedUUIDs(t *testing.T) {
	e := newEnv(t)
	var ids []string
	for range 3 {
		ids = append(ids, e.node.o.NewID())
		e.clk.Advance(time.Millisecond)
	}
	for i, id := range ids {
		u, err := uuid.Parse(id)
		if err != nil || u.Version() != 7 || u.Variant() != uuid.RFC4122 {
			t.Fatalf("%s: %v, version %d, variant %v", id, err, u.Version(), u.Variant())
		}
		if sec, nsec := u.Time().UnixTime(); time.Unix(sec, nsec).UnixMilli() != t0.Add(time.Duration(i)*time.Millisecond).UnixMilli() {
			t.Fatalf("%s carries %v", id, time.Unix(sec, nsec))
		}
		if i > 0 && id <= ids[i-1] {
			t.Fatalf("ids out of order: %v", ids)
		}
	}
}

// takes signals every Take of the handoff it wraps.
type takes struct {
	*handoff
	took chan int
}

func (t takes) Take(ctx context.Context, n int, vis time.Duration) ([]dispatch.HandoffItem, error) {
	items, err := t.handoff.Take(ctx, n, vis)
	t.took <- len(items)
	return items, err
}

func TestAHandOffWakesAnIdleSlowWorker(t *testing.T) {
	e := newEnv(t)
	route := dispatchtest.RegistryRoute("mailer", "notify")
	acl := dispatchtest.RegistryACL(source, "mailer", "notify")
	for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
		e.reg.Put(context.Background(), registry.Actor{Who: "t", At: t0}, it)
	}
	tk := takes{handoff: e.ho, took: make(chan int, 16)}
	e.node.o.Handoff = tk
	e.node.o.Idle = time.Hour // only the wake-up can bring the worker back
	e.node.o.SlowWorkers = 1
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.node.RunSlow(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	if n := <-tk.took; n != 0 {
		t.Fatalf("first take: %d items, want none", n)
	}
	// The worker is idle now (for an hour); escalate a command.
	if res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 9, "mailer", "notify")}); res[0].EventID == "" {
		t.Fatalf("result %+v", res[0])
	}
	select {
	case n := <-tk.took:
		if n != 1 {
			t.Fatalf("woken take: %d items, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the hand-off did not wake the idle worker")
	}
}

// gatedSender holds every Send until gate is closed, saying on entered
// that one is waiting: a delivery in progress.
type gatedSender struct {
	entered chan struct{}
	gate    chan struct{}
}

func (g gatedSender) Send(context.Context, *dispatch.Delivery) error {
	g.entered <- struct{}{}
	<-g.gate
	return nil
}

// A strict command's copy handled while the original's delivery is in
// progress comes back after RaceRetry, not after the visibility timeout,
// wakes an idle worker then, and is reported a duplicate.
func TestACopyRacingItsOriginalComesBackSoon(t *testing.T) {
	ctx := context.Background()
	g := gatedSender{entered: make(chan struct{}, 1), gate: make(chan struct{})}
	e := newEnvSending(t, g)
	route := dispatchtest.RegistryRoute("mailer", "pay")
	route.DedupeMode = registry.DedupeStrict
	acl := dispatchtest.RegistryACL(source, "mailer", "pay")
	for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
		if _, err := e.reg.Put(ctx, registry.Actor{Who: "t", At: t0}, it); err != nil {
			t.Fatal(err)
		}
	}
	e.node.o.Batch = 1
	var due []time.Duration
	var wakeWhenDue func()
	e.node.afterFunc = func(d time.Duration, f func()) { due, wakeWhenDue = append(due, d), f }
	copies := []server.Entry{e.entry(t, 7, "mailer", "pay"), e.entry(t, 7, "mailer", "pay")}
	for _, r := range e.node.Ingest(ctx, copies) {
		if r.EventID == "" {
			t.Fatalf("refused: %+v", r)
		}
	}
	<-e.node.handedOff // Ingest's wake-up: no worker runs here
	if e.ho.len() != 2 {
		t.Fatalf("%d hand-offs, want both copies (a strict first sighting escalates)", e.ho.len())
	}
	// The original: claimed, its delivery in progress.
	first := make(chan struct{})
	go func() { _, _ = e.node.SlowOnce(ctx); close(first) }()
	<-g.entered
	// The copy: claim in progress.
	if n, err := e.node.SlowOnce(ctx); n != 1 || err != nil {
		t.Fatalf("copy: took %d, %v", n, err)
	}
	close(g.gate)
	<-first
	if e.ho.len() != 1 {
		t.Fatalf("%d hand-offs left, want the copy", e.ho.len())
	}
	// An idle worker is woken when the copy is due, not at its next poll.
	if len(due) != 1 || due[0] != e.node.o.RaceRetry || len(e.node.handedOff) != 0 {
		t.Fatalf("wake-ups scheduled %v (want one after RaceRetry %v), %d pending before it", due, e.node.o.RaceRetry, len(e.node.handedOff))
	}
	wakeWhenDue()
	if len(e.node.handedOff) != 1 {
		t.Fatal("the scheduled wake-up did not wake a worker")
	}
	e.clk.Advance(time.Second)
	if n, err := e.node.SlowOnce(ctx); n != 1 || err != nil {
		t.Fatalf("the copy did not come back after RaceRetry: took %d, %v", n, err)
	}
	if e.ho.len() != 0 || names(e.tel, telemetry.NameDuplicate) != 1 {
		t.Fatalf("hand-offs %d, duplicate events %d; want the copy done as a duplicate", e.ho.len(), names(e.tel, telemetry.NameDuplicate))
	}
}

// TestDeferredWritesAreWaitedForBeforeTheAck: with Options.Defer, a
// request's writes are made under the deferring context and the wait runs
// once, after them and before the results; a failed wait refuses every
// entry so the producer retries.
func TestDeferredWritesAreWaitedForBeforeTheAck(t *testing.T) {
	type key struct{}
	for _, fail := range []bool{false, true} {
		e := newEnv(t)
		waits, deferredArchive := 0, false
		e.node.o.Defer = func(ctx context.Context) (context.Context, func() error) {
			return context.WithValue(ctx, key{}, true), func() error {
				waits++
				deferredArchive = e.arch.lastCtx != nil && e.arch.lastCtx.Value(key{}) == true
				if fail {
					return errors.New("fsync failed")
				}
				return nil
			}
		}
		e.rebuild(t)
		res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 20, "mailer", "send"), e.entry(t, 21, "mailer", "send")})
		if waits != 1 || !deferredArchive {
			t.Fatalf("fail=%v: %d waits, archive under the deferring context %v", fail, waits, deferredArchive)
		}
		for i, r := range res {
			if fail && (r.ErrorCode != server.EntryErrInternal || r.EventID != "") || !fail && r.EventID == "" {
				t.Fatalf("fail=%v: entry %d: %+v", fail, i, r)
			}
		}
	}
}

// TestAHandOffWakesAWorkerOnceDurable: under Options.Defer, the fast
// stage's hand-off is only queued, not takeable, until the request's wait
// returns; the wake-up for an idle slow worker comes after that wait (a
// worker woken before it found nothing and slept for Idle), and not at all
// when the wait fails.
func TestAHandOffWakesAWorkerOnceDurable(t *testing.T) {
	for _, fail := range []bool{false, true} {
		e := newEnv(t)
		route := dispatchtest.RegistryRoute("mailer", "notify")
		acl := dispatchtest.RegistryACL(source, "mailer", "notify")
		for _, it := range []registry.Item{{Route: &route}, {ACL: &acl}} {
			e.reg.Put(context.Background(), registry.Actor{Who: "t", At: t0}, it)
		}
		woken := -1
		e.node.o.Defer = func(ctx context.Context) (context.Context, func() error) {
			return ctx, func() error {
				woken = len(e.node.handedOff)
				if fail {
					return errors.New("fsync failed")
				}
				return nil
			}
		}
		e.rebuild(t)
		res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 9, "mailer", "notify")})
		if woken != 0 {
			t.Fatalf("fail=%v: %d wake-ups pending at the wait, want none before it", fail, woken)
		}
		want := 1
		if fail {
			want = 0
		} else if res[0].EventID == "" {
			t.Fatalf("result %+v", res[0])
		}
		if got := len(e.node.handedOff); got != want {
			t.Fatalf("fail=%v: %d wake-ups pending after Ingest, want %d", fail, got, want)
		}
	}
}

// TestThrottledInvalidEntriesAreNotArchived: past its invalid budget
// (shield.DefaultInvalidBudget a minute) a source's invalid entries are
// acknowledged like any invalid entry, get no event of their own, and are
// not archived; a request holding only such entries is not an error.
func TestThrottledInvalidEntriesAreNotArchived(t *testing.T) {
	e := newEnv(t)
	wrong, _ := signing.NewKey("hmac-v1", []byte("another secret, another secret!!"))
	bad := func(n int) server.Entry {
		env := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), e.clk.Now(), "mailer", "send", []byte(`{}`))
		if err := wrong.SignEnvelope(&env, source); err != nil {
			t.Fatal(err)
		}
		b, _ := env.AppendJSON(nil)
		return server.Entry{Source: source, DetailType: envelope.EventType, Detail: b}
	}
	var entries []server.Entry
	for i := range shield.DefaultInvalidBudget + 5 {
		entries = append(entries, bad(i))
	}
	for _, r := range e.node.Ingest(context.Background(), entries) {
		if r.EventID == "" {
			t.Fatalf("an invalid entry was refused: %+v", r)
		}
	}
	if len(e.arch.got) != shield.DefaultInvalidBudget || names(e.tel, telemetry.NameInvalid) != shield.DefaultInvalidBudget {
		t.Fatalf("archived %d, invalid events %d; want %d of each", len(e.arch.got), names(e.tel, telemetry.NameInvalid), shield.DefaultInvalidBudget)
	}
	res := e.node.Ingest(context.Background(), []server.Entry{bad(900), bad(901)})
	if res[0].EventID == "" || res[1].EventID == "" || len(e.arch.got) != shield.DefaultInvalidBudget {
		t.Fatalf("a request of throttled entries only: %+v, archived %d", res, len(e.arch.got))
	}
	// A valid entry of the same source is archived and delivered as ever.
	if res := e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 1000, "mailer", "send")}); res[0].EventID == "" || len(e.arch.got) != shield.DefaultInvalidBudget+1 || e.out.n != 1 {
		t.Fatalf("valid entry: %+v, archived %d, delivered %d", res, len(e.arch.got), e.out.n)
	}
}

// The archive records what the shield made of each entry, so a replay can
// refuse what was never accepted (issue 19).
func TestArchiveRecordsTheShieldsVerdict(t *testing.T) {
	e := newEnv(t)
	good := e.entry(t, 6, "mailer", "send")
	other, _ := signing.NewKey("hmac-v1", bytes.Repeat([]byte{7}, signing.MinSecretLen))
	forgedEnv := envelope.New("0f8fad5b-d9cb-469f-a165-000000000007", e.clk.Now(), "mailer", "send", []byte(`{}`))
	if err := other.SignEnvelope(&forgedEnv, source); err != nil {
		t.Fatal(err)
	}
	fb, _ := forgedEnv.AppendJSON(nil)
	forged := server.Entry{Source: source, DetailType: envelope.EventType, Detail: fb}
	res := e.node.Ingest(context.Background(), []server.Entry{good, forged, {Source: source, DetailType: "snavio.other", Detail: []byte(`{}`)}})
	if len(e.arch.got) != 3 {
		t.Fatalf("archived %d events, want 3: %+v", len(e.arch.got), e.arch.got)
	}
	want := []struct {
		v           dispatch.Verdict
		reason, key string
	}{{dispatch.VerdictAccepted, "", "hmac-v1"}, {dispatch.VerdictRejected, "bad_signature", ""}, {dispatch.VerdictNotCommand, "", ""}}
	for i, w := range want {
		a := e.arch.got[i]
		if a.EventID != res[i].EventID || a.Verdict != w.v || a.Reason != w.reason || a.KeyVersion != w.key {
			t.Errorf("entry %d archived as %s %q %q (id %s), want %s %q %q (id %s)", i, a.Verdict, a.Reason, a.KeyVersion, a.EventID, w.v, w.reason, w.key, res[i].EventID)
		}
	}
	// An entry the node refused is not on the bus: not archived.
	e.ho.fail = errors.New("disk full")
	res = e.node.Ingest(context.Background(), []server.Entry{e.entry(t, 8, "nobody", "x")})
	if res[0].EventID != "" || len(e.arch.got) != 3 {
		t.Fatalf("a refused entry: %+v, archived %d", res[0], len(e.arch.got))
	}
}
