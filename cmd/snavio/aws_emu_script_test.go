package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	ddbtypes "github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/johannesboyne/gofakes3"
	"github.com/johannesboyne/gofakes3/backend/s3mem"
	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snavio/snavio/internal/build"
	"github.com/snavio/snavio/internal/deploy/cfnfake"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// kumoAccount is the account kumo's STS answers for every caller.
const kumoAccount = "000000000000"

// One DynamoDB Local serves every script of the test binary; scripts use
// their own env's tables. It stops when the binary exits (its launcher
// stops when its standard input closes).
var (
	ddbOnce sync.Once
	ddb     *awstest.DynamoDBLocal
	ddbErr  error
)

func scriptDynamoDB() (*awstest.DynamoDBLocal, error) {
	ddbOnce.Do(func() { ddb, ddbErr = awstest.StartDynamoDBLocal(context.Background()) })
	return ddb, ddbErr
}

// dynamoDBLocalCondition is the condition [dynamodblocal]: DynamoDB Local
// runs here. Where it cannot start, the script is skipped, and with
// CI=true it fails instead.
func dynamoDBLocalCondition() (bool, error) {
	if _, err := scriptDynamoDB(); err != nil {
		if os.Getenv("CI") == "true" {
			return false, fmt.Errorf("CI=true and DynamoDB Local cannot start: %w", err)
		}
		return false, nil
	}
	return true, nil
}

// awsEmu implements the script command
//
//	aws-emu dynamodb | s3 | deploy ENV [-no-ttl] | sqs-send QUEUE BODY [NAME=VALUE...]
//
// for the aws profile's queue commands and doctor, after `aws-fake kumo`
// (STS, EventBridge and SQS at $AWS_ENDPOINT_URL). "dynamodb" starts a
// DynamoDB Local for the rest of the script (skipped where it cannot
// start, failed with CI=true) and "s3" a gofakes3, pointing
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_S3 at them. "deploy"
// makes ENV's resources as the stack names them (stack.Names): the bus on
// kumo, the four tables (TTL on where the stack has it, unless -no-ttl),
// the snapshot bucket in kumo's account, a full snapshot published now,
// and the env's stack, deployed by this snavio, on a CloudFormation fake
// (cfnfake; kumo's stacks have no outputs) at
// AWS_ENDPOINT_URL_CLOUDFORMATION. "sqs-send" sends BODY to QUEUE with String message attributes.
func awsEmu(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) == 0 {
		ts.Fatalf("usage: aws-emu dynamodb | s3 | deploy ENV [-no-ttl] | sqs-send QUEUE BODY [NAME=VALUE...]")
	}
	ctx := context.Background()
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDSCRIPT", "script", "")}
	endpoint := func(env string) string {
		v := ts.Getenv(env)
		if v == "" {
			ts.Fatalf("aws-emu %s: %s is not set: run `aws-fake kumo` and `aws-emu dynamodb`/`s3` first", args[0], env)
		}
		return v
	}
	switch args[0] {
	case "dynamodb":
		d, err := scriptDynamoDB()
		if err != nil {
			ts.Fatalf("aws-emu dynamodb: %v (guard the script with [dynamodblocal])", err)
		}
		ts.Setenv("AWS_ENDPOINT_URL_DYNAMODB", d.Endpoint)
	case "s3":
		srv := httptest.NewServer(gofakes3.New(s3mem.New()).Server())
		ts.Defer(srv.Close)
		ts.Setenv("AWS_ENDPOINT_URL_S3", srv.URL)
	case "deploy":
		if len(args) < 2 {
			ts.Fatalf("aws-emu deploy ENV [-no-ttl]")
		}
		if len(args) > 3 || len(args) == 3 && args[2] != "-no-ttl" {
			ts.Fatalf("aws-emu deploy ENV [-no-ttl]")
		}
		n := stack.Names{Env: args[1]}
		noTTL := len(args) == 3
		eb := eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL")) })
		_, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(n.Bus())})
		ts.Check(err)
		db := dynamodb.NewFromConfig(cfg, func(o *dynamodb.Options) { o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL_DYNAMODB")) })
		for _, tb := range stack.Tables {
			_, err := db.CreateTable(ctx, awsstore.TableInput(n.Table(tb.Kind)))
			ts.Check(err)
			if tb.TTL && !noTTL {
				_, err := db.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{TableName: aws.String(n.Table(tb.Kind)),
					TimeToLiveSpecification: &ddbtypes.TimeToLiveSpecification{AttributeName: aws.String(stack.TTLAttribute), Enabled: aws.Bool(true)}})
				ts.Check(err)
			}
		}
		c := s3.NewFromConfig(cfg, func(o *s3.Options) {
			o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL_S3"))
			o.UsePathStyle = true
		})
		bucket := n.SnapshotBucket(kumoAccount)
		_, err = c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
		ts.Check(err)
		key := strings.TrimPrefix(snapshot.DefaultPaths().Full, "/")
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: strings.NewReader("{}")})
		ts.Check(err)
		cfn := cfnfake.New()
		cfn.PutStack(n.Stack(), "UPDATE_COMPLETE", map[string]string{stack.VersionOutput: build.Current().Version})
		srv := httptest.NewServer(cfn)
		ts.Defer(srv.Close)
		ts.Setenv("AWS_ENDPOINT_URL_CLOUDFORMATION", srv.URL)
	case "sqs-send":
		if len(args) < 3 {
			ts.Fatalf("aws-emu sqs-send QUEUE BODY [NAME=VALUE...]")
		}
		q := sqs.NewFromConfig(cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(endpoint("AWS_ENDPOINT_URL")) })
		u, err := q.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(args[1])})
		ts.Check(err)
		attrs := map[string]sqstypes.MessageAttributeValue{}
		for _, kv := range args[3:] {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				ts.Fatalf("aws-emu sqs-send: attribute %q: give NAME=VALUE", kv)
			}
			attrs[k] = sqstypes.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
		}
		_, err = q.SendMessage(ctx, &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: aws.String(args[2]), MessageAttributes: attrs})
		ts.Check(err)
	default:
		ts.Fatalf("aws-emu: unknown subcommand %q", args[0])
	}
}
