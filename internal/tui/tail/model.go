package tail

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"charm.land/bubbles/v2/textinput"
	tea "charm.land/bubbletea/v2"
	"charm.land/lipgloss/v2"
	"github.com/charmbracelet/x/ansi"
)

// EventMsg delivers one event to the model.
type EventMsg Event

// HeartbeatMsg says the server is alive (streams send one periodically).
type HeartbeatMsg struct{ At time.Time }

// ConnState is the state of the connection to the stream.
type ConnState string

// Connection states.
const (
	Connecting   ConnState = "connecting"
	Connected    ConnState = "connected"
	Reconnecting ConnState = "reconnecting"
	Closed       ConnState = "closed"
)

// ConnMsg reports a connection change; Err says why it dropped.
type ConnMsg struct {
	State ConnState
	Err   error
}

// ResetMsg says the stream restarted from its beginning (a server on an
// ephemeral store restarted): sequence numbers start over, so what the
// model knows of them is forgotten, and the reset is shown.
type ResetMsg struct{ Note string }

// TickMsg advances the model's clock: staleness and the rate line are
// computed at tick time. The program sends one every second.
type TickMsg time.Time

// Config configures the model.
type Config struct {
	// Scrollback bounds the events kept (default 1000); older ones are
	// dropped and counted.
	Scrollback int
	// HeartbeatInterval is how often the server sends heartbeats (default
	// 5 s); three missed ones mark the stream stale.
	HeartbeatInterval time.Duration
	// Filter is the initial filter expression.
	Filter string
	// Events is the channel the source feeds; Listen reads it.
	Events <-chan tea.Msg
	// Now is the clock (default time.Now); ticks also carry time.
	Now func() time.Time
	// TickEvery is how often the model ticks (default 1 s); negative
	// disables ticking (tests send TickMsg themselves).
	TickEvery time.Duration
}

// Model is the tail UI. It never blocks and never does I/O.
type Model struct {
	cfg           Config
	width, height int
	styles        styles

	events  []Event // bounded scrollback, oldest first
	evicted int

	lastSeq map[string]uint64
	gaps    []string // recent gap notices
	missing uint64   // events known missing (sequence gaps)
	dups    int      // duplicates dropped (seq already seen)
	reset   string   // the last stream reset, if any

	filter    Filter
	input     textinput.Model
	filtering bool
	filterErr string

	cursor int  // index into the visible list
	follow bool // keep the cursor on the newest event

	paused    bool
	frozen    []Event // the scrollback when paused, unfiltered
	newPaused int     // matching events that arrived while paused

	detail bool
	help   bool

	counts map[Kind]int
	times  []time.Time // arrival times in the last rate window

	conn          ConnState
	connErr       string
	lastHeartbeat time.Time
	now           time.Time
}

// rateWindow is the span of the rate line.
const rateWindow = 10 * time.Second

// New returns a model.
func New(cfg Config) Model {
	if cfg.Scrollback <= 0 {
		cfg.Scrollback = 1000
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = 5 * time.Second
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.TickEvery == 0 {
		cfg.TickEvery = time.Second
	}
	in := textinput.New()
	in.Prompt = "filter: "
	in.Placeholder = "type:failed source:acme target:mailer command:send reason:rate"
	in.SetValue(cfg.Filter)
	f, err := ParseFilter(cfg.Filter)
	m := Model{
		cfg: cfg, width: 80, height: 24, styles: newStyles(),
		lastSeq: map[string]uint64{}, counts: map[Kind]int{},
		filter: f, input: in, follow: true, conn: Connecting, now: cfg.Now(),
	}
	if err != nil {
		m.filterErr = err.Error()
	}
	return m
}

// Listen returns a command that waits for the next message from ch. The
// model re-arms it after each message, so exactly one read is pending.
func Listen(ch <-chan tea.Msg) tea.Cmd {
	return func() tea.Msg {
		msg, ok := <-ch
		if !ok {
			return ConnMsg{State: Closed}
		}
		return msg
	}
}

func (m Model) tick() tea.Cmd {
	if m.cfg.TickEvery < 0 {
		return nil
	}
	return tea.Tick(m.cfg.TickEvery, func(t time.Time) tea.Msg { return TickMsg(t) })
}

// Init starts listening and ticking.
func (m Model) Init() tea.Cmd {
	var cmds []tea.Cmd
	if m.cfg.Events != nil {
		cmds = append(cmds, Listen(m.cfg.Events))
	}
	cmds = append(cmds, m.tick())
	return tea.Batch(cmds...)
}

// Update handles one message.
func (m Model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case EventMsg:
		m.add(Event(msg))
		return m, m.listen()
	case HeartbeatMsg:
		m.lastHeartbeat = msg.At
		return m, m.listen()
	case ResetMsg:
		m.lastSeq = map[string]uint64{}
		m.reset = msg.Note
		return m, m.listen()
	case ConnMsg:
		m.conn = msg.State
		m.connErr = ""
		if msg.Err != nil {
			m.connErr = msg.Err.Error()
		}
		if msg.State == Closed {
			return m, nil
		}
		return m, m.listen()
	case TickMsg:
		m.now = time.Time(msg)
		m.trimRate()
		return m, m.tick()
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
		m.clampCursor()
		return m, nil
	case tea.KeyPressMsg:
		return m.key(msg)
	}
	return m, nil
}

func (m Model) listen() tea.Cmd {
	if m.cfg.Events == nil {
		return nil
	}
	return Listen(m.cfg.Events)
}

// add takes one event: duplicates (a sequence number already seen for the
// tenant) are dropped, gaps are recorded, the scrollback stays bounded.
func (m *Model) add(e Event) {
	if e.Seq > 0 && e.Tenant != "" {
		last, seen := m.lastSeq[e.Tenant]
		if seen && e.Seq <= last {
			m.dups++
			return
		}
		if seen && e.Seq > last+1 {
			missing := e.Seq - last - 1
			m.missing += missing
			note := fmt.Sprintf("gap in %s: %d missing after #%d", e.Tenant, missing, last)
			m.gaps = append(m.gaps, note)
			if len(m.gaps) > 5 {
				m.gaps = m.gaps[1:]
			}
		}
		m.lastSeq[e.Tenant] = e.Seq
	}
	if len(m.events) >= m.cfg.Scrollback {
		copy(m.events, m.events[1:])
		m.events = m.events[:len(m.events)-1]
		m.evicted++
		if !m.follow && !m.paused && m.cursor > 0 {
			m.cursor-- // keep the selected event selected
		}
	}
	m.events = append(m.events, e)
	m.counts[KindOf(e.Name)]++
	// The rate counts arrivals on our clock, not the events' own
	// timestamps, so clock skew does not distort it.
	m.now = m.cfg.Now()
	m.times = append(m.times, m.now)
	m.trimRate()
	if m.paused {
		if m.filter.Match(&e) {
			m.newPaused++
		}
		return
	}
	if m.follow {
		m.cursor = len(m.visible()) - 1
	}
}

func (m *Model) trimRate() {
	cut := m.now.Add(-rateWindow)
	i := 0
	for i < len(m.times) && m.times[i].Before(cut) {
		i++
	}
	m.times = m.times[i:]
}

// visible returns the events shown: the scrollback (as it was when the
// view was paused, while paused) through the filter. Changing the filter
// while paused re-filters the paused view.
func (m *Model) visible() []Event {
	base := m.events
	if m.paused {
		base = m.frozen
	}
	if m.filter.Empty() {
		return base
	}
	out := make([]Event, 0, len(base))
	for i := range base {
		if m.filter.Match(&base[i]) {
			out = append(out, base[i])
		}
	}
	return out
}

func (m *Model) clampCursor() {
	n := len(m.visible())
	if m.cursor >= n {
		m.cursor = n - 1
	}
	if m.cursor < 0 {
		m.cursor = 0
	}
}

func (m Model) key(k tea.KeyPressMsg) (tea.Model, tea.Cmd) {
	if m.filtering {
		switch k.String() {
		case "enter", "esc":
			m.filtering = false
			m.input.Blur()
			if k.String() == "esc" {
				return m, nil
			}
			f, err := ParseFilter(m.input.Value())
			if err != nil {
				m.filterErr = err.Error()
				return m, nil
			}
			m.filter, m.filterErr = f, ""
			m.follow = true
			m.cursor = len(m.visible()) - 1
			m.clampCursor()
			return m, nil
		}
		var cmd tea.Cmd
		m.input, cmd = m.input.Update(k)
		return m, cmd
	}
	switch k.String() {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "?":
		m.help = !m.help
	case "/":
		m.filtering = true
		m.help = false
		return m, m.input.Focus()
	case "esc":
		switch {
		case m.help:
			m.help = false
		case m.detail:
			m.detail = false
		default:
			m.filter = Filter{}
			m.input.SetValue("")
			m.filterErr = ""
			m.clampCursor()
		}
	case "space", "p":
		m.togglePause()
	case "enter":
		m.detail = !m.detail
	case "up", "k":
		if m.cursor > 0 {
			m.cursor--
		}
		m.follow = false
	case "down", "j":
		m.cursor++
		m.clampCursor()
		m.follow = m.cursor == len(m.visible())-1
	case "g", "home":
		m.cursor, m.follow = 0, false
	case "G", "end":
		m.cursor, m.follow = len(m.visible())-1, true
		m.clampCursor()
	}
	return m, nil
}

func (m *Model) togglePause() {
	if !m.paused {
		m.frozen = append([]Event(nil), m.events...)
		m.paused, m.newPaused = true, 0
		return
	}
	m.paused, m.frozen, m.newPaused = false, nil, 0
	if m.follow {
		m.cursor = len(m.visible()) - 1
	}
	m.clampCursor()
}

// Paused reports whether the view is paused (tests).
func (m Model) Paused() bool { return m.paused }

// Visible returns the events the view shows (tests).
func (m Model) Visible() []Event { return m.visible() }

// Stats are the model's counters (tests and the status line).
type Stats struct {
	Received, Evicted, Duplicates int
	Missing                       uint64
	Counts                        map[Kind]int
}

// Stats returns the counters.
func (m Model) Stats() Stats {
	total := 0
	for _, n := range m.counts {
		total += n
	}
	return Stats{Received: total, Evicted: m.evicted, Duplicates: m.dups, Missing: m.missing, Counts: m.counts}
}

// View renders the screen, on the terminal's alternate screen.
func (m Model) View() tea.View {
	v := tea.NewView(m.Render())
	v.AltScreen = true
	return v
}

// Render returns the screen's text.
func (m Model) Render() string {
	if m.help {
		return m.helpView()
	}
	var b strings.Builder
	b.WriteString(m.statusLine())
	b.WriteByte('\n')
	b.WriteString(m.countsLine())
	b.WriteByte('\n')
	chrome := 3 // status, counts, footer
	if w := m.warningLine(); w != "" {
		b.WriteString(w)
		b.WriteByte('\n')
		chrome++
	}
	vis := m.visible()
	detailH := 0
	if m.detail && len(vis) > 0 {
		detailH = max(3, (m.height-chrome)/2)
	}
	listH := max(1, m.height-chrome-detailH)
	start := 0
	if m.cursor >= listH {
		start = m.cursor - listH + 1
	}
	for i := start; i < start+listH; i++ {
		if i < len(vis) {
			b.WriteString(m.line(&vis[i], i == m.cursor))
		}
		b.WriteByte('\n')
	}
	if detailH > 0 && m.cursor < len(vis) {
		b.WriteString(m.detailView(&vis[m.cursor], detailH))
	}
	b.WriteString(m.footer())
	return b.String()
}

func (m Model) statusLine() string {
	var parts []string
	conn := string(m.conn)
	style := m.styles.ok
	switch {
	case m.conn != Connected:
		style = m.styles.bad
		if m.connErr != "" {
			conn += " (" + m.connErr + ")"
		}
	case !m.lastHeartbeat.IsZero() && m.now.Sub(m.lastHeartbeat) > 3*m.cfg.HeartbeatInterval:
		style = m.styles.warn
		conn = fmt.Sprintf("stale: no heartbeat for %s", m.now.Sub(m.lastHeartbeat).Round(time.Second))
	}
	parts = append(parts, m.styles.title.Render("snavio tail"), style.Render("● "+conn))
	parts = append(parts, fmt.Sprintf("%.1f ev/s", float64(len(m.times))/rateWindow.Seconds()))
	if m.paused {
		parts = append(parts, m.styles.warn.Render(fmt.Sprintf("⏸ paused, %d new", m.newPaused)))
	}
	if !m.filter.Empty() {
		parts = append(parts, "filter: "+m.input.Value())
	}
	return truncate(strings.Join(parts, "  "), m.width)
}

// warningLine tells what the view cannot show: events missing from the
// stream (sequence gaps) and events dropped from the bounded scrollback.
// Empty when there is nothing to warn about.
func (m Model) warningLine() string {
	var parts []string
	if m.missing > 0 {
		parts = append(parts, m.styles.bad.Render(fmt.Sprintf("⚠ %d missing (%s)", m.missing, m.gaps[len(m.gaps)-1])))
	}
	if m.reset != "" {
		parts = append(parts, m.styles.warn.Render("↺ "+m.reset))
	}
	if m.evicted > 0 {
		parts = append(parts, m.styles.muted.Render(fmt.Sprintf("%d older dropped from scrollback", m.evicted)))
	}
	return truncate(strings.Join(parts, "  "), m.width)
}

func (m Model) countsLine() string {
	var parts []string
	for _, k := range Kinds() {
		if n := m.counts[k]; n > 0 {
			parts = append(parts, m.styles.kind(k).Render(fmt.Sprintf("%s %d", k, n)))
		}
	}
	if len(parts) == 0 {
		return m.styles.muted.Render("waiting for events…")
	}
	return truncate(strings.Join(parts, "  "), m.width)
}

func (m Model) line(e *Event, selected bool) string {
	route := e.Target
	if e.Command != "" {
		route += "/" + e.Command
	}
	who := e.Source
	if who == "" {
		who = e.Tenant
	}
	label := string(KindOf(e.Name))
	if KindOf(e.Name) == KindOther {
		label = strings.TrimPrefix(e.Name, "snavio.") // e.g. cache.refreshed
	}
	txt := fmt.Sprintf("%s  %-10s %-22s → %-24s %s %s",
		e.Time.UTC().Format("15:04:05.000"), label, who, route, e.Reason, shortID(e.CommandID))
	txt = truncate(txt, m.width)
	if selected {
		return m.styles.selected.Render(txt)
	}
	return m.styles.kind(KindOf(e.Name)).Render(txt)
}

func shortID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

func (m Model) detailView(e *Event, h int) string {
	body := e.Raw
	var buf bytes.Buffer
	if len(body) == 0 || json.Indent(&buf, body, "", "  ") != nil {
		b, _ := json.MarshalIndent(e, "", "  ")
		buf.Reset()
		buf.Write(b)
	}
	lines := strings.Split(buf.String(), "\n")
	if len(lines) > h-1 {
		lines = append(lines[:h-2], "…")
	}
	var out strings.Builder
	out.WriteString(m.styles.muted.Render(strings.Repeat("─", max(1, m.width))))
	out.WriteByte('\n')
	for _, l := range lines {
		out.WriteString(truncate(l, m.width))
		out.WriteByte('\n')
	}
	return out.String()
}

func (m Model) footer() string {
	if m.filtering {
		return m.input.View()
	}
	if m.filterErr != "" {
		return m.styles.bad.Render(truncate(m.filterErr, m.width))
	}
	return m.styles.muted.Render(truncate("? help  / filter  space pause  enter detail  ↑↓ move  G follow  q quit", m.width))
}

// helpView fits the help into the terminal: bubbletea shows the bottom
// lines of a view taller than the screen, which would hide the title.
func (m Model) helpView() string {
	lines := strings.Split(helpText, "\n")
	if len(lines) > m.height {
		lines = lines[:max(1, m.height)]
	}
	for i, l := range lines {
		lines[i] = truncate(l, m.width)
	}
	lines[0] = m.styles.title.Render(lines[0])
	return strings.Join(lines, "\n")
}

const helpText = `snavio tail — keys

  ↑/k ↓/j     move the selection
  g / G       oldest / newest (G follows new events)
  space, p    pause or resume (events keep arriving while paused)
  enter       show or hide the selected event in full
  /           edit the filter; enter applies, esc cancels
  esc         close help or detail, else clear the filter
  ?           this help
  q, ctrl+c   quit

Filter: space-separated terms, all must match (case-insensitive):
  type:failed  source:acme  target:mailer  command:send  reason:rate
  tenant:acme  id:0f8f  or a bare word that matches any field.`

// truncate cuts s to width display cells, keeping its colour escapes
// whole.
func truncate(s string, width int) string {
	if width <= 0 || lipgloss.Width(s) <= width {
		return s
	}
	return ansi.Truncate(s, width, "…")
}
