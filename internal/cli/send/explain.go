package send

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/controlapi"
	"github.com/snavio/snavio/internal/platform"
)

// Trace is the dispatcher's decision trace as POST /v1/explain returns it
// (pkg/dispatch.Trace).
type Trace struct {
	CommandID     string    `json:"command_id,omitempty"`
	Source        string    `json:"source"`
	Target        string    `json:"target,omitempty"`
	Command       string    `json:"command_name,omitempty"`
	At            time.Time `json:"at"`
	Outcome       string    `json:"outcome"`
	Path          string    `json:"path,omitempty"`
	Reason        string    `json:"reason,omitempty"`
	Escalation    string    `json:"escalation,omitempty"`
	RetryAfterMS  int64     `json:"retry_after_ms,omitempty"`
	ThrottleUntil time.Time `json:"throttle_until,omitzero"`
	Steps         []Step    `json:"steps"`
}

// Step is one check of a Trace.
type Step struct {
	Stage  string `json:"stage"`
	Check  string `json:"check"`
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	Cache  string `json:"cache,omitempty"`
}

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
		detail = t.Path + " path"
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
	return append(rows, []string{"outcome", "", t.Outcome, detail, "-"})
}

// explainRequest is the body of POST /v1/explain.
type explainRequest struct {
	Source string `json:"source"`
	Detail string `json:"detail"`
}

// explain prints the dispatcher's trace for the signed command detail.
func explain(ctx context.Context, f *cmdutil.Factory, client platform.Client, source string, detail []byte) error {
	api, err := client.API()
	if err != nil {
		return fmt.Errorf("--explain asks a local `snavio dispatch serve` for its decision trace: %w", err)
	}
	var tr Trace
	if err := api.Do(ctx, "POST", "/v1/explain", nil, explainRequest{Source: source, Detail: string(detail)}, &tr); err != nil {
		return fmt.Errorf("--explain: %w", controlapi.MapError(err, "snavio route list"))
	}
	p, err := f.Printer()
	if err != nil {
		return err
	}
	return p.Print(tr)
}
