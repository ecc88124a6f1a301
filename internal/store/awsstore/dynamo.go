package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// One narrow interface per DynamoDB operation the store calls, so a unit
// test fakes exactly the call it is about; *dynamodb.Client has them all.
type (
	PutItemAPI interface {
		PutItem(ctx context.Context, in *dynamodb.PutItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	}
	UpdateItemAPI interface {
		UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	}
	DeleteItemAPI interface {
		DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	}
	GetItemAPI interface {
		GetItem(ctx context.Context, in *dynamodb.GetItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	}
	QueryAPI interface {
		Query(ctx context.Context, in *dynamodb.QueryInput, optFns ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	}
	BatchWriteItemAPI interface {
		BatchWriteItem(ctx context.Context, in *dynamodb.BatchWriteItemInput, optFns ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
	}
	// TableAPI creates tables and turns TTL on (CreateTables).
	TableAPI interface {
		CreateTable(ctx context.Context, in *dynamodb.CreateTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
		DescribeTable(ctx context.Context, in *dynamodb.DescribeTableInput, optFns ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
		UpdateTimeToLive(ctx context.Context, in *dynamodb.UpdateTimeToLiveInput, optFns ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
	}
)

// Attribute names shared by every item (docs/store/aws.md).
const (
	attrPK = "pk"
	attrSK = "sk"
	// attrExpiresAt is the TTL attribute: epoch seconds, rounded up so
	// that TTL never deletes an item before it is dead.
	attrExpiresAt = "expires_at"
	// attrExpiresAtNS is the exact expiry in epoch nanoseconds: what every
	// condition and read compares with the caller's now.
	attrExpiresAtNS = "expires_at_ns"
)

// TableInput is the definition every table of the store shares:
// on-demand capacity, a string partition key and sort key, no index; TTL
// is turned on separately where the table has it (CreateTables).
func TableInput(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName:   aws.String(name),
		BillingMode: types.BillingModePayPerRequest,
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(attrPK), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrSK), AttributeType: types.ScalarAttributeTypeS},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(attrPK), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(attrSK), KeyType: types.KeyTypeRange},
		},
	}
}

// createTable creates in (unless it exists), waits until it is active and,
// with ttl, turns TTL on over expires_at.
func createTable(ctx context.Context, api TableAPI, in *dynamodb.CreateTableInput, ttl bool) error {
	name := aws.ToString(in.TableName)
	if _, err := api.CreateTable(ctx, in); err != nil {
		var inUse *types.ResourceInUseException
		if !errors.As(err, &inUse) {
			return fmt.Errorf("awsstore: create table %s: %w", name, err)
		}
	}
	w := dynamodb.NewTableExistsWaiter(api)
	if err := w.Wait(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)}, 5*time.Minute); err != nil {
		return fmt.Errorf("awsstore: wait for table %s: %w", name, err)
	}
	if !ttl {
		return nil
	}
	_, err := api.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName:               aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{AttributeName: aws.String(attrExpiresAt), Enabled: aws.Bool(true)},
	})
	if err != nil && !ttlAlreadyOn(err) {
		return fmt.Errorf("awsstore: turn on TTL of table %s over %s: %w", name, attrExpiresAt, err)
	}
	return nil
}

// ttlAlreadyOn reports DynamoDB's refusal to enable TTL that is already
// enabled.
func ttlAlreadyOn(err error) bool {
	var ve interface{ ErrorMessage() string }
	return errors.As(err, &ve) && strings.Contains(strings.ToLower(ve.ErrorMessage()), "already enabled")
}

// conditionFailed returns the item a failed condition saw (ALL_OLD; nil
// when there was none) and whether err is a failed condition at all.
func conditionFailed(err error) (map[string]types.AttributeValue, bool) {
	var ccf *types.ConditionalCheckFailedException
	if errors.As(err, &ccf) {
		return ccf.Item, true
	}
	return nil, false
}

func str(v string) types.AttributeValue { return &types.AttributeValueMemberS{Value: v} }

func num(v int64) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(v, 10)}
}

// expiry is the pair of expiry attributes of t.
func expiry(t time.Time) (ttlSeconds, exact types.AttributeValue) {
	sec := t.Unix()
	if t.Nanosecond() > 0 {
		sec++
	}
	return num(sec), num(t.UnixNano())
}

func getS(item map[string]types.AttributeValue, name string) (string, error) {
	v, ok := item[name].(*types.AttributeValueMemberS)
	if !ok {
		return "", fmt.Errorf("attribute %s: missing or not a string", name)
	}
	return v.Value, nil
}

func getN(item map[string]types.AttributeValue, name string) (int64, error) {
	v, ok := item[name].(*types.AttributeValueMemberN)
	if !ok {
		return 0, fmt.Errorf("attribute %s: missing or not a number", name)
	}
	i, err := strconv.ParseInt(v.Value, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("attribute %s: %w", name, err)
	}
	return i, nil
}

// expiresNS is an item's exact expiry.
func expiresNS(item map[string]types.AttributeValue) (int64, error) {
	return getN(item, attrExpiresAtNS)
}

// ErrCorrupt wraps an item the store cannot decode.
var ErrCorrupt = errors.New("awsstore: corrupt item")

func corrupt(table, pk string, err error) error {
	return fmt.Errorf("%w: table %s, pk %q: %v (delete the item; it holds flow state only)", ErrCorrupt, table, pk, err)
}
