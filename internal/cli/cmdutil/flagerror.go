package cmdutil

import (
	"fmt"
	"regexp"
	"strings"
	"sync"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// flagValueHints replace the parser's own error that pflag appends to a bad
// value (such as `strconv.ParseBool: parsing "maybe": invalid syntax`) with
// what the flag takes. Compiled on first use: start-up stays cheap.
var flagValueHints = sync.OnceValue(func() []flagValueHint {
	return []flagValueHint{
		{regexp.MustCompile(`strconv\.ParseBool: .*$`), "want true or false"},
		{regexp.MustCompile(`strconv\.Parse(Int|Uint): parsing .*: value out of range$`), "the number is out of range"},
		{regexp.MustCompile(`strconv\.Parse(Int|Uint): .*$`), "want a whole number"},
		{regexp.MustCompile(`strconv\.ParseFloat: .*$`), "want a number"},
		{regexp.MustCompile(`time: (invalid|unknown unit|missing unit).*$`), "want a duration with a unit, such as 30s, 5m or 1h"},
	}
})

type flagValueHint struct {
	cause *regexp.Regexp
	want  string
}

// FlagError turns a flag-parsing error of c into a usage error that says
// what the flag takes (instead of a Go parser's message) and, for an
// unknown flag close to a known one, which one was meant.
func FlagError(c *cobra.Command, err error) error {
	msg := err.Error()
	for _, h := range flagValueHints() {
		if loc := h.cause.FindStringIndex(msg); loc != nil {
			msg = msg[:loc[0]] + h.want
			break
		}
	}
	if name, ok := strings.CutPrefix(msg, "unknown flag: --"); ok {
		if s := suggestFlag(c, name); s != "" {
			msg += "; did you mean --" + s + "?"
		}
	}
	return &UsageError{Err: fmt.Errorf("%s", msg)}
}

// suggestFlag returns the flag of c (its own or inherited) nearest to name
// by edit distance, if within 2 edits or name is a prefix of it; else "".
func suggestFlag(c *cobra.Command, name string) string {
	best, bestD := "", 3
	visit := func(f *pflag.Flag) {
		if f.Hidden {
			return
		}
		d := editDistance(name, f.Name)
		if strings.HasPrefix(f.Name, name) && len(name) >= 3 {
			d = min(d, 1)
		}
		if d < bestD || (d == bestD && f.Name < best) {
			best, bestD = f.Name, d
		}
	}
	c.Flags().VisitAll(visit)
	c.InheritedFlags().VisitAll(visit)
	return best
}

// editDistance is the Levenshtein distance between a and b.
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
