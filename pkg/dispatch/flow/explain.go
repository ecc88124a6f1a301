package flow

import (
	"fmt"
	"time"
)

// Step is one flow-control check as Explain reports it.
type Step struct {
	// Check names it: dispatch_mode, global_ban, dedupe, fairness,
	// rate_limit.
	Check string
	// Result: pass, escalate, drop, reject, or slow (decided by the slow
	// stage against the store, which Explain does not touch).
	Result string
	Detail string
	// Throttle is the retry hint of a reject.
	Throttle Throttle
}

// Step results.
const (
	StepPass     = "pass"
	StepEscalate = "escalate"
	StepDrop     = "drop"
	StepReject   = "reject"
	StepSlow     = "slow"
)

// Preview is what the fast stage's flow control would decide now.
type Preview struct {
	Action     Action
	Escalation Escalation
	Throttle   Throttle
	Steps      []Step
}

// Explain previews Fast for c on r at the flow clock, read-only: it takes
// no token, starts no prefetch, creates no ban, counts no usage, emits no
// telemetry and no metric. What only the store knows (a strict id's
// claim, the window's authoritative counter) is reported as decided by
// the slow stage.
func (f *Flow) Explain(c *Command, r *Route) Preview {
	now := f.cfg.Clock.Now()
	var p Preview
	add := func(s Step) { p.Steps = append(p.Steps, s) }
	escalate := func(check string, why Escalation, detail string) Preview {
		add(Step{Check: check, Result: StepEscalate, Detail: detail})
		p.Action, p.Escalation = Escalate, why
		return p
	}
	if f.cfg.Mode == ModeColdOnly {
		return escalate("dispatch_mode", EscalateColdOnlyMode, "dispatch mode is cold-only: every command takes the slow stage")
	}
	add(Step{Check: "dispatch_mode", Result: StepPass, Detail: string(ModeAdaptive)})
	if b, ok := f.bans.lookup(c.Source, now); ok {
		why := EscalateGlobalBan
		if b.Reason == BanReasonColdOnly {
			why = EscalateColdOnlySource
		}
		return escalate("global_ban", why, fmt.Sprintf("%s until %s (%s)", c.Source, b.Until.UTC().Format(time.RFC3339), b.Reason))
	}
	add(Step{Check: "global_ban", Result: StepPass, Detail: "not banned (ban list as cached)"})
	if r.Strict {
		if c.ID != "" && !f.cfg.DisableSeenSet {
			if h, ok := f.seen.delivered(c.tenant(), c.ID, now); ok && h != "" && h == c.hash() {
				add(Step{Check: "dedupe", Result: StepDrop, Detail: "strict: id " + c.ID + " is known delivered for tenant " + c.tenant() + " with this payload on this instance"})
				p.Action = Drop
				return p
			}
		}
		p.Steps = append(p.Steps, Step{Check: "dedupe", Result: StepEscalate,
			Detail: "strict: the slow stage claims the id (a live claim makes it a duplicate); Explain takes no claim"})
		p.Action, p.Escalation = Escalate, EscalateDedupeRequired
		return p
	}
	add(Step{Check: "dedupe", Result: StepPass, Detail: "dedupe none"})
	if !r.RateLimit.Limited() {
		add(Step{Check: "rate_limit", Result: StepPass, Detail: "the route has no rate limit"})
		p.Action = Proceed
		return p
	}
	k := c.key()
	fp := f.fairness(r)
	if fp.Disabled {
		add(Step{Check: "fairness", Result: StepPass, Detail: "fairness disabled for the route"})
	} else if u := f.usage.peek(k); u != nil {
		banned, until, detail := u.explain(c.Source, fp, now)
		if banned {
			add(Step{Check: "fairness", Result: StepEscalate, Detail: detail})
			p.Action, p.Escalation, p.Throttle = Escalate, EscalateWarmPathBanned, Throttle{RetryAfter: until.Sub(now), Until: until}
			return p
		}
		add(Step{Check: "fairness", Result: StepPass, Detail: detail})
	} else {
		add(Step{Check: "fairness", Result: StepPass, Detail: "no warm dispatches on this route yet"})
	}
	limit := fmt.Sprintf("%d per %s", r.RateLimit.Max, r.RateLimit.Interval)
	b := f.limiter.buckets.peek(k)
	ns := now.UnixNano()
	switch {
	case b != nil && ns < b.denyUntil.Load():
		until := time.Unix(0, b.denyUntil.Load()).UTC()
		t := Throttle{RetryAfter: until.Sub(now), Until: until}
		if f.cfg.Shadow {
			return escalate("rate_limit", EscalateTokenRequired, "window exhausted ("+limit+"); shadow mode would refuse and escalates instead")
		}
		add(Step{Check: "rate_limit", Result: StepReject, Detail: "the window's budget is exhausted (" + limit + ") until " + until.Format(time.RFC3339Nano), Throttle: t})
		p.Action, p.Throttle = Reject, t
	case b != nil && ns < b.expiry.Load() && b.tokens.Load() > 0:
		add(Step{Check: "rate_limit", Result: StepPass, Detail: fmt.Sprintf("%d prefetched tokens in hand (%s)", b.tokens.Load(), limit)})
		p.Action = Proceed
	default:
		return escalate("rate_limit", EscalateTokenRequired, "no prefetched token in hand ("+limit+"): the slow stage takes one unit of the window's budget")
	}
	return p
}

// peek returns the route's usage without creating it.
func (us *usages) peek(k RouteKey) *usage {
	if m := us.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// peek returns the route's bucket without creating it.
func (bs *buckets) peek(k RouteKey) *bucket {
	if m := bs.m.Load(); m != nil {
		return (*m)[k]
	}
	return nil
}

// explain reports source's fairness state read-only: a live ban, or its
// share of the window and whether the next warm dispatch would ban it
// (the condition of check, without rolling the window or recording).
func (u *usage) explain(source string, p FairnessParams, now time.Time) (banned bool, until time.Time, detail string) {
	ns := now.UnixNano()
	u.mu.Lock()
	defer u.mu.Unlock()
	if end, ok := u.banned[source]; ok && ns < end {
		until = time.Unix(0, end).UTC()
		return true, until, "warm-path ban of " + source + " until " + until.Format(time.RFC3339Nano)
	}
	if ns-u.windowStart >= int64(p.Window) || u.bySource == nil {
		return false, time.Time{}, "the fairness window is empty"
	}
	mine := u.bySource[source]
	detail = fmt.Sprintf("%d of %d warm dispatches in the window (dominant share %.2f, min volume %d)", mine, u.total, p.DominantShare, p.MinVolume)
	if u.total < p.MinVolume || float64(mine)/float64(u.total) <= p.DominantShare+eps {
		return false, time.Time{}, detail
	}
	others := u.total - mine
	competitors := len(u.bySource)
	if mine > 0 {
		competitors--
	}
	if float64(others)/float64(u.total)+eps < p.CompetingShare && competitors < p.CompetingSources {
		return false, time.Time{}, detail + "; dominant, but without competition"
	}
	until = now.Add(p.BanDuration).UTC()
	return true, until, detail + "; the next warm dispatch would ban it from the warm path"
}
