package awsstore

import (
	"fmt"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// DecodeOutboxImage reads an outbox table item as its stream carries it
// (a record's NewImage): an event record, or the tenant's sequence item,
// for which event is false. The outbox drain publishes the event records.
func DecodeOutboxImage(item map[string]types.AttributeValue) (rec OutboxRecord, event bool, err error) {
	tenant, err := getS(item, attrPK)
	if err != nil {
		return rec, false, fmt.Errorf("awsstore outbox: stream image: %w", err)
	}
	sk, err := getS(item, attrSK)
	if err != nil {
		return rec, false, fmt.Errorf("awsstore outbox: stream image of %.80q: %w", tenant, err)
	}
	if sk == skSeqItem {
		return OutboxRecord{Tenant: tenant}, false, nil
	}
	if err := checkKey("outbox tenant", tenant); err != nil {
		return rec, false, fmt.Errorf("awsstore outbox: stream image: %w", err)
	}
	rec, err = outboxRecord(tenant, item)
	if err != nil {
		return rec, false, fmt.Errorf("awsstore outbox: stream image of %s: %w", tenant, err)
	}
	switch {
	case rec.Seq == 0:
		return rec, false, fmt.Errorf("awsstore outbox: stream image of %s: sequence number 0: numbers start at 1", tenant)
	case rec.Name == "" || len(rec.Event) == 0:
		return rec, false, fmt.Errorf("awsstore outbox: stream image of %s seq %d: no event name or no event", tenant, rec.Seq)
	}
	return rec, true, nil
}
