// Package node is the dispatcher of `snavio dispatch serve` on one
// machine: it takes PutEvents entries from the ingress (server.Pipeline)
// and runs them through dispatch.Intake (the shield and fast stages
// inline, the entries archived with the shield's verdicts, escalations
// handed to the slow stage through a durable queue), admits escalations
// to that queue per tenant and route, and runs a bounded pool of slow
// workers. Storage is behind the dispatch ports (dispatch.Archive,
// dispatch.HandoffQueue) that the embedded store implements.
//
// Durability is Intake's contract: an entry is acknowledged (gets an
// event id) only once it is archived with the shield's verdict and
// delivered, refused with telemetry, or durably handed to the slow stage.
// So every acknowledged command ends in its queue, its DLQ, or a
// failed/invalid event, whatever crashes after the acknowledgement.
package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/uuidv7"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// Options configure a Node.
type Options struct {
	Dispatcher *dispatch.Dispatcher
	Handoff    dispatch.HandoffQueue
	// Light, when set, is a second hand-off for the commands of tenants
	// with fewer than LightWaiting (default 16) waiting: slow workers take
	// from it first, so a quiet tenant's command does not wait behind
	// another tenant's backlog in Handoff.
	Light        dispatch.HandoffQueue
	LightWaiting int
	Archive      dispatch.Archive
	Clock        clock.Clock
	Logger       *slog.Logger
	// SlowWorkers bounds concurrent slow-stage work (default 4).
	SlowWorkers int
	// Batch is how many hand-offs one worker takes at once (default 10).
	Batch int
	// Visibility is how long a taken hand-off stays hidden (default 30 s).
	Visibility time.Duration
	// MaxReceives: after this many attempts the slow stage gives up and
	// emits snavio.command.failed delivery-failure (default 5).
	MaxReceives int
	// RaceRetry is how soon a command comes back when the slow stage
	// found its strict id claimed by a copy still in progress (default
	// 1 s): the copy usually completes within milliseconds, so the retry
	// reports the duplicate instead of waiting out Visibility. Only the
	// first attempt is brought back early; later ones wait Visibility, so
	// a claim left by a crashed worker still expires before the retries
	// run out.
	RaceRetry time.Duration
	// Idle is how long a worker waits when the hand-off queue is empty
	// (default 1 s), unless this node hands a command off meanwhile: that
	// wakes a worker at once, once the request's writes are durable. The
	// poll finds hand-offs left by a previous process, or back after their
	// visibility timeout: those wait up to Idle longer (a RaceRetry wakes a
	// worker when due). (At 50 ms, four idle workers woke an idle
	// `dispatch serve` about 100 times a second.)
	Idle time.Duration
	// Room, when set, says how many more messages a route's queue (by
	// ARN, dispatch.Result.QueueARN) takes; known=false if it cannot
	// tell. The hand-off admits no more of a route's commands than that
	// (admit.go).
	Room func(queueARN string) (room int, known bool)
	// HandoffCapacity is the hand-off's capacity (default 100,000, its
	// queue's max depth); TenantWaiting and RouteWaiting bound what one
	// tenant and one route may have waiting in it (default 250 and
	// 1,000), and a tenant never more than half the room the others
	// leave. An
	// entry over a bound is refused with ThrottlingException and a retry
	// hint of RetryAfter (default 1 s).
	HandoffCapacity, TenantWaiting, RouteWaiting int
	RetryAfter                                   time.Duration
	// NewID makes event ids (default: UUIDs version 7 from Clock, so the
	// archive's id index is appended to rather than written at random).
	NewID func() string
	// Defer, when set, returns a context under which the durable writes
	// of a request (archive, deliveries, hand-offs) return once queued,
	// and a wait that returns once they are all durable: the request
	// then waits for its writes' group commits once, together, instead of
	// for each in turn. Ingest acknowledges nothing before the wait
	// returns, and refuses every entry if it fails.
	Defer func(context.Context) (context.Context, func() error)
}

// Node is the local dispatcher. Safe for concurrent use.
type Node struct {
	o      Options
	intake *dispatch.Intake
	stats  Stats
	mu     sync.Mutex
	// handedOff wakes an idle slow worker when a hand-off was put, so an
	// escalated command waits for a worker, not for the Idle poll.
	handedOff chan struct{}
	// afterFunc runs f after d (time.AfterFunc; tests run it at once).
	afterFunc func(d time.Duration, f func())
	// wait counts hand-offs waiting per tenant and route (under mu).
	wait waiting
}

// wake wakes an idle slow worker, if none is woken already.
func (n *Node) wake() {
	select {
	case n.handedOff <- struct{}{}:
	default: // a wake-up is pending already
	}
}

// Stats count what the node did.
type Stats struct {
	Accepted, Refused, Escalated, SlowDone, SlowRetries, GaveUp, Corrupt int64
	// Throttled counts entries refused at admission to the hand-off (a
	// tenant's or route's bound, or a full target queue); Refused counts
	// them too. TargetFull counts hand-offs failed at once because their
	// target queue was full at delivery.
	Throttled, TargetFull int64
}

// New returns a Node.
func New(o Options) (*Node, error) {
	if o.Dispatcher == nil || o.Handoff == nil || o.Archive == nil {
		return nil, errors.New("node: Dispatcher, Handoff and Archive are required")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.SlowWorkers <= 0 {
		o.SlowWorkers = 4
	}
	if o.Batch <= 0 {
		o.Batch = 10
	}
	if o.Visibility <= 0 {
		o.Visibility = 30 * time.Second
	}
	if o.MaxReceives <= 0 {
		o.MaxReceives = 5
	}
	if o.RaceRetry <= 0 {
		o.RaceRetry = time.Second
	}
	if o.Idle <= 0 {
		o.Idle = time.Second
	}
	if o.HandoffCapacity <= 0 {
		o.HandoffCapacity = DefaultHandoffCapacity
	}
	if o.TenantWaiting <= 0 {
		o.TenantWaiting = DefaultTenantWaiting
	}
	if o.RouteWaiting <= 0 {
		o.RouteWaiting = DefaultRouteWaiting
	}
	if o.LightWaiting <= 0 {
		o.LightWaiting = DefaultLightWaiting
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = DefaultRetryAfter
	}
	if o.NewID == nil {
		clk := o.Clock
		o.NewID = func() string { return uuidv7.String(clk.Now()) }
	}
	n := &Node{o: o, handedOff: make(chan struct{}, 1), afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}
	var err error
	n.intake, err = dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: o.Dispatcher, Archive: o.Archive, Handoff: o.Handoff,
		Admission: admission{n}, Defer: o.Defer, NewID: o.NewID, Clock: o.Clock, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	return n, nil
}

var _ server.Pipeline = (*Node)(nil)

// Stats returns a copy of the counters.
func (n *Node) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.stats
}

func (n *Node) count(f func(*Stats)) {
	n.mu.Lock()
	f(&n.stats)
	n.mu.Unlock()
}

// Ingest implements server.Pipeline with dispatch.Intake: the request's
// commands run through the shield and the fast stage, its events are
// archived with the shield's verdicts in one durable write, and an entry
// is acknowledged only once it is archived and delivered, refused with
// telemetry, or durably handed off. Under a deferred context (Defer) the
// request's durable writes (deliveries, telemetry, hand-offs, archive)
// meet in the store's group commits and the request waits for them once,
// together.
func (n *Node) Ingest(ctx context.Context, entries []server.Entry) []server.EntryResult {
	out := make([]server.EntryResult, len(entries))
	if len(entries) == 0 {
		return out
	}
	in := make([]dispatch.Entry, len(entries))
	for i, e := range entries {
		in[i] = dispatch.Entry{Source: e.Source, DetailType: e.DetailType, Detail: e.Detail}
	}
	acks, _ := n.intake.Run(ctx, in) // a failure refuses the entries, logged
	escalated := false
	for i := range acks {
		a := &acks[i]
		switch a.Refused {
		case "":
			out[i] = server.Accepted(a.EventID)
			escalated = escalated || a.Escalated
		case dispatch.RefusedTooLarge:
			out[i] = server.Refused(server.EntryErrInvalidArgument, a.Message)
		case dispatch.RefusedThrottled:
			out[i] = server.Refused(server.EntryErrThrottling, a.Message)
		default:
			out[i] = server.Refused(server.EntryErrInternal, a.Message)
		}
	}
	if escalated {
		// After the writes are durable: woken earlier (when the fast stage
		// queued the hand-off under a deferred context), a worker found
		// nothing to take and slept for Idle.
		n.wake()
	}
	n.count(func(s *Stats) {
		for i := range acks {
			if !acks[i].Acknowledged() {
				s.Refused++
				continue
			}
			s.Accepted++
			if acks[i].Escalated {
				s.Escalated++
			}
		}
	})
	return out
}

// RunSlow runs the slow workers until ctx is done, then waits for the
// batches in hand to finish (graceful shutdown drains in-flight work).
func (n *Node) RunSlow(ctx context.Context) {
	var wg sync.WaitGroup
	for range n.o.SlowWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				handled, err := n.SlowOnce(context.WithoutCancel(ctx))
				if err != nil {
					n.o.Logger.Warn("slow worker: taking hand-offs failed", "err", err)
				}
				if handled == 0 || err != nil {
					idle := time.NewTimer(n.o.Idle)
					select {
					case <-ctx.Done():
					case <-idle.C:
					case <-n.handedOff:
					}
					idle.Stop()
				}
			}
		}()
	}
	wg.Wait()
}

// SlowOnce takes one batch of hand-offs and runs the slow stage on each;
// it returns how many it took. Tests call it directly.
func (n *Node) SlowOnce(ctx context.Context) (int, error) {
	taken := 0
	for _, light := range []bool{true, false} {
		if light && n.o.Light == nil {
			continue
		}
		items, err := n.lane(light).Take(ctx, n.o.Batch, n.o.Visibility)
		if err != nil {
			return taken, fmt.Errorf("node: take hand-offs: %w", err)
		}
		for _, it := range items {
			n.handle(ctx, n.lane(light), it)
		}
		taken += len(items)
	}
	return taken, nil
}

// lane is the hand-off of light tenants' commands (Options.Light), or
// the shared one.
func (n *Node) lane(light bool) dispatch.HandoffQueue {
	if light && n.o.Light != nil {
		return n.o.Light
	}
	return n.o.Handoff
}

func (n *Node) handle(ctx context.Context, q dispatch.HandoffQueue, it dispatch.HandoffItem) {
	esc, err := dispatch.UnmarshalEscalation(it.Payload)
	if err != nil {
		// Cannot happen with our own writer: count it loudly and drop it
		// so it does not block the queue forever.
		n.o.Logger.Error("corrupt hand-off dropped", "handle", it.Handle, "err", err)
		n.count(func(s *Stats) { s.Corrupt++ })
		n.done(ctx, q, it)
		return
	}
	if _, err := n.o.Dispatcher.Slow(ctx, esc); err != nil {
		if errors.Is(err, dispatch.ErrTargetFull) {
			// Admitted while its queue had room, which others took since:
			// failed at once with a retry hint, not retried into a full
			// queue for minutes.
			n.o.Dispatcher.GiveUpRetryAfter(esc, n.o.RetryAfter)
			n.count(func(s *Stats) { s.GaveUp++; s.TargetFull++ })
			n.finish(ctx, q, it, esc)
			return
		}
		if it.Receives >= n.o.MaxReceives {
			n.o.Dispatcher.GiveUp(esc)
			n.count(func(s *Stats) { s.GaveUp++ })
			n.finish(ctx, q, it, esc)
			return
		}
		// Left in the queue: taken again after the visibility timeout, or
		// soon if it raced a copy of itself.
		n.o.Logger.Warn("slow stage failed; will retry", "command_id", esc.Envelope.Metadata.ID, "attempt", it.Receives, "err", err)
		n.count(func(s *Stats) { s.SlowRetries++ })
		if errors.Is(err, flow.ErrClaimInProgress) && it.Receives == 1 {
			if err := q.Retry(ctx, it, n.o.RaceRetry); err != nil {
				n.o.Logger.Warn("bringing a raced hand-off back early failed; it returns after its visibility timeout", "handle", it.Handle, "err", err)
			} else {
				// Taken when due, not at the next Idle poll.
				n.afterFunc(n.o.RaceRetry, n.wake)
			}
		}
		return
	}
	n.count(func(s *Stats) { s.SlowDone++ })
	n.finish(ctx, q, it, esc)
}

// finish deletes a handled hand-off and gives back its place.
func (n *Node) finish(ctx context.Context, q dispatch.HandoffQueue, it dispatch.HandoffItem, esc *dispatch.Escalation) {
	n.done(ctx, q, it)
	n.release(esc)
}

func (n *Node) done(ctx context.Context, q dispatch.HandoffQueue, it dispatch.HandoffItem) {
	if err := q.Done(ctx, it); err != nil {
		// The item comes back after its visibility timeout; the slow stage
		// is idempotent for strict routes and at-least-once otherwise.
		n.o.Logger.Warn("deleting a handled hand-off failed; it will be seen again", "handle", it.Handle, "err", err)
	}
}
