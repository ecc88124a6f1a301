package queue

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

type fixture struct {
	store  *embedded.Store
	out    *bytes.Buffer
	errOut *bytes.Buffer
	deps   Deps
	// tenant, when set, makes requests a tenant's.
	tenant string
}

func newFixture(t *testing.T, format output.Format) *fixture {
	t.Helper()
	st, err := embedded.Open(embedded.Options{Ephemeral: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	api, err := controlapi.NewQueueAPI(controlapi.QueueOptions{Queues: st})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	fx := &fixture{store: st, out: &bytes.Buffer{}, errOut: &bytes.Buffer{}}
	srv := httptest.NewServer(servertest.Authenticated(mux, servertest.Tenant(&fx.tenant)))
	t.Cleanup(srv.Close)
	client := platform.NewLocal(srv.URL, nil, nil)
	fx.deps = Deps{
		Platform: func() (platform.Platform, error) { return client, nil },
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(fx.out, format, output.NewStyles(fx.out, false)), nil
		},
		ErrOut:    fx.errOut,
		In:        strings.NewReader(""),
		CanPrompt: func() bool { return false },
	}
	return fx
}

func TestCreateListReceiveDelete(t *testing.T) {
	fx := newFixture(t, output.JSON)
	ctx := context.Background()
	create := NewCmdCreate(fx.deps, nil)
	create.SetArgs([]string{"mailer-dlq"})
	if err := create.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	create = NewCmdCreate(fx.deps, nil)
	create.SetArgs([]string{"mailer", "--dlq", "mailer-dlq", "--max-receives", "2", "--visibility-timeout", "45s"})
	fx.out.Reset()
	if err := create.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var cr wire.QueueCreateResult
	if err := json.Unmarshal(fx.out.Bytes(), &cr); err != nil || !cr.Created || cr.VisibilityTimeoutSeconds != 45 || cr.DeadLetterQueue != "mailer-dlq" {
		t.Fatalf("create = %s (%v)", fx.out, err)
	}
	for _, b := range []string{`{"n":1}`, `{"n":2}`} {
		if _, err := fx.store.Send(ctx, "mailer", []byte(b), map[string]string{"command.source": "acme/billing"}); err != nil {
			t.Fatal(err)
		}
	}
	list := NewCmdList(fx.deps, nil)
	list.SetArgs(nil)
	fx.out.Reset()
	if err := list.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var qs []wire.QueueInfo
	if err := json.Unmarshal(fx.out.Bytes(), &qs); err != nil || len(qs) != 2 || qs[0].Name != "mailer" || qs[0].Visible != 2 {
		t.Fatalf("list = %s (%v)", fx.out, err)
	}

	recv := NewCmdReceive(fx.deps, nil)
	recv.SetArgs([]string{"mailer", "--max", "10", "--delete"})
	fx.out.Reset()
	if err := recv.ExecuteContext(ctx); err != nil {
		t.Fatal(err)
	}
	var msgs []wire.QueueMessage
	if err := json.Unmarshal(fx.out.Bytes(), &msgs); err != nil || len(msgs) != 2 || msgs[0].Attributes["command.source"] != "acme/billing" || msgs[0].ReceiptHandle == "" {
		t.Fatalf("receive = %s (%v)", fx.out, err)
	}
	if !strings.Contains(fx.errOut.String(), "deleted 2 message(s) from mailer") {
		t.Fatalf("stderr = %q", fx.errOut)
	}
	stats, err := fx.store.ListQueues(ctx)
	if err != nil || stats[0].Visible+stats[0].InFlight != 0 {
		t.Fatalf("after --delete: %+v, %v", stats, err)
	}

	// delete with a stale handle exits 1 and says which.
	del := NewCmdDelete(fx.deps, nil)
	del.SetArgs([]string{"mailer", msgs[0].ReceiptHandle})
	fx.out.Reset()
	err = del.ExecuteContext(ctx)
	if err == nil || !strings.Contains(err.Error(), "stale_receipt") || cmdutil.ExitCode(err) != cmdutil.ExitError {
		t.Fatalf("stale delete = %v", err)
	}
}

func TestReceiveTablePrintsAttributesAndHandles(t *testing.T) {
	fx := newFixture(t, output.Table)
	ctx := context.Background()
	if _, err := fx.store.CreateQueue(ctx, localqueue.QueueConfig{Name: "mailer"}); err != nil {
		t.Fatal(err)
	}
	recv := func() {
		t.Helper()
		fx.out.Reset()
		fx.errOut.Reset()
		c := NewCmdReceive(fx.deps, nil)
		c.SetArgs([]string{"mailer"})
		if err := c.ExecuteContext(ctx); err != nil {
			t.Fatal(err)
		}
	}
	recv()
	if fx.out.Len() != 0 || fx.errOut.String() != "No message in mailer is visible now.\n" {
		t.Fatalf("empty receive: stdout %q, stderr %q", fx.out, fx.errOut)
	}
	if _, err := fx.store.Send(ctx, "mailer", []byte(`{"hello":"world"}`), map[string]string{"command.source": "acme/billing", "command.name": "send"}); err != nil {
		t.Fatal(err)
	}
	recv()
	out := fx.out.String()
	for _, want := range []string{"(?m)^ID +[0-9a-f-]{36}$", "(?m)^RECEIPT HANDLE +r1\\.", "(?m)^ATTRIBUTES +command.name=send\n +command.source=acme/billing$", `(?m)^BODY +\{"hello":"world"\}$`} {
		if !regexpMatch(t, want, out) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// TestReceiveTableFitsATerminalOf160Columns: a delivered command as the
// dispatcher sends it (its envelope, the six provenance attributes), two of
// them, on a terminal: every line fits in 160 columns, the labels line up,
// and the wrapped body reads back whole. Piped, the body stays one line.
func TestReceiveTableFitsATerminalOf160Columns(t *testing.T) {
	body := `{"metadata":{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","timestamp":"2026-11-21T12:00:00.000Z","type":"snavio.command-sent","version_id":"hmac-v1",` +
		`"hmac":"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"},"command":{"target":"orders","name":"create","source":"demo/app",` +
		`"payload":{"sku":"A-1","qty":2,"note":"gift wrap, leave at the door"}}}`
	attrs := map[string]string{"snavio.command_id": "0f8fad5b-d9cb-469f-a165-70867728950e", "snavio.source": "demo/app", "snavio.target": "orders",
		"snavio.command_name": "create", "snavio.signature": "v1=" + strings.Repeat("Ab3_", 11), "snavio.signature_key": "delivery-v1"}
	m := wire.QueueMessage{ID: "0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b", ReceiveCount: 3, SentAt: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		Attributes: attrs, Body: body, ReceiptHandle: "r1.0193a1b2-7c3d-7e4f-8a9b-0c1d2e3f4a5b.8c2f6a1e9d3b7c4f"}
	render := func(wrap int) string {
		var b bytes.Buffer
		if err := output.NewPrinter(&b, output.Table, output.NewStyles(&b, false)).Print(messageTable{ms: Messages{m, m}, wrap: wrap}); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	tty := render(TableWrap)
	lines := strings.Split(strings.TrimSuffix(tty, "\n"), "\n")
	var got strings.Builder
	bodies := 0
	for _, l := range lines {
		if n := utf8.RuneCountInString(l); n > TableWrap {
			t.Errorf("a line of %d columns, over %d:\n%s", n, TableWrap, l)
		}
		if l != "" && len(l) > labelWidth && l[labelWidth-1] != ' ' {
			t.Errorf("a value does not start at column %d: %q", labelWidth, l)
		}
		if strings.HasPrefix(l, "BODY ") {
			bodies++
			got.Reset()
		}
		if strings.HasPrefix(l, "BODY ") || (got.Len() > 0 && strings.HasPrefix(l, strings.Repeat(" ", labelWidth))) {
			got.WriteString(l[labelWidth:])
		}
	}
	if bodies != 2 || got.String() != body || strings.Count(tty, "\n\n") != 1 {
		t.Fatalf("%d bodies, the last reads back %q; want 2 blocks, one blank line between, whole bodies:\n%s", bodies, got.String(), tty)
	}
	if !strings.Contains(render(0), "BODY             "+body+"\n") {
		t.Fatalf("piped, the body is not one line:\n%s", render(0))
	}
}

func TestPurgeConfirmation(t *testing.T) {
	fx := newFixture(t, output.JSON)
	ctx := context.Background()
	if _, err := fx.store.CreateQueue(ctx, localqueue.QueueConfig{Name: "dlq"}); err != nil {
		t.Fatal(err)
	}
	send := func() {
		if _, err := fx.store.Send(ctx, "dlq", []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	send()
	// No terminal and no --yes: a usage error, nothing purged.
	purge := NewCmdPurge(fx.deps, nil)
	purge.SetArgs([]string{"dlq"})
	if err := purge.ExecuteContext(ctx); cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--yes") {
		t.Fatalf("purge without --yes = %v", err)
	}
	// On a terminal, the wrong name refuses; the right name purges.
	fx.deps.CanPrompt = func() bool { return true }
	fx.deps.In = strings.NewReader("nope\n")
	purge = NewCmdPurge(fx.deps, nil)
	purge.SetArgs([]string{"dlq"})
	if err := purge.ExecuteContext(ctx); !errors.Is(err, errNotConfirmed) {
		t.Fatalf("purge with the wrong name = %v", err)
	}
	if !strings.Contains(fx.errOut.String(), "Purge 1 visible and 0 in-flight messages of dlq?") {
		t.Fatalf("prompt = %q", fx.errOut)
	}
	fx.deps.In = strings.NewReader("dlq\n")
	purge = NewCmdPurge(fx.deps, nil)
	purge.SetArgs([]string{"dlq"})
	fx.out.Reset()
	if err := purge.ExecuteContext(ctx); err != nil || !strings.Contains(fx.out.String(), `"purged": 1`) {
		t.Fatalf("confirmed purge = %v %s", err, fx.out)
	}
	send()
	fx.deps.CanPrompt = func() bool { return false }
	purge = NewCmdPurge(fx.deps, nil)
	purge.SetArgs([]string{"dlq", "--yes"})
	fx.out.Reset()
	if err := purge.ExecuteContext(ctx); err != nil || !strings.Contains(fx.out.String(), `"purged": 1`) {
		t.Fatalf("purge --yes = %v %s", err, fx.out)
	}
}

func TestBadInputIsAUsageError(t *testing.T) {
	fx := newFixture(t, output.JSON)
	for _, tc := range []struct {
		cmd  func(Deps) error
		want string
	}{
		{func(d Deps) error { c := NewCmdCreate(d, nil); c.SetArgs([]string{"q.fifo"}); return c.Execute() }, "FIFO"},
		{func(d Deps) error {
			c := NewCmdCreate(d, nil)
			c.SetArgs([]string{"q", "--max-receives", "3"})
			return c.Execute()
		}, "without a dead-letter"},
		{func(d Deps) error {
			c := NewCmdCreate(d, nil)
			c.SetArgs([]string{"q", "--visibility-timeout", "1500ms"})
			return c.Execute()
		}, "whole seconds"},
		{func(d Deps) error {
			c := NewCmdReceive(d, nil)
			c.SetArgs([]string{"q", "--max", "11"})
			return c.Execute()
		}, "--max 11"},
		{func(d Deps) error {
			c := NewCmdReceive(d, nil)
			c.SetArgs([]string{"q", "--wait", "21s"})
			return c.Execute()
		}, "--wait 21s"},
		{func(d Deps) error { c := NewCmdReceive(d, nil); c.SetArgs([]string{"bad name"}); return c.Execute() }, "not allowed"},
		{func(d Deps) error { c := NewCmdDelete(d, nil); c.SetArgs([]string{"q"}); return c.Execute() }, "at least one RECEIPT_HANDLE"},
	} {
		err := tc.cmd(fx.deps)
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want a usage error with %q", err, tc.want)
		}
	}
}

func TestTenantIsRefusedWithTheFix(t *testing.T) {
	fx := newFixture(t, output.JSON)
	fx.tenant = "acme"
	c := NewCmdReceive(fx.deps, nil)
	c.SetArgs([]string{"mailer"})
	err := c.Execute()
	var ae *platform.APIError
	if !errors.As(err, &ae) || ae.Status != http.StatusForbidden || !strings.Contains(err.Error(), "operator") {
		t.Fatalf("tenant receive = %v", err)
	}
	// Listing is allowed.
	l := NewCmdList(fx.deps, nil)
	l.SetArgs(nil)
	if err := l.Execute(); err != nil {
		t.Fatalf("tenant list = %v", err)
	}
}

func TestWaitIsSentAsSeconds(t *testing.T) {
	var got *ReceiveOptions
	c := NewCmdReceive(Deps{}, func(_ context.Context, o *ReceiveOptions) error { got = o; return nil })
	c.SetArgs([]string{"mailer", "--wait", "20s", "--visibility-timeout", "2m", "--max", "5"})
	if err := c.Execute(); err != nil {
		t.Fatal(err)
	}
	req, err := got.request()
	if err != nil || req != (wire.QueueReceiveRequest{Max: 5, VisibilityTimeoutSeconds: 120, WaitSeconds: 20}) {
		t.Fatalf("request = %+v, %v", req, err)
	}
}

func TestQueueNamesComplete(t *testing.T) {
	fx := newFixture(t, output.JSON)
	ctx := context.Background()
	for _, q := range []string{"mailer", "mailer-dlq", "orders"} {
		if _, err := fx.store.CreateQueue(ctx, localqueue.QueueConfig{Name: q}); err != nil {
			t.Fatal(err)
		}
	}
	cmd := NewCmdReceive(fx.deps, nil)
	got, dir := cmd.ValidArgsFunction(cmd, nil, "mai")
	if strings.Join(got, ",") != "mailer,mailer-dlq" || dir != cobra.ShellCompDirectiveNoFileComp {
		t.Errorf("complete mai = %q %v", got, dir)
	}
	if got, _ := cmd.ValidArgsFunction(cmd, []string{"mailer"}, ""); got != nil {
		t.Errorf("second argument completed to %q", got)
	}
	// No server: nothing, and no error in the shell.
	down := fx.deps
	down.Platform = func() (platform.Platform, error) { return platform.NewLocal("http://127.0.0.1:1", nil, nil), nil }
	if got := queueNames(ctx, down, ""); got != nil {
		t.Errorf("no server: %q", got)
	}
}

func regexpMatch(t *testing.T, pattern, s string) bool {
	t.Helper()
	return regexp.MustCompile(pattern).MatchString(s)
}

// FuzzWrapRunes: the lines read back as the input, and none is wider
// than asked.
func FuzzWrapRunes(f *testing.F) {
	for _, s := range []string{"", "abc", `{"k":"é\u00e9"}`, strings.Repeat("x", 300)} {
		f.Add(s, 7)
	}
	f.Fuzz(func(t *testing.T, s string, width int) {
		lines := wrapRunes(s, width)
		if strings.Join(lines, "") != s {
			t.Fatalf("lines %q do not read back as %q", lines, s)
		}
		for _, l := range lines {
			if width > 0 && len(lines) > 1 && utf8.RuneCountInString(l) > width {
				t.Fatalf("line %q is over %d runes", l, width)
			}
		}
	})
}

// sqsStub is an aws platform that lists queues by prefix the way SQS
// does, without end: it records the prefixes it was asked.
type sqsStub struct {
	platform.Platform
	prefixes []string
}

func (s *sqsStub) Target() platform.Target { return platform.Target{Kind: "aws"} }

func (s *sqsStub) ListQueuesPrefix(_ context.Context, prefix, after string, limit int) (wire.QueueList, error) {
	s.prefixes = append(s.prefixes, prefix)
	var l wire.QueueList
	for i := range limit {
		l.Queues = append(l.Queues, wire.QueueInfo{Name: fmt.Sprintf("%s%s%04d", prefix, after, i)})
	}
	next := l.Queues[limit-1].Name
	l.Next = &next
	return l, nil
}

// On aws the prefix goes to SQS, and a list longer than QueueMaxCount
// stops there with a note saying where.
func TestListOnAWSPassesThePrefixAndSaysWhereItStopped(t *testing.T) {
	stub := &sqsStub{}
	var out, errOut bytes.Buffer
	d := Deps{
		Platform: func() (platform.Platform, error) { return stub, nil },
		Printer: func() (*output.Printer, error) {
			return output.NewPrinter(&out, output.JSON, output.NewStyles(&out, false)), nil
		},
		ErrOut: &errOut,
	}
	cmd := NewCmdList(d, nil)
	cmd.SetArgs([]string{"--prefix", "team-"})
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	var got []wire.QueueInfo
	if err := json.Unmarshal(out.Bytes(), &got); err != nil || len(got) != wire.QueueMaxCount {
		t.Fatalf("%d queues, %v", len(got), err)
	}
	if strings.Join(stub.prefixes, ",") != "team-" || !strings.Contains(errOut.String(), "listed the first 1000 queues, up to team-0999: narrow the list with --prefix") {
		t.Fatalf("prefixes %q, stderr %q", stub.prefixes, errOut.String())
	}
	// --max-depth has no SQS meaning: a usage error before any call.
	create := NewCmdCreate(d, nil)
	create.SetArgs([]string{"q", "--max-depth", "10"})
	create.SilenceErrors, create.SilenceUsage = true, true
	var ue *cmdutil.UsageError
	if err := create.ExecuteContext(context.Background()); !errors.As(err, &ue) || !strings.Contains(err.Error(), "no depth limit") {
		t.Fatalf("create --max-depth: %v", err)
	}
}
