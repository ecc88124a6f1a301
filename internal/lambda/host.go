package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/internal/node"
	"github.com/snavio/snavio/internal/store/awsstore"
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

// escalationAPI is what the host calls on the escalation queue.
type escalationAPI interface {
	SendMessage(ctx context.Context, in *sqs.SendMessageInput, optFns ...func(*sqs.Options)) (*sqs.SendMessageOutput, error)
	ChangeMessageVisibility(ctx context.Context, in *sqs.ChangeMessageVisibilityInput, optFns ...func(*sqs.Options)) (*sqs.ChangeMessageVisibilityOutput, error)
}

// Host is the state that lives across invocations of one execution
// environment: the dispatcher with its caches, the clients. Build it once
// at init with New; Lambda runs one invocation at a time per environment.
type Host struct {
	cfg Config
	d   *dispatch.Dispatcher
	esc escalationAPI
	out *outbox
	log *slog.Logger
}

// New assembles the dispatcher on the AWS store (as internal/serve does
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
	out := &outbox{store: ob}
	asm, err := dispatch.Assemble(ctx, dispatch.Config{Registry: reg, FlowStore: fs, Sender: sender,
		Telemetry: out, Clock: clk, Logger: log, Flow: flow.Config{Instance: cfg.Instance}})
	if err != nil {
		return nil, err
	}
	d := asm.Dispatcher
	// The cold load's events (cache refreshes) are stored now, so that
	// the first invocation does not carry them.
	if err := out.flush(ctx); err != nil {
		return nil, fmt.Errorf("storing the cold load's telemetry in the outbox: %w", err)
	}
	esc := sqs.NewFromConfig(cfg.Store.AWSConfig, cfg.EscalationOptions...)
	return &Host{cfg: cfg, d: d, esc: esc, out: out, log: log}, nil
}

// Ingest is the EventBridge rule's target: the shield and the fast stage
// on one event, then delivery (done by the fast stage) or the durable
// hand-off to the escalation queue. It returns nil only once the command
// is delivered, refused with its telemetry in the outbox, or handed off;
// an error makes Lambda retry the event (then its on-failure
// destination). A command that can never succeed (invalid) is not an
// error: its snavio.command.invalid is its answer.
func (h *Host) Ingest(ctx context.Context, ev events.CloudWatchEvent) error {
	if ev.DetailType != envelope.EventType {
		// The rule matches commands only; anything else is not ours.
		h.log.Warn("ignoring an event that is not a command; check the rule's pattern", "detail_type", ev.DetailType, "source", ev.Source)
		return nil
	}
	r, esc := h.d.Fast(ctx, ev.Source, ev.Detail)
	var handErr error
	if r.Outcome == dispatch.Escalated {
		handErr = h.handOff(ctx, esc)
	}
	if err := h.out.flush(ctx); err != nil {
		return fmt.Errorf("command %s: its telemetry is not stored; retrying the event: %w", r.CommandID, err)
	}
	if handErr != nil {
		return fmt.Errorf("command %s: handing it to the slow stage failed; retrying the event: %w", r.CommandID, handErr)
	}
	return nil
}

// handOff puts esc on the escalation queue.
func (h *Host) handOff(ctx context.Context, esc *dispatch.Escalation) error {
	wire, err := esc.Marshal()
	if err != nil {
		return err
	}
	_, err = h.esc.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: aws.String(h.cfg.EscalationQueueURL), MessageBody: aws.String(string(wire))})
	return err
}

// Slow consumes the escalation queue with partial batch responses: a
// record is reported failed (and comes back after its visibility
// timeout, then goes to the DLQ) unless it was delivered, refused with
// telemetry, or given up with snavio.command.failed. If the batch's
// telemetry cannot be stored, every record is reported failed: the
// retries are at-least-once and strict routes drop them as duplicates.
func (h *Host) Slow(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
	var resp events.SQSEventResponse
	for i := range ev.Records {
		if !h.slowOne(ctx, &ev.Records[i]) {
			resp.BatchItemFailures = append(resp.BatchItemFailures, events.SQSBatchItemFailure{ItemIdentifier: ev.Records[i].MessageId})
		}
	}
	if err := h.out.flush(ctx); err != nil {
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
	receives, err := strconv.Atoi(rec.Attributes["ApproximateReceiveCount"])
	if err != nil || receives < 1 {
		receives = 1
	}
	_, err = h.d.Slow(ctx, esc)
	switch {
	case err == nil:
		return true
	case errors.Is(err, dispatch.ErrTargetFull):
		h.d.GiveUpRetryAfter(esc, node.DefaultRetryAfter)
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
		_, verr := h.esc.ChangeMessageVisibility(ctx, &sqs.ChangeMessageVisibilityInput{
			QueueUrl: aws.String(h.cfg.EscalationQueueURL), ReceiptHandle: aws.String(rec.ReceiptHandle), VisibilityTimeout: int32(raceRetry / time.Second)})
		if verr != nil {
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
	mu    sync.Mutex
	buf   []awsstore.OutboxEntry
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
