package awsstore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// TransactWriteItemsAPI is DynamoDB's TransactWriteItems (the outbox's
// append).
type TransactWriteItemsAPI interface {
	TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, optFns ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
}

// Outbox limits (docs/store/aws.md, "The outbox table").
const (
	// MaxOutboxAppend is the most entries one Append takes.
	MaxOutboxAppend = 1000
	// MaxOutboxEventBytes bounds one marshalled event, as the embedded
	// store's outbox does.
	MaxOutboxEventBytes = 64 << 10
	// MaxOutboxRead is the most records one Read returns.
	MaxOutboxRead = 1000
	// outboxTxItems is how many events one transaction writes beside the
	// sequence item (DynamoDB's limit is 100 items a transaction).
	outboxTxItems = 99
	// outboxTxBytes bounds one transaction's events (DynamoDB's limit is
	// 4 MB a transaction), leaving room for keys and attributes.
	outboxTxBytes = 3 << 20
	// skSeqItem is the sort key of a tenant's sequence item; it sorts
	// after every record's 20-digit key.
	skSeqItem = "seq"
	// outboxCachedTenants bounds the tenants whose last sequence number a
	// store remembers.
	outboxCachedTenants = 10_000
)

// OutboxEntry is one telemetry event for one tenant's stream.
type OutboxEntry struct {
	Tenant string
	Event  telemetry.Event
}

// OutboxRecord is one stored event.
type OutboxRecord struct {
	Tenant string
	// Seq is the record's number in its tenant's stream: from 1, no gaps.
	Seq        uint64
	AppendedAt time.Time
	// Name is the event's name; Event its JSON (telemetry.Marshal).
	Name  string
	Event json.RawMessage
}

// OutboxStore is the telemetry outbox on one DynamoDB table with a stream:
// per-tenant streams of events, appended durably, numbered from 1 without
// gaps, read in order. The stream (NEW_IMAGE) feeds the outbox drain,
// which publishes with SNSPublisher. Build it with NewOutboxStore; it is
// safe for concurrent use.
type OutboxStore struct {
	table       string
	maxAttempts int
	retention   time.Duration
	clock       clock.Clock
	tx          TransactWriteItemsAPI
	get         GetItemAPI
	query       QueryAPI
	tables      TableAPI
	// last caches each tenant's last sequence number as this store last
	// saw it: the guess that lets an append take one call.
	last *bounded[uint64]
}

// NewOutboxStore returns the outbox of cfg's environment.
func NewOutboxStore(cfg Config) (*OutboxStore, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...)
	return &OutboxStore{
		table: cfg.OutboxTable(), maxAttempts: cfg.MaxAttempts, retention: cfg.OutboxRetention, clock: cfg.Clock,
		tx: c, get: c, query: c, tables: c, last: newBounded[uint64](outboxCachedTenants),
	}, nil
}

// OutboxTableInput is the outbox table's definition: the store's key
// schema with a stream of new images.
func OutboxTableInput(name string) *dynamodb.CreateTableInput {
	in := TableInput(name)
	in.StreamSpecification = &types.StreamSpecification{StreamEnabled: aws.Bool(true), StreamViewType: types.StreamViewTypeNewImage}
	return in
}

// CreateTables creates the outbox table with its stream and TTL on
// expires_at, unless it exists.
func (s *OutboxStore) CreateTables(ctx context.Context) error {
	return createTable(ctx, s.tables, OutboxTableInput(s.table), true)
}

// seqKey is a sequence number as a sort key: 20 digits, so that string
// order is number order.
func seqKey(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// encoded is one entry ready to write.
type encoded struct {
	index int
	name  string
	event []byte
}

// Append files each entry under its tenant's stream and returns the
// sequence numbers, in the entries' order. Each tenant's entries are
// written in transactions of up to 99 events together with the tenant's
// sequence item, conditioned on the last number this store expects, so
// that numbers are gapless and no two appends get the same ones.
func (s *OutboxStore) Append(ctx context.Context, entries []OutboxEntry) ([]uint64, error) {
	if len(entries) == 0 || len(entries) > MaxOutboxAppend {
		return nil, fmt.Errorf("awsstore outbox: append: %d entries: give 1 to %d per call", len(entries), MaxOutboxAppend)
	}
	byTenant := map[string][]encoded{}
	var tenants []string
	for i, e := range entries {
		if err := checkKey("outbox tenant", e.Tenant); err != nil {
			return nil, fmt.Errorf("awsstore outbox: append entry %d: %w", i, err)
		}
		if e.Event == nil {
			return nil, fmt.Errorf("awsstore outbox: append entry %d: no event", i)
		}
		b, err := telemetry.Marshal(e.Event)
		if err != nil {
			return nil, fmt.Errorf("awsstore outbox: append entry %d (%s): %w", i, e.Event.EventName(), err)
		}
		if len(b) > MaxOutboxEventBytes {
			return nil, fmt.Errorf("awsstore outbox: append entry %d (%s): %d bytes, over the limit of %d", i, e.Event.EventName(), len(b), MaxOutboxEventBytes)
		}
		if _, ok := byTenant[e.Tenant]; !ok {
			tenants = append(tenants, e.Tenant)
		}
		byTenant[e.Tenant] = append(byTenant[e.Tenant], encoded{index: i, name: e.Event.EventName(), event: b})
	}
	seqs := make([]uint64, len(entries))
	now := s.clock.Now()
	for _, tenant := range tenants {
		evs := byTenant[tenant]
		for len(evs) > 0 {
			n, size := 0, 0
			for n < len(evs) && n < outboxTxItems && size+len(evs[n].event) <= outboxTxBytes {
				size += len(evs[n].event)
				n++
			}
			first, err := s.appendTx(ctx, tenant, evs[:n], now)
			if err != nil {
				return nil, err
			}
			for j, e := range evs[:n] {
				seqs[e.index] = first + uint64(j)
			}
			evs = evs[n:]
		}
	}
	return seqs, nil
}

// appendTx writes evs as the next numbers of tenant's stream in one
// transaction and returns the first number.
func (s *OutboxStore) appendTx(ctx context.Context, tenant string, evs []encoded, now time.Time) (uint64, error) {
	guess, _ := s.last.get(tenant)
	ttl, exact := expiry(now.Add(s.retention))
	for range s.maxAttempts {
		items := make([]types.TransactWriteItem, 0, len(evs)+1)
		seqItem := &types.Update{
			TableName:                           aws.String(s.table),
			Key:                                 map[string]types.AttributeValue{attrPK: str(tenant), attrSK: str(skSeqItem)},
			UpdateExpression:                    aws.String("SET #last = :new"),
			ExpressionAttributeNames:            map[string]string{"#last": "last"},
			ExpressionAttributeValues:           map[string]types.AttributeValue{":new": num(int64(guess) + int64(len(evs)))},
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}
		if guess == 0 {
			seqItem.ConditionExpression = aws.String("attribute_not_exists(#last)")
		} else {
			seqItem.ConditionExpression = aws.String("#last = :old")
			seqItem.ExpressionAttributeValues[":old"] = num(int64(guess))
		}
		items = append(items, types.TransactWriteItem{Update: seqItem})
		for j, e := range evs {
			items = append(items, types.TransactWriteItem{Put: &types.Put{
				TableName: aws.String(s.table),
				Item: map[string]types.AttributeValue{
					attrPK: str(tenant), attrSK: str(seqKey(guess + 1 + uint64(j))),
					"name": str(e.name), "event": str(string(e.event)), "appended_at_ns": num(now.UnixNano()),
					attrExpiresAt: ttl, attrExpiresAtNS: exact,
				},
				ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
				ExpressionAttributeNames: map[string]string{"#pk": attrPK},
			}})
		}
		_, err := s.tx.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items})
		if err == nil {
			s.last.put(tenant, guess+uint64(len(evs)))
			return guess + 1, nil
		}
		var cancel *types.TransactionCanceledException
		if !errors.As(err, &cancel) {
			return 0, fmt.Errorf("awsstore outbox: append to %s: %w", tenant, err)
		}
		// Another writer moved the sequence (ConditionalCheckFailed on the
		// sequence item, whose ALL_OLD says where it is now), or wrote at
		// the same moment (TransactionConflict): start again from there.
		last, err := s.lastSeq(ctx, tenant, cancel)
		if err != nil {
			return 0, err
		}
		guess = last
	}
	s.last.drop(tenant)
	return 0, fmt.Errorf("awsstore outbox: append to %s: other writers kept moving the sequence through %d attempts; try again", tenant, s.maxAttempts)
}

// lastSeq is tenant's last sequence number: from the cancelled
// transaction's ALL_OLD when it carries it, else one consistent read.
func (s *OutboxStore) lastSeq(ctx context.Context, tenant string, cancel *types.TransactionCanceledException) (uint64, error) {
	var item map[string]types.AttributeValue
	if len(cancel.CancellationReasons) > 0 && aws.ToString(cancel.CancellationReasons[0].Code) == "ConditionalCheckFailed" {
		item = cancel.CancellationReasons[0].Item
	}
	if item == nil {
		out, err := s.get.GetItem(ctx, &dynamodb.GetItemInput{
			TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
			Key: map[string]types.AttributeValue{attrPK: str(tenant), attrSK: str(skSeqItem)},
		})
		if err != nil {
			return 0, fmt.Errorf("awsstore outbox: append to %s: read its sequence: %w", tenant, err)
		}
		if out.Item == nil {
			return 0, nil
		}
		item = out.Item
	}
	n, err := getN(item, "last")
	if err != nil || n < 0 {
		return 0, corrupt(s.table, tenant, fmt.Errorf("sequence item: %v", err))
	}
	return uint64(n), nil
}

// Read returns up to limit of tenant's records after sequence number
// after, in order, skipping records past their retention at the store
// clock's now. One strongly consistent Query per 1 MB page.
func (s *OutboxStore) Read(ctx context.Context, tenant string, after uint64, limit int) ([]OutboxRecord, error) {
	if err := checkKey("outbox tenant", tenant); err != nil {
		return nil, fmt.Errorf("awsstore outbox: read: %w", err)
	}
	if limit < 1 || limit > MaxOutboxRead {
		return nil, fmt.Errorf("awsstore outbox: read %s: limit %d: give 1 to %d", tenant, limit, MaxOutboxRead)
	}
	if after == ^uint64(0) {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		ConsistentRead:           aws.Bool(true),
		KeyConditionExpression:   aws.String("#pk = :t AND #sk BETWEEN :from AND :to"),
		FilterExpression:         aws.String("#expns > :now"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":t": str(tenant), ":from": str(seqKey(after + 1)), ":to": str(seqKey(^uint64(0))),
			":now": num(s.clock.Now().UnixNano()),
		},
		Limit: aws.Int32(int32(limit)),
	}
	var out []OutboxRecord
	for {
		page, err := s.query.Query(ctx, in)
		if err != nil {
			return nil, fmt.Errorf("awsstore outbox: read %s: %w", tenant, err)
		}
		for _, it := range page.Items {
			r, err := outboxRecord(tenant, it)
			if err != nil {
				return nil, corrupt(s.table, tenant, err)
			}
			out = append(out, r)
			if len(out) == limit {
				return out, nil
			}
		}
		if page.LastEvaluatedKey == nil {
			return out, nil
		}
		in.ExclusiveStartKey = page.LastEvaluatedKey
	}
}

func outboxRecord(tenant string, it map[string]types.AttributeValue) (OutboxRecord, error) {
	r := OutboxRecord{Tenant: tenant}
	sk, err := getS(it, attrSK)
	if err != nil {
		return r, err
	}
	if r.Seq, err = strconv.ParseUint(sk, 10, 64); err != nil || len(sk) != 20 {
		return r, fmt.Errorf("sort key %q is not a 20-digit sequence number", sk)
	}
	if r.Name, err = getS(it, "name"); err != nil {
		return r, err
	}
	ev, err := getS(it, "event")
	if err != nil {
		return r, err
	}
	r.Event = json.RawMessage(ev)
	at, err := getN(it, "appended_at_ns")
	if err != nil {
		return r, err
	}
	r.AppendedAt = time.Unix(0, at).UTC()
	return r, nil
}
