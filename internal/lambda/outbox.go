package lambda

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Metrics of the outbox function (platform metrics; the spec names none
// for the drain).
const (
	MetricOutboxPublished  = "Snavio.Outbox.Published"
	MetricOutboxRetried    = "Snavio.Outbox.Retried"
	MetricOutboxDropped    = "Snavio.Outbox.Dropped"
	MetricOutboxRedelivery = "Snavio.Outbox.BatchRetried"
	MetricOutboxCorrupt    = "Snavio.Outbox.Corrupt"
	MetricOutboxTTLSkipped = "Snavio.Outbox.TTLRemoveSkipped"
)

// ttlPrincipal is the userIdentity.principalId of a stream record that
// DynamoDB's TTL sweep wrote (a REMOVE of an expired item).
const ttlPrincipal = "dynamodb.amazonaws.com"

// Outbox drain defaults (OutboxConfig).
const (
	DefaultOutboxAttempts = 3
	DefaultOutboxBackoff  = 100 * time.Millisecond
)

// telemetryPublisher is what the drain publishes with
// (*awsstore.SNSPublisher).
type telemetryPublisher interface {
	Publish(ctx context.Context, msgs []awsstore.TelemetryMessage) []awsstore.PublishFailure
}

// outboxAppender stores the drain's own reports (*awsstore.OutboxStore).
type outboxAppender interface {
	Append(ctx context.Context, entries []awsstore.OutboxEntry) ([]uint64, error)
}

// OutboxConfig configures an OutboxDrain.
type OutboxConfig struct {
	// Attempts is how many times one invocation publishes a retryable
	// failure before it hands the record back to the stream (default 3).
	Attempts int
	// Backoff is the wait before the second attempt, doubled after each
	// (default 100 ms).
	Backoff time.Duration
	// Sleep waits between attempts (default clock.Sleep); tests pass one
	// that returns at once.
	Sleep   func(context.Context, time.Duration) error
	Clock   clock.Clock
	Metrics *EMF
	Logger  *slog.Logger
}

// OutboxDrain is the outbox function: the outbox table's stream (an event
// source mapping with a batching window of 1 s and batches of 10 records,
// ReportBatchItemFailures on) in, each tenant's events out to its SNS
// topic, in order of their sequence numbers, 10 to a PublishBatch.
type OutboxDrain struct {
	pub    telemetryPublisher
	outbox outboxAppender
	cfg    OutboxConfig
}

// NewOutboxDrain returns the drain publishing with pub and reporting
// given-up events into outbox.
func NewOutboxDrain(pub telemetryPublisher, outbox outboxAppender, cfg OutboxConfig) *OutboxDrain {
	if cfg.Attempts < 1 {
		cfg.Attempts = DefaultOutboxAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = DefaultOutboxBackoff
	}
	if cfg.Sleep == nil {
		cfg.Sleep = clock.Sleep
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.System()
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewEMF(FunctionOutbox, cfg.Clock)
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &OutboxDrain{pub: pub, outbox: outbox, cfg: cfg}
}

// streamImage converts a stream record's image to the SDK's attribute
// values. The outbox writes strings and numbers only; anything else is
// not an outbox item.
func streamImage(img map[string]events.DynamoDBAttributeValue) (map[string]types.AttributeValue, error) {
	out := make(map[string]types.AttributeValue, len(img))
	for k, v := range img {
		switch v.DataType() {
		case events.DataTypeString:
			out[k] = &types.AttributeValueMemberS{Value: v.String()}
		case events.DataTypeNumber:
			out[k] = &types.AttributeValueMemberN{Value: v.Number()}
		default:
			return nil, fmt.Errorf("attribute %.40q has type %d; the outbox writes strings and numbers only", k, v.DataType())
		}
	}
	return out, nil
}

// drainItem is one event to publish and the stream record it came from.
type drainItem struct {
	record int
	rec    awsstore.OutboxRecord
}

// Handle publishes the batch's event records. Records that are not
// events (the sequence item, TTL removals, corrupt images) are skipped; a
// record whose publish failed retryably through every attempt is
// reported with the lowest such sequence number, so the stream hands it
// (and what follows it) back; a record SNS refuses for good is given up
// with snavio.telemetry.dropped (reason publish_failed) on the tenant's
// stream and on the platform's.
func (d *OutboxDrain) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	m, log := d.cfg.Metrics, d.cfg.Logger
	items := make([]drainItem, 0, len(ev.Records))
	type key struct {
		tenant string
		seq    uint64
	}
	seen := make(map[key]bool, len(ev.Records))
	for i := range ev.Records {
		r := &ev.Records[i]
		switch r.EventName {
		case string(events.DynamoDBOperationTypeInsert):
		case string(events.DynamoDBOperationTypeRemove):
			if r.UserIdentity != nil && r.UserIdentity.PrincipalID == ttlPrincipal {
				m.Count(MetricOutboxTTLSkipped, 1)
			}
			continue
		default:
			continue // MODIFY: the sequence item moving on
		}
		img, err := streamImage(r.Change.NewImage)
		var rec awsstore.OutboxRecord
		event := false
		if err == nil {
			rec, event, err = awsstore.DecodeOutboxImage(img)
		}
		if err != nil {
			// Publishing it again can never succeed; handing it back would
			// hold the shard forever.
			m.Count(MetricOutboxCorrupt, 1)
			log.Error("outbox stream record is not an outbox item; skipped (check what writes to the outbox table)", "sequence_number", r.Change.SequenceNumber, "err", err)
			continue
		}
		if !event || seen[key{rec.Tenant, rec.Seq}] {
			continue
		}
		seen[key{rec.Tenant, rec.Seq}] = true
		items = append(items, drainItem{record: i, rec: rec})
	}
	// Per tenant, in sequence order (a batch holds whole transactions, and
	// the stream's order is per item).
	sort.SliceStable(items, func(i, j int) bool {
		if items[i].rec.Tenant != items[j].rec.Tenant {
			return items[i].rec.Tenant < items[j].rec.Tenant
		}
		return items[i].rec.Seq < items[j].rec.Seq
	})

	todo := items
	var given []drainItem
	var lastFailure awsstore.PublishFailure
	for attempt := 1; len(todo) > 0; attempt++ {
		msgs := make([]awsstore.TelemetryMessage, len(todo))
		for i, it := range todo {
			msgs[i] = awsstore.TelemetryMessage{Tenant: it.rec.Tenant, Seq: it.rec.Seq, Name: it.rec.Name, Event: it.rec.Event}
		}
		failed := d.pub.Publish(ctx, msgs)
		m.Count(MetricOutboxPublished, int64(len(todo)-len(failed)))
		var retry []drainItem
		for _, f := range failed {
			if f.Retryable {
				retry = append(retry, todo[f.Index])
				lastFailure = f
				continue
			}
			it := todo[f.Index]
			log.Error("outbox: SNS refused a telemetry event for good; giving it up", "tenant", it.rec.Tenant, "seq", it.rec.Seq, "event", it.rec.Name, "code", f.Code, "err", f.Message)
			given = append(given, it)
		}
		if len(retry) == 0 || attempt == d.cfg.Attempts {
			todo = retry
			break
		}
		m.Count(MetricOutboxRetried, int64(len(retry)))
		sort.SliceStable(retry, func(i, j int) bool {
			return retry[i].rec.Tenant < retry[j].rec.Tenant || retry[i].rec.Tenant == retry[j].rec.Tenant && retry[i].rec.Seq < retry[j].rec.Seq
		})
		todo = retry
		if err := d.cfg.Sleep(ctx, d.cfg.Backoff<<(attempt-1)); err != nil {
			break
		}
	}

	var resp events.DynamoDBEventResponse
	first := len(ev.Records)
	for _, it := range todo {
		first = min(first, it.record)
	}
	if err := d.giveUp(ctx, given); err != nil {
		log.Error("outbox: storing the report of given-up events failed; the batch is handed back from the first of them", "err", err)
		for _, it := range given {
			first = min(first, it.record)
		}
	}
	if first < len(ev.Records) {
		m.Count(MetricOutboxRedelivery, 1)
		log.Warn("outbox: publishing failed through every attempt; the stream hands the batch back from this record",
			"sequence_number", ev.Records[first].Change.SequenceNumber, "still_failing", len(todo), "code", lastFailure.Code, "err", lastFailure.Message)
		resp.BatchItemFailures = []events.DynamoDBBatchItemFailure{{ItemIdentifier: ev.Records[first].Change.SequenceNumber}}
	}
	return resp, nil
}

// giveUp reports given-up events, per tenant, as snavio.telemetry.dropped
// in the outbox: on the tenant's stream (its topic may take them even if
// it refused the event, e.g. one too large) and on the platform's, which
// alerts the operators. A given-up report is never reported again, so a
// missing topic cannot feed itself.
func (d *OutboxDrain) giveUp(ctx context.Context, given []drainItem) error {
	if len(given) == 0 {
		return nil
	}
	now := d.cfg.Clock.Now().UTC()
	byTenant := map[string]*telemetry.Dropped{}
	var tenants []string
	for _, it := range given {
		d.cfg.Metrics.Count(MetricOutboxDropped, 1)
		if it.rec.Name == telemetry.NameDropped || it.rec.Tenant == telemetry.PlatformTenant {
			continue
		}
		dr := byTenant[it.rec.Tenant]
		if dr == nil {
			dr = &telemetry.Dropped{Tenant: it.rec.Tenant, Reason: telemetry.DroppedPublishFailed}
			byTenant[it.rec.Tenant] = dr
			tenants = append(tenants, it.rec.Tenant)
		}
		dr.DroppedEvents++
		dr.QueueAgeSeconds = max(dr.QueueAgeSeconds, int64(now.Sub(it.rec.AppendedAt)/time.Second))
		if it.rec.AppendedAt.After(dr.LastReceivedAt) {
			dr.LastReceivedAt = it.rec.AppendedAt
		}
	}
	var entries []awsstore.OutboxEntry
	for _, t := range tenants {
		entries = append(entries, awsstore.OutboxEntry{Tenant: t, Event: *byTenant[t]},
			awsstore.OutboxEntry{Tenant: telemetry.PlatformTenant, Event: *byTenant[t]})
	}
	if len(entries) == 0 {
		return nil
	}
	_, err := d.outbox.Append(ctx, entries)
	return err
}
