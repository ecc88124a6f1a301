package route

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Result is what a registration prints: the plan and, unless a dry run,
// the stored version of each record it wrote.
type Result struct {
	DryRun  bool        `json:"dry_run"`
	Summary Summary     `json:"summary"`
	Changes []ChangeRow `json:"changes"`
}

// Summary counts a plan's changes by action.
type Summary struct {
	Create    int `json:"create"`
	Update    int `json:"update"`
	Delete    int `json:"delete"`
	Unchanged int `json:"unchanged"`
}

// Pending reports whether the plan changes anything.
func (s Summary) Pending() bool { return s.Create+s.Update+s.Delete > 0 }

// ChangeRow is one planned (or made) change.
type ChangeRow struct {
	Action spec.Action `json:"action"`
	ID     registry.ID `json:"id"`
	// Version is the record's stored version after the change (0 in a
	// dry run or for an unchanged record: see Before).
	Version int64 `json:"version,omitempty"`
	// Fields names the fields an update changes.
	Fields []string       `json:"fields,omitempty"`
	Before *registry.Item `json:"before,omitempty"`
	After  *registry.Item `json:"after,omitempty"`
}

// TableHeader implements output.Tabular.
func (Result) TableHeader() []string { return []string{"action", "id", "version", "changed fields"} }

// TableRows implements output.Tabular.
func (r Result) TableRows() [][]string {
	rows := make([][]string, 0, len(r.Changes))
	for _, c := range r.Changes {
		v := ""
		switch {
		case c.Version > 0:
			v = strconv.FormatInt(c.Version, 10)
		case c.Before != nil:
			v = strconv.FormatInt(c.Before.Version(), 10)
		}
		rows = append(rows, []string{string(c.Action), string(c.ID), v, strings.Join(c.Fields, ",")})
	}
	return rows
}

// Line is the one-line summary a person reads after the table.
func (r Result) Line() string {
	s := r.Summary
	counts := fmt.Sprintf("%d to create, %d to update, %d to delete, %d unchanged", s.Create, s.Update, s.Delete, s.Unchanged)
	switch {
	case r.DryRun && s.Pending():
		return "Plan: " + counts + ". Dry run: nothing was written; run again without --dry-run to apply."
	case r.DryRun:
		return "Plan: " + counts + ". No changes: the registry already matches."
	case s.Pending():
		return fmt.Sprintf("Applied: %d created, %d updated, %d deleted, %d unchanged.", s.Create, s.Update, s.Delete, s.Unchanged)
	default:
		return "No changes: the registry already matches (" + strconv.Itoa(s.Unchanged) + " unchanged)."
	}
}

// NewResult builds the printed result of an apply answer.
func NewResult(res wire.ApplyResult, dryRun bool) Result {
	out := Result{DryRun: dryRun, Changes: []ChangeRow{}}
	versions := map[registry.ID]int64{}
	for _, ch := range res.Applied {
		versions[ch.ID] = ch.Version
	}
	for _, c := range res.Plan.Changes {
		row := ChangeRow{Action: c.Action, ID: c.ID, Before: c.Before, After: c.After, Version: versions[c.ID]}
		switch c.Action {
		case spec.Create:
			out.Summary.Create++
		case spec.Update:
			out.Summary.Update++
			row.Fields = ChangedFields(c.Before, c.After)
		case spec.Delete:
			out.Summary.Delete++
		default:
			out.Summary.Unchanged++
		}
		out.Changes = append(out.Changes, row)
	}
	return out
}

// ChangedFields names the top-level fields of the record that differ
// between before and after (the version aside), sorted.
func ChangedFields(before, after *registry.Item) []string {
	a, b := fields(before), fields(after)
	var out []string
	for k := range a {
		if k != "version" && !reflect.DeepEqual(a[k], b[k]) {
			out = append(out, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && k != "version" {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// fields is the JSON object of the one record it holds.
func fields(it *registry.Item) map[string]any {
	if it == nil {
		return nil
	}
	b, err := json.Marshal(it)
	if err != nil {
		return nil
	}
	var outer map[string]map[string]any
	if json.Unmarshal(b, &outer) != nil {
		return nil
	}
	for _, rec := range outer {
		return rec
	}
	return nil
}

// Apply sends items to the one registration code path and returns the
// result to print; API errors are mapped for the CLI (list names the
// command that shows what exists).
func Apply(ctx context.Context, pf func() (platform.Platform, error), req wire.ApplyRequest, list string) (Result, error) {
	a, err := pf()
	if err != nil {
		return Result{}, err
	}
	res, err := a.ApplyRegistry(ctx, req)
	if err != nil {
		return Result{}, cmdutil.MapAPIError(err, list)
	}
	return NewResult(res, req.DryRun), nil
}

// Print prints r, with its summary line on errOut when the format is for
// people (the structured formats carry the summary in the value).
func Print(p *output.Printer, errOut io.Writer, r Result) error {
	if err := p.Print(r); err != nil {
		return err
	}
	if p.Format() == output.Table {
		_, err := fmt.Fprintln(errOut, r.Line())
		return err
	}
	return nil
}
