package cmdutil

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
)

func TestFlagError(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
		not  string
	}{
		{[]string{"--sorce", "x"}, "unknown flag: --sorce; did you mean --source?", ""},
		{[]string{"--targte", "x"}, "did you mean --target?", ""},
		{[]string{"--verb"}, "did you mean --verbose?", ""},
		{[]string{"--zzzzzz"}, "unknown flag: --zzzzzz", "did you mean"},
		{[]string{"--follow=maybe"}, `invalid argument "maybe" for "--follow" flag: want true or false`, "strconv"},
		{[]string{"--count", "x"}, "want a whole number", "strconv"},
		{[]string{"--count", "99999999999999999999"}, "out of range", "strconv"},
		{[]string{"--rate", "fast"}, "want a number", "strconv"},
		{[]string{"--wait", "nope"}, "want a duration with a unit, such as 30s", "time:"},
	} {
		c := &cobra.Command{Use: "x", RunE: func(*cobra.Command, []string) error { return nil }}
		c.Flags().String("source", "", "")
		c.Flags().String("target", "", "")
		c.Flags().Bool("follow", true, "")
		c.Flags().Int("count", 0, "")
		c.Flags().Float64("rate", 0, "")
		c.Flags().Duration("wait", time.Second, "")
		c.PersistentFlags().Bool("verbose", false, "")
		c.SetFlagErrorFunc(FlagError)
		c.SetArgs(tc.args)
		c.SilenceErrors, c.SilenceUsage = true, true
		err := c.Execute()
		if err == nil || ExitCode(err) != ExitUsage {
			t.Errorf("%v: err %v, want a usage error", tc.args, err)
			continue
		}
		if !strings.Contains(err.Error(), tc.want) || (tc.not != "" && strings.Contains(err.Error(), tc.not)) {
			t.Errorf("%v: %q, want %q and not %q", tc.args, err, tc.want, tc.not)
		}
	}
}

func TestEditDistance(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"sorce", "source", 1}, {"kitten", "sitting", 3}, {"abc", "", 3}} {
		if got := editDistance(tc.a, tc.b); got != tc.d {
			t.Errorf("editDistance(%q, %q) = %d, want %d", tc.a, tc.b, got, tc.d)
		}
	}
}
