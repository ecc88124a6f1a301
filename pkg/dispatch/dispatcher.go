// Package dispatch is the Snavio dispatcher as a library: the same code runs
// on one machine (`snavio dispatch serve`) and on AWS Lambda. A Dispatcher
// composes the three stages:
//
//   - shield (package shield): schema, forbidden command.source, size
//     limits, replay window, HMAC, bans; rejects with snavio.command.invalid;
//   - fast: memory only; routes with cached routing and ACLs (a Router),
//     applies flow control (package flow: tokens, fairness, local dedupe)
//     and delivers, or escalates with a reason code;
//   - slow: authoritative; routes after refreshing, claims strict ids, takes
//     the rate-limit budget, delivers.
//
// The package imports no AWS code and holds no globals; time comes from an
// injected clock. Storage and delivery are ports (registry.Reader,
// flow.Store, Sender) implemented by stores that pass
// pkg/dispatch/dispatchtest; package memstore holds in-memory ones.
//
// Assemble is the standard way to build a Dispatcher: it takes the ports and
// settings in a Config and wires the caches, the router, flow control and
// the shield with their defaults. A host then calls Fast on each bus
// event, hands every escalation durably (a queue, in the wire form of
// Escalation.Marshal) to a worker that calls Slow, and uses the returned
// Assembly's caches and flow control for its background jobs. The
// examples (example_test.go) assemble a Dispatcher over package memstore
// and dispatch a signed command; docs/library.md walks through the API.
package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// Delivery is one command on its way to a target queue.
type Delivery struct {
	// QueueARN is the route's target queue.
	QueueARN string
	// Body is the envelope with command.source set by the dispatcher. The
	// sender must not retain it after Send returns.
	Body []byte
	// Identifying attributes, for queue message attributes.
	CommandID, Source, Target, Command string
	// Claim, on a strict route's slow-path delivery, is the dedupe claim
	// to complete. A sender whose store can write the message and the
	// completion in one transaction does so and sets Completed; others
	// ignore it and the dispatcher completes the claim after Send.
	Claim     *flow.Completion
	Completed bool
	// Event is the delivery's snavio.command.delivered event. A sender
	// whose store also holds the telemetry outbox writes it in the
	// message's own transaction (the transactional outbox: the message and
	// its event are durable together or not at all) and sets EventWritten;
	// otherwise the dispatcher emits it through Deps.Telemetry after Send.
	Event        telemetry.Delivered
	EventWritten bool
}

// ErrTargetFull marks a delivery refused because its target queue is full
// (SQS has no such limit; the embedded store's queues have a max depth).
// A Sender wraps it so that the caller refuses or fails the command at
// once instead of retrying it into a queue that has no room.
var ErrTargetFull = errors.New("target queue is full")

// Sender delivers commands to target queues (SQS SendMessage; a local
// queue in `dispatch serve`). Send returns nil only once the queue has
// durably accepted the message. Safe for concurrent use. Send must not
// retain d, nor d.Body, after it returns: the dispatcher reuses both.
type Sender interface {
	Send(ctx context.Context, d *Delivery) error
}

// Route is a routing decision: where a command goes and the route's flow
// parameters.
type Route struct {
	QueueARN string
	Flow     flow.Route
}

// Router makes the routing and ACL decisions. Implementations must be safe
// for concurrent use.
type Router interface {
	// Fast decides from memory only, without blocking: ok=false means
	// escalate, with a reason code such as cache_miss, acl_expired or
	// routing_stale. It must not return a failure: only the slow path
	// refuses.
	Fast(source, target, command string) (r Route, escalation string, ok bool)
	// Slow decides authoritatively, refreshing what it needs first. A
	// non-empty fail (route-missing, acl-deny) refuses the command; an
	// error means the decision could not be made now (retry later).
	Slow(ctx context.Context, source, target, command string) (r Route, fail telemetry.FailReason, err error)
}

// RouterAt is an optional capability of a Router: FastAt is Fast at a
// given time. The dispatcher then decides at the time the shield received
// the message instead of reading the clock again.
type RouterAt interface {
	FastAt(source, target, command string, now time.Time) (r Route, escalation string, ok bool)
}

// Outcome is what became of a command at a stage.
type Outcome string

// Outcomes.
const (
	Delivered Outcome = "delivered"
	Escalated Outcome = "escalated"
	Duplicate Outcome = "duplicate"
	Invalid   Outcome = "invalid"
	Failed    Outcome = "failed"
)

// Result is a stage's verdict on one command.
type Result struct {
	Outcome   Outcome
	CommandID string
	// Reason is the escalation, rejection or failure reason code.
	Reason string
	Path   telemetry.Path
	// Throttled: an invalid command from a source over its invalid budget
	// (shield.Throttled); it had no event of its own and is not archived.
	Throttled bool
	// KeyVersion, from Fast on a command the shield accepted, is the key
	// version its signature was verified with (the archive records it).
	KeyVersion string
	// QueueARN, from Fast on a command escalated after the fast stage
	// routed it (strict, rate limit, a failed delivery), is its route's
	// queue: the caller may check the queue's room before handing it off.
	QueueARN string
}

// Escalation is a command the fast stage hands to the slow stage: already
// through the shield, so the slow stage trusts it and does not verify it
// again. The hand-off between them must be durable (a queue) so that
// nothing is lost in a crash; Marshal and UnmarshalEscalation give its
// wire form.
type Escalation struct {
	Envelope   envelope.Envelope `json:"envelope"`
	ReceivedAt time.Time         `json:"received_at"`
	Reason     string            `json:"reason"`
	ColdOnly   bool              `json:"cold_only,omitzero"`
}

// Marshal returns the escalation's wire form.
func (e *Escalation) Marshal() ([]byte, error) { return jsonv2.Marshal(e) }

// UnmarshalEscalation parses an escalation's wire form. It is a trusted
// internal format; it still refuses anything incomplete.
func UnmarshalEscalation(b []byte) (*Escalation, error) {
	var e Escalation
	if err := jsonv2.Unmarshal(b, &e); err != nil {
		return nil, fmt.Errorf("dispatch: escalation: %w", err)
	}
	c := &e.Envelope.Command
	if e.Envelope.Metadata.ID == "" || c.Source == "" || c.Target == "" || c.Name == "" || len(c.Payload) == 0 {
		return nil, errors.New("dispatch: escalation is missing its id, source, target, name or payload")
	}
	return &e, nil
}

// Deps are the Dispatcher's collaborators.
type Deps struct {
	Shield    *shield.Shield
	Router    Router
	Flow      *flow.Flow
	Sender    Sender
	Clock     clock.Clock
	Telemetry telemetry.Sink
	Logger    *slog.Logger
}

// Dispatcher runs the stages. Safe for concurrent use.
type Dispatcher struct {
	d        Deps
	routerAt RouterAt  // d.Router's FastAt, if it has one
	sends    sync.Pool // *sending, reused across deliveries
}

// sending is what one delivery needs besides the envelope: the body buffer
// and the Delivery handed to the Sender (which, passed through an
// interface, would otherwise escape to the heap on every command).
type sending struct {
	body []byte
	d    Delivery
}

// New returns a Dispatcher; every dependency except Logger is required.
func New(deps Deps) (*Dispatcher, error) {
	if deps.Shield == nil || deps.Router == nil || deps.Flow == nil || deps.Sender == nil || deps.Clock == nil || deps.Telemetry == nil {
		return nil, errors.New("dispatch: Shield, Router, Flow, Sender, Clock and Telemetry are required")
	}
	if deps.Logger == nil {
		deps.Logger = slog.New(slog.DiscardHandler)
	}
	x := &Dispatcher{d: deps}
	x.routerAt, _ = deps.Router.(RouterAt)
	return x, nil
}

// Fast runs the shield and the fast stage on one bus event: busSource is
// the authenticated event source, detail the producer's envelope. It
// returns the result and, when the outcome is Escalated, the escalation
// the caller must hand durably to the slow stage.
func (x *Dispatcher) Fast(ctx context.Context, busSource string, detail []byte) (res Result, _ *Escalation) {
	return x.fast(ctx, busSource, detail, nil)
}

// fast is Fast recording each decision into tr (nil: none); a dry run
// (tr.DryRun, Explain) decides the same and neither emits nor delivers.
func (x *Dispatcher) fast(ctx context.Context, busSource string, detail []byte, tr *trace.Trace) (res Result, _ *Escalation) {
	acc, err := x.d.Shield.CheckTrace(busSource, detail, tr)
	if err != nil {
		if tr != nil {
			tr.Err = err
		}
		return Result{Outcome: Invalid, Reason: reasonOf(err), Throttled: shield.Throttled(err)}, nil
	}
	kv := acc.Envelope.Metadata.VersionID
	defer func() { res.KeyVersion = kv }()
	env := &acc.Envelope
	if acc.ColdOnly {
		tr.Add(trace.Fast, CheckWarmPath, trace.Escalate, "the source is cold-only")
		return x.escalateEmit(acc, flow.EscalateColdOnlySource, tr)
	}
	var route Route
	var why string
	var ok bool
	switch {
	case tr != nil:
		route, why, ok = x.routeTrace(busSource, env.Command.Target, env.Command.Name, acc.ReceivedAt, tr)
	case x.routerAt != nil:
		route, why, ok = x.routerAt.FastAt(busSource, env.Command.Target, env.Command.Name, acc.ReceivedAt)
	default:
		route, why, ok = x.d.Router.Fast(busSource, env.Command.Target, env.Command.Name)
	}
	if !ok {
		return x.escalateEmit(acc, flow.Escalation(why), tr)
	}
	c := flowCommand(env, false)
	dec := x.d.Flow.FastTrace(&c, &route.Flow, acc.ReceivedAt, tr)
	defer func() {
		if res.Outcome == Escalated {
			res.QueueARN = route.QueueARN
		}
	}()
	switch dec.Action {
	case flow.Escalate:
		return x.escalate(acc, dec.Escalation)
	case flow.Drop:
		return Result{Outcome: Duplicate, CommandID: c.ID}, nil
	case flow.Reject:
		return Result{Outcome: Failed, CommandID: c.ID, Reason: string(telemetry.FailRateLimitExceeded)}, nil
	}
	if tr.Dry() {
		return Result{Outcome: Delivered, CommandID: c.ID, Path: telemetry.PathFast}, nil
	}
	ev := x.deliveredEvent(env, acc.ReceivedAt, telemetry.PathFast)
	_, written, err := x.send(ctx, route.QueueARN, env, nil, &ev)
	if err != nil {
		// At least once: the slow stage retries the delivery.
		_ = x.d.Flow.Finish(ctx, &c, &route.Flow, dec, false)
		if errors.Is(err, ErrTargetFull) {
			// No event and no log line: the caller admits it to the slow
			// stage only if the queue has room again, else refuses it.
			return x.escalate(acc, EscalateTargetFull)
		}
		x.d.Logger.Warn("fast delivery failed; escalating", "command_id", c.ID, "queue", route.QueueARN, "err", err)
		return x.escalateEmit(acc, EscalateDeliveryRetry, nil)
	}
	if err := x.d.Flow.Finish(ctx, &c, &route.Flow, dec, true); err != nil {
		x.d.Logger.Warn("recording fast delivery failed", "command_id", c.ID, "err", err)
	}
	if !written {
		x.d.Telemetry.Emit(ev)
	}
	return Result{Outcome: Delivered, CommandID: c.ID, Path: telemetry.PathFast}, nil
}

// EscalateDeliveryRetry is the escalation of a command whose fast-path
// delivery failed.
const EscalateDeliveryRetry flow.Escalation = "delivery_retry"

// EscalateTargetFull is the escalation of a command whose fast-path
// delivery found its target queue full (ErrTargetFull).
const EscalateTargetFull flow.Escalation = "target_full"

// routeTrace is the fast routing decision recorded into tr: with the
// cache states from the cache-backed router, without them from a router
// of the host's own.
func (x *Dispatcher) routeTrace(source, target, command string, now time.Time, tr *trace.Trace) (Route, string, bool) {
	if rr, ok := x.d.Router.(routingRouter); ok {
		return rr.fastTrace(source, target, command, now, tr)
	}
	var route Route
	var why string
	var ok bool
	if x.routerAt != nil {
		route, why, ok = x.routerAt.FastAt(source, target, command, now)
	} else {
		route, why, ok = x.d.Router.Fast(source, target, command)
	}
	if ok {
		tr.Add(trace.Fast, CheckRoute, trace.Pass, route.QueueARN)
		tr.Add(trace.Fast, CheckACL, trace.Pass, "granted")
	} else {
		tr.Add(trace.Fast, CheckRoute, trace.Escalate, why)
		tr.Add(trace.Fast, CheckACL, trace.Skip, "")
	}
	return route, why, ok
}

// escalateEmit escalates for a reason decided here or by the router and
// emits its telemetry (flow control emits the telemetry of its own),
// unless tr is a dry run.
func (x *Dispatcher) escalateEmit(acc shield.Accepted, why flow.Escalation, tr *trace.Trace) (Result, *Escalation) {
	if tr.Dry() {
		return x.escalate(acc, why)
	}
	c := &acc.Envelope.Command
	x.d.Telemetry.Emit(flow.Escalated{CommandID: acc.Envelope.Metadata.ID, Source: c.Source, Target: c.Target, CommandName: c.Name, Reason: why})
	return x.escalate(acc, why)
}

func (x *Dispatcher) escalate(acc shield.Accepted, why flow.Escalation) (Result, *Escalation) {
	e := &Escalation{Envelope: acc.Envelope, ReceivedAt: acc.ReceivedAt, Reason: string(why), ColdOnly: acc.ColdOnly}
	return Result{Outcome: Escalated, CommandID: acc.Envelope.Metadata.ID, Reason: string(why)}, e
}

// Slow runs the slow stage on an escalation. An error means the command
// was neither delivered nor refused (a store or queue was unavailable):
// the caller keeps the escalation and retries it later, and calls GiveUp
// when it stops retrying.
func (x *Dispatcher) Slow(ctx context.Context, e *Escalation) (Result, error) {
	return x.slow(ctx, e, nil)
}

// Checks of the dispatcher's own, as a trace names them: the fast stage's
// refusal of a cold-only source, and the slow stage's routing.
const (
	CheckWarmPath = "warm_path"
	CheckRouteACL = "route_acl"
)

// slow is Slow recording each decision into tr (nil: none); a dry run
// routes authoritatively (reading the registry when the caches say so)
// but claims, takes, emits and delivers nothing.
func (x *Dispatcher) slow(ctx context.Context, e *Escalation, tr *trace.Trace) (Result, error) {
	env := &e.Envelope
	c := flowCommand(env, false)
	route, fail, err := x.d.Router.Slow(ctx, c.Source, c.Target, c.Name)
	if err != nil {
		if tr != nil {
			tr.Add(trace.Slow, CheckRouteACL, trace.Fail, "no decision now: "+err.Error())
		}
		return Result{}, fmt.Errorf("dispatch: route %s/%s: %w", c.Target, c.Name, err)
	}
	if fail != "" {
		tr.Add(trace.Slow, CheckRouteACL, trace.Fail, string(fail)+" (confirmed against the registry)")
		if !tr.Dry() {
			x.failed(env, fail)
		}
		return Result{Outcome: Failed, CommandID: c.ID, Reason: string(fail), Path: telemetry.PathSlow}, nil
	}
	tr.Add(trace.Slow, CheckRouteACL, trace.Pass, route.QueueARN)
	if route.Flow.Strict {
		c = flowCommand(env, true)
	}
	dec, err := x.d.Flow.SlowTrace(ctx, &c, &route.Flow, tr)
	if err != nil {
		return Result{}, err
	}
	if tr.Dry() {
		return Result{Outcome: Delivered, CommandID: c.ID, Path: telemetry.PathSlow}, nil
	}
	switch dec.Action {
	case flow.Drop:
		return Result{Outcome: Duplicate, CommandID: c.ID, Path: telemetry.PathSlow}, nil
	case flow.Reject:
		return Result{Outcome: Failed, CommandID: c.ID, Path: telemetry.PathSlow}, nil
	}
	var claim *flow.Completion
	if cp, ok := x.d.Flow.Completion(dec); ok {
		claim = &cp
	}
	ev := x.deliveredEvent(env, e.ReceivedAt, telemetry.PathSlow)
	completed, written, err := x.send(ctx, route.QueueARN, env, claim, &ev)
	if err != nil {
		if ferr := x.d.Flow.Finish(ctx, &c, &route.Flow, dec, false); ferr != nil {
			x.d.Logger.Warn("releasing claim after failed delivery", "command_id", c.ID, "err", ferr)
		}
		return Result{}, fmt.Errorf("dispatch: deliver %s to %s: %w", c.ID, route.QueueARN, err)
	}
	if completed {
		dec = dec.Completed(claim.ExpiresAt)
	}
	if err := x.d.Flow.Finish(ctx, &c, &route.Flow, dec, true); err != nil {
		x.d.Logger.Warn("recording slow delivery failed", "command_id", c.ID, "err", err)
	}
	if !written {
		x.d.Telemetry.Emit(ev)
	}
	return Result{Outcome: Delivered, CommandID: c.ID, Path: telemetry.PathSlow}, nil
}

// GiveUp reports that an escalation will not be retried any more: it emits
// snavio.command.failed with reason delivery-failure.
func (x *Dispatcher) GiveUp(e *Escalation) Result {
	x.failed(&e.Envelope, telemetry.FailDeliveryFailure)
	return Result{Outcome: Failed, CommandID: e.Envelope.Metadata.ID, Reason: string(telemetry.FailDeliveryFailure), Path: telemetry.PathSlow}
}

// GiveUpRetryAfter is GiveUp for a command that may succeed if sent again
// later (its target queue was full): the event carries the retry hints
// retry_after_ms and throttle_until.
func (x *Dispatcher) GiveUpRetryAfter(e *Escalation, after time.Duration) Result {
	m := &e.Envelope.Metadata
	c := &e.Envelope.Command
	x.d.Telemetry.Emit(telemetry.Failed{
		CommandID: m.ID, Source: c.Source, Target: c.Target, CommandName: c.Name, Timestamp: m.Timestamp,
		Reason: telemetry.FailDeliveryFailure, RetryAfterMS: after.Milliseconds(), ThrottleUntil: x.d.Clock.Now().Add(after).UTC(),
		Replay: replayOf(m),
	})
	return Result{Outcome: Failed, CommandID: m.ID, Reason: string(telemetry.FailDeliveryFailure), Path: telemetry.PathSlow}
}

// send delivers env to queue with its delivered event ev; claim (strict
// slow path only) may be completed by the sender in the same transaction,
// which it reports, and so may ev be written with the message (written:
// the caller must not emit it again).
func (x *Dispatcher) send(ctx context.Context, queue string, env *envelope.Envelope, claim *flow.Completion, ev *telemetry.Delivered) (completed, written bool, err error) {
	sn, _ := x.sends.Get().(*sending)
	if sn == nil {
		sn = new(sending)
	}
	body, err := env.AppendJSON(sn.body[:0])
	sn.body = body
	if err != nil {
		x.sends.Put(sn)
		return false, false, err
	}
	d := &sn.d
	*d = Delivery{QueueARN: queue, Body: body, CommandID: env.Metadata.ID, Source: env.Command.Source, Target: env.Command.Target, Command: env.Command.Name, Claim: claim, Event: *ev}
	err = x.d.Sender.Send(ctx, d)
	completed, written = d.Completed && claim != nil, err == nil && d.EventWritten
	*d = Delivery{} // keep no command's strings or claim alive in the pool
	if cap(sn.body) > 64<<10 {
		sn.body = nil // do not pin one huge body
	}
	x.sends.Put(sn)
	return completed, written, err
}

// deliveredEvent is env's delivered event; its dispatch latency runs from
// the shield's receipt to the hand to the queue.
func (x *Dispatcher) deliveredEvent(env *envelope.Envelope, received time.Time, path telemetry.Path) telemetry.Delivered {
	m := &env.Metadata
	return telemetry.Delivered{
		CommandID: m.ID, Source: env.Command.Source, Target: env.Command.Target, CommandName: env.Command.Name,
		Timestamp: m.Timestamp, Path: path, DispatchLatencyMS: x.d.Clock.Now().Sub(received).Milliseconds(),
		Replay: replayOf(m),
	}
}

func (x *Dispatcher) failed(env *envelope.Envelope, why telemetry.FailReason) {
	m := &env.Metadata
	x.d.Telemetry.Emit(telemetry.Failed{
		CommandID: m.ID, Source: env.Command.Source, Target: env.Command.Target, CommandName: env.Command.Name,
		Timestamp: m.Timestamp, Reason: why, Replay: replayOf(m),
	})
}

func replayOf(m *envelope.Metadata) telemetry.Replay {
	if !m.Replay {
		return telemetry.Replay{}
	}
	return telemetry.Replay{Replay: true, ReplayReason: m.ReplayReason, ReplayID: m.ReplayID}
}

// flowCommand is the flow-control view of an accepted envelope. The payload
// hash (SHA-256 of the canonical payload) is computed here only when asked;
// otherwise flow control hashes Payload itself if it needs to (a strict id
// already known delivered).
func flowCommand(env *envelope.Envelope, withHash bool) flow.Command {
	c := flow.Command{
		ID: env.Metadata.ID, Source: env.Command.Source, Target: env.Command.Target, Name: env.Command.Name,
		Timestamp: env.Metadata.Timestamp, Payload: env.Command.Payload, Replay: replayOf(&env.Metadata),
	}
	if withHash {
		c.PayloadHash = flow.PayloadHash(env.Command.Payload)
	}
	return c
}

// reasonOf extracts the shield's reason code.
func reasonOf(err error) string { return string(reason.Of(err)) }
