package tail

import "charm.land/lipgloss/v2"

// styles are the colours of the UI. The program's colour profile decides
// whether they print colour at all: Bubble Tea downsamples to what the
// terminal supports, and to none with NO_COLOR.
type styles struct {
	title, ok, warn, bad, muted, selected lipgloss.Style
	kinds                                 map[Kind]lipgloss.Style
}

func newStyles() styles {
	c := func(color string) lipgloss.Style { return lipgloss.NewStyle().Foreground(lipgloss.Color(color)) }
	return styles{
		title:    lipgloss.NewStyle().Bold(true),
		ok:       c("2"),
		warn:     c("3"),
		bad:      c("1").Bold(true),
		muted:    c("8"),
		selected: lipgloss.NewStyle().Reverse(true),
		kinds: map[Kind]lipgloss.Style{
			KindDelivered: c("2"),
			KindInvalid:   c("1"),
			KindFailed:    c("9"),
			KindDuplicate: c("3"),
			KindFairness:  c("5"),
			KindSecret:    c("6"),
			KindSkew:      c("4"),
			KindDropped:   c("1").Bold(true),
			KindOther:     lipgloss.NewStyle(),
		},
	}
}

func (s styles) kind(k Kind) lipgloss.Style { return s.kinds[k] }
