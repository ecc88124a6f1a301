package awsstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/pkg/dispatch"
)

// MaxArchiveDetail bounds an archived event's detail: EventBridge's entry
// limit, as the embedded store's archive.
const MaxArchiveDetail = 256 << 10

// Archive item layout (docs/store/aws.md, "The archive table"): pk
// "event#<id>", sk "event"; the detail is binary.
const (
	archivePKPrefix = "event#"
	archiveSK       = "event"
)

// ArchiveTable is the archive table's name: <prefix>archive.
func (c Config) ArchiveTable() string { return c.TablePrefix + "archive" }

var _ dispatch.Archive = (*ArchiveStore)(nil)

// ArchiveStore is dispatch.Archive on one DynamoDB table: the events the
// dispatcher took from the bus, each with the shield's verdict, for
// replay. Build it with NewArchiveStore; it is safe for concurrent use.
type ArchiveStore struct {
	table       string
	maxAttempts int
	put         PutItemAPI
	tx          TransactWriteItemsAPI
	get         GetItemAPI
	tables      TableAPI
}

// NewArchiveStore returns the archive of cfg's environment.
func NewArchiveStore(cfg Config) (*ArchiveStore, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...)
	return &ArchiveStore{table: cfg.ArchiveTable(), maxAttempts: cfg.MaxAttempts, put: c, tx: c, get: c, tables: c}, nil
}

// CreateTables creates the archive table, unless it exists.
func (a *ArchiveStore) CreateTables(ctx context.Context) error {
	return createTable(ctx, a.tables, TableInput(a.table), false)
}

// Append implements dispatch.Archive: one conditional PutItem for one
// event, else one transaction (all or none); an id already archived is
// left as it is.
func (a *ArchiveStore) Append(ctx context.Context, events []dispatch.Archived) error {
	if len(events) == 0 || len(events) > dispatch.MaxArchiveBatch {
		return fmt.Errorf("awsstore archive: %d events: give 1 to %d per call", len(events), dispatch.MaxArchiveBatch)
	}
	items := make([]map[string]types.AttributeValue, 0, len(events))
	seen := make(map[string]bool, len(events))
	for i := range events {
		e := &events[i]
		if err := checkArchived(e); err != nil {
			return err
		}
		if seen[e.EventID] {
			continue // repeated in the batch: the first copy stays
		}
		seen[e.EventID] = true
		items = append(items, archiveItem(e))
	}
	if len(items) == 1 {
		_, err := a.put.PutItem(ctx, a.putInput(items[0]))
		if _, exists := conditionFailed(err); err != nil && !exists {
			return fmt.Errorf("awsstore archive: append %s: %w", events[0].EventID, err)
		}
		return nil
	}
	for range a.maxAttempts {
		tx := make([]types.TransactWriteItem, len(items))
		for i, it := range items {
			in := a.putInput(it)
			tx[i] = types.TransactWriteItem{Put: &types.Put{TableName: in.TableName, Item: in.Item,
				ConditionExpression: in.ConditionExpression, ExpressionAttributeNames: in.ExpressionAttributeNames}}
		}
		_, err := a.tx.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: tx})
		if err == nil {
			return nil
		}
		var cancel *types.TransactionCanceledException
		if !errors.As(err, &cancel) || len(cancel.CancellationReasons) != len(items) {
			return fmt.Errorf("awsstore archive: append %d events: %w", len(items), err)
		}
		// Drop the events already archived and write the others again; a
		// conflict with another writer is written again as it is.
		kept := items[:0]
		for i, r := range cancel.CancellationReasons {
			if aws.ToString(r.Code) != "ConditionalCheckFailed" {
				kept = append(kept, items[i])
			}
		}
		if items = kept; len(items) == 0 {
			return nil
		}
	}
	return fmt.Errorf("awsstore archive: append: transactions kept conflicting through %d attempts; try again", a.maxAttempts)
}

func (a *ArchiveStore) putInput(item map[string]types.AttributeValue) *dynamodb.PutItemInput {
	return &dynamodb.PutItemInput{TableName: aws.String(a.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(#pk)"), ExpressionAttributeNames: map[string]string{"#pk": attrPK}}
}

// checkArchived validates e before any write.
func checkArchived(e *dispatch.Archived) error {
	if err := checkKey("archive event id", e.EventID); err != nil {
		return fmt.Errorf("awsstore archive: %w", err)
	}
	switch {
	case e.ReceivedAt.IsZero():
		return fmt.Errorf("awsstore archive: event %s: no received time: set ReceivedAt", e.EventID)
	case len(e.Detail) > MaxArchiveDetail:
		return fmt.Errorf("awsstore archive: event %s: detail of %d bytes, over the limit of %d", e.EventID, len(e.Detail), MaxArchiveDetail)
	}
	switch e.Verdict {
	case "", dispatch.VerdictAccepted, dispatch.VerdictRejected, dispatch.VerdictNotCommand:
	default:
		return fmt.Errorf("awsstore archive: event %s: unknown verdict %.40q: use accepted, rejected or not_command", e.EventID, e.Verdict)
	}
	return nil
}

func archiveItem(e *dispatch.Archived) map[string]types.AttributeValue {
	it := map[string]types.AttributeValue{
		attrPK:        str(archivePKPrefix + e.EventID),
		attrSK:        str(archiveSK),
		"source":      str(e.Source),
		"detail_type": str(e.DetailType),
		"received_ns": num(e.ReceivedAt.UnixNano()),
	}
	if len(e.Detail) > 0 {
		it["detail"] = &types.AttributeValueMemberB{Value: e.Detail}
	}
	for name, v := range map[string]string{"verdict": string(e.Verdict), "reason": e.Reason, "key_version": e.KeyVersion} {
		if v != "" {
			it[name] = str(v)
		}
	}
	return it
}

// Get returns the archived event id, and whether there is one.
func (a *ArchiveStore) Get(ctx context.Context, id string) (dispatch.Archived, bool, error) {
	if err := checkKey("archive event id", id); err != nil {
		return dispatch.Archived{}, false, fmt.Errorf("awsstore archive: %w", err)
	}
	out, err := a.get.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(a.table), ConsistentRead: aws.Bool(true),
		Key: map[string]types.AttributeValue{attrPK: str(archivePKPrefix + id), attrSK: str(archiveSK)}})
	if err != nil {
		return dispatch.Archived{}, false, fmt.Errorf("awsstore archive: get %s: %w", id, err)
	}
	if out.Item == nil {
		return dispatch.Archived{}, false, nil
	}
	e := dispatch.Archived{EventID: id}
	var errs []error
	var recv int64
	e.Source, err = getS(out.Item, "source")
	errs = append(errs, err)
	e.DetailType, err = getS(out.Item, "detail_type")
	errs = append(errs, err)
	recv, err = getN(out.Item, "received_ns")
	errs = append(errs, err)
	switch d := out.Item["detail"].(type) {
	case nil: // an empty detail
	case *types.AttributeValueMemberB:
		e.Detail = d.Value
	default:
		errs = append(errs, errors.New("attribute detail: not binary"))
	}
	if err := errors.Join(errs...); err != nil {
		return dispatch.Archived{}, false, fmt.Errorf("%w: table %s, event %s: %v", ErrCorrupt, a.table, id, err)
	}
	e.ReceivedAt = time.Unix(0, recv).UTC()
	v, _ := getS(out.Item, "verdict")
	e.Verdict = dispatch.Verdict(v)
	e.Reason, _ = getS(out.Item, "reason")
	e.KeyVersion, _ = getS(out.Item, "key_version")
	return e, true, nil
}
