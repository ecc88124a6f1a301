package replay

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

const src = "acme/billing"

var secret = []byte("0123456789abcdef0123456789abcdef")

func key(t testing.TB) *signing.Key {
	k, err := signing.NewKey("hmac-v3", secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

type keysFor map[string]*signing.Key

func (k keysFor) SigningKey(source string, _ time.Time) (*signing.Key, error) {
	if kk, ok := k[source]; ok {
		return kk, nil
	}
	return nil, fmt.Errorf("no key for %s", source)
}

// dlq is an in-memory queue standing in for a DLQ source: Ack deletes.
type dlq struct {
	mu    sync.Mutex
	recs  []Record
	acked map[string]int
}

func (d *dlq) Name() string { return "dlq:mailer-dlq" }

func (d *dlq) Next(_ context.Context, cursor string, limit int) ([]Record, string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	start := 0
	if cursor != "" {
		start, _ = strconv.Atoi(cursor)
	}
	end := min(start+limit, len(d.recs))
	if start >= end {
		return nil, cursor, nil
	}
	return append([]Record(nil), d.recs[start:end]...), strconv.Itoa(end), nil
}

func (d *dlq) Ack(_ context.Context, r Record) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.acked == nil {
		d.acked = map[string]int{}
	}
	d.acked[r.Ref]++
	return nil
}

// bus records what was put, verifies every signature, and can refuse an
// id or cancel the run after n puts.
type bus struct {
	t       testing.TB
	key     *signing.Key
	mu      sync.Mutex
	got     []envelope.Envelope
	refuse  string
	cancel  context.CancelFunc
	cancelN int
}

func (b *bus) PutEvents(_ context.Context, evs []Event) ([]Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]Result, len(evs))
	for i, ev := range evs {
		env, _, err := envelope.NewParser(envelope.Limits{}).Parse(ev.Detail, nil)
		if err != nil {
			b.t.Fatalf("replayed detail does not parse: %v", err)
		}
		if err := b.key.VerifyEnvelope(&env, ev.Source); err != nil {
			b.t.Fatalf("replayed command %s is not validly signed: %v", env.Metadata.ID, err)
		}
		if b.refuse != "" && strings.HasSuffix(env.Metadata.ID, b.refuse) {
			out[i] = Result{ErrorCode: "InternalFailure", ErrorMessage: "refused"}
			continue
		}
		b.got = append(b.got, env)
		out[i] = Result{EventID: "ev-" + env.Metadata.ID}
		if b.cancel != nil && len(b.got) == b.cancelN {
			b.cancel()
		}
	}
	return out, nil
}

func command(t testing.TB, n int, target string, at time.Time) Record {
	env := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), at, target, "send", []byte(`{"n":`+strconv.Itoa(n)+`}`))
	env.Metadata.VersionID = "hmac-v1"
	old, _ := signing.NewKey("hmac-v1", secret)
	if err := old.SignEnvelope(&env, src); err != nil {
		t.Fatal(err)
	}
	env.Command.Source = src // as delivered, then dead-lettered
	body, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return Record{Ref: "r" + strconv.Itoa(n), Source: src, Detail: body, At: at, Reason: "poison"}
}

type strictRoutes map[string]bool

func (s strictRoutes) Strict(target, _ string) bool { return s[target] }

func setup(t testing.TB, n int) (*Engine, *dlq, *bus, *clock.Fake) {
	clk := clock.NewFake(t0)
	q := &dlq{}
	for i := 1; i <= n; i++ {
		target := "mailer"
		if i%4 == 0 {
			target = "accounts"
		}
		q.recs = append(q.recs, command(t, i, target, t0.Add(-time.Duration(n-i)*time.Minute)))
	}
	k := key(t)
	b := &bus{t: t, key: k}
	e := &Engine{
		Bus: b, Signer: KeySigner{Keys: keysFor{src: k}, Clock: clk}, Routes: strictRoutes{"accounts": true}, Audits: &MemoryAudits{}, Clock: clk,
		Sleep: func(ctx context.Context, d time.Duration) error { clk.Advance(d); return ctx.Err() },
	}
	return e, q, b, clk
}

func TestPlanChangesNothing(t *testing.T) {
	e, q, b, _ := setup(t, 12)
	p, err := e.Plan(context.Background(), q, Options{Reason: "incident 42", Filter: wire.ReplayFilter{Start: t0.Add(-20 * time.Minute)}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 12 || p.ByRoute["mailer/send"] != 9 || p.ByRoute["accounts/send"] != 3 || p.FirstID != "0f8fad5b-d9cb-469f-a165-000000000001" {
		t.Fatalf("plan = %+v", p)
	}
	// accounts is strict; #8 (4 min ago) and #12 (now) are inside the 300 s TTL.
	if len(p.Warnings) != 1 || !strings.Contains(p.Warnings[0], "2 strict-mode command(s) are still inside") || !strings.Contains(p.Warnings[0], "--dedupe new-id") {
		t.Fatalf("warnings = %q", p.Warnings)
	}
	if len(b.got) != 0 || len(q.acked) != 0 {
		t.Fatal("the plan sent or deleted something")
	}
	p, _ = e.Plan(context.Background(), q, Options{Reason: "r", Filter: wire.ReplayFilter{Target: "accounts"}})
	if p.Total != 3 {
		t.Fatalf("filtered plan = %+v", p)
	}
}

func TestBadInput(t *testing.T) {
	e, q, _, _ := setup(t, 1)
	for _, o := range []Options{
		{},
		{Reason: "r", Filter: wire.ReplayFilter{Start: t0, End: t0.Add(-time.Hour)}},
		{Reason: "r", Dedupe: "maybe"},
		{Reason: "r", Rate: -1},
	} {
		if _, err := e.Plan(context.Background(), q, o); err == nil {
			t.Errorf("Plan(%+v) accepted", o)
		}
	}
}

func TestReplayResignsAndAcksAfterAcceptance(t *testing.T) {
	e, q, b, clk := setup(t, 5)
	b.refuse = "000000000003"
	a, err := e.Start(context.Background(), q, Options{Reason: "incident 42", Operator: "ops@acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	// #4 goes to the strict route accounts and was sent a minute ago:
	// keep-id holds it back until its dedupe TTL ends.
	if a.Status != wire.ReplayDone || a.SentCount != 3 || a.Failed != 1 || a.Planned != 5 || a.Held != 1 || !a.HeldUntil.Equal(t0.Add(-time.Minute+300*time.Second)) {
		t.Fatalf("audit = %+v", a)
	}
	for _, env := range b.got {
		m := env.Metadata
		if !m.Replay || m.ReplayReason != "incident 42" || m.ReplayID != a.ID || m.Timestamp != envelope.FormatTimestamp(clk.Now()) || m.VersionID != "hmac-v3" {
			t.Fatalf("replayed metadata = %+v", m)
		}
		if env.Command.Source != "" {
			t.Fatal("a replay carried command.source: the shield would reject it")
		}
	}
	if q.acked["r3"] != 0 || q.acked["r4"] != 0 || q.acked["r1"] != 1 || len(q.acked) != 3 {
		t.Fatalf("acks = %v: the refused and the held message must stay in the DLQ, every other be deleted once", q.acked)
	}
	stored, err := e.Audits.Get(context.Background(), a.ID)
	if err != nil || stored.Operator != "ops@acme" || stored.EndedAt.IsZero() || !strings.Contains(stored.LastError, "InternalFailure") {
		t.Fatalf("stored audit = %+v %v", stored, err)
	}
}

// TestInterruptAndResume: interrupt a replay at every possible point and
// resume it: no command sent twice, none lost.
func TestInterruptAndResume(t *testing.T) {
	const n = 23
	for cut := 1; cut < n; cut++ {
		e, q, b, _ := setup(t, n)
		e.Routes = nil // nothing held
		ctx, cancel := context.WithCancel(context.Background())
		b.cancel, b.cancelN = cancel, cut
		a, err := e.Start(ctx, q, Options{Reason: "r", Rate: 50}, nil)
		if err == nil || a.Status != wire.ReplayInterrupted || !strings.Contains(err.Error(), "--resume "+a.ID) {
			t.Fatalf("cut %d: %+v %v", cut, a, err)
		}
		b.cancel = nil
		a, err = e.Resume(context.Background(), q, a.ID, 0, nil)
		if err != nil || a.Status != wire.ReplayDone || a.Resumes != 1 {
			t.Fatalf("cut %d: resume = %+v %v", cut, a, err)
		}
		seen := map[string]int{}
		for _, env := range b.got {
			seen[env.Metadata.ID]++
		}
		if len(seen) != n {
			t.Fatalf("cut %d: %d distinct commands sent, want %d (lost some)", cut, len(seen), n)
		}
		for id, c := range seen {
			if c != 1 {
				t.Fatalf("cut %d: %s sent %d times", cut, id, c)
			}
		}
		for ref, c := range q.acked {
			if c < 1 {
				t.Fatalf("cut %d: %s not deleted", cut, ref)
			}
		}
		if len(q.acked) != n {
			t.Fatalf("cut %d: %d of %d DLQ messages deleted", cut, len(q.acked), n)
		}
	}
}

func TestResumeRefusesFinishedOrForeignRuns(t *testing.T) {
	e, q, _, _ := setup(t, 2)
	a, err := e.Start(context.Background(), q, Options{Reason: "r"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.Resume(context.Background(), q, a.ID, 0, nil); err == nil || !strings.Contains(err.Error(), "already finished") {
		t.Fatalf("resume of a finished run: %v", err)
	}
	if _, err := e.Resume(context.Background(), q, "nope", 0, nil); !errors.Is(err, ErrNotFound) {
		t.Fatalf("resume of an unknown id: %v", err)
	}
}

func TestNewIDModeIsStableAcrossResume(t *testing.T) {
	e, q, b, _ := setup(t, 6)
	ctx, cancel := context.WithCancel(context.Background())
	b.cancel, b.cancelN = cancel, 3
	a, _ := e.Start(ctx, q, Options{Reason: "rerun", Dedupe: wire.DedupeNewID, Rate: 100}, nil)
	b.cancel = nil
	if _, err := e.Resume(context.Background(), q, a.ID, 0, nil); err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, env := range b.got {
		if strings.HasPrefix(env.Metadata.ID, "0f8fad5b-d9cb-469f-a165-") {
			t.Fatalf("new-id mode kept the original id %s", env.Metadata.ID)
		}
		if !envelope.ValidID(env.Metadata.ID) || seen[env.Metadata.ID] {
			t.Fatalf("bad or repeated id %s", env.Metadata.ID)
		}
		seen[env.Metadata.ID] = true
	}
	first, again, other := derivedID(a.ID, "x"), derivedID(a.ID, "x"), derivedID(a.ID, "y")
	if len(seen) != 6 || first != again || first == other {
		t.Fatal("derived ids are not stable and distinct")
	}
}

func TestRateIsHonoured(t *testing.T) {
	e, q, _, clk := setup(t, 11)
	e.Routes = nil
	start := clk.Now()
	if _, err := e.Start(context.Background(), q, Options{Reason: "r", Rate: 5}, nil); err != nil {
		t.Fatal(err)
	}
	if el := clk.Now().Sub(start); el < 2*time.Second {
		t.Fatalf("11 commands at 5/s took %v, want at least 2s", el)
	}
}

func TestFileAuditsSurvive(t *testing.T) {
	dir := t.TempDir()
	s := &FileAudits{Dir: dir}
	ctx := context.Background()
	a := wire.ReplayAudit{ID: "11111111-2222-3333-4444-555555555555", Origin: "archive", Reason: "r", Status: wire.ReplayRunning, StartedAt: t0, Sent: []string{"a"}}
	if err := s.Create(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := s.Create(ctx, a); err == nil {
		t.Fatal("duplicate create accepted")
	}
	a.Status = wire.ReplayDone
	if err := s.Update(ctx, a); err != nil {
		t.Fatal(err)
	}
	got, err := (&FileAudits{Dir: dir}).Get(ctx, a.ID)
	if err != nil || got.Status != wire.ReplayDone || len(got.Sent) != 1 {
		t.Fatalf("reloaded = %+v %v", got, err)
	}
	list, _ := s.List(ctx)
	if len(list) != 1 {
		t.Fatalf("list = %+v", list)
	}
	if _, err := s.Get(ctx, "../etc/passwd"); err == nil {
		t.Fatal("a path-traversing id was accepted")
	}
}

// A record with a Refusal is listed as refused in the plan, by reason, and
// a run neither sends nor acknowledges it.
func TestRefusedRecordsAreNeverSent(t *testing.T) {
	e, q, b, _ := setup(t, 6)
	q.recs[1].Refusal = "shield:bad_signature"
	q.recs[2].Refusal = "shield:bad_signature"
	q.recs[4].Refusal = "not_a_command"
	q.recs[4].Detail = []byte("junk")
	p, err := e.Plan(context.Background(), q, Options{Reason: "incident 42"})
	if err != nil {
		t.Fatal(err)
	}
	if p.Total != 3 || p.Refused != 3 || p.RefusedBy["shield:bad_signature"] != 2 || p.RefusedBy["not_a_command"] != 1 || p.Skipped != 0 {
		t.Fatalf("plan = %+v", p)
	}
	if w := strings.Join(p.Warnings, "\n"); !strings.Contains(w, "3 record(s) are refused") || !strings.Contains(w, "not_a_command: 1, shield:bad_signature: 2") {
		t.Fatalf("warnings = %q", p.Warnings)
	}
	// A filter on the target drops a refused command of another target,
	// and keeps one whose target cannot be read.
	p, _ = e.Plan(context.Background(), q, Options{Reason: "r", Filter: wire.ReplayFilter{Target: "accounts"}})
	if p.Refused != 1 || p.RefusedBy["not_a_command"] != 1 {
		t.Fatalf("filtered plan = %+v", p)
	}
	a, err := e.Start(context.Background(), q, Options{Reason: "incident 42"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != wire.ReplayDone || a.Refused != 3 || a.RefusedBy["shield:bad_signature"] != 2 || a.RefusedBy["not_a_command"] != 1 {
		t.Fatalf("audit = %+v", a)
	}
	for _, env := range b.got {
		switch env.Metadata.ID {
		case "0f8fad5b-d9cb-469f-a165-000000000002", "0f8fad5b-d9cb-469f-a165-000000000003":
			t.Fatalf("refused record %s was sent", env.Metadata.ID)
		}
	}
	for _, ref := range []string{"r2", "r3", "r5"} {
		if q.acked[ref] != 0 {
			t.Fatalf("refused record %s was acknowledged", ref)
		}
	}
	if len(b.got) == 0 {
		t.Fatal("nothing was sent: the others should have been")
	}
}

// A rate the CLI's parser accepts is one the engine runs with.
func TestParsedRatesValidate(t *testing.T) {
	for _, s := range []string{"50/s", "600/m", "1/h", "1e4/s", "10000/s", "0.5/s"} {
		r, err := wire.ParseReplayRate(s)
		if err != nil {
			t.Fatalf("ParseReplayRate(%q): %v", s, err)
		}
		o := Options{Reason: "r", Rate: r}
		if err := o.Validate(); err != nil {
			t.Errorf("a parsed rate %v (%s) is refused by Validate: %v", r, s, err)
		}
	}
}

// refusingSigner refuses the records whose ref it names, and signs the
// rest with inner.
type refusingSigner struct {
	inner Signer
	refs  map[string]string
}

func (s refusingSigner) Sign(ctx context.Context, a *wire.ReplayAudit, recs []Record) ([]Signed, error) {
	out, err := s.inner.Sign(ctx, a, recs)
	for i := range recs {
		if why := s.refs[recs[i].Ref]; why != "" && err == nil {
			out[i] = Signed{Refusal: why}
		}
	}
	return out, err
}

// TestSignerRefusals: a record the signer refuses (the control function's
// check on AWS) is counted by reason, never sent and never acknowledged;
// the rest of its batch goes on.
func TestSignerRefusals(t *testing.T) {
	e, q, b, _ := setup(t, 3)
	e.Signer = refusingSigner{inner: e.Signer, refs: map[string]string{"r2": "bad_signature"}}
	a, err := e.Start(context.Background(), q, Options{Reason: "incident 43"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Status != wire.ReplayDone || a.SentCount != 2 || a.Refused != 1 || a.RefusedBy["bad_signature"] != 1 || len(b.got) != 2 {
		t.Fatalf("audit = %+v, bus got %d", a, len(b.got))
	}
	if q.acked["r2"] != 0 || len(q.acked) != 2 {
		t.Errorf("acknowledged %v, want r1 and r3 only", q.acked)
	}
}
