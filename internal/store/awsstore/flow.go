package awsstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

var _ flow.Store = (*FlowStore)(nil)

// Limits on caller input, the same as the embedded store's where they
// share one (docs/store/aws.md, "Item sizes").
const (
	maxKeyLen          = 1024
	maxLeaseHolders    = 10_000
	maxRollupsPerPut   = 10_000
	rollupShards       = 4
	batchWriteMaxItems = 25
	// singleton is the sort key of every item that is alone in its
	// partition (counters, leases, dedupe records).
	singleton = "-"
)

// Partition key prefixes of the flow table's item kinds.
const (
	pkCounter   = "ctr#"
	pkLease     = "lease#"
	pkDedupe    = "dedupe#"
	pkBanLedger = "banlog#"
	pkBans      = "bans"
	pkRollups   = "rollup#"
)

// FlowStore is flow.Store on one DynamoDB table. Build it with
// NewFlowStore; it is safe for concurrent use.
type FlowStore struct {
	table       string
	maxAttempts int
	put         PutItemAPI
	update      UpdateItemAPI
	del         DeleteItemAPI
	get         GetItemAPI
	query       QueryAPI
	batch       BatchWriteItemAPI
	tables      TableAPI
}

// NewFlowStore returns the flow store of cfg's environment, on a DynamoDB
// client built from cfg.AWSConfig and cfg.ClientOptions.
func NewFlowStore(cfg Config) (*FlowStore, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...)
	return &FlowStore{
		table: cfg.FlowTable(), maxAttempts: cfg.MaxAttempts,
		put: c, update: c, del: c, get: c, query: c, batch: c, tables: c,
	}, nil
}

// CreateTables creates the flow table with TTL on expires_at, unless it
// exists. Deployments make it with the stack; tests and development call
// this.
func (s *FlowStore) CreateTables(ctx context.Context) error {
	return createTable(ctx, s.tables, TableInput(s.table), true)
}

func checkKey(what, k string) error {
	switch {
	case k == "":
		return fmt.Errorf("%s: empty: give a non-empty key", what)
	case len(k) > maxKeyLen:
		return fmt.Errorf("%s %.40q...: %d bytes, over the limit of %d", what, k, len(k), maxKeyLen)
	case !utf8.ValidString(k):
		return fmt.Errorf("%s %q: not valid UTF-8, which DynamoDB strings must be", what, k)
	}
	return nil
}

func key(pk string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(pk), attrSK: str(singleton)}
}

// live reports whether an item (as a failed condition returned it) is
// alive at now; a missing item is not.
func live(item map[string]types.AttributeValue, now time.Time) (bool, error) {
	if item == nil {
		return false, nil
	}
	exp, err := expiresNS(item)
	if err != nil {
		return false, err
	}
	return exp > now.UnixNano(), nil
}

// oldItem returns what a failed condition saw: the ALL_OLD item if the
// response carried it, else a strongly consistent read (one more call; an
// emulator may omit ALL_OLD).
func (s *FlowStore) oldItem(ctx context.Context, pk string, seen map[string]types.AttributeValue) (map[string]types.AttributeValue, error) {
	if seen != nil {
		return seen, nil
	}
	out, err := s.get.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: key(pk), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil, err
	}
	return out.Item, nil
}

// Take implements flow.Counters. A live counter or a missing one takes one
// UpdateItem; an expired one not yet deleted by TTL is replaced by a
// conditional PutItem (its own reset path: ADD would add to the dead
// count); a partial grant takes a second UpdateItem sized by the count the
// failed condition returned.
func (s *FlowStore) Take(ctx context.Context, k string, want, limit int64, expiresAt, now time.Time) (int64, error) {
	if err := checkKey("counter key", k); err != nil {
		return 0, err
	}
	if want < 0 || limit < 0 {
		return 0, fmt.Errorf("take %q: negative n %d or limit %d: both must be >= 0", k, want, limit)
	}
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	full := min(want, limit)
	if full == 0 {
		return 0, nil
	}
	pk := pkCounter + k
	grant := full
	for range s.maxAttempts {
		err := s.addCount(ctx, pk, grant, limit, expiresAt, now)
		if err == nil {
			return grant, nil
		}
		seen, failed := conditionFailed(err)
		if !failed {
			return 0, fmt.Errorf("awsstore: take counter %q: %w", k, err)
		}
		old, err := s.oldItem(ctx, pk, seen)
		if err != nil {
			return 0, fmt.Errorf("awsstore: take counter %q: %w", k, err)
		}
		alive, err := live(old, now)
		if err != nil {
			return 0, corrupt(s.table, pk, err)
		}
		if !alive {
			err = s.resetCount(ctx, pk, full, expiresAt, now)
			if err == nil {
				return full, nil
			}
			if seen, failed = conditionFailed(err); !failed {
				return 0, fmt.Errorf("awsstore: reset counter %q: %w", k, err)
			}
			// Someone revived it first: take from theirs.
			if old, err = s.oldItem(ctx, pk, seen); err != nil {
				return 0, fmt.Errorf("awsstore: take counter %q: %w", k, err)
			}
			if alive, err = live(old, now); err != nil {
				return 0, corrupt(s.table, pk, err)
			}
			if !alive {
				continue
			}
		}
		count, err := getN(old, "n")
		if err != nil {
			return 0, corrupt(s.table, pk, err)
		}
		if count >= limit {
			return 0, nil
		}
		grant = min(want, limit-count)
	}
	return 0, fmt.Errorf("awsstore: take counter %q: the item changed under %d conditional writes in a row; retry", k, s.maxAttempts)
}

// addCount adds grant to a live counter that has room for it, or creates
// a missing one; the condition fails on a full or expired counter.
func (s *FlowStore) addCount(ctx context.Context, pk string, grant, limit int64, expiresAt, now time.Time) error {
	ttl, exact := expiry(expiresAt)
	_, err := s.update.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.table),
		Key:                 key(pk),
		UpdateExpression:    aws.String("ADD #n :grant SET #exp = if_not_exists(#exp, :exp), #expns = if_not_exists(#expns, :expns)"),
		ConditionExpression: aws.String("attribute_not_exists(#pk) OR (#expns > :now AND #n <= :room)"),
		ExpressionAttributeNames: map[string]string{
			"#pk": attrPK, "#n": "n", "#exp": attrExpiresAt, "#expns": attrExpiresAtNS,
		},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":grant": num(grant), ":exp": ttl, ":expns": exact,
			":now": num(now.UnixNano()), ":room": num(limit - grant),
		},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// resetCount replaces a missing or expired counter with one holding grant.
func (s *FlowStore) resetCount(ctx context.Context, pk string, grant int64, expiresAt, now time.Time) error {
	ttl, exact := expiry(expiresAt)
	_, err := s.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(singleton), "n": num(grant), attrExpiresAt: ttl, attrExpiresAtNS: exact,
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #expns <= :now"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(now.UnixNano())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

// Acquire implements flow.Leases: one UpdateItem that adds holder to the
// lease's string set when it has room or already holds it; an expired
// lease not yet deleted by TTL is replaced by a conditional PutItem.
func (s *FlowStore) Acquire(ctx context.Context, k, holder string, maxHolders int, expiresAt, now time.Time) (bool, error) {
	if err := checkKey("lease key", k); err != nil {
		return false, err
	}
	if err := checkKey("lease holder", holder); err != nil {
		return false, err
	}
	if maxHolders < 0 || maxHolders > maxLeaseHolders {
		return false, fmt.Errorf("acquire %q: max %d outside 0..%d", k, maxHolders, maxLeaseHolders)
	}
	pk := pkLease + k
	for range s.maxAttempts {
		err := s.addHolder(ctx, pk, holder, maxHolders, expiresAt, now)
		if err == nil {
			return true, nil
		}
		seen, failed := conditionFailed(err)
		if !failed {
			return false, fmt.Errorf("awsstore: acquire lease %q: %w", k, err)
		}
		old, err := s.oldItem(ctx, pk, seen)
		if err != nil {
			return false, fmt.Errorf("awsstore: acquire lease %q: %w", k, err)
		}
		alive, err := live(old, now)
		if err != nil {
			return false, corrupt(s.table, pk, err)
		}
		if !alive {
			if maxHolders == 0 {
				return false, nil
			}
			err := s.resetLease(ctx, pk, holder, expiresAt, now)
			if err == nil {
				return true, nil
			}
			if _, failed := conditionFailed(err); !failed {
				return false, fmt.Errorf("awsstore: reset lease %q: %w", k, err)
			}
			continue // someone revived it first: try to join theirs
		}
		holders, ok := old["holders"].(*types.AttributeValueMemberSS)
		if !ok {
			return false, corrupt(s.table, pk, errors.New("attribute holders: missing or not a string set"))
		}
		if slices.Contains(holders.Value, holder) {
			return true, nil
		}
		if len(holders.Value) >= maxHolders {
			return false, nil
		}
	}
	return false, fmt.Errorf("awsstore: acquire lease %q: the item changed under %d conditional writes in a row; retry", k, s.maxAttempts)
}

func (s *FlowStore) addHolder(ctx context.Context, pk, holder string, maxHolders int, expiresAt, now time.Time) error {
	ttl, exact := expiry(expiresAt)
	names := map[string]string{"#h": "holders", "#exp": attrExpiresAt, "#expns": attrExpiresAtNS}
	vals := map[string]types.AttributeValue{
		":holders": &types.AttributeValueMemberSS{Value: []string{holder}}, ":holder": str(holder),
		":exp": ttl, ":expns": exact, ":now": num(now.UnixNano()),
	}
	// With max 0 nobody new may join; a holder already in stays in.
	cond := "#expns > :now AND contains(#h, :holder)"
	if maxHolders > 0 {
		cond = "attribute_not_exists(#pk) OR (#expns > :now AND (contains(#h, :holder) OR size(#h) < :max))"
		names["#pk"], vals[":max"] = attrPK, num(int64(maxHolders))
	}
	_, err := s.update.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                           aws.String(s.table),
		Key:                                 key(pk),
		UpdateExpression:                    aws.String("ADD #h :holders SET #exp = if_not_exists(#exp, :exp), #expns = if_not_exists(#expns, :expns)"),
		ConditionExpression:                 aws.String(cond),
		ExpressionAttributeNames:            names,
		ExpressionAttributeValues:           vals,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	return err
}

func (s *FlowStore) resetLease(ctx context.Context, pk, holder string, expiresAt, now time.Time) error {
	ttl, exact := expiry(expiresAt)
	_, err := s.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(singleton), "holders": &types.AttributeValueMemberSS{Value: []string{holder}},
			attrExpiresAt: ttl, attrExpiresAtNS: exact,
		},
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #expns <= :now"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":now": num(now.UnixNano())},
	})
	return err
}

func checkClaim(rec flow.DedupeRecord) error {
	if rec.State != flow.ClaimInProgress || rec.Tenant == "" || rec.ID == "" || rec.Owner == "" {
		return fmt.Errorf("claim %q: a claim must be in state %q with a tenant, an id and an owner (got state %q, tenant %q, owner %q)", rec.ID, flow.ClaimInProgress, rec.State, rec.Tenant, rec.Owner)
	}
	if err := checkKey("dedupe key", rec.Key()); err != nil {
		return err
	}
	if err := checkKey("dedupe owner", rec.Owner); err != nil {
		return err
	}
	if len(rec.PayloadHash) > maxKeyLen || !utf8.ValidString(rec.PayloadHash) {
		return fmt.Errorf("claim %q: payload hash over %d bytes or not UTF-8", rec.ID, maxKeyLen)
	}
	if rec.ExpiresAt.IsZero() {
		return fmt.Errorf("claim %q: no expiry: an in-progress claim must expire", rec.ID)
	}
	return nil
}

// Claim implements flow.DedupeClaims: one PutItem that succeeds unless a
// live record exists, and returns that record (ALL_OLD) when it does not.
func (s *FlowStore) Claim(ctx context.Context, rec flow.DedupeRecord, now time.Time) (bool, flow.DedupeRecord, error) {
	if err := checkClaim(rec); err != nil {
		return false, flow.DedupeRecord{}, err
	}
	pk := pkDedupe + rec.Key() // scoped by tenant: another tenant's id is another item
	ttl, exact := expiry(rec.ExpiresAt)
	_, err := s.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(singleton), "tenant": str(rec.Tenant), "hash": str(rec.PayloadHash), "state": str(string(rec.State)),
			"owner": str(rec.Owner), attrExpiresAt: ttl, attrExpiresAtNS: exact,
		},
		ConditionExpression:                 aws.String("attribute_not_exists(#pk) OR #expns <= :now"),
		ExpressionAttributeNames:            map[string]string{"#pk": attrPK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues:           map[string]types.AttributeValue{":now": num(now.UnixNano())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if err == nil {
		return true, flow.DedupeRecord{}, nil
	}
	seen, failed := conditionFailed(err)
	if !failed {
		return false, flow.DedupeRecord{}, fmt.Errorf("awsstore: claim %q: %w", rec.ID, err)
	}
	old, err := s.oldItem(ctx, pk, seen)
	if err != nil {
		return false, flow.DedupeRecord{}, fmt.Errorf("awsstore: claim %q: %w", rec.ID, err)
	}
	existing, err := dedupeRecord(rec.Tenant, rec.ID, old)
	if err != nil {
		return false, flow.DedupeRecord{}, corrupt(s.table, pk, err)
	}
	return false, existing, nil
}

func dedupeRecord(tenant, id string, item map[string]types.AttributeValue) (flow.DedupeRecord, error) {
	r := flow.DedupeRecord{Tenant: tenant, ID: id}
	var err error
	var state string
	var exp int64
	if r.PayloadHash, err = getS(item, "hash"); err != nil {
		return r, err
	}
	if state, err = getS(item, "state"); err != nil {
		return r, err
	}
	if r.Owner, err = getS(item, "owner"); err != nil {
		return r, err
	}
	if exp, err = expiresNS(item); err != nil {
		return r, err
	}
	r.State = flow.ClaimState(state)
	r.ExpiresAt = time.Unix(0, exp).UTC()
	return r, nil
}

// ownedCondition holds when the record is owner's, live and in progress.
const ownedCondition = "#expns > :now AND #state = :inprogress AND #owner = :owner"

func ownedValues(owner string, now time.Time) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		":now": num(now.UnixNano()), ":inprogress": str(string(flow.ClaimInProgress)), ":owner": str(owner),
	}
}

// Complete implements flow.DedupeClaims: one conditional UpdateItem on the
// claim under id (its DedupeRecord.Key).
func (s *FlowStore) Complete(ctx context.Context, id, owner string, expiresAt, now time.Time) error {
	if checkKey("dedupe id", id) != nil || checkKey("dedupe owner", owner) != nil {
		return fmt.Errorf("complete %q as %q: %w", id, owner, flow.ErrNotOwner)
	}
	ttl, exact := expiry(expiresAt)
	vals := ownedValues(owner, now)
	vals[":delivered"], vals[":exp"], vals[":expns"] = str(string(flow.ClaimDelivered)), ttl, exact
	_, err := s.update.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(pkDedupe + id),
		UpdateExpression:          aws.String("SET #state = :delivered, #exp = :exp, #expns = :expns"),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#state": "state", "#owner": "owner", "#exp": attrExpiresAt, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: vals,
	})
	if _, failed := conditionFailed(err); failed {
		return fmt.Errorf("complete %q as %q: %w", id, owner, flow.ErrNotOwner)
	}
	if err != nil {
		return fmt.Errorf("awsstore: complete %q: %w", id, err)
	}
	return nil
}

// Release implements flow.DedupeClaims: one conditional DeleteItem.
func (s *FlowStore) Release(ctx context.Context, id, owner string, now time.Time) error {
	if checkKey("dedupe id", id) != nil || checkKey("dedupe owner", owner) != nil {
		return fmt.Errorf("release %q as %q: %w", id, owner, flow.ErrNotOwner)
	}
	_, err := s.del.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.table),
		Key:                       key(pkDedupe + id),
		ConditionExpression:       aws.String(ownedCondition),
		ExpressionAttributeNames:  map[string]string{"#state": "state", "#owner": "owner", "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: ownedValues(owner, now),
	})
	if _, failed := conditionFailed(err); failed {
		return fmt.Errorf("release %q as %q: %w", id, owner, flow.ErrNotOwner)
	}
	if err != nil {
		return fmt.Errorf("awsstore: release %q: %w", id, err)
	}
	return nil
}

// timeKey encodes t so that byte order is time order, before and after
// 1970: 20 decimal digits of the nanoseconds with the sign bit flipped.
func timeKey(t time.Time) string {
	v := uint64(t.UnixNano()) ^ (1 << 63)
	return fmt.Sprintf("%020d", v)
}

// tuple encodes UTF-8 parts unambiguously (a JSON array of strings).
func tuple(parts ...string) string {
	b, _ := json.Marshal(parts) // strings always marshal
	return string(b)
}

// RecordBan implements flow.BanLedger: one PutItem per ban (a new sort key
// each, so concurrent bans never conflict) and one strongly consistent
// Query that counts the key's bans in (at-window, at].
func (s *FlowStore) RecordBan(ctx context.Context, k flow.BanKey, at time.Time, window time.Duration) (int, error) {
	if err := checkKey("ban source", k.Source); err != nil {
		return 0, err
	}
	if len(k.Target)+len(k.Command) > 2*maxKeyLen || !utf8.ValidString(k.Target+k.Command) {
		return 0, fmt.Errorf("record ban of %s: target and command over %d bytes or not UTF-8", k.Source, 2*maxKeyLen)
	}
	if window <= 0 {
		return 0, fmt.Errorf("record ban of %s: window %v must be positive", k.Source, window)
	}
	var nonce [8]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return 0, err
	}
	pk := pkBanLedger + tuple(k.Source, k.Target, k.Command)
	ttl, exact := expiry(at.Add(window))
	_, err := s.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.table),
		Item: map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(timeKey(at) + "#" + hex.EncodeToString(nonce[:])),
			attrExpiresAt: ttl, attrExpiresAtNS: exact,
		},
	})
	if err != nil {
		return 0, fmt.Errorf("awsstore: record ban of %s: %w", k.Source, err)
	}
	// '$' sorts right after '#': "<from>$" excludes bans at exactly
	// at-window and "<at>$" includes those at exactly at.
	in := &dynamodb.QueryInput{
		TableName:                aws.String(s.table),
		KeyConditionExpression:   aws.String("#pk = :pk AND #sk BETWEEN :from AND :to"),
		ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK},
		ExpressionAttributeValues: map[string]types.AttributeValue{
			":pk": str(pk), ":from": str(timeKey(at.Add(-window)) + "$"), ":to": str(timeKey(at) + "$"),
		},
		Select:         types.SelectCount,
		ConsistentRead: aws.Bool(true),
	}
	count := 0
	for p := dynamodb.NewQueryPaginator(s.query, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return 0, fmt.Errorf("awsstore: count bans of %s: %w", k.Source, err)
		}
		count += int(out.Count)
	}
	return count, nil
}

// PutBan implements flow.GlobalBans: one PutItem whose condition keeps a
// longer ban; a refused condition is that case and no error.
func (s *FlowStore) PutBan(ctx context.Context, b flow.Ban) error {
	if err := checkKey("ban source", b.Source); err != nil {
		return fmt.Errorf("put ban: %w", err)
	}
	if b.Until.IsZero() || len(b.Reason) > maxKeyLen || !utf8.ValidString(b.Reason) {
		return fmt.Errorf("put ban of %s: give an end time and a UTF-8 reason of at most %d bytes", b.Source, maxKeyLen)
	}
	ttl, exact := expiry(b.Until)
	item := map[string]types.AttributeValue{
		attrPK: str(pkBans), attrSK: str(b.Source), attrExpiresAt: ttl, attrExpiresAtNS: exact,
	}
	if b.Reason != "" {
		item["reason"] = str(b.Reason)
	}
	_, err := s.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName:                 aws.String(s.table),
		Item:                      item,
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #expns <= :until"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":until": exact},
	})
	if _, failed := conditionFailed(err); failed {
		return nil // a longer ban stands
	}
	if err != nil {
		return fmt.Errorf("awsstore: put ban of %s: %w", b.Source, err)
	}
	return nil
}

// Bans implements flow.GlobalBans, in source order: one strongly
// consistent Query of the bans partition, filtered on expires_at_ns.
func (s *FlowStore) Bans(ctx context.Context, now time.Time) ([]flow.Ban, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		FilterExpression:          aws.String("#expns > :now"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(pkBans), ":now": num(now.UnixNano())},
		ConsistentRead:            aws.Bool(true),
	}
	var out []flow.Ban
	for p := dynamodb.NewQueryPaginator(s.query, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsstore: read bans: %w", err)
		}
		for _, it := range page.Items {
			src, err := getS(it, attrSK)
			if err != nil {
				return nil, corrupt(s.table, pkBans, err)
			}
			until, err := expiresNS(it)
			if err != nil {
				return nil, corrupt(s.table, pkBans, err)
			}
			reason, _ := getS(it, "reason") // optional
			out = append(out, flow.Ban{Source: src, Until: time.Unix(0, until).UTC(), Reason: reason})
		}
	}
	return out, nil
}

// rollupShard spreads instances over a few partitions; ReadRollups
// queries each.
func rollupShard(instance string) string {
	h := fnv.New32a()
	h.Write([]byte(instance))
	return pkRollups + strconv.Itoa(int(h.Sum32()%rollupShards))
}

// PutRollups implements flow.Rollups: BatchWriteItem of 25 puts at a time
// (a put replaces, so retries are idempotent), unprocessed items retried
// with backoff.
func (s *FlowStore) PutRollups(ctx context.Context, rs []flow.Rollup, expiresAt time.Time) error {
	if len(rs) > maxRollupsPerPut {
		return fmt.Errorf("put rollups: %d rollups in one call, over the limit of %d: split the call", len(rs), maxRollupsPerPut)
	}
	ttl, exact := expiry(expiresAt)
	// One write per item key, the last one winning: a batch may not name
	// a key twice.
	byKey := map[[2]string]int{}
	var writes []types.WriteRequest
	for _, r := range rs {
		if err := checkKey("rollup instance", r.Instance); err != nil {
			return err
		}
		if len(r.Source)+len(r.Target)+len(r.Command) > maxKeyLen || !utf8.ValidString(r.Source+r.Target+r.Command) {
			return fmt.Errorf("put rollups: source, target and command of %q over %d bytes together or not UTF-8", r.Source, maxKeyLen)
		}
		pk, sk := rollupShard(r.Instance), timeKey(r.WindowStart)+"#"+tuple(r.Instance, r.Source, r.Target, r.Command)
		w := types.WriteRequest{PutRequest: &types.PutRequest{Item: map[string]types.AttributeValue{
			attrPK: str(pk), attrSK: str(sk), "instance": str(r.Instance), "window_ns": num(r.WindowStart.UnixNano()),
			"source": str(r.Source), "target": str(r.Target), "command": str(r.Command), "dispatches": num(r.Dispatches),
			attrExpiresAt: ttl, attrExpiresAtNS: exact,
		}}}
		if i, ok := byKey[[2]string{pk, sk}]; ok {
			writes[i] = w
			continue
		}
		byKey[[2]string{pk, sk}] = len(writes)
		writes = append(writes, w)
	}
	for len(writes) > 0 {
		chunk := writes[:min(batchWriteMaxItems, len(writes))]
		writes = writes[len(chunk):]
		if err := s.batchWrite(ctx, chunk); err != nil {
			return fmt.Errorf("awsstore: put rollups: %w", err)
		}
	}
	return nil
}

func (s *FlowStore) batchWrite(ctx context.Context, writes []types.WriteRequest) error {
	backoff := 20 * time.Millisecond
	for attempt := 1; ; attempt++ {
		out, err := s.batch.BatchWriteItem(ctx, &dynamodb.BatchWriteItemInput{
			RequestItems: map[string][]types.WriteRequest{s.table: writes},
		})
		if err != nil {
			return err
		}
		writes = out.UnprocessedItems[s.table]
		if len(writes) == 0 {
			return nil
		}
		if attempt == s.maxAttempts {
			return fmt.Errorf("%d items still unprocessed after %d batches (throttled): retry later", len(writes), attempt)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

// ReadRollups implements flow.Rollups: one strongly consistent Query per
// shard from since's window on, filtered on expires_at_ns; ordered by
// window start, instance, source, target and command.
func (s *FlowStore) ReadRollups(ctx context.Context, since, now time.Time) ([]flow.Rollup, error) {
	var out []flow.Rollup
	for shard := range rollupShards {
		pk := pkRollups + strconv.Itoa(shard)
		in := &dynamodb.QueryInput{
			TableName:                aws.String(s.table),
			KeyConditionExpression:   aws.String("#pk = :pk AND #sk >= :since"),
			FilterExpression:         aws.String("#expns > :now"),
			ExpressionAttributeNames: map[string]string{"#pk": attrPK, "#sk": attrSK, "#expns": attrExpiresAtNS},
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": str(pk), ":since": str(timeKey(since)), ":now": num(now.UnixNano()),
			},
			ConsistentRead: aws.Bool(true),
		}
		for p := dynamodb.NewQueryPaginator(s.query, in); p.HasMorePages(); {
			page, err := p.NextPage(ctx)
			if err != nil {
				return nil, fmt.Errorf("awsstore: read rollups: %w", err)
			}
			for _, it := range page.Items {
				r, err := rollup(it)
				if err != nil {
					return nil, corrupt(s.table, pk, err)
				}
				out = append(out, r)
			}
		}
	}
	slices.SortStableFunc(out, func(a, b flow.Rollup) int {
		if c := a.WindowStart.Compare(b.WindowStart); c != 0 {
			return c
		}
		return strings.Compare(tuple(a.Instance, a.Source, a.Target, a.Command), tuple(b.Instance, b.Source, b.Target, b.Command))
	})
	return out, nil
}

func rollup(it map[string]types.AttributeValue) (flow.Rollup, error) {
	var r flow.Rollup
	var err error
	var ws int64
	for _, f := range []struct {
		name string
		dst  *string
	}{{"instance", &r.Instance}, {"source", &r.Source}, {"target", &r.Target}, {"command", &r.Command}} {
		if *f.dst, err = getS(it, f.name); err != nil {
			return r, err
		}
	}
	if ws, err = getN(it, "window_ns"); err != nil {
		return r, err
	}
	if r.Dispatches, err = getN(it, "dispatches"); err != nil {
		return r, err
	}
	r.WindowStart = time.Unix(0, ws).UTC()
	return r, nil
}
