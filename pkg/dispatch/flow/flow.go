// Package flow is the dispatcher's flow control: per-route rate limits with
// prefetched warm-path tokens and an authoritative cold-path counter,
// warm-path fairness with durable escalation to global bans, per-source
// quotas, a fairness auditor over rollups, and write-once dedupe for strict
// routes. The design, and how it reconciles the spec's pre-dispatch
// guarantee with its post-dispatch denylist, is in docs/flow/design.md.
//
// A Flow belongs to one dispatcher instance. The fast stage calls Fast
// (memory only, never blocks on I/O); the slow stage calls Slow before it
// delivers and Finish after. Flow emits the telemetry of its own decisions
// (duplicate, failed with retry hints, warm-path ban, escalations).
package flow

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// Escalation is the reason code with which the fast stage forwards a
// command to the slow stage.
type Escalation string

// Escalation reasons of flow control (routing adds its own, such as
// cache_miss and acl_expired).
const (
	EscalateColdOnlyMode   Escalation = "cold_only"        // dispatch mode is cold-only
	EscalateColdOnlySource Escalation = "cold_only_source" // the source is on the cold-only denylist
	EscalateGlobalBan      Escalation = "global_ban"       // the source has a global warm-path ban
	EscalateDedupeRequired Escalation = "dedupe_required"  // strict route, id not known delivered here
	EscalateWarmPathBanned Escalation = "warm_path_banned" // the source dominates the route's warm path
	EscalateTokenRequired  Escalation = "token_required"   // no valid prefetched token in memory
)

// Escalated is the telemetry of an escalation: the spec asks for
// structured telemetry with a reason code for every one. It goes to the
// platform's stream, not to tenants.
type Escalated struct {
	CommandID   string     `json:"command_id,omitempty"`
	Source      string     `json:"source"`
	Target      string     `json:"target"`
	CommandName string     `json:"command_name"`
	Reason      Escalation `json:"reason"`
}

// EventNameEscalated is Escalated's event name.
const EventNameEscalated = "snavio.dispatch.escalated"

// EventName implements telemetry.Event.
func (Escalated) EventName() string { return EventNameEscalated }

// Alert implements telemetry.Event.
func (Escalated) Alert() bool { return false }

// Command is what flow control needs of a validated command.
type Command struct {
	ID, Source, Target, Name string
	// Timestamp is the producer's metadata.timestamp, as sent.
	Timestamp string
	// PayloadHash is the hex SHA-256 of the canonical payload
	// (PayloadHash(payload)); required by the slow stage on strict routes
	// (dedupe records keep the hash, never the payload).
	PayloadHash string
	// Payload is the canonical payload, used by the fast stage only when
	// PayloadHash is empty: a strict command whose id is known delivered is
	// dropped as a duplicate only if its payload hashes the same, so the
	// hash is computed for those copies alone. Never stored.
	Payload []byte
	Replay  telemetry.Replay
}

func (c *Command) key() RouteKey { return RouteKey{Target: c.Target, Command: c.Name} }

// tenant is the tenant of the command's source: the scope of its dedupe.
func (c *Command) tenant() string {
	t, _, _ := strings.Cut(c.Source, "/")
	return t
}

// hash returns the command's payload hash, computing it from Payload if
// PayloadHash is empty; "" if neither is known.
func (c *Command) hash() string {
	if c.PayloadHash != "" || c.Payload == nil {
		return c.PayloadHash
	}
	return PayloadHash(c.Payload)
}

// PayloadHash returns the hex SHA-256 of a canonical payload: the hash
// dedupe records keep.
func PayloadHash(canonical []byte) string {
	sum := sha256.Sum256(canonical)
	return hex.EncodeToString(sum[:])
}

// Route is the flow-control view of a registered route.
type Route struct {
	Strict    bool
	RateLimit RateLimit
	// Fairness overrides the dispatcher's defaults field by field.
	Fairness FairnessParams
}

// Quotas looks up per-source quotas of (source, target, command).
type Quotas interface {
	SourceQuota(source, target, command string) (RateLimit, bool)
}

// Action is what the stage does with a command.
type Action uint8

// Actions.
const (
	// Proceed: deliver it (fast: a token was taken; slow: every check
	// passed and, on a strict route, the id is claimed).
	Proceed Action = iota
	// Escalate: forward to the slow stage (fast only).
	Escalate
	// Drop: a duplicate; telemetry was emitted.
	Drop
	// Reject: refused; telemetry (failed or invalid) was emitted.
	Reject
)

func (a Action) String() string {
	switch a {
	case Proceed:
		return "proceed"
	case Escalate:
		return "escalate"
	case Drop:
		return "drop"
	case Reject:
		return "reject"
	}
	return "action(" + strconv.Itoa(int(a)) + ")"
}

// Decision is a stage's verdict on one command.
type Decision struct {
	Action     Action
	Escalation Escalation
	// Throttle is set on rate-limit and fairness rejections.
	Throttle Throttle
	// ShadowRefusal names what shadow mode would have refused ("" if
	// nothing).
	ShadowRefusal string
	// claim is the slow path's dedupe claim, finished by Finish, and
	// claimKey its store key (claim.Key(), built once).
	claim    *DedupeRecord
	claimKey string
	// completedUntil is set when the sender completed the claim itself,
	// atomically with the delivery (see Completion).
	completedUntil time.Time
	warm           bool
	start          time.Time
	strict         bool
}

// Flow is flow control for one dispatcher instance. Build it with New; it
// is safe for concurrent use.
type Flow struct {
	cfg     Config
	store   Store
	sink    telemetry.Sink
	quotas  Quotas
	limiter limiter
	usage   usages
	flushed rollupFlushes
	bans    banView
	seen    *seenSet
	attempt atomic.Uint64
}

// New returns flow control over store, emitting telemetry to sink and
// reading per-source quotas from quotas (nil: none).
func New(cfg Config, store Store, sink telemetry.Sink, quotas Quotas) (*Flow, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	f := &Flow{cfg: cfg, store: store, sink: sink, quotas: quotas, seen: newSeenSet(cfg.SeenSetSize)}
	f.limiter = limiter{cfg: &f.cfg, store: store}
	return f, nil
}

func (f *Flow) escalate(c *Command, why Escalation, tr *trace.Trace) Decision {
	if !tr.Dry() {
		f.cfg.Metrics.Count(MetricEscalations, 1)
		f.sink.Emit(Escalated{CommandID: c.ID, Source: c.Source, Target: c.Target, CommandName: c.Name, Reason: why})
	}
	return Decision{Action: Escalate, Escalation: why}
}

// Fast is the fast stage's flow check: memory only. It returns Proceed
// with a token taken, Escalate with a reason, Drop for a duplicate known
// delivered, or Reject when the route's window is known exhausted.
func (f *Flow) Fast(c *Command, r *Route) Decision {
	return f.FastAt(c, r, f.cfg.Clock.Now())
}

// FastAt is Fast at a given time: the dispatcher passes the time the
// shield received the command, so the fast path reads the clock once.
func (f *Flow) FastAt(c *Command, r *Route, now time.Time) Decision {
	return f.FastTrace(c, r, now, nil)
}

// FastTrace is FastAt recording each check into tr (nil: none). A dry run
// (tr.DryRun) decides the same from the same memory and changes nothing:
// no token taken, no prefetch started, no usage counted, no ban made, no
// telemetry and no metric.
func (f *Flow) FastTrace(c *Command, r *Route, now time.Time, tr *trace.Trace) Decision {
	dry := tr.Dry()
	if f.cfg.Mode == ModeColdOnly {
		tr.Add(trace.Fast, CheckDispatchMode, trace.Escalate, "dispatch mode is cold-only: every command takes the slow stage")
		return f.escalate(c, EscalateColdOnlyMode, tr)
	}
	tr.Add(trace.Fast, CheckDispatchMode, trace.Pass, string(ModeAdaptive))
	f.maybeRefreshBans(now)
	if b, ok := f.bans.lookup(c.Source, now); ok {
		why := EscalateGlobalBan
		if b.Reason == BanReasonColdOnly {
			why = EscalateColdOnlySource
		}
		if tr != nil {
			tr.Add(trace.Fast, CheckGlobalBan, trace.Escalate, fmt.Sprintf("%s until %s (%s)", c.Source, b.Until.UTC().Format(time.RFC3339), b.Reason))
		}
		return f.escalate(c, why, tr)
	}
	tr.Add(trace.Fast, CheckGlobalBan, trace.Pass, "not banned (ban list as cached)")
	if r.Strict {
		if !dry {
			f.cfg.Metrics.Count(telemetry.MetricDedupStrictModeUsage, 1)
		}
		if c.ID != "" && !f.cfg.DisableSeenSet {
			// A reused id with another payload is not a duplicate: the
			// slow stage refuses it as a conflict.
			if h, ok := f.seen.delivered(c.tenant(), c.ID, now); ok && h != "" && h == c.hash() {
				if tr != nil {
					tr.Add(trace.Fast, CheckDedupe, trace.Drop, "strict: id "+c.ID+" is known delivered for tenant "+c.tenant()+" with this payload on this instance")
				}
				if !dry {
					f.cfg.Metrics.Count(telemetry.MetricDedupDuplicatesPrevented, 1)
					f.emitDuplicate(c)
				}
				return Decision{Action: Drop}
			}
		}
		tr.Add(trace.Fast, CheckDedupe, trace.Escalate, "strict: the slow stage claims the id (a live claim makes it a duplicate)")
		if !dry {
			f.cfg.Metrics.Count(telemetry.MetricDedupEscalations, 1)
		}
		return f.escalate(c, EscalateDedupeRequired, tr)
	}
	tr.Add(trace.Fast, CheckDedupe, trace.Pass, "dedupe none")
	k := c.key()
	if !r.RateLimit.Limited() {
		tr.Add(trace.Fast, CheckRateLimit, trace.Pass, "the route has no rate limit")
		if !dry {
			f.usage.get(k).record(c.Source, true, f.fairness(r), now)
		}
		return Decision{Action: Proceed, warm: true}
	}
	var u *usage
	if dry {
		u = f.usage.peek(k)
	} else {
		u = f.usage.get(k)
	}
	p := f.fairness(r)
	switch {
	case p.Disabled:
		tr.Add(trace.Fast, CheckFairness, trace.Pass, "fairness disabled for the route")
	case u == nil:
		tr.Add(trace.Fast, CheckFairness, trace.Pass, "no warm dispatches on this route yet")
	default:
		fc := u.check(c.Source, p, now, dry)
		if fc.newBan && !dry {
			f.cfg.Metrics.Count(MetricWarmPathBans, 1)
			f.sink.Emit(warmPathBanEvent(c.Source, k, fc, now))
			f.escalateBan(BanKey{Source: c.Source, Target: k.Target, Command: k.Command}, now)
		}
		if tr != nil {
			result := trace.Pass
			if fc.banned {
				result = trace.Escalate
			}
			tr.Add(trace.Fast, CheckFairness, result, fc.describe(c.Source, p))
		}
		if fc.banned {
			return f.escalate(c, EscalateWarmPathBanned, tr)
		}
	}
	ok, throttled, tokens := f.limiter.fastTake(k, r.RateLimit, now, dry)
	if ok {
		if tr != nil {
			tr.Add(trace.Fast, CheckRateLimit, trace.Pass, fmt.Sprintf("%d prefetched tokens in hand (%d per %s)", tokens, r.RateLimit.Max, r.RateLimit.Interval))
		}
		if !dry {
			u.record(c.Source, true, p, now)
		}
		return Decision{Action: Proceed, warm: true}
	}
	if throttled != nil {
		if f.cfg.Shadow {
			if tr != nil {
				tr.Add(trace.Fast, CheckRateLimit, trace.Escalate, fmt.Sprintf("window exhausted (%d per %s); shadow mode would refuse and escalates instead", r.RateLimit.Max, r.RateLimit.Interval))
			}
			if !dry {
				f.shadow(c, "rate-limit-exceeded")
			}
			return f.escalate(c, EscalateTokenRequired, tr)
		}
		if tr != nil {
			tr.Add(trace.Fast, CheckRateLimit, trace.Reject, fmt.Sprintf("the window's budget is exhausted (%d per %s) until %s", r.RateLimit.Max, r.RateLimit.Interval, throttled.Until.Format(time.RFC3339Nano)))
			tr.RetryAfter, tr.Until = throttled.RetryAfter, throttled.Until
		}
		if !dry {
			f.cfg.Metrics.Count(MetricRateLimited, 1)
			f.emitFailed(c, telemetry.FailRateLimitExceeded, "", *throttled, Dominance{})
		}
		return Decision{Action: Reject, Throttle: *throttled}
	}
	if tr != nil {
		tr.Add(trace.Fast, CheckRateLimit, trace.Escalate, fmt.Sprintf("no prefetched token in hand (%d per %s): the slow stage takes one unit of the window's budget", r.RateLimit.Max, r.RateLimit.Interval))
	}
	return f.escalate(c, EscalateTokenRequired, tr)
}

// The checks of the fast stage's flow control, as a trace names them.
const (
	CheckDispatchMode = "dispatch_mode"
	CheckGlobalBan    = "global_ban"
	CheckDedupe       = "dedupe"
	CheckFairness     = "fairness"
	CheckRateLimit    = "rate_limit"
)

func (f *Flow) fairness(r *Route) FairnessParams {
	return r.Fairness.withDefaults(f.cfg.Fairness)
}

// Slow is the slow stage's authoritative flow check, made before delivery.
// On a strict route it claims the command id first (a lost claim is a
// duplicate; the same id with another payload is refused as a conflict);
// then it applies the per-source quota to sources under a warm-path ban and
// takes one unit of the route's window budget. Every Proceed must be
// followed by Finish with the delivery's outcome.
func (f *Flow) Slow(ctx context.Context, c *Command, r *Route) (Decision, error) {
	return f.SlowTrace(ctx, c, r, nil)
}

// SlowTrace is Slow recording into tr (nil: none). A dry run (tr.DryRun)
// touches no store: it records the strict claim and the window's budget as
// deferred (decided only at delivery) and proceeds.
func (f *Flow) SlowTrace(ctx context.Context, c *Command, r *Route, tr *trace.Trace) (Decision, error) {
	if tr.Dry() {
		if r.Strict {
			tr.Add(trace.Slow, CheckDedupe, trace.Deferred, "strict: the id is claimed at delivery; a live claim or delivered record makes it a duplicate")
		}
		if r.RateLimit.Limited() {
			tr.Add(trace.Slow, CheckRateLimit, trace.Deferred, "one unit of the window's budget is taken at delivery")
		}
		return Decision{Action: Proceed}, nil
	}
	now := f.cfg.Clock.Now()
	d := Decision{start: now, strict: r.Strict}
	if r.Strict {
		if c.ID == "" || c.PayloadHash == "" {
			return Decision{}, fmt.Errorf("flow: strict route %s/%s needs the command id and payload hash", c.Target, c.Name)
		}
		claim := DedupeRecord{
			Tenant: c.tenant(), ID: c.ID, PayloadHash: c.PayloadHash, State: ClaimInProgress,
			Owner:     f.cfg.Instance + "/" + strconv.FormatUint(f.attempt.Add(1), 36),
			ExpiresAt: now.Add(f.cfg.InProgressTTL),
		}
		ok, existing, err := f.store.Claim(ctx, claim, now)
		if err == nil && !ok && f.orphaned(existing, c.PayloadHash) {
			ok, existing, err = f.takeOver(ctx, claim, existing, now)
		}
		if err != nil {
			return Decision{}, fmt.Errorf("flow: claim command %s: %w", c.ID, err)
		}
		if !ok {
			if existing.PayloadHash != c.PayloadHash {
				f.sink.Emit(telemetry.Invalid{CommandID: c.ID, Source: c.Source, Target: c.Target, CommandName: c.Name,
					Timestamp: c.Timestamp, Reason: ReasonDedupeConflict})
				return Decision{Action: Reject}, nil
			}
			if existing.State == ClaimInProgress {
				return Decision{}, fmt.Errorf("flow: command %s: %w until %s; retry then", c.ID, ErrClaimInProgress, existing.ExpiresAt.UTC().Format(time.RFC3339))
			}
			f.cfg.Metrics.Count(telemetry.MetricDedupDuplicatesPrevented, 1)
			if existing.State == ClaimDelivered && !f.cfg.DisableSeenSet {
				f.seen.add(claim.Tenant, c.ID, c.PayloadHash, existing.ExpiresAt)
			}
			f.emitDuplicate(c)
			return Decision{Action: Drop}, nil
		}
		d.claim, d.claimKey = &claim, claim.Key()
	}
	refuse := func(reason telemetry.FailReason, quota string, t Throttle, dom Dominance) (Decision, error) {
		if f.cfg.Shadow {
			f.shadow(c, string(reason))
			d.Action, d.ShadowRefusal = Proceed, string(reason)
			return d, nil
		}
		if d.claim != nil {
			if err := f.store.Release(ctx, d.claimKey, d.claim.Owner, f.cfg.Clock.Now()); err != nil {
				f.cfg.Logger.Warn("releasing dedupe claim after refusal failed; it expires on its own", "id", c.ID, "err", err)
			}
		}
		f.cfg.Metrics.Count(MetricRateLimited, 1)
		f.emitFailed(c, reason, quota, t, dom)
		return Decision{Action: Reject, Throttle: t}, nil
	}
	if !r.RateLimit.Limited() {
		d.Action = Proceed
		return d, nil
	}
	k := c.key()
	u := f.usage.get(k)
	p := f.fairness(r)
	_, localBan := u.bannedUntil(c.Source, now)
	_, globalBan := f.bans.lookup(c.Source, now)
	if (localBan || globalBan) && f.quotas != nil {
		if q, ok := f.quotas.SourceQuota(c.Source, c.Target, c.Name); ok && q.Limited() {
			granted, t, err := f.limiter.quotaTake(ctx, c.Source, k, q, now)
			if err != nil {
				f.release(ctx, d)
				return Decision{}, fmt.Errorf("flow: source quota of %s on %s/%s: %w", c.Source, c.Target, c.Name, err)
			}
			if !granted {
				return refuse(telemetry.FailRateLimitExceeded, telemetry.QuotaSource, t, Dominance{})
			}
		}
	}
	granted, t, err := f.limiter.slowTake(ctx, k, r.RateLimit, now, !localBan && !globalBan)
	if err != nil {
		f.release(ctx, d)
		return Decision{}, fmt.Errorf("flow: rate limit of %s/%s: %w", c.Target, c.Name, err)
	}
	if !granted {
		// Hard rejection on sustained abuse: the target's budget is
		// saturated and this source dominates its warm path.
		if dom, banned := u.dominance(c.Source, p, now); (banned || globalBan) && !p.Disabled {
			return refuse(telemetry.FailFairnessViolation, "", t, dom)
		}
		return refuse(telemetry.FailRateLimitExceeded, "", t, Dominance{})
	}
	d.Action = Proceed
	return d, nil
}

// orphaned says whether existing, a live record of the same command, is a
// claim in progress left by a process that is gone: only a sole instance
// (Config.SoleInstance) knows that every other instance is gone.
func (f *Flow) orphaned(existing DedupeRecord, hash string) bool {
	return f.cfg.SoleInstance && existing.State == ClaimInProgress && existing.PayloadHash == hash &&
		!strings.HasPrefix(existing.Owner, f.cfg.Instance+"/")
}

// takeOver releases existing, an orphaned claim, and claims the command
// again. The claim's command was not delivered: a delivery completes its
// claim in the same transaction, so no strict command is delivered twice.
func (f *Flow) takeOver(ctx context.Context, claim, existing DedupeRecord, now time.Time) (bool, DedupeRecord, error) {
	if err := f.store.Release(ctx, existing.Key(), existing.Owner, now); err != nil && !errors.Is(err, ErrNotOwner) {
		return false, DedupeRecord{}, fmt.Errorf("releasing the claim %s left by %s: %w", existing.Key(), existing.Owner, err)
	}
	f.cfg.Metrics.Count(MetricClaimsTakenOver, 1)
	return f.store.Claim(ctx, claim, now)
}

// ReasonDedupeConflict is the snavio.command.invalid reason for a strict
// command id reused with a different payload: refused, not dropped as a
// duplicate of the first.
const ReasonDedupeConflict = reason.DedupeConflict

func (f *Flow) release(ctx context.Context, d Decision) {
	if d.claim == nil {
		return
	}
	if err := f.store.Release(ctx, d.claimKey, d.claim.Owner, f.cfg.Clock.Now()); err != nil {
		f.cfg.Logger.Warn("releasing dedupe claim failed; it expires on its own", "id", d.claim.ID, "err", err)
	}
}

// Completion is what a sender needs to complete a strict command's claim
// in the same transaction as the delivery, where the store allows it (the
// embedded store's SendAndComplete): then no crash between the delivery
// and the completion can let a retry deliver the command twice.
type Completion struct {
	// Key (the claim's DedupeRecord.Key) and Owner identify the claim;
	// ExpiresAt is the delivered record's expiry (now + the dedupe TTL).
	Key, Owner string
	ExpiresAt  time.Time
}

// Completion returns the claim completion of a slow-path decision on a
// strict route, and false when there is no claim to complete.
func (f *Flow) Completion(d Decision) (Completion, bool) {
	if d.claim == nil {
		return Completion{}, false
	}
	return Completion{Key: d.claimKey, Owner: d.claim.Owner, ExpiresAt: f.cfg.Clock.Now().Add(f.cfg.DedupeTTL)}, true
}

// Completed returns d marked as completed by the sender (until is the
// Completion's ExpiresAt): Finish then records the delivery without
// completing the claim again.
func (d Decision) Completed(until time.Time) Decision {
	d.completedUntil = until
	return d
}

// Finish records the outcome of delivering a command the slow stage
// admitted (or the fast stage admitted: then only usage is recorded). On a
// strict route a delivered command's claim becomes a delivered record for
// the dedupe TTL and the id enters the fast path's seen-set; a failed
// delivery releases the claim so that a retry goes through.
func (f *Flow) Finish(ctx context.Context, c *Command, r *Route, d Decision, delivered bool) error {
	if d.warm && d.claim == nil && !d.strict {
		return nil // the fast stage recorded usage when it took the token
	}
	now := f.cfg.Clock.Now()
	if delivered && !d.warm {
		f.usage.get(c.key()).record(c.Source, false, f.fairness(r), now)
	}
	if d.strict && !d.start.IsZero() {
		f.cfg.Metrics.Observe(telemetry.MetricDedupSlowPathLatency, now.Sub(d.start).Seconds())
	}
	if d.claim == nil {
		return nil
	}
	if !delivered {
		if err := f.store.Release(ctx, d.claimKey, d.claim.Owner, now); err != nil {
			return fmt.Errorf("flow: release claim of %s after failed delivery: %w (it expires at %s)", c.ID, err, d.claim.ExpiresAt.Format(time.RFC3339))
		}
		return nil
	}
	exp := d.completedUntil
	if exp.IsZero() {
		exp = now.Add(f.cfg.DedupeTTL)
		if err := f.store.Complete(ctx, d.claimKey, d.claim.Owner, exp, now); err != nil {
			return fmt.Errorf("flow: complete claim of %s: %w", c.ID, err)
		}
	}
	if !f.cfg.DisableSeenSet {
		f.seen.add(d.claim.Tenant, c.ID, d.claim.PayloadHash, exp)
	}
	return nil
}

func (f *Flow) shadow(c *Command, what string) {
	f.cfg.Metrics.Count(MetricShadowWouldRefuse, 1)
	f.cfg.Logger.Info("shadow mode: would refuse", "refusal", what, "command_id", c.ID, "source", c.Source, "target", c.Target, "command", c.Name)
}

func (f *Flow) emitDuplicate(c *Command) {
	f.sink.Emit(telemetry.Duplicate{CommandID: c.ID, Source: c.Source, Target: c.Target, CommandName: c.Name,
		Timestamp: c.Timestamp, DedupeMode: "strict"})
}

func (f *Flow) emitFailed(c *Command, why telemetry.FailReason, quota string, t Throttle, dom Dominance) {
	f.sink.Emit(telemetry.Failed{
		CommandID: c.ID, Source: c.Source, Target: c.Target, CommandName: c.Name, Timestamp: c.Timestamp,
		Reason: why, Quota: quota, RetryAfterMS: max(0, t.RetryAfter.Milliseconds()), ThrottleUntil: t.Until,
		SourceShare: dom.SourceShare, CompetingShare: dom.CompetingShare, DispatchVolume: dom.Volume,
		Replay: c.Replay,
	})
}
