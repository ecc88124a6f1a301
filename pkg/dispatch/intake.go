package dispatch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// Entry is one bus event given to Intake.
type Entry struct {
	// EventID is the bus's id of the event; when empty, Intake makes one
	// (IntakeConfig.NewID).
	EventID    string
	Source     string
	DetailType string
	Detail     []byte
}

// Refusal says why Intake did not acknowledge an entry.
type Refusal string

// Refusals.
const (
	// RefusedRetry: nothing of the entry is durable (its archive, its
	// hand-off or its telemetry failed, or the dispatcher failed on it);
	// the producer retries it with the same command id.
	RefusedRetry Refusal = "retry"
	// RefusedTooLarge: the command can never be delivered (its canonical
	// detail is over the limit); the producer must not retry it.
	RefusedTooLarge Refusal = "too_large"
	// RefusedThrottled: the hand-off's admission refused the command
	// (IntakeConfig.Admission); the producer retries it later.
	RefusedThrottled Refusal = "throttled"
)

// Ack is Intake's answer for one entry.
type Ack struct {
	// EventID is set when the entry is acknowledged: it is archived with
	// its verdict (but for an invalid command of a source over its invalid
	// budget, Result.Throttled, which is not archived), and the command is
	// delivered, refused with telemetry, or durably handed off.
	EventID string
	// Refused says why an entry is not acknowledged; Message says it to
	// the producer, and Err is the cause, for the host's log.
	Refused Refusal
	Message string
	Err     error
	// Escalated reports that the command was handed to the slow stage.
	Escalated bool
	// Result is what the shield and the fast stage made of a command.
	Result Result
}

// Acknowledged reports whether the entry was acknowledged.
func (a *Ack) Acknowledged() bool { return a.EventID != "" }

// Admission bounds what waits in the hand-off (optional; IntakeConfig).
// Safe for concurrent use.
type Admission interface {
	// Admit reserves a place for esc, whose route's queue is queueARN
	// ("" if the fast stage did not route it), and returns the hand-off to
	// put it on (nil: IntakeConfig.Handoff), or a non-empty refusal
	// message for the producer.
	Admit(esc *Escalation, queueARN string) (h Handoff, refusal string)
	// Release gives back esc's place: its hand-off was not put.
	Release(esc *Escalation)
}

// IntakeConfig configures an Intake.
type IntakeConfig struct {
	Dispatcher *Dispatcher
	// Handoff is required. Archive records the entries with the shield's
	// verdicts; nil only where the ingress archives every entry itself
	// before the intake runs (EventBridge's bus archive on AWS), and replay
	// re-verifies each entry it reads from there.
	Archive Archive
	Handoff Handoff
	// Admission, when set, admits each escalation to the hand-off.
	Admission Admission
	// Defer, when set, returns a context under which the durable writes
	// of one Run (deliveries, telemetry, hand-offs, archive) may return
	// once queued, and a wait that returns once they are all durable
	// (a group commit, or storing buffered telemetry). Run acknowledges
	// nothing before the wait returns nil, and refuses every entry if it
	// fails.
	Defer func(context.Context) (context.Context, func() error)
	// NewID makes an event id for an entry without one; required when
	// entries come without ids.
	NewID  func() string
	Clock  clock.Clock
	Logger *slog.Logger
}

// Intake is the durability contract of a host's ingress: it runs the
// shield and the fast stage on a request's entries, archives them with
// the shield's verdicts, hands escalations off, and acknowledges an entry
// only once all of that is durable. Every acknowledged command then ends
// in its queue, its DLQ, or a failed or invalid event, whatever crashes
// after the acknowledgement. Safe for concurrent use.
type Intake struct{ c IntakeConfig }

// NewIntake returns an Intake.
func NewIntake(c IntakeConfig) (*Intake, error) {
	var errs []error
	if c.Dispatcher == nil {
		errs = append(errs, errors.New("dispatch: IntakeConfig.Dispatcher is required"))
	}
	if c.Handoff == nil {
		errs = append(errs, errors.New("dispatch: IntakeConfig.Handoff is required: escalations are acknowledged only once handed off"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return &Intake{c: c}, nil
}

// Messages of refused entries, for the producer.
const (
	msgNotStored = "the dispatcher could not store the event; retry it"
	msgNotQueued = "the dispatcher could not queue the command; retry it with the same id"
	msgFailed    = "the dispatcher failed on this event; retry it"
	msgTooLarge  = "the command is too large to deliver (detail over 256 KiB in canonical form, RFC 8785); do not retry it: make the payload smaller"
	msgNeedsAnID = "the event has no id and the dispatcher makes none; retry it"
)

// Run takes one request's entries and returns an Ack for each, in order.
// The commands run through the shield and the fast stage on as many
// goroutines as there are processors; then the acknowledged entries are
// archived, in one Append for a PutEvents request (up to
// MaxArchiveBatch). err is set when the
// request's archive or its durable writes failed: every entry is then
// refused with RefusedRetry, even one the fast stage delivered (at least
// once, like a crash between a delivery and its acknowledgement; a strict
// route drops the retry as a duplicate).
func (in *Intake) Run(ctx context.Context, entries []Entry) ([]Ack, error) {
	acks := make([]Ack, len(entries))
	if len(entries) == 0 {
		return acks, nil
	}
	now := in.c.Clock.Now()
	wait := func() error { return nil }
	if in.c.Defer != nil {
		ctx, wait = in.c.Defer(ctx)
	}
	// Ids are made here, in entry order, so that an archive indexed by id
	// is appended to.
	commands := make([]int, 0, len(entries))
	for i := range entries {
		e := &entries[i]
		id := e.EventID
		if id == "" && in.c.NewID != nil {
			id = in.c.NewID()
		}
		if id == "" {
			acks[i] = Ack{Refused: RefusedRetry, Message: msgNeedsAnID, Err: errors.New("dispatch: an entry without an event id and no IntakeConfig.NewID")}
			continue
		}
		acks[i].EventID = id
		if e.DetailType == envelope.EventType {
			commands = append(commands, i)
		}
		// Like EventBridge: anything else is accepted onto the bus and
		// archived, but no rule sends it to the dispatcher.
	}
	// The fast stage computes and queues its writes (a deferred context
	// does not wait for them), so more goroutines than processors buy no
	// parallelism; a goroutine per command grew a new stack for each.
	var next atomic.Int32
	run := func() {
		for {
			k := int(next.Add(1)) - 1
			if k >= len(commands) {
				return
			}
			i := commands[k]
			in.fast(ctx, &entries[i], &acks[i])
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
	var events []Archived
	if in.c.Archive != nil {
		events = make([]Archived, 0, len(entries))
		for i := range entries {
			if a, ok := archived(&entries[i], &acks[i], now); ok {
				events = append(events, a)
			}
		}
	}
	var err error
	for len(events) > 0 && err == nil {
		k := min(len(events), MaxArchiveBatch)
		if err = in.c.Archive.Append(ctx, events[:k]); err != nil {
			err = fmt.Errorf("archiving the request's events: %w", err)
		}
		events = events[k:]
	}
	if werr := wait(); werr != nil && err == nil {
		err = fmt.Errorf("making the request's writes durable: %w", werr)
	}
	if err != nil {
		in.c.Logger.Error("a request's writes are not durable; refusing its entries so the producer retries", "entries", len(entries), "err", err)
		for i := range acks {
			acks[i] = Ack{Refused: RefusedRetry, Message: msgNotStored, Err: err, Result: acks[i].Result}
		}
	}
	return acks, err
}

// archived is how the archive records entry e, answered with a, and
// whether it is archived at all: a refused entry was not put on the bus
// (its producer retries it), and an invalid command of a source over its
// invalid budget is dropped.
func archived(e *Entry, a *Ack, now time.Time) (Archived, bool) {
	r := &a.Result
	if !a.Acknowledged() || r.Throttled {
		return Archived{}, false
	}
	ev := Archived{EventID: a.EventID, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: now}
	switch {
	case e.DetailType != envelope.EventType:
		ev.Verdict = VerdictNotCommand
	case r.Outcome == Invalid:
		ev.Verdict, ev.Reason = VerdictRejected, r.Reason
		if ev.Reason == "" {
			ev.Reason = "not_judged" // the shield failed on it (a bug)
		}
	default:
		ev.Verdict, ev.KeyVersion = VerdictAccepted, r.KeyVersion
	}
	return ev, true
}

// fast runs the shield and the fast stage on one command entry and hands
// an escalation off, filling a. A panic (a bug) refuses the entry, as
// net/http would have refused the request.
func (in *Intake) fast(ctx context.Context, e *Entry, a *Ack) {
	defer func() {
		if p := recover(); p != nil {
			in.c.Logger.Error("the fast stage panicked; refusing the entry so the producer retries", "source", e.Source, "panic", p, "stack", string(debug.Stack()))
			*a = Ack{Refused: RefusedRetry, Message: msgFailed, Err: fmt.Errorf("the fast stage panicked: %v", p), Result: a.Result}
		}
	}()
	r, esc := in.c.Dispatcher.Fast(ctx, e.Source, e.Detail)
	a.Result = r
	if r.Outcome == Invalid && r.Reason == string(reason.TooLarge) {
		// Never deliverable: a permanent refusal (the shield emitted
		// snavio.command.invalid).
		a.EventID, a.Refused, a.Message = "", RefusedTooLarge, msgTooLarge
		return
	}
	if r.Outcome != Escalated {
		return
	}
	h := in.c.Handoff
	if ad := in.c.Admission; ad != nil {
		lane, why := ad.Admit(esc, r.QueueARN)
		if why != "" {
			a.EventID, a.Refused, a.Message, a.Err = "", RefusedThrottled, why, errors.New(why)
			return
		}
		if lane != nil {
			h = lane
		}
	}
	wire, err := esc.Marshal()
	if err == nil {
		err = h.Put(ctx, wire)
	}
	if err != nil {
		if ad := in.c.Admission; ad != nil {
			ad.Release(esc)
		}
		in.c.Logger.Error("handing a command to the slow stage failed; refusing it so the producer retries", "command_id", r.CommandID, "err", err)
		a.EventID, a.Refused, a.Message, a.Err = "", RefusedRetry, msgNotQueued, fmt.Errorf("handing command %s to the slow stage: %w", r.CommandID, err)
		return
	}
	a.Escalated = true
}
