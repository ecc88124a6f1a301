package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/internal/pipeline"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/uuidv7"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// raceRetry is how soon an escalation comes back when its strict id was
// claimed by a copy still in progress (node.Options.RaceRetry).
const raceRetry = time.Second

// Host is the state that lives across invocations of one execution
// environment: the dispatcher with its caches, the clients. Build it once
// at init with New; Lambda runs one invocation at a time per environment.
type Host struct {
	cfg Config
	d   *dispatch.Dispatcher
	// intake runs the shield and the fast stage and hands escalations to
	// esc, the escalation queue; out keeps the telemetry (warm.go).
	intake *dispatch.Intake
	esc    *awsstore.SQSHandoff
	out    *outbox
	bg     *background
	cold   *coldStart
	log    *slog.Logger
	// flow writes the fairness rollups; rollupAt is when the last flush
	// started (warm.go).
	flow     *flow.Flow
	rollupAt time.Time
}

// New assembles the dispatcher on the AWS store (as internal/devserver does
// on the embedded one) and cold-loads its caches from the registry.
func New(ctx context.Context, cfg Config) (*Host, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	clk, log := cfg.Clock, cfg.Logger
	cfg.Store.Clock = clk
	reg, err := awsstore.NewRegistryStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	fs, err := awsstore.NewFlowStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	ob, err := awsstore.NewOutboxStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	signer, err := provenance.NewSigner(cfg.DeliveryKey)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", EnvDeliveryKey, err)
	}
	sender, err := awsstore.NewSQSSender(cfg.Store, signer)
	if err != nil {
		return nil, err
	}
	bg := &background{}
	cold, err := newColdStart(&cfg, bg)
	if err != nil {
		return nil, err
	}
	out := &outbox{store: ob, log: log}
	asm, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: fs, Sender: sender,
		Telemetry: out, Clock: clk, Logger: log, Metrics: cfg.Metrics, Executor: bg.run, Flow: flow.Config{Instance: cfg.Instance}, Load: cold.load})
	if err != nil {
		return nil, err
	}
	d := asm.Dispatcher
	// The global ban list now, not in the first command's invocation.
	if err := asm.Deps.Flow.RefreshBans(ctx); err != nil {
		return nil, fmt.Errorf("loading the global ban list: %w", err)
	}
	// The cold load's events (cache refreshes) are stored now, so that
	// the first invocation does not carry them.
	if err := out.flush(ctx); err != nil {
		return nil, fmt.Errorf("storing the cold load's telemetry in the outbox: %w", err)
	}
	escCfg := cfg.Store
	escCfg.SQSOptions = cfg.EscalationOptions
	esc, err := awsstore.NewSQSHandoff(escCfg, cfg.EscalationQueueURL)
	if err != nil {
		return nil, err
	}
	h := &Host{cfg: cfg, d: d, esc: esc, out: out, bg: bg, cold: cold, log: log, flow: asm.Deps.Flow, rollupAt: clk.Now()}
	// No Archive: the bus archives every event before the rule invokes
	// this function, and replay re-verifies what it reads from there
	// (docs/lambda.md, "The archive on AWS"). No Defer: deliveries and
	// hand-offs are synchronous, and Ingest settles the telemetry.
	h.intake, err = dispatch.NewIntake(dispatch.IntakeConfig{Dispatcher: d, Handoff: esc,
		NewID: func() string { return uuidv7.String(clk.Now()) }, Clock: clk, Logger: log})
	if err != nil {
		return nil, err
	}
	return h, nil
}

// Ingest is the EventBridge rule's target: dispatch.Intake on one event
// (the shield and the fast stage, then delivery or the durable hand-off
// to the escalation queue), then the invocation's telemetry settled
// (warm.go: stored now, or kept when it confirms nothing). It returns nil
// only once the command is delivered, refused with its telemetry in the
// outbox, or handed off; an error makes Lambda retry the event (then its
// on-failure destination). A command that can never succeed (invalid) is
// not an error: its snavio.command.invalid is its answer.
func (h *Host) Ingest(ctx context.Context, ev events.CloudWatchEvent) error {
	if ev.DetailType != envelope.EventType {
		// The rule matches commands only; anything else is not ours.
		h.log.Warn("ignoring an event that is not a command; check the rule's pattern", "detail_type", ev.DetailType, "source", ev.Source)
		return nil
	}
	defer h.cold.afterInvocation()
	defer h.flushRollupsIfDue(ctx)()
	acks, err := h.intake.Run(ctx, []dispatch.Entry{{EventID: ev.ID, Source: ev.Source, DetailType: ev.DetailType, Detail: ev.Detail}})
	a := &acks[0]
	if serr := h.out.settle(ctx, a.Result.Outcome, a.Acknowledged(), h.cfg.Clock.Now()); serr != nil && err == nil {
		return fmt.Errorf("command %s: its telemetry is not stored; retrying the event: %w", a.Result.CommandID, serr)
	}
	switch {
	case err != nil:
		return fmt.Errorf("command %s: not stored; retrying the event: %w", a.Result.CommandID, err)
	case a.Acknowledged(), a.Refused == dispatch.RefusedTooLarge:
		return nil
	case a.Result.Outcome == dispatch.Escalated:
		return fmt.Errorf("command %s: handing it to the slow stage failed; retrying the event: %w", a.Result.CommandID, a.Err)
	}
	return fmt.Errorf("command %s: %s; retrying the event: %w", a.Result.CommandID, a.Message, a.Err)
}

// Slow consumes the escalation queue with partial batch responses: a
// record is reported failed (and comes back after its visibility
// timeout, then goes to the DLQ) unless it was delivered, refused with
// telemetry, or given up with snavio.command.failed. If the batch's
// telemetry cannot be stored, every record is reported failed: the
// retries are at-least-once and strict routes drop them as duplicates.
func (h *Host) Slow(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	defer h.cold.afterInvocation()
	defer h.flushRollupsIfDue(ctx)()
	for i := range ev.Records {
		if !h.slowOne(ctx, &ev.Records[i]) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	if err := h.out.storeAll(ctx); err != nil {
		h.log.Error("storing the batch's telemetry failed; the whole batch will be retried", "records", len(ev.Records), "err", err)
		resp.BatchItemFailures = resp.BatchItemFailures[:0]
		for i := range ev.Records {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	return resp, nil
}

// slowOne runs the slow stage on one record and says whether it is done
// with (to be deleted from the queue).
func (h *Host) slowOne(ctx context.Context, rec *events.SQSMessage) bool {
	esc, err := dispatch.UnmarshalEscalation([]byte(rec.Body))
	if err != nil {
		// Not our writer's: left to the redrive policy, which moves it to
		// the DLQ for inspection.
		h.log.Error("corrupt escalation; it goes to the DLQ after its receives", "message_id", rec.MessageId, "err", err)
		return false
	}
	receives := awsstore.ReceiveCount(rec.Attributes)
	_, err = h.d.Slow(ctx, esc)
	switch {
	case err == nil:
		return true
	case errors.Is(err, dispatch.ErrTargetFull):
		h.d.GiveUpRetryAfter(esc, pipeline.DefaultRetryAfter)
		return true
	case receives >= h.cfg.MaxReceives:
		h.d.GiveUp(esc)
		return true
	}
	h.log.Warn("slow stage failed; will retry", "command_id", esc.Envelope.Metadata.ID, "attempt", receives, "err", err)
	if errors.Is(err, flow.ErrClaimInProgress) && receives == 1 {
		// A copy is in progress and usually done within milliseconds:
		// come back soon to report the duplicate, not after the visibility
		// timeout.
		if verr := h.esc.Retry(ctx, dispatch.HandoffItem{Handle: rec.ReceiptHandle}, raceRetry); verr != nil {
			h.log.Warn("bringing a raced escalation back early failed; it returns after its visibility timeout", "message_id", rec.MessageId, "err", verr)
		}
	}
	return false
}

// outbox is the dispatcher's telemetry.Sink: it keeps an invocation's
// events and the handler stores them in one Append (flush) before it
// answers, so each invocation's telemetry is durable before its commands
// are acknowledged.
type outbox struct {
	store *awsstore.OutboxStore
	log   *slog.Logger
	mu    sync.Mutex
	buf   []awsstore.OutboxEntry
	// keptN events at the head of buf are kept from earlier invocations,
	// since the time of the oldest (warm.go).
	keptN int
	since time.Time
	// last is when the previous invocation settled (zero before the
	// first): a quiet environment stores at once (warm.go).
	last time.Time
}

var _ telemetry.Sink = (*outbox)(nil)

func (o *outbox) Emit(e telemetry.Event) {
	tenant, _ := telemetry.StreamOf(e)
	o.mu.Lock()
	o.buf = append(o.buf, awsstore.OutboxEntry{Tenant: tenant, Event: e})
	o.mu.Unlock()
}

// flush appends the kept events. On failure they are dropped: the
// invocation fails, and its retry emits its commands' events again.
func (o *outbox) flush(ctx context.Context) error {
	o.mu.Lock()
	buf := o.buf
	o.buf = nil
	o.mu.Unlock()
	for len(buf) > 0 {
		n := min(len(buf), awsstore.MaxOutboxAppend)
		if _, err := o.store.Append(ctx, buf[:n]); err != nil {
			return err
		}
		buf = buf[n:]
	}
	return nil
}
