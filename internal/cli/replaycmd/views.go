package replaycmd

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// PlanView prints a dry run's plan.
type PlanView struct {
	wire.ReplayPlan
	// End is the end of the archive range the run would use.
	End time.Time `json:"end,omitzero"`
}

// TableHeader implements output.Tabular.
func (PlanView) TableHeader() []string { return []string{"plan", "value"} }

// TableRows implements output.Tabular.
func (v PlanView) TableRows() [][]string {
	rows := [][]string{{"origin", v.Origin}, {"commands", strconv.Itoa(v.Total)}}
	routes := make([]string, 0, len(v.ByRoute))
	for r := range v.ByRoute {
		routes = append(routes, r)
	}
	sort.Strings(routes)
	for _, r := range routes {
		rows = append(rows, []string{"  " + r, strconv.Itoa(v.ByRoute[r])})
	}
	if v.FirstID != "" {
		rows = append(rows, []string{"id range", v.FirstID + " .. " + v.LastID})
	}
	if !v.First.IsZero() {
		rows = append(rows, []string{"time range", stamp(v.First) + " .. " + stamp(v.Last)})
	}
	if !v.End.IsZero() {
		rows = append(rows, []string{"archive end", stamp(v.End)})
	}
	rows = append(rows, []string{"held (dedupe TTL)", strconv.Itoa(v.Held)}, []string{"repeated ids", strconv.Itoa(v.Repeats)}, []string{"unreadable", strconv.Itoa(v.Skipped)})
	rows = append(rows, refusedRows(v.Refused, v.RefusedBy)...)
	for _, w := range v.Warnings {
		rows = append(rows, []string{"warning", w})
	}
	return rows
}

// refusedRows are the count of records refused as never replayable and
// one row per reason.
func refusedRows(n int, by map[string]int) [][]string {
	rows := [][]string{{"refused (never replayed)", strconv.Itoa(n)}}
	reasons := make([]string, 0, len(by))
	for r := range by {
		reasons = append(reasons, r)
	}
	sort.Strings(reasons)
	for _, r := range reasons {
		rows = append(rows, []string{"  " + r, strconv.Itoa(by[r])})
	}
	return rows
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

// AuditView prints one replay's audit.
type AuditView wire.ReplayAudit

// TableHeader implements output.Tabular.
func (AuditView) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (v AuditView) TableRows() [][]string {
	f := v.Filter
	var filters []string
	for _, kv := range [][2]string{{"source", f.Source}, {"target", f.Target}, {"command", f.Command}, {"reason", f.Reason}, {"start", stamp(f.Start)}, {"end", stamp(f.End)}} {
		if kv[1] != "" {
			filters = append(filters, kv[0]+"="+kv[1])
		}
	}
	rate := "no limit"
	if v.Rate > 0 {
		rate = strconv.FormatFloat(v.Rate, 'g', 4, 64) + "/s"
	}
	rows := [][]string{
		{"id", v.ID}, {"status", string(v.Status)}, {"origin", v.Origin}, {"reason", v.Reason}, {"operator", v.Operator},
		{"filters", strings.Join(filters, " ")}, {"dedupe", string(v.Dedupe)}, {"rate", rate},
		{"planned", strconv.Itoa(v.Planned)}, {"sent", strconv.Itoa(v.SentCount)}, {"refused by the bus", strconv.Itoa(v.Failed)},
		{"held", strconv.Itoa(v.Held)}, {"unreadable", strconv.Itoa(v.Skipped)},
	}
	rows = append(rows, refusedRows(v.Refused, v.RefusedBy)...)
	rows = append(rows, [][]string{{"started", stamp(v.StartedAt)}, {"ended", stamp(v.EndedAt)}, {"resumes", strconv.Itoa(v.Resumes)}}...)
	if !v.HeldUntil.IsZero() {
		rows = append(rows, []string{"held until", stamp(v.HeldUntil)})
	}
	if v.Error != "" {
		rows = append(rows, []string{"error", v.Error})
	}
	if v.LastError != "" {
		rows = append(rows, []string{"last refusal", v.LastError})
	}
	return rows
}

// Audits prints the list of replays.
type Audits []wire.ReplayAudit

// TableHeader implements output.Tabular.
func (Audits) TableHeader() []string {
	return []string{"id", "status", "origin", "sent", "refused", "held", "operator", "started", "reason"}
}

// TableRows implements output.Tabular.
func (as Audits) TableRows() [][]string {
	rows := make([][]string, len(as))
	for i, a := range as {
		rows[i] = []string{a.ID, string(a.Status), a.Origin, fmt.Sprintf("%d/%d", a.SentCount, a.Planned), strconv.Itoa(a.Failed),
			strconv.Itoa(a.Held), a.Operator, stamp(a.StartedAt), a.Reason}
	}
	return rows
}

// ListOptions are the inputs of `snavio replay list`.
type ListOptions struct {
	Deps
	Status string
}

// NewCmdList builds `snavio replay list`.
func NewCmdList(d Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	o := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list",
		Aliases: []string{"ls"},
		Short:   "List the replays audited on the server, newest first",
		Long: `List every replay the server has audited, newest first: its status
(running, paused, interrupted, done, failed), origin, counts, operator,
start and reason. A replay whose server (or, on an aws profile, whose
CLI) stopped under it shows as interrupted; continue it with snavio
replay --resume ID. On an aws profile the control API keeps the audits
(in the env's DynamoDB flow table).`,
		Example: `  snavio replay list
  snavio replay list --status interrupted -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch wire.ReplayStatus(o.Status) {
			case "", wire.ReplayRunning, wire.ReplayPaused, wire.ReplayInterrupted, wire.ReplayDone, wire.ReplayFailed:
			default:
				return cmdutil.Usagef("invalid --status %.40q: use running, paused, interrupted, done or failed", o.Status)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runList(cmd.Context(), o)
		},
	}
	cmd.Flags().StringVar(&o.Status, "status", "", "only replays with this status: running, paused, interrupted, done or failed")
	return cmd
}

func runList(ctx context.Context, o *ListOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	replays, err := api.ListReplays(ctx)
	if err != nil {
		return mapErr(err, "")
	}
	out := Audits{}
	for _, a := range replays {
		if o.Status == "" || string(a.Status) == o.Status {
			out = append(out, a)
		}
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(out)
}

// ShowOptions are the inputs of `snavio replay show`.
type ShowOptions struct {
	Deps
	ID string
}

// NewCmdShow builds `snavio replay show ID`.
func NewCmdShow(d Deps, runF func(context.Context, *ShowOptions) error) *cobra.Command {
	o := &ShowOptions{Deps: d}
	return &cobra.Command{
		Use:   "show ID",
		Short: "Show one replay's audit: origin, reason, operator, filters, counts, start and end",
		Example: `  snavio replay show 2f1c0b7e-6a53-4b1e-9d0a-8f4e2c1b3a55
  snavio replay show 2f1c0b7e-6a53-4b1e-9d0a-8f4e2c1b3a55 -o yaml`,
		Args: cmdutil.ExactArgs(1, "a replay ID"),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.ID = args[0]
			if !envelope.ValidID(o.ID) {
				return cmdutil.Usagef("invalid replay ID %.60q: give the id `snavio replay list` shows (a UUID)", o.ID)
			}
			if runF != nil {
				return runF(cmd.Context(), o)
			}
			return runShow(cmd.Context(), o)
		},
	}
}

func runShow(ctx context.Context, o *ShowOptions) error {
	api, err := o.Platform()
	if err != nil {
		return err
	}
	a, err := api.GetReplay(ctx, o.ID)
	if err != nil {
		return mapErr(err, "")
	}
	p, err := o.Printer()
	if err != nil {
		return err
	}
	return p.Print(AuditView(a))
}
