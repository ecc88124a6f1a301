package route

import (
	"context"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Routes is a list of routes as printed.
type Routes []registry.Route

// TableHeader implements output.Tabular.
func (Routes) TableHeader() []string {
	return []string{"target", "command", "queue", "dlq", "dedupe", "sensitivity", "rate", "version", "expires"}
}

// TableRows implements output.Tabular.
func (rs Routes) TableRows() [][]string {
	rows := make([][]string, 0, len(rs))
	for _, r := range rs {
		rows = append(rows, []string{r.Target, r.Command, r.QueueARN, r.DLQARN, dedupe(r.DedupeMode), string(r.Profile.OrDefault()),
			Rate(r.RateLimit), strconv.FormatInt(r.Version, 10), Expires(r.ExpiresAt)})
	}
	return rows
}

func dedupe(m registry.DedupeMode) string {
	if m == "" {
		return string(registry.DedupeNone)
	}
	return string(m)
}

// Rate formats a rate limit as the flags write it ("-" for none).
func Rate(l registry.RateLimit) string {
	if l.Max == 0 {
		return "-"
	}
	s := strconv.FormatInt(l.Max, 10) + "/"
	switch l.IntervalSeconds {
	case 1:
		s += "s"
	case 60:
		s += "m"
	case 3600:
		s += "h"
	default:
		s += (time.Duration(l.IntervalSeconds) * time.Second).String()
	}
	return s
}

// Expires formats an expiry ("-" for none).
func Expires(epoch int64) string {
	if epoch == 0 {
		return "-"
	}
	return time.Unix(epoch, 0).UTC().Format(time.RFC3339)
}

// ListOptions are the inputs of `snavio route list`.
type ListOptions struct {
	Deps
	Target, Command string
}

// NewCmdList builds `snavio route list`. runF replaces the run function in
// tests.
func NewCmdList(d Deps, runF func(context.Context, *ListOptions) error) *cobra.Command {
	opts := &ListOptions{Deps: d}
	cmd := &cobra.Command{
		Use:     "list [--target T] [--command C]",
		Aliases: []string{"ls"},
		Short:   "List the registered routes",
		Example: `  snavio route list
  snavio route list --target mailer -o json`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunList(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Target, "target", "", "only the routes of this target")
	cmd.Flags().StringVar(&opts.Command, "command", "", "only the routes of this command")
	return cmd
}

// ListItems lists the registry records of kind matching f (empty fields
// match all).
func ListItems(ctx context.Context, pf func() (platform.Platform, error), kind registry.Kind, f platform.RegistryFilter, list string) ([]registry.Item, error) {
	a, err := pf()
	if err != nil {
		return nil, err
	}
	items, err := a.ListRegistry(ctx, kind, f)
	if err != nil {
		return nil, cmdutil.MapAPIError(err, list)
	}
	return items, nil
}

// RunList lists routes.
func RunList(ctx context.Context, opts *ListOptions) error {
	its, err := ListItems(ctx, opts.Platform, registry.KindRoute, platform.RegistryFilter{Target: opts.Target, Command: opts.Command}, "snavio route list")
	if err != nil {
		return err
	}
	out := Routes{}
	for _, it := range its {
		if it.Route != nil {
			out = append(out, *it.Route)
		}
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(out)
}

// GetOptions are the inputs of `snavio route get`.
type GetOptions struct {
	Deps
	Target, Command string
}

// NewCmdGet builds `snavio route get`. runF replaces the run function in
// tests.
func NewCmdGet(d Deps, runF func(context.Context, *GetOptions) error) *cobra.Command {
	opts := &GetOptions{Deps: d}
	cmd := &cobra.Command{
		Use:   "get --target T --command C",
		Short: "Show one route",
		Example: `  snavio route get --target mailer --command send-receipt
  snavio route get --target mailer --command send-receipt -o yaml`,
		Args: cmdutil.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return RunGet(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Target, "target", "", "target service (required)")
	cmd.Flags().StringVar(&opts.Command, "command", "", "command name (required)")
	_ = cmd.MarkFlagRequired("target")
	_ = cmd.MarkFlagRequired("command")
	return cmd
}

// GetItem reads one record.
func GetItem(ctx context.Context, pf func() (platform.Platform, error), id registry.ID, list string) (registry.Item, error) {
	a, err := pf()
	if err != nil {
		return registry.Item{}, err
	}
	it, err := a.GetRegistryItem(ctx, id)
	if err != nil {
		return registry.Item{}, cmdutil.MapAPIError(err, list)
	}
	return it, nil
}

// RouteView prints one route as FIELD VALUE rows.
type RouteView struct{ registry.Route }

// TableHeader implements output.Tabular.
func (RouteView) TableHeader() []string { return []string{"field", "value"} }

// TableRows implements output.Tabular.
func (v RouteView) TableRows() [][]string {
	r := v.Route
	rows := [][]string{
		{"target", r.Target}, {"command", r.Command}, {"queue", r.QueueARN}, {"dlq", r.DLQARN},
		{"dedupe", dedupe(r.DedupeMode)}, {"expected_drain", (time.Duration(r.DrainSeconds()) * time.Second).String()},
		{"sensitivity", string(r.Profile.OrDefault())}, {"rate", Rate(r.RateLimit)},
	}
	if r.RateLimit.Max > 0 {
		rows = append(rows, []string{"burst", strconv.FormatInt(r.RateLimit.Burst, 10)},
			[]string{"cooldown", (time.Duration(r.RateLimit.CooldownSeconds) * time.Second).String()})
	}
	f := r.Fairness
	switch {
	case f.Disabled:
		rows = append(rows, []string{"fairness", "disabled"})
	case f != registry.Fairness{}:
		rows = append(rows, []string{"fairness", "dominant_share=" + strconv.FormatFloat(f.DominantShare, 'g', -1, 64) +
			" competing_share=" + strconv.FormatFloat(f.CompetingShare, 'g', -1, 64) + " competing_sources=" + strconv.Itoa(f.CompetingSources) +
			" window=" + strconv.FormatInt(f.WindowSeconds, 10) + "s ban=" + strconv.FormatInt(f.BanSeconds, 10) + "s"})
	default:
		rows = append(rows, []string{"fairness", "defaults"})
	}
	if r.PrefetchLeases > 0 {
		rows = append(rows, []string{"prefetch_leases", strconv.Itoa(r.PrefetchLeases)})
	}
	for _, k := range sortedKeys(r.Metadata) {
		rows = append(rows, []string{"metadata." + k, r.Metadata[k]})
	}
	return append(rows, []string{"expires", Expires(r.ExpiresAt)}, []string{"version", strconv.FormatInt(r.Version, 10)})
}

// MarshalJSON prints the route itself.
func (v RouteView) MarshalJSON() ([]byte, error) { return marshal(v.Route) }

// RunGet shows one route.
func RunGet(ctx context.Context, opts *GetOptions) error {
	it, err := GetItem(ctx, opts.Platform, registry.RouteID(opts.Target, opts.Command), "snavio route list")
	if err != nil {
		return err
	}
	if it.Route == nil {
		return cmdutil.Usagef("%s is not a route", registry.RouteID(opts.Target, opts.Command))
	}
	p, err := opts.Printer()
	if err != nil {
		return err
	}
	return p.Print(RouteView{*it.Route})
}
