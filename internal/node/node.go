// Package node is the dispatcher of `snavio dispatch serve` on one
// machine: it takes PutEvents entries from the ingress (server.Pipeline),
// runs the shield and fast stages inline, archives the entries with the
// shield's verdicts, hands escalations
// to the slow stage through a durable queue, and runs a bounded pool of
// slow workers. Storage is behind small ports (Handoff, Archive) that the
// embedded store implements.
//
// Durability: an entry is acknowledged (gets an event id) only once it is
// archived with the shield's verdict and delivered, refused with
// telemetry, or durably handed to the slow stage. So
// every acknowledged command ends in its queue, its DLQ, or a
// failed/invalid event, whatever crashes after the acknowledgement.
package node

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/uuidv7"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// Item is one hand-off taken from the queue.
type Item struct {
	// Handle identifies this receipt for Done.
	Handle string
	// Payload is the escalation's wire form.
	Payload []byte
	// Receives counts deliveries of the item, this one included.
	Receives int
	// light: taken from Options.Light.
	light bool
}

// Handoff is the durable queue between the fast and slow stages, with SQS
// semantics: Take hides items for the visibility timeout; an item not
// Done by then is taken again.
type Handoff interface {
	// Put stores payload durably and returns once it is durable.
	Put(ctx context.Context, payload []byte) error
	// Take returns up to n items, hidden for visibility.
	Take(ctx context.Context, n int, visibility time.Duration) ([]Item, error)
	// Done deletes a handled item.
	Done(ctx context.Context, it Item) error
	// Retry makes a taken item visible again after d instead of after its
	// visibility timeout (SQS ChangeMessageVisibility).
	Retry(ctx context.Context, it Item, d time.Duration) error
}

// Archived is one event of the archive (like the EventBridge archive):
// an event put on the bus, with what the dispatcher made of it, for
// replay.
type Archived struct {
	EventID    string
	Source     string
	DetailType string
	Detail     []byte
	ReceivedAt time.Time
	// Verdict is the shield's verdict on a command, or VerdictNotCommand.
	Verdict Verdict
	// Reason is the shield's reason code for a rejected command.
	Reason string
	// KeyVersion is the key version the shield verified an accepted
	// command with.
	KeyVersion string
}

// Verdict is what the dispatcher made of an archived event. Only an
// accepted command may ever be replayed (docs/replay.md).
type Verdict string

// Verdicts.
const (
	VerdictAccepted   Verdict = "accepted"
	VerdictRejected   Verdict = "rejected"
	VerdictNotCommand Verdict = "not_command"
)

// archived is how the archive records entry e, which the node answered
// with res (and, for a command, the dispatcher with r), and whether it is
// archived at all: an entry refused (no event id) was not put on the bus,
// and its producer retries it.
func archived(e *server.Entry, res server.EntryResult, r *dispatch.Result, now time.Time) (Archived, bool) {
	if res.EventID == "" || r.Throttled {
		// Refused (the producer retries, or must not), or invalid beyond
		// its source's budget: nothing to archive.
		return Archived{}, false
	}
	a := Archived{EventID: res.EventID, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: now}
	switch {
	case e.DetailType != envelope.EventType:
		a.Verdict = VerdictNotCommand
	case r.Outcome == dispatch.Invalid:
		a.Verdict, a.Reason = VerdictRejected, r.Reason
		if a.Reason == "" {
			a.Reason = "not_judged" // the shield failed on it (a bug)
		}
	default:
		a.Verdict, a.KeyVersion = VerdictAccepted, r.KeyVersion
	}
	return a, true
}

// Archive stores accepted events durably.
type Archive interface {
	// Append stores events (one PutEvents request's, 1 to 10) durably, all
	// of them or none, and returns once they are durable.
	Append(ctx context.Context, events []Archived) error
}

// Options configure a Node.
type Options struct {
	Dispatcher *dispatch.Dispatcher
	Handoff    Handoff
	// Light, when set, is a second hand-off for the commands of tenants
	// with fewer than LightWaiting (default 16) waiting: slow workers take
	// from it first, so a quiet tenant's command does not wait behind
	// another tenant's backlog in Handoff.
	Light        Handoff
	LightWaiting int
	Archive      Archive
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
	o     Options
	stats Stats
	mu    sync.Mutex
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
	return &Node{o: o, handedOff: make(chan struct{}, 1), afterFunc: func(d time.Duration, f func()) { time.AfterFunc(d, f) }}, nil
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

// Ingest implements server.Pipeline. The request's commands run through
// the shield and the fast stage, on as many goroutines as there are
// processors; then its events are archived, each with the shield's
// verdict, in one durable write (but for invalid entries of a source over
// its invalid budget, dispatch.Result.Throttled, which are not archived). Under a deferred context (Defer) none of
// these writes waits for its commit: the request's durable writes
// (deliveries, telemetry, hand-offs, archive) meet in the store's group
// commits and the request waits for them once, together.
//
// An entry is acknowledged only once it is archived and delivered,
// refused with telemetry, or durably handed off. If the archive write
// fails, every entry of the request is refused so the producer retries,
// even one the fast stage delivered: at least once, like a crash between
// a delivery and its acknowledgement (a strict route drops the retry as a
// duplicate).
func (n *Node) Ingest(ctx context.Context, entries []server.Entry) []server.EntryResult {
	out := make([]server.EntryResult, len(entries))
	if len(entries) == 0 {
		return out
	}
	now := n.o.Clock.Now()
	wait := func() error { return nil }
	if n.o.Defer != nil {
		ctx, wait = n.o.Defer(ctx)
	}
	// Ids are made here, in entry order, so the archive's id index is
	// appended to.
	ids := make([]string, len(entries))
	results := make([]dispatch.Result, len(entries))
	escalated := make([]bool, len(entries))
	commands := make([]int, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		ids[i] = n.o.NewID()
		if e.DetailType != envelope.EventType {
			// Like EventBridge: accepted onto the bus, but no rule sends it
			// to the dispatcher.
			out[i] = server.Accepted(ids[i])
			continue
		}
		commands = append(commands, i)
	}
	// The commands run on as many goroutines as there are processors,
	// this one included, each taking the next. The fast stage computes
	// and queues its writes (a deferred context does not wait for them),
	// so more goroutines buy no more parallelism; a goroutine per command
	// grew a new stack for each (4% of the CPU in memory). Interleaved
	// runs of make bench-serve: 0.50-0.54x against 0.42-0.50x in memory.
	var next atomic.Int32
	run := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(commands) {
				return
			}
			i := commands[k]
			out[i], escalated[i], results[i] = n.fast(ctx, &entries[i], ids[i])
		}
	}
	var wg sync.WaitGroup
	for range min(len(commands), runtime.GOMAXPROCS(0)) - 1 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run()
		}()
	}
	run()
	wg.Wait()
	events := make([]Archived, 0, len(entries))
	for i := range entries {
		if a, ok := archived(&entries[i], out[i], &results[i], now); ok {
			events = append(events, a)
		}
	}
	var archErr error
	if len(events) > 0 {
		archErr = n.o.Archive.Append(ctx, events)
	}
	if err := wait(); err != nil && archErr == nil {
		archErr = err
	}
	if archErr != nil {
		n.o.Logger.Error("archiving a request's events failed; refusing them so the producer retries", "entries", len(entries), "err", archErr)
		for i := range out {
			out[i] = server.Refused(server.EntryErrInternal, "the dispatcher could not store the event; retry it")
		}
	} else if slices.Contains(escalated, true) {
		// After the wait: woken earlier (when the fast stage queued the
		// hand-off under a deferred context), a worker found nothing to
		// take and slept for Idle.
		n.wake()
	}
	n.count(func(s *Stats) {
		for i, r := range out {
			if r.EventID == "" {
				s.Refused++
				continue
			}
			s.Accepted++
			if escalated[i] {
				s.Escalated++
			}
		}
	})
	return out
}

// fast runs the shield and the fast stage on one command entry, and says
// whether it handed the command to the slow stage, and what the
// dispatcher made of it (for the archive). A panic (a bug) refuses the
// entry, as net/http would have refused the request.
func (n *Node) fast(ctx context.Context, e *server.Entry, id string) (res server.EntryResult, escalated bool, r dispatch.Result) {
	defer func() {
		if p := recover(); p != nil {
			n.o.Logger.Error("the fast stage panicked; refusing the entry so the producer retries", "source", e.Source, "panic", p, "stack", string(debug.Stack()))
			res, escalated = server.Refused(server.EntryErrInternal, "the dispatcher failed on this event; retry it"), false
		}
	}()
	r, esc := n.o.Dispatcher.Fast(ctx, e.Source, e.Detail)
	if r.Outcome == dispatch.Invalid && r.Reason == string(reason.TooLarge) {
		// Never deliverable: a permanent refusal, not a retryable one (the
		// shield emitted snavio.command.invalid).
		return server.Refused(server.EntryErrInvalidArgument, "the command is too large to deliver (detail over 256 KiB in canonical form, RFC 8785); do not retry it: make the payload smaller"), false, r
	}
	if r.Outcome == dispatch.Escalated {
		why, light := n.admit(esc, r.QueueARN)
		if why != "" {
			return server.Refused(server.EntryErrThrottling, why), false, r
		}
		wire, err := esc.Marshal()
		if err == nil {
			err = n.lane(light).Put(ctx, wire)
		}
		if err != nil {
			n.release(esc)
			n.o.Logger.Error("handing a command to the slow stage failed; refusing it so the producer retries", "command_id", r.CommandID, "err", err)
			return server.Refused(server.EntryErrInternal, "the dispatcher could not queue the command; retry it with the same id"), false, r
		}
		// Ingest wakes a slow worker once the request's writes are
		// durable: a deferred Put is not yet takeable here.
		return server.Accepted(id), true, r
	}
	return server.Accepted(id), false, r
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
			it.light = light
			n.handle(ctx, it)
		}
		taken += len(items)
	}
	return taken, nil
}

// lane is the hand-off of light tenants' commands (Options.Light), or
// the shared one.
func (n *Node) lane(light bool) Handoff {
	if light && n.o.Light != nil {
		return n.o.Light
	}
	return n.o.Handoff
}

func (n *Node) handle(ctx context.Context, it Item) {
	esc, err := dispatch.UnmarshalEscalation(it.Payload)
	if err != nil {
		// Cannot happen with our own writer: count it loudly and drop it
		// so it does not block the queue forever.
		n.o.Logger.Error("corrupt hand-off dropped", "handle", it.Handle, "err", err)
		n.count(func(s *Stats) { s.Corrupt++ })
		n.done(ctx, it)
		return
	}
	if _, err := n.o.Dispatcher.Slow(ctx, esc); err != nil {
		if errors.Is(err, dispatch.ErrTargetFull) {
			// Admitted while its queue had room, which others took since:
			// failed at once with a retry hint, not retried into a full
			// queue for minutes.
			n.o.Dispatcher.GiveUpRetryAfter(esc, n.o.RetryAfter)
			n.count(func(s *Stats) { s.GaveUp++; s.TargetFull++ })
			n.finish(ctx, it, esc)
			return
		}
		if it.Receives >= n.o.MaxReceives {
			n.o.Dispatcher.GiveUp(esc)
			n.count(func(s *Stats) { s.GaveUp++ })
			n.finish(ctx, it, esc)
			return
		}
		// Left in the queue: taken again after the visibility timeout, or
		// soon if it raced a copy of itself.
		n.o.Logger.Warn("slow stage failed; will retry", "command_id", esc.Envelope.Metadata.ID, "attempt", it.Receives, "err", err)
		n.count(func(s *Stats) { s.SlowRetries++ })
		if errors.Is(err, flow.ErrClaimInProgress) && it.Receives == 1 {
			if err := n.lane(it.light).Retry(ctx, it, n.o.RaceRetry); err != nil {
				n.o.Logger.Warn("bringing a raced hand-off back early failed; it returns after its visibility timeout", "handle", it.Handle, "err", err)
			} else {
				// Taken when due, not at the next Idle poll.
				n.afterFunc(n.o.RaceRetry, n.wake)
			}
		}
		return
	}
	n.count(func(s *Stats) { s.SlowDone++ })
	n.finish(ctx, it, esc)
}

// finish deletes a handled hand-off and gives back its place.
func (n *Node) finish(ctx context.Context, it Item, esc *dispatch.Escalation) {
	n.done(ctx, it)
	n.release(esc)
}

func (n *Node) done(ctx context.Context, it Item) {
	if err := n.lane(it.light).Done(ctx, it); err != nil {
		// The item comes back after its visibility timeout; the slow stage
		// is idempotent for strict routes and at-least-once otherwise.
		n.o.Logger.Warn("deleting a handled hand-off failed; it will be seen again", "handle", it.Handle, "err", err)
	}
}
