package dispatch

import (
	"context"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// Trace is the dispatcher's decision trace for one command: each check in
// the order the stages run them, its result and the cache state it used,
// and the outcome the command would have if it were sent now.
type Trace struct {
	CommandID string `json:"command_id,omitempty"`
	Source    string `json:"source"`
	Target    string `json:"target,omitempty"`
	Command   string `json:"command_name,omitempty"`
	// At is the dispatcher's clock when the trace was taken.
	At time.Time `json:"at"`
	// Outcome is what would happen: delivered, invalid, failed,
	// duplicate, or undecided (a collaborator failed; retry).
	Outcome Outcome `json:"outcome"`
	// Path is the stage that would deliver (fast or slow).
	Path telemetry.Path `json:"path,omitempty"`
	// Reason is the invalid or failed reason, or what failed when
	// undecided.
	Reason string `json:"reason,omitempty"`
	// Escalation is the fast stage's reason to hand the command to the
	// slow stage, if it would.
	Escalation string `json:"escalation,omitempty"`
	// RetryAfterMS and ThrottleUntil are the retry hints of a rate-limit
	// refusal.
	RetryAfterMS  int64        `json:"retry_after_ms,omitzero"`
	ThrottleUntil time.Time    `json:"throttle_until,omitzero"`
	Steps         []trace.Step `json:"steps"`
}

// Undecided is a Trace outcome: a collaborator (the registry) failed, so
// no decision could be made now.
const Undecided Outcome = "undecided"

// Explain runs the real decision path (the shield, the fast stage, and
// the slow stage if the fast one escalates) on a command as if it arrived
// now from busSource, as a dry run recording each decision (package
// trace): nothing changes the command's fate or anyone's budget. No
// telemetry event, no rate-limit token or budget taken, no usage counted,
// no dedupe claim, no send. Caches are read through their normal lookups
// (a stale one starts its background refresh, as any command would), and
// the slow stage's routing may read the registry. Checks decided only by
// the store at delivery (a strict id's claim, the window's budget) are
// reported as deferred.
func (x *Dispatcher) Explain(ctx context.Context, busSource string, detail []byte) Trace {
	tr := &trace.Trace{DryRun: true}
	out := Trace{Source: busSource, At: x.d.Clock.Now().UTC()}
	res, esc := x.fast(ctx, busSource, detail, tr)
	if esc != nil {
		out.Escalation = esc.Reason
		var err error
		if res, err = x.slow(ctx, esc, tr); err != nil {
			res = Result{Outcome: Undecided, Reason: err.Error()}
		}
	}
	if res.Outcome == Invalid && res.Reason == "" && tr.Err != nil {
		res = Result{Outcome: Undecided, Reason: tr.Err.Error()}
	}
	out.CommandID, out.Target, out.Command = tr.CommandID, tr.Target, tr.Command
	out.Outcome, out.Reason, out.Steps = res.Outcome, res.Reason, tr.Steps
	if res.Outcome == Delivered {
		out.Path = res.Path
	}
	if res.Outcome == Failed && tr.RetryAfter > 0 {
		out.RetryAfterMS, out.ThrottleUntil = tr.RetryAfter.Milliseconds(), tr.Until
	}
	return out
}
