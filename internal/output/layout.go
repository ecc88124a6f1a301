package output

import (
	"strings"

	"github.com/clipperhouse/displaywidth"
)

// columnGap separates a column from the next.
const columnGap = "   "

// layoutTable lays header and rows out as left-aligned columns, each as
// wide as its widest cell in display columns (East Asian wide runes count
// two, escape sequences none), separated by columnGap, with no trailing
// blanks. A cell with newlines spans as many lines, the row's other cells
// blank on the extra ones.
func layoutTable(header []string, rows [][]string) string {
	all := rows
	if len(header) > 0 {
		all = append([][]string{header}, rows...)
	}
	var widths []int
	lines := make([][][]string, len(all)) // row -> cell -> lines
	for i, r := range all {
		lines[i] = make([][]string, len(r))
		for j, c := range r {
			ls := strings.Split(strings.TrimRight(c, "\n"), "\n")
			lines[i][j] = ls
			if j >= len(widths) {
				widths = append(widths, 0)
			}
			for _, l := range ls {
				widths[j] = max(widths[j], displayWidth(l))
			}
		}
	}
	var b strings.Builder
	for _, cells := range lines {
		height := 1
		for _, ls := range cells {
			height = max(height, len(ls))
		}
		for k := range height {
			var line strings.Builder
			for j := range widths {
				var s string
				if j < len(cells) && k < len(cells[j]) {
					s = cells[j][k]
				}
				line.WriteString(s)
				if j < len(widths)-1 {
					line.WriteString(strings.Repeat(" ", widths[j]-displayWidth(s)))
					line.WriteString(columnGap)
				}
			}
			b.WriteString(strings.TrimRight(line.String(), " "))
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// displayWidth is s's width on a terminal: escape sequences take none.
func displayWidth(s string) int {
	if strings.IndexByte(s, '\x1b') >= 0 {
		s = stripEscapes(s)
	}
	return displaywidth.String(s)
}

// stripEscapes removes CSI sequences (ESC [ ... final byte).
func stripEscapes(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\x1b' && i+1 < len(s) && s[i+1] == '[' {
			j := i + 2
			for j < len(s) && (s[j] < 0x40 || s[j] > 0x7e) {
				j++
			}
			i = j
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
