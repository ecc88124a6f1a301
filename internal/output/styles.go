package output

import (
	"io"

	"github.com/charmbracelet/lipgloss"
	"github.com/muesli/termenv"
)

// Styles colours text for one stream. Colour is decided once, by the
// IOStreams (TTY, NO_COLOR, --no-color); a disabled Styles returns text
// unchanged, so callers never branch on colour themselves.
type Styles struct {
	enabled bool
	header  lipgloss.Style
	success lipgloss.Style
	warning lipgloss.Style
	failure lipgloss.Style
	muted   lipgloss.Style
}

// NewStyles returns styles for w. With enabled false every method is the
// identity.
func NewStyles(w io.Writer, enabled bool) Styles {
	if !enabled {
		return Styles{}
	}
	r := lipgloss.NewRenderer(w)
	if r.ColorProfile() == termenv.Ascii {
		// Colour was asked for (a TTY, or SNAVIO_FORCE_TTY) on a writer
		// lipgloss cannot probe: use the basic 16-colour palette.
		r.SetColorProfile(termenv.ANSI)
	}
	return Styles{
		enabled: true,
		header:  r.NewStyle().Bold(true),
		success: r.NewStyle().Foreground(lipgloss.Color("2")),
		warning: r.NewStyle().Foreground(lipgloss.Color("3")),
		failure: r.NewStyle().Foreground(lipgloss.Color("1")).Bold(true),
		muted:   r.NewStyle().Foreground(lipgloss.Color("8")),
	}
}

// Enabled reports whether these styles emit colour.
func (s Styles) Enabled() bool { return s.enabled }

func (s Styles) render(st lipgloss.Style, text string) string {
	if !s.enabled {
		return text
	}
	return st.Render(text)
}

// Header styles a table header cell.
func (s Styles) Header(text string) string { return s.render(s.header, text) }

// Success styles a message about something that worked.
func (s Styles) Success(text string) string { return s.render(s.success, text) }

// Warning styles a warning.
func (s Styles) Warning(text string) string { return s.render(s.warning, text) }

// Failure styles an error.
func (s Styles) Failure(text string) string { return s.render(s.failure, text) }

// Muted styles secondary text.
func (s Styles) Muted(text string) string { return s.render(s.muted, text) }
