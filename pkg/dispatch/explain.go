package dispatch

import (
	"context"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/routing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
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
	// Reason is the invalid or failed reason, or why the fast stage
	// escalates when the slow stage decides.
	Reason string `json:"reason,omitempty"`
	// Escalation is the fast stage's reason to hand the command to the
	// slow stage, if it would.
	Escalation string `json:"escalation,omitempty"`
	// RetryAfterMS and ThrottleUntil are the retry hints of a rate-limit
	// or fairness refusal.
	RetryAfterMS  int64     `json:"retry_after_ms,omitzero"`
	ThrottleUntil time.Time `json:"throttle_until,omitzero"`
	Steps         []Step    `json:"steps"`
}

// Undecided is a Trace outcome: a collaborator (the registry) failed, so
// no decision could be made now.
const Undecided Outcome = "undecided"

// Step is one check of a Trace.
type Step struct {
	// Stage is shield, fast or slow.
	Stage string `json:"stage"`
	Check string `json:"check"`
	// Result is pass, fail, skip (not reached), escalate, drop, reject,
	// or deferred (decided only by the store at delivery: a strict claim,
	// the window's budget).
	Result string `json:"result"`
	Detail string `json:"detail,omitempty"`
	// Cache is the state (fresh, stale, expired) of the cache the check
	// read, when it read one.
	Cache string `json:"cache,omitempty"`
}

// Step results.
const (
	StepPass     = "pass"
	StepFail     = "fail"
	StepSkip     = "skip"
	StepEscalate = "escalate"
	StepDrop     = "drop"
	StepReject   = "reject"
	StepDeferred = "deferred"
)

// routeExplainer is a Router that reports the cache states behind its
// fast decision (the cache-backed router does).
type routeExplainer interface {
	explainFast(source, target, command string) (Route, string, bool, cache.State, cache.State, bool)
}

func (a routingRouter) explainFast(source, target, command string) (Route, string, bool, cache.State, cache.State, bool) {
	d := a.r.Fast(source, target, command)
	aclRead := d.Escalate != routing.CacheCold && d.Escalate != routing.RoutingStale && d.Escalate != routing.CacheMiss
	if !d.Deliver {
		return Route{}, string(d.Escalate), false, d.RouteState, d.ACLState, aclRead
	}
	return Route{QueueARN: d.QueueARN(), Flow: d.Flow}, "", true, d.RouteState, d.ACLState, true
}

// Explain runs the checks of the shield, the fast stage and the slow
// stage's routing on a command as if it arrived now from busSource, and
// returns the trace, without delivering it and without side effects on
// the command's fate: no telemetry event, no rate-limit token or budget
// taken, no dedupe claim, no usage counted, no send. Caches are read
// through their normal lookups (a stale one starts its background refresh,
// as any command would), and the slow stage's routing may read the
// registry. Checks decided only by the store at delivery time (a strict
// id's claim, the window's budget) are reported as deferred.
func (x *Dispatcher) Explain(ctx context.Context, busSource string, detail []byte) Trace {
	tr := Trace{Source: busSource, At: x.d.Clock.Now().UTC()}
	acc, steps, err := x.d.Shield.Explain(busSource, detail)
	for _, s := range steps {
		st := Step{Stage: "shield", Check: s.Check, Detail: s.Detail}
		switch {
		case s.Skipped:
			st.Result = StepSkip
		case s.Pass:
			st.Result = StepPass
		default:
			st.Result = StepFail
		}
		tr.Steps = append(tr.Steps, st)
	}
	if err != nil {
		if r := reasonOf(err); r != "" {
			tr.Outcome, tr.Reason = Invalid, r
		} else {
			tr.Outcome, tr.Reason = Undecided, err.Error()
		}
		return tr
	}
	env := &acc.Envelope
	tr.CommandID, tr.Target, tr.Command = env.Metadata.ID, env.Command.Target, env.Command.Name
	if acc.ColdOnly {
		tr.Steps = append(tr.Steps, Step{Stage: "fast", Check: "warm_path", Result: StepEscalate, Detail: "the source is cold-only"})
		x.explainSlow(ctx, &tr, env.Command.Source, string(flow.EscalateColdOnlySource))
		return tr
	}
	var (
		route    Route
		why      string
		ok       bool
		rst, ast cache.State
		aclRead  bool
		known    bool
	)
	if re, isRE := x.d.Router.(routeExplainer); isRE {
		route, why, ok, rst, ast, aclRead = re.explainFast(busSource, env.Command.Target, env.Command.Name)
		known = true
	} else {
		route, why, ok = x.d.Router.Fast(busSource, env.Command.Target, env.Command.Name)
	}
	routeStep := Step{Stage: "fast", Check: "route", Result: StepPass, Detail: route.QueueARN}
	aclStep := Step{Stage: "fast", Check: "acl", Result: StepPass, Detail: "granted"}
	if known {
		routeStep.Cache = rst.String()
		if aclRead {
			aclStep.Cache = ast.String()
		}
	}
	if !ok {
		switch {
		case !known || !aclRead:
			routeStep.Result, routeStep.Detail = StepEscalate, why
			aclStep.Result, aclStep.Detail = StepSkip, ""
		default:
			routeStep.Detail = "found in the routing cache"
			aclStep.Result, aclStep.Detail = StepEscalate, why
		}
		tr.Steps = append(tr.Steps, routeStep, aclStep)
		x.explainSlow(ctx, &tr, busSource, why)
		return tr
	}
	tr.Steps = append(tr.Steps, routeStep, aclStep)
	c := flowCommand(env, false)
	pv := x.d.Flow.Explain(&c, &route.Flow)
	for _, s := range pv.Steps {
		st := Step{Stage: "fast", Check: s.Check, Detail: s.Detail}
		switch s.Result {
		case flow.StepPass:
			st.Result = StepPass
		case flow.StepEscalate:
			st.Result = StepEscalate
		case flow.StepDrop:
			st.Result = StepDrop
		case flow.StepReject:
			st.Result = StepReject
		default:
			st.Result = StepDeferred
		}
		tr.Steps = append(tr.Steps, st)
	}
	switch pv.Action {
	case flow.Proceed:
		tr.Outcome, tr.Path = Delivered, telemetry.PathFast
	case flow.Drop:
		tr.Outcome = Duplicate
	case flow.Reject:
		tr.Outcome, tr.Reason = Failed, string(telemetry.FailRateLimitExceeded)
		tr.RetryAfterMS, tr.ThrottleUntil = max(0, pv.Throttle.RetryAfter.Milliseconds()), pv.Throttle.Until
	case flow.Escalate:
		x.explainSlow(ctx, &tr, busSource, string(pv.Escalation))
	}
	return tr
}

// explainSlow adds the slow stage's routing decision for a command the
// fast stage escalates for why.
func (x *Dispatcher) explainSlow(ctx context.Context, tr *Trace, source, why string) {
	tr.Escalation = why
	route, fail, err := x.d.Router.Slow(ctx, source, tr.Target, tr.Command)
	switch {
	case err != nil:
		tr.Steps = append(tr.Steps, Step{Stage: "slow", Check: "route_acl", Result: StepFail, Detail: "no decision now: " + err.Error()})
		tr.Outcome, tr.Reason = Undecided, err.Error()
		return
	case fail != "":
		tr.Steps = append(tr.Steps, Step{Stage: "slow", Check: "route_acl", Result: StepFail, Detail: string(fail) + " (confirmed against the registry)"})
		tr.Outcome, tr.Reason = Failed, string(fail)
		return
	}
	tr.Steps = append(tr.Steps, Step{Stage: "slow", Check: "route_acl", Result: StepPass, Detail: route.QueueARN})
	if route.Flow.Strict {
		tr.Steps = append(tr.Steps, Step{Stage: "slow", Check: "dedupe", Result: StepDeferred, Detail: "strict: the id is claimed at delivery; a live claim or delivered record makes it a duplicate"})
	}
	if route.Flow.RateLimit.Limited() {
		tr.Steps = append(tr.Steps, Step{Stage: "slow", Check: "rate_limit", Result: StepDeferred, Detail: "one unit of the window's budget is taken at delivery"})
	}
	tr.Outcome, tr.Path = Delivered, telemetry.PathSlow
}
