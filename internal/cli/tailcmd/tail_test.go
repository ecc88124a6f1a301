package tailcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/store/embedded"
	tuitail "github.com/snavio/snavio/internal/tui/tail"
	"github.com/snavio/snavio/internal/tui/tail/tailtest"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// parse runs the command's flag handling and returns the validated
// options, or the error.
func parse(t *testing.T, args ...string) (*Options, error) {
	t.Helper()
	ios, _, _, _ := iostreams.Test()
	f := &cmdutil.Factory{IOStreams: ios}
	var got *Options
	cmd := NewCmd(f, func(o *Options) error { got = o; return nil })
	cmd.SetArgs(args)
	cmd.SetOut(io.Discard)
	cmd.SetErr(io.Discard)
	err := cmd.Execute()
	return got, err
}

func TestFlagsValidate(t *testing.T) {
	o, err := parse(t, "--type", "failed,invalid", "--type", "snavio.telemetry.dropped", "--source", "acme/billing", "--reason", "rate", "--since", "10m")
	if err != nil {
		t.Fatal(err)
	}
	if o.expr != "type:failed,invalid,snavio.telemetry.dropped source:acme/billing reason:rate" {
		t.Errorf("filter expression %q", o.expr)
	}
	if d := time.Since(o.since); d < 10*time.Minute || d > 11*time.Minute || !o.Follow {
		t.Errorf("since %v ago, follow %v", d, o.Follow)
	}
	for args, want := range map[string]string{
		"--since yesterday":                     `invalid --since "yesterday": give a duration such as 10m or 2h, or an RFC 3339 time`,
		"--since -5m":                           "the duration must be positive",
		"--type failure":                        `unknown --type "failure": use one of delivered, invalid, failed`,
		"--source a\tb":                         "spaces and control characters",
		"--target a,,b":                         "invalid --target: an empty value",
		"--tenant a/b":                          `invalid --tenant "a/b"`,
		"--scrollback 5":                        "invalid --scrollback 5",
		"extra":                                 "takes no arguments",
		"--follow=maybe":                        "invalid argument",
		"--command " + strings.Repeat("x", 300): "longer than 256 bytes",
	} {
		_, err := parse(t, strings.Split(args, " ")...)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
			continue
		}
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage && !cmdutil.IsCobraUsage(err) {
			t.Errorf("%s: exit %d, want usage", args, cmdutil.ExitCode(err))
		}
	}
}

func TestParseSince(t *testing.T) {
	now := t0
	for in, want := range map[string]time.Time{
		"":                          {},
		"10m":                       now.Add(-10 * time.Minute),
		"1h30m":                     now.Add(-90 * time.Minute),
		"2026-11-21T11:00:00Z":      t0.Add(-time.Hour),
		"2026-11-21T13:00:00+01:00": t0,
	} {
		got, err := ParseSince(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("ParseSince(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0s", "-1m", "10", "2026-11-21", "9999999999h", "later"} {
		if _, err := ParseSince(in, now); err == nil {
			t.Errorf("ParseSince(%q) accepted", in)
		}
	}
}

// fixture is a server with acme and globex events and the options of a
// tail against it.
func fixture(t *testing.T, stdoutTTY, stdinTTY bool, format output.Format, args ...string) (*Options, *bytes.Buffer, *bytes.Buffer, *restartable) {
	t.Helper()
	srv := newRestartable(t)
	srv.append("acme", 2)
	st := srv.store
	if _, err := st.AppendTelemetry(context.Background(), []embedded.OutboxEntry{
		{Tenant: "globex", Event: telemetry.Delivered{CommandID: "c-1", Source: "globex/api", Target: "accounts", CommandName: "close", Path: telemetry.PathFast}},
		{Tenant: "acme", Event: telemetry.Invalid{Source: "acme/shop", Reason: "bad_signature"}},
	}); err != nil {
		t.Fatal(err)
	}
	o, err := parse(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	ios, _, out, errOut := iostreams.Test()
	ios.SetStdoutTTY(stdoutTTY)
	ios.SetStdinTTY(stdinTTY)
	o.IO = ios
	o.Platform = func() (platform.Platform, error) { return platform.NewLocal(srv.srv.URL, nil, srv.srv.Client()), nil }
	o.Printer = func() (*output.Printer, error) { return output.NewPrinter(out, format, output.Styles{}), nil }
	o.Context = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
	o.RunUI = func(context.Context, tea.Model, io.Reader, io.Writer, bool) error {
		t.Fatal("the UI started")
		return nil
	}
	return o, out, errOut, srv
}

func TestPlainNDJSONWithFilters(t *testing.T) {
	o, out, errOut, _ := fixture(t, false, false, output.JSON, "--follow=false", "--type", "failed,invalid", "--source", "acme")
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("want 3 lines (acme's 2 failed and 1 invalid), got:\n%s", out)
	}
	var rec wire.TelemetryRecord
	if err := json.Unmarshal([]byte(lines[2]), &rec); err != nil || rec.Tenant != "acme" || rec.Seq != 3 || rec.Global != 4 || !strings.Contains(string(rec.Event), `"reason":"bad_signature"`) {
		t.Fatalf("last line %s: %v", lines[2], err)
	}
	if errOut.Len() != 0 {
		t.Errorf("stderr: %s", errOut)
	}
}

func TestPlainTableAndYAML(t *testing.T) {
	o, out, _, _ := fixture(t, false, false, output.Table, "--follow=false", "--tenant", "globex")
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	want := "time                     tenant#seq       type                   source                   target/command               reason                 command_id\n" +
		"2026-11-21T12:00:00.000Z globex#1         command.delivered      globex/api               accounts/close               -                      c-1\n"
	if out.String() != want {
		t.Fatalf("table:\n%s\nwant:\n%s", out, want)
	}
	o, out, _, _ = fixture(t, true, false, output.YAML, "--follow=false", "--type", "invalid")
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.HasPrefix(got, "---\nseq: 3\nglobal: 4\ntenant: acme\n") || !strings.Contains(got, "  reason: bad_signature\n") || strings.Count(got, "---") != 1 {
		t.Fatalf("yaml:\n%s", got)
	}
}

func TestNoTerminalNeverStartsTheUI(t *testing.T) {
	// Table format with stdout "a terminal" (SNAVIO_FORCE_TTY) but stdin
	// not: lines, no UI (fixture's RunUI fails the test if called).
	o, out, _, _ := fixture(t, true, false, output.Table, "--follow=false")
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "acme#3") {
		t.Fatalf("output:\n%s", out)
	}
	if o.useUI(output.Table) || o.useUI(output.NDJSON) {
		t.Fatal("UI chosen without a terminal or when not following")
	}
	o.Follow = true
	if o.useUI(output.Table) {
		t.Fatal("UI chosen with stdin not a terminal")
	}
	o.IO.SetStdinTTY(true)
	if !o.useUI(output.Table) || o.useUI(output.NDJSON) {
		t.Fatal("UI not chosen on a terminal in table format, or chosen for ndjson")
	}
}

func TestTerminalUIFedByTheFollower(t *testing.T) {
	o, _, _, srv := fixture(t, true, true, output.Table, "--type", "failed")
	o.RunUI = func(ctx context.Context, m tea.Model, _ io.Reader, _ io.Writer, color bool) error {
		if color {
			t.Error("colour on after --no-color")
		}
		m, screens := tailtest.Observe(m)
		tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 20))
		screens.WaitFor(t, "invalid 1")
		// A new event arrives while the UI runs.
		srv.append("acme", 1)
		screens.WaitFor(t, "failed 3")
		tm.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
		fm := tailtest.Unwrap(tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))).(tuitail.Model)
		st := fm.Stats()
		if st.Received != 5 || st.Missing != 0 || st.Duplicates != 0 {
			t.Errorf("UI stats %+v; want 5 received (4 acme, 1 globex), none missing or repeated", st)
		}
		if vis := fm.Visible(); len(vis) != 3 {
			t.Errorf("--type failed shows %d events, want acme's 3 failed", len(vis))
		}
		return nil
	}
	o.IO.DisableColor() // as --no-color or NO_COLOR do
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
}

func TestDecodeEventTolerates(t *testing.T) {
	e := DecodeEvent(wire.TelemetryRecord{Tenant: "acme", Seq: 1, Event: json.RawMessage(`{"event":"snavio.command.failed","source":7,"reason":"acl-deny"}`)})
	if e.Name != telemetry.NameFailed || e.Source != "" || e.Reason != "acl-deny" {
		t.Fatalf("%+v", e)
	}
	if e := DecodeEvent(wire.TelemetryRecord{Event: json.RawMessage(`[`)}); e.Name != "(undecodable event)" {
		t.Fatalf("%+v", e)
	}
}

func FuzzParseSince(f *testing.F) {
	for _, s := range []string{"10m", "2026-11-21T12:00:00Z", "-1s", "9223372036s", "2026-11-21T12:00:00.123456789+14:00", "1e3h", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got, err := ParseSince(s, t0)
		if err != nil {
			if !strings.Contains(err.Error(), "--since") {
				t.Fatalf("%q: error does not name the flag: %v", s, err)
			}
			return
		}
		if strings.TrimSpace(s) == "" != got.IsZero() {
			t.Fatalf("%q: %v", s, got)
		}
	})
}

func FuzzFilterFlags(f *testing.F) {
	f.Add("failed,invalid", "acme/billing", "mailer", "send", "rate")
	f.Add("snavio.command.failed", "", "a b", "x:y", "\x00")
	f.Fuzz(func(t *testing.T, typ, source, target, command, reason string) {
		split := func(s string) []string {
			if s == "" {
				return nil
			}
			return strings.Split(s, ",")
		}
		fl := Filters{Types: split(typ), Sources: split(source), Targets: split(target), Commands: split(command), Reasons: split(reason)}
		expr, err := fl.Expr()
		if err != nil {
			return
		}
		flt, err := tuitail.ParseFilter(expr)
		if err != nil {
			t.Fatalf("valid flags made an expression the parser refuses: %q: %v", expr, err)
		}
		// An event carrying exactly the given values matches.
		if len(fl.Types) == 0 {
			e := tuitail.Event{Name: "snavio.command.failed"}
			if len(fl.Sources) > 0 {
				e.Source = fl.Sources[0]
			}
			if len(fl.Targets) > 0 {
				e.Target = fl.Targets[0]
			}
			if len(fl.Commands) > 0 {
				e.Command = fl.Commands[0]
			}
			if len(fl.Reasons) > 0 {
				e.Reason = fl.Reasons[0]
			}
			if !flt.Match(&e) {
				t.Fatalf("%q does not match its own values %+v", expr, e)
			}
		}
	})
}

func TestAckerBatchesAcknowledgements(t *testing.T) {
	now := time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)
	var sent []uint64
	a := &acker{now: func() time.Time { return now }, ack: func(seq uint64) error { sent = append(sent, seq); return nil }}
	for seq := uint64(1); seq <= 5; seq++ {
		if err := a.saw(seq); err != nil {
			t.Fatal(err)
		}
	}
	// The first record acks at once (nothing acked yet); the rest wait
	// for a second to pass or a flush.
	if fmt.Sprint(sent) != "[1]" {
		t.Fatalf("acks after 5 records within a second = %v", sent)
	}
	now = now.Add(time.Second)
	_ = a.saw(6)
	if err := a.flush(); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(sent) != "[1 6]" {
		t.Fatalf("acks = %v, want [1 6]: one per second, the highest seq read, no repeat on flush", sent)
	}
}

func TestAckNeedsATenant(t *testing.T) {
	o := &Options{Ack: true, Now: time.Now, Scrollback: 1000}
	if err := o.validate(); err == nil || !strings.Contains(err.Error(), "--ack needs --tenant") {
		t.Fatalf("validate = %v", err)
	}
}
