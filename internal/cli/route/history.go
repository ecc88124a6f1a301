package route

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func marshal(v any) ([]byte, error) { return json.Marshal(v) }

func sortedKeys(m map[string]string) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// HistoryEntry is one changelog entry as printed.
type HistoryEntry struct {
	registry.Change
	// Fields names the fields the change set (all of a created record's).
	Fields []string `json:"fields,omitempty"`
}

// TableHeader implements output.Tabular.
func (e HistoryEntry) TableHeader() []string { return History{e}.TableHeader() }

// TableRows implements output.Tabular.
func (e HistoryEntry) TableRows() [][]string { return History{e}.TableRows() }

// History is a record's changelog, newest first.
type History []HistoryEntry

// TableHeader implements output.Tabular.
func (History) TableHeader() []string { return []string{"version", "op", "who", "at", "fields"} }

// TableRows implements output.Tabular.
func (h History) TableRows() [][]string {
	rows := make([][]string, 0, len(h))
	for _, e := range h {
		fs := ""
		for i, f := range e.Fields {
			if i > 0 {
				fs += ","
			}
			fs += f
		}
		rows = append(rows, []string{strconv.FormatInt(e.Version, 10), string(e.Op), e.Who, e.At.UTC().Format(time.RFC3339), fs})
	}
	return rows
}

// NewHistory annotates changes with the fields each set.
func NewHistory(cs []registry.Change) History {
	out := History{}
	for _, c := range cs {
		out = append(out, HistoryEntry{Change: c, Fields: ChangedFields(c.Before, c.After)})
	}
	return out
}

// GetHistory reads id's changelog.
func GetHistory(ctx context.Context, pf func() (platform.Platform, error), id registry.ID, limit int, list string) (History, error) {
	a, err := pf()
	if err != nil {
		return nil, err
	}
	cs, err := a.RegistryHistory(ctx, id, limit)
	if err != nil {
		return nil, cmdutil.MapAPIError(err, list)
	}
	return NewHistory(cs), nil
}

// HistoryOptions are the inputs of `snavio route history`.
type HistoryOptions struct {
	Deps
	Target, Command string
	Limit           int
}

// NewCmdHistory builds `snavio route history`. runF replaces the run
// function in tests.
func NewCmdHistory(d Deps, runF func(context.Context, *HistoryOptions) error) *cobra.Command {
	opts := &HistoryOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "history --target T --command C [--limit N]",
		Short: "Show a route's changelog: who changed what, when",
		Long: `Show a route's changelog, newest first: the version each change made, put or
delete, who made it and when, and the fields it set. -o json includes the
record before and after each change. The changelog of a deleted route stays
readable.`,
		Example: `  snavio route history --target mailer --command send-receipt
  snavio route history --target mailer --command send-receipt --limit 5 -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if opts.Limit < 1 || opts.Limit > 1000 {
				return cmdutil.Usagef("invalid --limit %d: use 1 to 1000", opts.Limit)
			}
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunHistory(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Target, "target", "", "target service (required)")
	cmd.Flags().StringVar(&opts.Command, "command", "", "command name (required)")
	cmd.Flags().IntVar(&opts.Limit, "limit", 50, "at most this many changes (1 to 1000)")
	_ = cmd.MarkFlagRequired("target")
	_ = cmd.MarkFlagRequired("command")
	return cmd
}

// RunHistory prints a route's changelog.
func RunHistory(ctx context.Context, opts *HistoryOptions) error {
	h, err := GetHistory(ctx, opts.Platform, registry.RouteID(opts.Target, opts.Command), opts.Limit, "snavio route list")
	if err != nil {
		return err
	}
	if len(h) == 0 {
		return fmt.Errorf("route %s %s has no history: it was never registered; see `snavio route list`", opts.Target, opts.Command)
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(h)
}
