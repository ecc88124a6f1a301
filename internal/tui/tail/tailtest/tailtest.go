// Package tailtest helps test Bubble Tea models under teatest: Observe
// wraps a model so that each screen it renders after an update is
// published, and Screens.WaitFor waits until the screen shows a text.
// Waiting on the screen, not on the program's byte output, is needed with
// Bubble Tea v2: its renderer writes only the cells that changed, so a
// text that changed in part never appears whole in the output.
package tailtest

import (
	"strings"
	"sync"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/ansi"
)

// Screens is the latest screen of an observed model.
type Screens struct {
	mu      sync.Mutex
	last    string
	changed chan struct{}
}

type observed struct {
	inner   tea.Model
	screens *Screens
}

// Observe returns m wrapped to publish its screens, and the screens.
func Observe(m tea.Model) (tea.Model, *Screens) {
	s := &Screens{changed: make(chan struct{})}
	s.publish(m)
	return observed{inner: m, screens: s}, s
}

// Unwrap returns the model inside an observed one (FinalModel's answer).
func Unwrap(m tea.Model) tea.Model {
	if o, ok := m.(observed); ok {
		return o.inner
	}
	return m
}

func (s *Screens) publish(m tea.Model) {
	screen := ansi.Strip(m.View().Content)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.last = screen
	close(s.changed)
	s.changed = make(chan struct{})
}

func (o observed) Init() tea.Cmd { return o.inner.Init() }

func (o observed) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	m, cmd := o.inner.Update(msg)
	o.inner = m
	o.screens.publish(m)
	return o, cmd
}

func (o observed) View() tea.View { return o.inner.View() }

// WaitFor waits up to 5 s for a screen that contains text (colours
// stripped), failing the test with the last screen otherwise.
func (s *Screens) WaitFor(tb testing.TB, text string) {
	tb.Helper()
	timeout := time.NewTimer(5 * time.Second)
	defer timeout.Stop()
	for {
		s.mu.Lock()
		last, changed := s.last, s.changed
		s.mu.Unlock()
		if strings.Contains(last, text) {
			return
		}
		select {
		case <-changed:
		case <-timeout.C:
			tb.Fatalf("the screen did not show %q within 5s; it shows:\n%s", text, last)
		}
	}
}
