package tail

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/snavio/snavio/internal/tui/tail/tailtest"
)

// updating reports -update, the flag teatest defines for golden files.
func updating() bool {
	f := flag.Lookup("update")
	return f != nil && f.Value.String() == "true"
}

// key is a key press of a printable key.
func key(s string) tea.KeyPressMsg {
	r := []rune(s)[0]
	return tea.KeyPressMsg{Code: r, Text: s}
}

// plain is the model's screen without colour: goldens must not depend on
// the terminal the tests run in.
func plain(m Model) string { return ansi.Strip(m.Render()) }

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func ev(tenant string, seq uint64, name, source, target, command, reason string) EventMsg {
	raw, _ := json.Marshal(map[string]any{"event": name, "source": source, "target": target, "command_name": command, "reason": reason})
	return EventMsg{Tenant: tenant, Seq: seq, Time: t0.Add(time.Duration(seq) * time.Second), Name: name,
		CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: source, Target: target, Command: command, Reason: reason, Raw: raw}
}

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if updating() {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from the golden file (go test -update to accept):\n%s", name, got)
	}
}

// uiTest is a model running under teatest, observed.
type uiTest struct {
	*teatest.TestModel
	screens *tailtest.Screens
}

func newTest(t *testing.T, w, h int) (uiTest, chan tea.Msg) {
	ch := make(chan tea.Msg, 64)
	m, screens := tailtest.Observe(New(Config{Events: ch, Now: func() time.Time { return t0 }, TickEvery: -1}))
	return uiTest{teatest.NewTestModel(t, m, teatest.WithInitialTermSize(w, h)), screens}, ch
}

func waitFor(t *testing.T, tm uiTest, s string) {
	t.Helper()
	tm.screens.WaitFor(t, s)
}

func final(t *testing.T, tm uiTest) Model {
	t.Helper()
	tm.Send(key("q"))
	return tailtest.Unwrap(tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))).(Model)
}

func TestLiveListCountsAndFilter(t *testing.T) {
	tm, ch := newTest(t, 110, 20)
	ch <- ConnMsg{State: Connected}
	ch <- ev("acme", 1, "snavio.command.delivered", "acme/billing", "mailer", "send", "")
	ch <- ev("acme", 2, "snavio.command.failed", "acme/billing", "mailer", "send", "rate-limit-exceeded")
	ch <- ev("acme", 3, "snavio.command.invalid", "acme/shop", "mailer", "send", "hmac_mismatch")
	ch <- ev("globex", 1, "snavio.command.failed", "globex/api", "accounts", "delete-user", "acl-deny")
	waitFor(t, tm, "invalid 1")

	// Typed, combined filter: failed events of acme only.
	tm.Type("/")
	tm.Type("type:failed source:acme")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitFor(t, tm, "filter: type:failed source:acme")
	m := final(t, tm)
	vis := m.Visible()
	if len(vis) != 1 || vis[0].Reason != "rate-limit-exceeded" {
		t.Fatalf("visible after filter = %+v", vis)
	}
	st := m.Stats()
	if st.Received != 4 || st.Counts[KindFailed] != 2 || st.Counts[KindDelivered] != 1 {
		t.Fatalf("stats = %+v", st)
	}
	golden(t, "filtered", plain(m))
}

func TestPauseKeepsEvents(t *testing.T) {
	tm, ch := newTest(t, 100, 20)
	ch <- ConnMsg{State: Connected}
	ch <- ev("acme", 1, "snavio.command.delivered", "acme/billing", "mailer", "send", "")
	waitFor(t, tm, "delivered 1")
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	waitFor(t, tm, "paused, 0 new")
	ch <- ev("acme", 2, "snavio.command.delivered", "acme/billing", "mailer", "send", "")
	ch <- ev("acme", 3, "snavio.command.duplicate", "acme/billing", "mailer", "send", "")
	waitFor(t, tm, "paused, 2 new")
	tm.Send(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	m := final(t, tm)
	if m.Paused() || len(m.Visible()) != 3 {
		t.Fatalf("after resume: paused=%v visible=%d, want 3 events and none lost", m.Paused(), len(m.Visible()))
	}
}

func TestDetailPaneShowsFullEvent(t *testing.T) {
	tm, ch := newTest(t, 100, 24)
	ch <- ConnMsg{State: Connected}
	ch <- ev("acme", 1, "snavio.command.failed", "acme/billing", "mailer", "send", "route-missing")
	waitFor(t, tm, "failed 1")
	tm.Send(tea.KeyPressMsg{Code: tea.KeyEnter})
	waitFor(t, tm, `"reason": "route-missing"`)
	m := final(t, tm)
	golden(t, "detail", plain(m))
}

func TestResizeAndHelp(t *testing.T) {
	tm, ch := newTest(t, 100, 20)
	ch <- ConnMsg{State: Connected}
	for i := uint64(1); i <= 30; i++ {
		ch <- ev("acme", i, "snavio.command.delivered", "acme/billing", "mailer", "send", "")
	}
	waitFor(t, tm, "delivered 30")
	tm.Send(tea.WindowSizeMsg{Width: 40, Height: 8})
	tm.Type("?")
	waitFor(t, tm, "snavio tail — keys")
	tm.Type("?")
	m := final(t, tm)
	view := plain(m)
	lines := strings.Split(strings.TrimRight(view, "\n"), "\n")
	if len(lines) > 8 {
		t.Errorf("view has %d lines in an 8-line terminal", len(lines))
	}
	for _, l := range lines {
		if w := lipgloss.Width(l); w > 40 {
			t.Errorf("line of width %d in a 40-column terminal: %q", w, l)
		}
	}
	golden(t, "resized", view)
}

func TestSequenceGapsAndDuplicates(t *testing.T) {
	m := New(Config{Now: func() time.Time { return t0 }, TickEvery: -1})
	var model tea.Model = m
	for _, seq := range []uint64{1, 2, 2, 3, 6, 4, 7} {
		model, _ = model.Update(ev("acme", seq, "snavio.command.delivered", "acme/a", "t", "c", ""))
	}
	model, _ = model.Update(ev("globex", 10, "snavio.command.delivered", "globex/a", "t", "c", ""))
	st := model.(Model).Stats()
	if st.Duplicates != 2 || st.Missing != 2 || st.Received != 6 {
		t.Fatalf("stats = %+v; want 2 duplicates (2, 4), 2 missing (4, 5), 6 received", st)
	}
	if !strings.Contains(model.(Model).Render(), "2 missing (gap in acme: 2 missing after #3)") {
		t.Errorf("gap not shown:\n%s", model.(Model).Render())
	}
}

func TestScrollbackIsBounded(t *testing.T) {
	var model tea.Model = New(Config{Scrollback: 10, Now: func() time.Time { return t0 }, TickEvery: -1})
	for i := uint64(1); i <= 25; i++ {
		model, _ = model.Update(ev("acme", i, "snavio.command.delivered", "acme/a", "t", "c", ""))
	}
	m := model.(Model)
	if len(m.Visible()) != 10 || m.Stats().Evicted != 15 || m.Visible()[0].Seq != 16 {
		t.Fatalf("scrollback: %d visible, %d evicted, first #%d", len(m.Visible()), m.Stats().Evicted, m.Visible()[0].Seq)
	}
}

func TestStalenessAndConnection(t *testing.T) {
	var model tea.Model = New(Config{HeartbeatInterval: 5 * time.Second, Now: func() time.Time { return t0 }, TickEvery: -1})
	model, _ = model.Update(ConnMsg{State: Connected})
	model, _ = model.Update(HeartbeatMsg{At: t0})
	model, _ = model.Update(TickMsg(t0.Add(10 * time.Second)))
	if v := model.(Model).Render(); !strings.Contains(v, "● connected") {
		t.Fatalf("fresh stream not shown connected:\n%s", v)
	}
	model, _ = model.Update(TickMsg(t0.Add(16 * time.Second)))
	if v := model.(Model).Render(); !strings.Contains(v, "stale: no heartbeat for 16s") {
		t.Fatalf("stale stream not flagged:\n%s", v)
	}
	model, _ = model.Update(ConnMsg{State: Reconnecting, Err: errString("connection refused")})
	if v := model.(Model).Render(); !strings.Contains(v, "● reconnecting (connection refused)") {
		t.Fatalf("reconnecting not shown:\n%s", v)
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestParseFilter(t *testing.T) {
	e := Event{Tenant: "acme", Name: "snavio.command.failed", Source: "acme/billing", Target: "mailer", Command: "send", Reason: "rate-limit-exceeded", CommandID: "0f8fad5b"}
	for expr, want := range map[string]bool{
		"":                           true,
		"type:failed":                true,
		"type:snavio.command.fail":   true,
		"type:delivered":             false,
		"source:ACME target:mailer":  true,
		"source:acme target:other":   false,
		"reason:rate command:send":   true,
		"billing":                    true,
		"nothing-like-this":          false,
		"tenant:acme id:0f8f":        true,
		"type:invalid,failed":        true,
		"type:invalid,delivered":     false,
		"source:globex,acme reason:": true,
		"source:,":                   true,
	} {
		f, err := ParseFilter(expr)
		if err != nil {
			t.Fatalf("ParseFilter(%q): %v", expr, err)
		}
		if got := f.Match(&e); got != want {
			t.Errorf("%q matched %v, want %v", expr, got, want)
		}
	}
	if _, err := ParseFilter("colour:red"); err == nil || !strings.Contains(err.Error(), "use type:, source:") {
		t.Errorf("unknown field: %v", err)
	}
}

func FuzzParseFilter(f *testing.F) {
	for _, s := range []string{"", "type:failed source:a", "x:y", ":", "a:b:c", "  \t "} {
		f.Add(s)
	}
	e := Event{Name: "snavio.command.failed", Source: "a/b"}
	f.Fuzz(func(t *testing.T, s string) {
		flt, err := ParseFilter(s)
		if err != nil {
			return
		}
		_ = flt.Match(&e)
	})
}

func TestFilterWhilePausedRefiltersThePausedView(t *testing.T) {
	var model tea.Model = New(Config{Now: func() time.Time { return t0 }, TickEvery: -1})
	model, _ = model.Update(ev("acme", 1, "snavio.command.delivered", "acme/a", "mailer", "send", ""))
	model, _ = model.Update(ev("acme", 2, "snavio.command.failed", "acme/a", "mailer", "send", "acl-deny"))
	model, _ = model.Update(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	model, _ = model.Update(ev("acme", 3, "snavio.command.failed", "acme/a", "mailer", "send", "route-missing"))
	model, _ = model.Update(key("/"))
	for _, r := range "type:failed" {
		model, _ = model.Update(key(string(r)))
	}
	model, _ = model.Update(tea.KeyPressMsg{Code: tea.KeyEnter})
	m := model.(Model)
	if !m.Paused() || len(m.Visible()) != 1 || m.Visible()[0].Seq != 2 {
		t.Fatalf("paused and filtered: paused=%v visible=%+v; want only #2 (#3 arrived after the pause)", m.Paused(), m.Visible())
	}
	model, _ = model.Update(tea.KeyPressMsg{Code: tea.KeySpace, Text: " "})
	if vis := model.(Model).Visible(); len(vis) != 2 || vis[1].Seq != 3 {
		t.Fatalf("resumed: %+v; want #2 and #3", vis)
	}
}

func TestResetForgetsSequenceNumbers(t *testing.T) {
	var model tea.Model = New(Config{Now: func() time.Time { return t0 }, TickEvery: -1})
	model, _ = model.Update(ev("acme", 9, "snavio.command.delivered", "acme/a", "t", "c", ""))
	model, _ = model.Update(ResetMsg{Note: "the server's stream restarted"})
	model, _ = model.Update(ev("acme", 1, "snavio.command.delivered", "acme/a", "t", "c", ""))
	model, _ = model.Update(ev("acme", 2, "snavio.command.delivered", "acme/a", "t", "c", ""))
	st := model.(Model).Stats()
	if st.Received != 3 || st.Duplicates != 0 || st.Missing != 0 {
		t.Fatalf("after a reset: %+v; want 3 received, none taken for duplicates", st)
	}
	if v := model.(Model).Render(); !strings.Contains(v, "↺ the server's stream restarted") {
		t.Fatalf("reset not shown:\n%s", v)
	}
}

func TestTruncateKeepsEscapesWhole(t *testing.T) {
	red := "\x1b[31m" + strings.Repeat("x", 30) + "\x1b[0m"
	got := truncate(red, 10)
	if w := lipgloss.Width(got); w != 10 || !strings.HasPrefix(got, "\x1b[31m") || !strings.Contains(got, "…") || !strings.HasSuffix(got, "\x1b[0m") {
		t.Fatalf("truncate(%q, 10) = %q (width %d)", red, got, w)
	}
	if got := truncate("short", 10); got != "short" {
		t.Fatalf("short string changed: %q", got)
	}
}
