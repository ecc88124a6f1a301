package replaycmd

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// parse runs the replay command's flag handling and returns the options
// it would run with.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	var got *Options
	cmd := newCmdReplay(Deps{Clock: clock.NewFake(t0)}, func(_ context.Context, o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(&bytes.Buffer{})
	cmd.SetErr(&bytes.Buffer{})
	err := cmd.Execute()
	return got, err
}

func TestFlags(t *testing.T) {
	o, err := parse(t, "--from", "archive", "--start", "2h", "--end", "2026-11-21T11:30:00Z", "--target", "mailer", "--reason-text", "INC-42", "--rate", "600/m", "--dedupe", "new-id")
	if err != nil {
		t.Fatal(err)
	}
	r := o.request()
	if r.From != "archive" || !r.Start.Equal(t0.Add(-2*time.Hour)) || !r.End.Equal(t0.Add(-30*time.Minute)) || r.Rate != 10 || r.Dedupe != "new-id" || r.Target != "mailer" || r.Reason != "INC-42" {
		t.Fatalf("request = %+v", r)
	}
	if o, err = parse(t, "--resume", "2f1c0b7e-6a53-4b1e-9d0a-8f4e2c1b3a55", "--limit", "3"); err != nil || o.Resume == "" || o.Limit != 3 {
		t.Fatalf("resume: %+v %v", o, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--from", "kafka:x", "--reason-text", "r"}, "unknown --from"},
		{[]string{"--from", "archive", "--start", "1h", "--end", "2h", "--reason-text", "r"}, "bad time range"},
		{[]string{"--from", "dlq:q", "--reason-text", "r", "--rate", "fast"}, "invalid --rate"},
		{[]string{"--from", "dlq:q"}, "--reason-text"},
		{[]string{"--from", "archive", "--reason-text", "r"}, "needs --start"},
		{[]string{"--resume", "2f1c0b7e-6a53-4b1e-9d0a-8f4e2c1b3a55", "--target", "x"}, "drop --target"},
		{[]string{"--from", "dlq:q", "--reason-text", "r", "--dry-run", "--limit", "2"}, "--dry-run sends nothing"},
		{[]string{"oops"}, `unknown command "oops"`},
	} {
		_, err := parse(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%q: %v (exit %d), want a usage error with %q", c.args, err, cmdutil.ExitCode(err), c.want)
		}
	}
}

func TestProgress(t *testing.T) {
	clk := clock.NewFake(t0)
	var buf bytes.Buffer
	a := wire.ReplayAudit{ID: "r1", Origin: "archive", Planned: 100, Status: wire.ReplayRunning}
	p := newProgress(&buf, false, clk)
	p.start(a)
	clk.Advance(10 * time.Second)
	a.SentCount = 20
	p.update(a)
	clk.Advance(100 * time.Millisecond)
	a.SentCount = 21
	p.update(a) // within a second of the last line: not printed
	a.SentCount, a.Failed, a.Status = 99, 1, wire.ReplayDone
	p.finish(a)
	want := "replay r1: 100 command(s) planned from archive\nreplay r1: sent 20/100, ETA 40s\nreplay r1: done: sent 99/100, refused 1\n"
	if buf.String() != want {
		t.Fatalf("plain progress:\n%s\nwant:\n%s", buf.String(), want)
	}
	// On a terminal: a bar redrawn in place, with the rate's bound on the
	// ETA (30 left at 1/s is at least 30 s).
	buf.Reset()
	p = newProgress(&buf, true, clk)
	a = wire.ReplayAudit{ID: "r2", Planned: 40, Rate: 1, Status: wire.ReplayRunning}
	p.start(a)
	clk.Advance(time.Second)
	a.SentCount = 10
	p.update(a)
	if s := buf.String(); !strings.Contains(s, "\r\x1b[K") || !strings.Contains(s, " 25%") || !strings.Contains(s, "ETA 30s") {
		t.Fatalf("terminal progress = %q", s)
	}
}

// fixture is a real replay API over an ephemeral store behind an HTTP
// server, with a pipeline that can interrupt the client.
type fixture struct {
	srv   *httptest.Server
	store *embedded.Store
	mu    sync.Mutex
	sent  map[string]int
	after func(n int)
}

func (f *fixture) Ingest(_ context.Context, es []server.Entry) []server.EntryResult {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]server.EntryResult, len(es))
	for i, e := range es {
		env, _, err := envelope.NewParser(envelope.Limits{}).Parse(e.Detail, nil)
		if err != nil {
			out[i] = server.Refused(server.EntryErrMalformedDetail, err.Error())
			continue
		}
		f.sent[env.Metadata.ID]++
		out[i] = server.Accepted("ev-" + strconv.Itoa(len(f.sent)))
		if f.after != nil {
			f.after(len(f.sent))
		}
	}
	return out
}

func newFixture(t *testing.T, n int) *fixture {
	t.Helper()
	ctx := context.Background()
	st, err := embedded.Open(embedded.Options{Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if _, err := st.CreateQueue(ctx, localqueue.QueueConfig{Name: "mailer-dlq"}); err != nil {
		t.Fatal(err)
	}
	secret := []byte("0123456789abcdef0123456789abcdef")
	reg := memstore.NewRegistry()
	by := registry.Actor{Who: "t", At: time.Now()}
	if _, err := reg.Put(ctx, by, registry.Item{Key: &registry.ServiceKey{Source: "acme/billing",
		Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: secret, ActivatedAt: time.Now().Add(-time.Hour)}}}}); err != nil {
		t.Fatal(err)
	}
	// The DLQ's messages are the dispatcher's: signed for a route whose
	// dead-letter queue it is (a DLQ replay refuses anything else).
	route := &registry.Route{Target: "mailer", Command: "send", QueueARN: embedded.QueueARN("mailer"), DLQARN: embedded.QueueARN("mailer-dlq")}
	if _, err := reg.Put(ctx, by, registry.Item{Route: route}); err != nil {
		t.Fatal(err)
	}
	sig, err := provenance.NewSigner([]byte("a delivery master secret, 32 b.!"))
	if err != nil {
		t.Fatal(err)
	}
	key, _ := signing.NewKey("hmac-v1", secret)
	for i := 1; i <= n; i++ {
		e := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", i), time.Now(), "mailer", "send", []byte(`{}`))
		e.Metadata.VersionID = "hmac-v1"
		if err := key.SignEnvelope(&e, "acme/billing"); err != nil {
			t.Fatal(err)
		}
		e.Command.Source = "acme/billing"
		body, _ := e.AppendJSON(nil)
		m := provenance.Message{CommandID: e.Metadata.ID, Source: "acme/billing", Target: "mailer", Command: "send", Body: body}
		if err := sig.Sign(&m); err != nil {
			t.Fatal(err)
		}
		if _, err := st.Send(ctx, "mailer-dlq", body, m.Attributes()); err != nil {
			t.Fatal(err)
		}
	}
	f := &fixture{store: st, sent: map[string]int{}}
	mux := http.NewServeMux()
	if err := controlapi.MountReplays(mux, controlapi.ReplayOptions{Store: st, Registry: reg, Pipeline: f, DataDir: t.TempDir(), Lease: time.Second, Delivery: sig}); err != nil {
		t.Fatal(err)
	}
	f.srv = httptest.NewServer(servertest.Authenticated(mux, servertest.Operator))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fixture) deps(interrupt func(context.Context) (context.Context, context.CancelFunc)) (Deps, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return Deps{
		Platform:    func() (platform.Platform, error) { return platform.NewLocal(f.srv.URL, nil, nil), nil },
		Printer:     func() (*output.Printer, error) { return output.NewPrinter(&out, output.JSON, output.Styles{}), nil },
		ErrOut:      &errOut,
		ProgressTTY: func() bool { return false },
		Clock:       clock.System(),
		Interrupt:   interrupt,
	}, &out, &errOut
}

func (f *fixture) depth(t *testing.T) int {
	qs, err := f.store.ListQueues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return qs[0].Visible + qs[0].InFlight
}

// TestCtrlCThenResume: Ctrl-C in the middle of a DLQ replay stops it
// cleanly with the resume hint; --resume sends the rest; no command is
// sent twice and the DLQ ends empty.
func TestCtrlCThenResume(t *testing.T) {
	const n = 25
	f := newFixture(t, n)
	var cancel context.CancelFunc
	interrupt := func(ctx context.Context) (context.Context, context.CancelFunc) {
		ctx, cancel = context.WithCancel(ctx)
		return ctx, cancel
	}
	f.after = func(got int) {
		if got == 12 {
			cancel() // Ctrl-C
		}
	}
	d, out, errOut := f.deps(interrupt)
	o := &Options{Deps: d, From: "dlq:mailer-dlq", Reason: "INC-7", Dedupe: "keep-id"}
	err := run(context.Background(), o)
	if err == nil || !strings.Contains(err.Error(), "resume it with --resume") || !strings.Contains(out.String(), `"status": "interrupted"`) {
		t.Fatalf("interrupted run: %v\nstdout %s\nstderr %s", err, out, errOut)
	}
	if !strings.Contains(errOut.String(), "stopping replay") {
		t.Fatalf("stderr = %s", errOut)
	}
	// The CLI printed the stopped audit; the id is in it.
	id := strings.Split(strings.Split(out.String(), `"id": "`)[1], `"`)[0]
	f.mu.Lock()
	f.after = nil
	f.mu.Unlock()
	d, out, _ = f.deps(func(ctx context.Context) (context.Context, context.CancelFunc) { return context.WithCancel(ctx) })
	// Messages the interrupted run had in hand come back after their
	// lease (1 s here); the resume waits for them.
	o = &Options{Deps: d, Resume: id}
	done := make(chan error, 1)
	go func() { done <- run(context.Background(), o) }()
	select {
	case err = <-done:
	case <-time.After(45 * time.Second):
		t.Fatal("resume did not finish")
	}
	if err != nil || !strings.Contains(out.String(), `"status": "done"`) {
		t.Fatalf("resume: %v\n%s", err, out)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sent) != n {
		t.Fatalf("%d distinct commands sent, want %d", len(f.sent), n)
	}
	for id, c := range f.sent {
		if c != 1 {
			t.Fatalf("%s sent %d times", id, c)
		}
	}
	if d := f.depth(t); d != 0 {
		t.Fatalf("%d messages left in the DLQ", d)
	}
}
