package send

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch"
)

// Trace is the dispatcher's decision trace as the platform returns it,
// printed one row per check.
type Trace dispatch.Trace

// TableHeader implements output.Tabular.
func (Trace) TableHeader() []string {
	return []string{"stage", "check", "result", "detail", "cache state"}
}

// TableRows implements output.Tabular: one row per check, then the
// outcome.
func (t Trace) TableRows() [][]string {
	rows := make([][]string, 0, len(t.Steps)+1)
	for _, s := range t.Steps {
		cache := s.Cache
		if cache == "" {
			cache = "-"
		}
		rows = append(rows, []string{s.Stage, s.Check, s.Result, s.Detail, cache})
	}
	detail := t.Reason
	if t.Path != "" {
		detail = string(t.Path) + " path"
	}
	if t.Escalation != "" {
		detail += " (escalated: " + t.Escalation + ")"
	}
	if t.RetryAfterMS > 0 {
		detail += "; retry_after_ms " + strconv.FormatInt(t.RetryAfterMS, 10)
	}
	if !t.ThrottleUntil.IsZero() {
		detail += "; throttle_until " + t.ThrottleUntil.UTC().Format(time.RFC3339Nano)
	}
	return append(rows, []string{"outcome", "", string(t.Outcome), detail, "-"})
}

// explain prints the dispatcher's trace for the signed command detail.
func explain(ctx context.Context, f *cmdutil.Factory, client platform.Platform, source string, detail []byte) error {
	tr, err := client.Explain(ctx, wire.ExplainRequest{Source: source, Detail: string(detail)})
	if err != nil {
		return fmt.Errorf("--explain: %w", cmdutil.MapAPIError(err, "snavio route list"))
	}
	p, err := f.Printer()
	if err != nil {
		return err
	}
	return p.Print(Trace(tr))
}
