package awsstore

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var _ registry.Store = (*RegistryStore)(nil)

// maxRegistryID bounds an id: DynamoDB's partition key limit is 2048
// bytes.
const maxRegistryID = 2048

// Registry item attributes. A record's item stays after a delete, without
// data, so that its version never goes back.
const (
	attrData    = "data"    // the record's JSON (its version field is not trusted: attrVersion is)
	attrKind    = "kind"    // the record's kind, for Load's filter
	attrVersion = "version" // the highest version ever written for the id
	attrChange  = "change"  // a changelog item's JSON
)

// RegistryStore is registry.Store on two DynamoDB tables: the records
// (snavio-<env>-registry) and their changelog (snavio-<env>-changelog).
// Build it with NewRegistryStore; it is safe for concurrent use.
type RegistryStore struct {
	table, changelog string
	update           UpdateItemAPI
	put              PutItemAPI
	get              GetItemAPI
	query            QueryAPI
	scan             ScanAPI
	tables           TableAPI
}

// ScanAPI is DynamoDB's Scan (the registry's cold load).
type ScanAPI interface {
	Scan(ctx context.Context, in *dynamodb.ScanInput, optFns ...func(*dynamodb.Options)) (*dynamodb.ScanOutput, error)
}

// NewRegistryStore returns the registry store of cfg's environment.
func NewRegistryStore(cfg Config) (*RegistryStore, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...)
	return &RegistryStore{
		table: cfg.RegistryTable(), changelog: cfg.ChangelogTable(),
		update: c, put: c, get: c, query: c, scan: c, tables: c,
	}, nil
}

// CreateTables creates the registry and changelog tables, unless they
// exist. Neither has TTL: an expired record keeps its item (readers skip
// it) so that its version never goes back, and the changelog outlives its
// records.
func (r *RegistryStore) CreateTables(ctx context.Context) error {
	if err := createTable(ctx, r.tables, TableInput(r.table), false); err != nil {
		return err
	}
	return createTable(ctx, r.tables, TableInput(r.changelog), false)
}

func recordKey(id registry.ID) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(string(id)), attrSK: str(singleton)}
}

func checkActor(by registry.Actor) error {
	if by.Who == "" || !utf8.ValidString(by.Who) {
		return fmt.Errorf("awsstore registry: a write without a UTF-8 actor: set Actor.Who: %w", registry.ErrInvalid)
	}
	return nil
}

// liveCondition holds for a record that exists (not deleted) and has not
// expired at :now.
const liveCondition = "attribute_exists(#data) AND (attribute_not_exists(#expns) OR #expns > :now)"

// Put implements registry.Writer: one conditional UpdateItem on the
// record's version (ALL_OLD gives the change's before), then one PutItem
// of the changelog entry, whose key and content are fixed by the change,
// so that writing it again is harmless.
func (r *RegistryStore) Put(ctx context.Context, by registry.Actor, it registry.Item) (registry.Change, error) {
	if err := checkActor(by); err != nil {
		return registry.Change{}, err
	}
	if err := registry.ValidateItem(it); err != nil {
		return registry.Change{}, err
	}
	id := it.ID()
	if len(id) > maxRegistryID || !utf8.ValidString(string(id)) {
		return registry.Change{}, fmt.Errorf("awsstore registry: id of %d bytes, over %d or not UTF-8: %w", len(id), maxRegistryID, registry.ErrInvalid)
	}
	data, err := json.Marshal(it.WithVersion(0))
	if err != nil {
		return registry.Change{}, err
	}
	names := map[string]string{"#data": attrData, "#kind": attrKind, "#ver": attrVersion, "#expns": attrExpiresAtNS}
	vals := map[string]types.AttributeValue{
		":data": str(string(data)), ":kind": str(string(it.Kind())), ":zero": num(0), ":one": num(1),
		":now": num(by.At.UnixNano()),
	}
	update := "SET #data = :data, #kind = :kind, #ver = if_not_exists(#ver, :zero) + :one"
	if e := it.ExpiresAt(); e > 0 {
		update += ", #expns = :expns"
		vals[":expns"] = num(e * int64(time.Second))
	} else {
		update += " REMOVE #expns"
	}
	cond := "NOT (" + liveCondition + ")" // absent, deleted or expired: version 0
	if v := it.Version(); v > 0 {
		cond = "#ver = :ver AND " + liveCondition
		vals[":ver"] = num(v)
	}
	out, err := r.update.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.table),
		Key:                       recordKey(id),
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  names,
		ExpressionAttributeValues: vals,
		ReturnValues:              types.ReturnValueAllOld,
	})
	if _, failed := conditionFailed(err); failed {
		return registry.Change{}, fmt.Errorf("awsstore registry: put %s at version %d: the stored version differs: re-read and retry: %w", id, it.Version(), registry.ErrConflict)
	}
	if err != nil {
		return registry.Change{}, fmt.Errorf("awsstore registry: put %s: %w", id, err)
	}
	before, prev, err := r.decodeOld(id, out.Attributes, by.At)
	if err != nil {
		return registry.Change{}, err
	}
	after := it.WithVersion(prev + 1).Clone()
	ch := registry.Change{ID: id, Version: prev + 1, Who: by.Who, At: by.At.UTC(), Op: registry.OpPut, Before: before, After: &after}
	return ch, r.appendChange(ctx, ch)
}

// Delete implements registry.Writer: one conditional UpdateItem that
// removes the record's data and bumps its version, then the changelog
// PutItem.
func (r *RegistryStore) Delete(ctx context.Context, by registry.Actor, id registry.ID, version int64) (registry.Change, error) {
	if err := checkActor(by); err != nil {
		return registry.Change{}, err
	}
	if id == "" || len(id) > maxRegistryID || !utf8.ValidString(string(id)) {
		return registry.Change{}, fmt.Errorf("awsstore registry: delete: id of %d bytes: %w", len(id), registry.ErrNotFound)
	}
	out, err := r.update.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:                 aws.String(r.table),
		Key:                       recordKey(id),
		UpdateExpression:          aws.String("SET #ver = #ver + :one REMOVE #data, #kind, #expns"),
		ConditionExpression:       aws.String(liveCondition + " AND #ver = :ver"),
		ExpressionAttributeNames:  map[string]string{"#data": attrData, "#kind": attrKind, "#ver": attrVersion, "#expns": attrExpiresAtNS},
		ExpressionAttributeValues: map[string]types.AttributeValue{":one": num(1), ":ver": num(version), ":now": num(by.At.UnixNano())},
		ReturnValues:              types.ReturnValueAllOld,
		// Tells a missing record from another version in one call.
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, failed := conditionFailed(err); failed {
		cur, have, decodeErr := r.decodeOld(id, old, by.At)
		if decodeErr != nil {
			return registry.Change{}, decodeErr
		}
		if cur == nil {
			return registry.Change{}, fmt.Errorf("awsstore registry: delete %s: %w", id, registry.ErrNotFound)
		}
		return registry.Change{}, fmt.Errorf("awsstore registry: delete %s at version %d, stored %d: re-read and retry: %w", id, version, have, registry.ErrConflict)
	}
	if err != nil {
		return registry.Change{}, fmt.Errorf("awsstore registry: delete %s: %w", id, err)
	}
	before, prev, err := r.decodeOld(id, out.Attributes, by.At)
	if err != nil {
		return registry.Change{}, err
	}
	ch := registry.Change{ID: id, Version: prev + 1, Who: by.Who, At: by.At.UTC(), Op: registry.OpDelete, Before: before}
	return ch, r.appendChange(ctx, ch)
}

// decodeOld returns the live record an item held at now (nil if it was
// absent, deleted or expired) and the item's version (0 if absent).
func (r *RegistryStore) decodeOld(id registry.ID, item map[string]types.AttributeValue, now time.Time) (*registry.Item, int64, error) {
	if len(item) == 0 {
		return nil, 0, nil
	}
	ver, err := getN(item, attrVersion)
	if err != nil {
		return nil, 0, corrupt(r.table, string(id), err)
	}
	it, live, err := r.decodeRecord(id, item, now)
	if err != nil || !live {
		return nil, ver, err
	}
	return &it, ver, nil
}

// decodeRecord decodes a record item and reports whether it is live at
// now.
func (r *RegistryStore) decodeRecord(id registry.ID, item map[string]types.AttributeValue, now time.Time) (registry.Item, bool, error) {
	if _, ok := item[attrData]; !ok {
		return registry.Item{}, false, nil // deleted
	}
	if _, ok := item[attrExpiresAtNS]; ok {
		e, err := expiresNS(item)
		if err != nil {
			return registry.Item{}, false, corrupt(r.table, string(id), err)
		}
		if e <= now.UnixNano() {
			return registry.Item{}, false, nil
		}
	}
	data, err := getS(item, attrData)
	if err != nil {
		return registry.Item{}, false, corrupt(r.table, string(id), err)
	}
	ver, err := getN(item, attrVersion)
	if err != nil {
		return registry.Item{}, false, corrupt(r.table, string(id), err)
	}
	var it registry.Item
	if err := json.Unmarshal([]byte(data), &it); err != nil {
		return registry.Item{}, false, corrupt(r.table, string(id), err)
	}
	return it.WithVersion(ver), true, nil
}

// appendChange writes ch to the changelog under (id, version). The record
// write before it is the commit; a failure here leaves the record changed
// and the error says so.
func (r *RegistryStore) appendChange(ctx context.Context, ch registry.Change) error {
	data, err := json.Marshal(ch)
	if err != nil {
		return err
	}
	_, err = r.put.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(r.changelog),
		Item: map[string]types.AttributeValue{
			attrPK: str(string(ch.ID)), attrSK: str(fmt.Sprintf("%020d", ch.Version)), attrChange: str(string(data)),
		},
	})
	if err != nil {
		return fmt.Errorf("awsstore registry: %s version %d was written but its changelog entry was not: %w", ch.ID, ch.Version, err)
	}
	return nil
}

// Load implements registry.Reader: a strongly consistent Scan of the
// record table, filtered on kind and expiry; each kind sorted by key.
func (r *RegistryStore) Load(ctx context.Context, now time.Time, kinds ...registry.Kind) (registry.Data, error) {
	for _, k := range kinds {
		if !k.Valid() {
			return registry.Data{}, fmt.Errorf("awsstore registry: load: unknown kind %q: use one of %v", k, registry.Kinds())
		}
	}
	filter := liveCondition
	names := map[string]string{"#data": attrData, "#expns": attrExpiresAtNS}
	vals := map[string]types.AttributeValue{":now": num(now.UnixNano())}
	if len(kinds) > 0 {
		filter += " AND #kind IN ("
		for i, k := range kinds {
			p := ":k" + strconv.Itoa(i)
			if i > 0 {
				filter += ", "
			}
			filter += p
			vals[p] = str(string(k))
		}
		filter += ")"
		names["#kind"] = attrKind
	}
	type rec struct {
		id registry.ID
		it registry.Item
	}
	var recs []rec
	in := &dynamodb.ScanInput{
		TableName: aws.String(r.table), FilterExpression: aws.String(filter),
		ExpressionAttributeNames: names, ExpressionAttributeValues: vals, ConsistentRead: aws.Bool(true),
	}
	for p := dynamodb.NewScanPaginator(r.scan, in); p.HasMorePages(); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return registry.Data{}, fmt.Errorf("awsstore registry: load: %w", err)
		}
		for _, item := range page.Items {
			pk, err := getS(item, attrPK)
			if err != nil {
				return registry.Data{}, corrupt(r.table, "", err)
			}
			it, live, err := r.decodeRecord(registry.ID(pk), item, now)
			if err != nil {
				return registry.Data{}, err
			}
			if live {
				recs = append(recs, rec{registry.ID(pk), it})
			}
		}
	}
	slices.SortFunc(recs, func(a, b rec) int {
		switch {
		case a.id < b.id:
			return -1
		case a.id > b.id:
			return 1
		}
		return 0
	})
	var d registry.Data
	for _, x := range recs {
		d.Add(x.it)
	}
	return d, nil
}

// Get implements registry.Reader: one strongly consistent GetItem.
func (r *RegistryStore) Get(ctx context.Context, id registry.ID, now time.Time) (registry.Item, error) {
	if id == "" || len(id) > maxRegistryID || !utf8.ValidString(string(id)) {
		return registry.Item{}, fmt.Errorf("awsstore registry: %q: %w", id, registry.ErrNotFound)
	}
	out, err := r.get.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(r.table), Key: recordKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return registry.Item{}, fmt.Errorf("awsstore registry: get %s: %w", id, err)
	}
	if out.Item == nil {
		return registry.Item{}, fmt.Errorf("awsstore registry: %s: %w", id, registry.ErrNotFound)
	}
	it, live, err := r.decodeRecord(id, out.Item, now)
	if err != nil {
		return registry.Item{}, err
	}
	if !live {
		return registry.Item{}, fmt.Errorf("awsstore registry: %s: %w", id, registry.ErrNotFound)
	}
	return it, nil
}

// History implements registry.Reader: a strongly consistent Query of the
// id's changelog, newest first.
func (r *RegistryStore) History(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error) {
	if id == "" || len(id) > maxRegistryID || !utf8.ValidString(string(id)) {
		return nil, nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(r.changelog),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": attrPK},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(string(id))},
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
	}
	if limit > 0 {
		in.Limit = aws.Int32(int32(min(limit, 1000)))
	}
	var out []registry.Change
	for p := dynamodb.NewQueryPaginator(r.query, in); p.HasMorePages() && (limit <= 0 || len(out) < limit); {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsstore registry: history of %s: %w", id, err)
		}
		for _, item := range page.Items {
			data, err := getS(item, attrChange)
			if err != nil {
				return nil, corrupt(r.changelog, string(id), err)
			}
			var ch registry.Change
			if err := json.Unmarshal([]byte(data), &ch); err != nil {
				return nil, corrupt(r.changelog, string(id), err)
			}
			out = append(out, ch)
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}
