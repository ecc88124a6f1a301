// Package stack is the platform's shared resources as one CloudFormation
// stack, built as a typed goformation model: the command bus with its
// static policy, rule and archive, the Lambda functions with one
// least-privilege role each, the hand-off queues and their dead-letter
// queues, the AWS store's DynamoDB tables, the snapshot bucket, the job
// schedules, the control API's Function URL and the alarms. Every name is
// scoped by the environment (Names). docs/deploy.md describes the stack.
package stack

import (
	"fmt"
	"slices"

	"github.com/awslabs/goformation/v7/cloudformation/cloudwatch"
	"github.com/awslabs/goformation/v7/cloudformation/dynamodb"
	"github.com/awslabs/goformation/v7/cloudformation/events"
	"github.com/awslabs/goformation/v7/cloudformation/iam"
	"github.com/awslabs/goformation/v7/cloudformation/lambda"
	"github.com/awslabs/goformation/v7/cloudformation/logs"
	"github.com/awslabs/goformation/v7/cloudformation/policies"
	"github.com/awslabs/goformation/v7/cloudformation/s3"
	"github.com/awslabs/goformation/v7/cloudformation/sns"
	"github.com/awslabs/goformation/v7/cloudformation/sqs"
	"github.com/awslabs/goformation/v7/cloudformation/tags"

	"github.com/snavio/snavio/internal/deploy/policy"
)

// Parameters of the template, given at each deploy.
const (
	ParamCodeBucket   = "CodeBucket"
	ParamCodeKey      = "CodeKey"
	ParamArchitecture = "Architecture"
	ParamDeliveryKey  = "DeliveryKey"
	// ParamSnapshotSigningKey is base64 of the Ed25519 seed the snapshot
	// function signs with; ParamSnapshotPublicKey is its public key, which
	// the ingest and slow functions trust (deploy derives it from the seed).
	ParamSnapshotSigningKey = "SnapshotSigningKey"
	ParamSnapshotPublicKey  = "SnapshotPublicKey"
)

// Function keys: the SNAVIO_FUNCTION each function's bootstrap runs
// (internal/lambda's Function*; names_test.go holds them together).
const (
	FnIngest   = "ingest"
	FnSlow     = "slow"
	FnOutbox   = "outbox"
	FnSnapshot = "snapshot"
	FnMonitor  = "queue-monitor"
	FnAuditor  = "fairness-auditor"
	FnControl  = "control"
)

// Functions lists every function key in template order.
var Functions = []string{FnIngest, FnSlow, FnOutbox, FnSnapshot, FnMonitor, FnAuditor, FnControl}

// bootstrapRuns lists the functions cmd/snavio-lambda has a handler for:
// the stages and lambda.IsJob's jobs (names_test.go checks it). The
// others are deployed with their triggers disabled.
var bootstrapRuns = []string{FnIngest, FnSlow, FnOutbox, FnSnapshot, FnMonitor, FnAuditor, FnControl}

// The AWS store's tables (awsstore.Config's FlowTable, RegistryTable,
// ChangelogTable, OutboxTable), their TTL attribute and the outbox stream.
const (
	TableFlow      = "flow"
	TableRegistry  = "registry"
	TableChangelog = "changelog"
	TableOutbox    = "outbox"
	// TTLAttribute is the TTL attribute of the tables that expire items.
	TTLAttribute = "expires_at"
)

// TableSpec is one of the AWS store's tables in the stack: its logical
// id, its kind (Names.Table), whether items expire (TTL on TTLAttribute)
// and its stream, if any.
type TableSpec struct {
	ID, Kind string
	TTL      bool
	Stream   string
}

// Tables are the AWS store's four tables, as the stack makes them and
// `snavio doctor` checks them.
var Tables = []TableSpec{
	{"FlowTable", TableFlow, true, ""},
	{"RegistryTable", TableRegistry, false, ""},
	{"ChangelogTable", TableChangelog, false, ""},
	{"OutboxTable", TableOutbox, true, "NEW_IMAGE"},
}

// Environment variables the functions read (internal/lambda's Env*).
const (
	envFunction        = "SNAVIO_FUNCTION"
	envEnv             = "SNAVIO_ENV"
	envEscalationQueue = "SNAVIO_ESCALATION_QUEUE_URL"
	envDeliveryKey     = "SNAVIO_DELIVERY_KEY"
	envMaxReceives     = "SNAVIO_SLOW_MAX_RECEIVES"
	envSnapshotBucket  = "SNAVIO_SNAPSHOT_BUCKET"
	envSnapshotKeys    = "SNAVIO_SNAPSHOT_KEYS"
	envSnapshotSigning = "SNAVIO_SNAPSHOT_SIGNING_KEY"
	envSnapshotKeyID   = "SNAVIO_SNAPSHOT_KEY_ID"
	envAccountID       = "SNAVIO_ACCOUNT_ID"
)

// snapshotKeyID names the snapshot signing key: the snapshot function
// signs under it and the ingest and slow functions trust the public key
// under it.
const snapshotKeyID = "snavio-ed25519"

// ed25519KeyPattern is base64 of 32 bytes, as Go's StdEncoding writes it
// (the last character carries 4 bits, the padding is one '=').
const ed25519KeyPattern = "^[A-Za-z0-9+/]{42}[AEIMQUYcgkosw048]=$"

// slowMaxReceives is the slow function's give-up; the escalation queue's
// maxReceiveCount is one more (docs/lambda.md, "The durability contract").
const slowMaxReceives = 5

// Snapshot paths the dispatcher reads and the generator writes
// (docs/registry/snapshots.md).
const snapshotPrefix = "snavio/registry/"

// fnSpec is one function's sizing and wiring.
type fnSpec struct {
	key         string
	id          string // logical id prefix
	description string
	memory      int
	timeout     int // seconds
	p95ms       float64
	asyncDLQ    bool // invoked asynchronously: on-failure destination queue
	schedule    string
	// built: the bootstrap has this function's handler (bootstrapRuns).
	// The triggers of the others are made disabled, so that they do not
	// fail every minute until it does.
	built bool
}

func specs() []fnSpec {
	out := []fnSpec{
		{key: FnIngest, id: "Ingest", description: "Shield and fast stage: the command bus rule's target", memory: 512, timeout: 10, p95ms: 1000, asyncDLQ: true},
		{key: FnSlow, id: "Slow", description: "Slow stage: consumes the escalation queue", memory: 512, timeout: 30, p95ms: 5000},
		{key: FnOutbox, id: "Outbox", description: "Telemetry outbox drain: the outbox table's stream to each tenant's topic", memory: 256, timeout: 60, p95ms: 10000},
		{key: FnSnapshot, id: "Snapshot", description: "Registry snapshot generator (the snapshot writer)", memory: 512, timeout: 50, p95ms: 30000, asyncDLQ: true, schedule: "rate(1 minute)"},
		{key: FnMonitor, id: "Monitor", description: "Target queue monitor", memory: 256, timeout: 50, p95ms: 30000, asyncDLQ: true, schedule: "rate(1 minute)"},
		{key: FnAuditor, id: "Auditor", description: "Fairness auditor", memory: 256, timeout: 50, p95ms: 30000, asyncDLQ: true, schedule: "rate(1 minute)"},
		{key: FnControl, id: "Control", description: "Control API behind an IAM-authenticated Function URL", memory: 256, timeout: 29, p95ms: 2000},
	}
	for i := range out {
		out[i].built = slices.Contains(bootstrapRuns, out[i].key)
	}
	return out
}

// b is a tiny builder over the template being made.
type b struct {
	t *Template
	n Names
	o Options
}

func (x b) add(id string, r Resource) {
	if _, dup := x.t.Resources[id]; dup {
		panic("stack: duplicate logical id " + id) // a programming error, caught by every test
	}
	x.t.Resources[id] = r
}

func ptr[T any](v T) *T { return &v }

func arn(service, resource string) string {
	return Sub("arn:${AWS::Partition}:" + service + ":${AWS::Region}:${AWS::AccountId}:" + resource)
}

func roleARN(path, name string) string {
	return Sub("arn:${AWS::Partition}:iam::${AWS::AccountId}:role" + path + name)
}

func stackTags(env string) []tags.Tag {
	return []tags.Tag{{Key: "snavio:env", Value: env}}
}

// Build returns the template of env's platform stack with the default
// Options.
func Build(env string) (*Template, error) { return BuildWith(env, Options{}) }

// BuildWith returns the template of env's platform stack shaped by o.
func BuildWith(env string, o Options) (*Template, error) {
	if err := CheckEnv(env); err != nil {
		return nil, err
	}
	if err := o.Check(); err != nil {
		return nil, err
	}
	n := Names{Env: env}
	t := &Template{AWSTemplateFormatVersion: "2010-09-09", Parameters: map[string]Parameter{}, Resources: map[string]Resource{}, Outputs: map[string]Output{}}
	t.Description = fmt.Sprintf("Snavio platform, environment %s: command bus, dispatcher functions, store, snapshots, alarms (snavio dispatch deploy)", env)
	t.Parameters[ParamCodeBucket] = Parameter{Type: "String", Description: ptr("S3 bucket holding the bootstrap zip"), AllowedPattern: ptr("^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")}
	t.Parameters[ParamCodeKey] = Parameter{Type: "String", Description: ptr("S3 key of the bootstrap zip (content-addressed: lambda/<sha256>.zip)"), AllowedPattern: ptr("^.+$")}
	t.Parameters[ParamArchitecture] = Parameter{Type: "String", Description: ptr("Lambda architecture the zip was built for"), Default: "arm64", AllowedValues: []any{"arm64", "x86_64"}}
	t.Parameters[ParamDeliveryKey] = Parameter{Type: "String", Description: ptr("base64 of the delivery signing master key, 32 bytes or more (docs/security/delivery-signature.md)"), NoEcho: ptr(true), AllowedPattern: ptr("^[A-Za-z0-9+/]{43,}={0,2}$")}
	t.Parameters[ParamSnapshotSigningKey] = Parameter{Type: "String", Description: ptr("base64 of the 32-byte Ed25519 seed the snapshot function signs registry snapshots with"), NoEcho: ptr(true), AllowedPattern: ptr(ed25519KeyPattern)}
	t.Parameters[ParamSnapshotPublicKey] = Parameter{Type: "String", Description: ptr("base64 of the snapshot signing key's Ed25519 public key, which the ingest and slow functions trust (snavio dispatch deploy derives it from the seed)"), AllowedPattern: ptr(ed25519KeyPattern)}
	t.Parameters[ParamDeliveryKeyFingerprint] = Parameter{Type: "String", Description: ptr("first 16 hex digits of the delivery key's SHA-256 (snavio dispatch deploy sets it): a new key publishes a new ingest version"), Default: "none", AllowedPattern: ptr("^(none|[0-9a-f]{16})$")}
	x := b{t: t, n: n, o: o}

	x.alarmTopic()
	x.tables()
	x.bucket()
	x.queues()
	x.bus()
	for _, s := range specs() {
		x.function(s)
	}
	x.triggers()
	x.bucketPolicy()
	if err := x.ingestAlias(); err != nil {
		return nil, err
	}

	out := func(id, desc string, v string) {
		t.Outputs[id] = Output{Value: v, Description: ptr(desc), Export: &Export{Name: n.prefix() + id}}
	}
	out("BusName", "The command bus: producers' profiles set bus_name to it", Ref("CommandBus"))
	out("BusArn", "The command bus's ARN (emit role permissions name it)", GetAtt("CommandBus", "Arn"))
	out("EmitRolePath", "IAM path of tenant emit roles (snavio tenant create)", n.EmitRolePath())
	out("OperatorRolePath", "IAM path of roles that may read registry snapshots", n.OperatorRolePath())
	out("ControlApiUrl", "The control API's Function URL (AWS_IAM)", GetAtt("ControlFunctionUrl", "FunctionUrl"))
	out("SnapshotBucket", "The registry snapshot bucket", Ref("SnapshotBucket"))
	out("EscalationQueueUrl", "The fast-to-slow hand-off queue", Ref("EscalationQueue"))
	out("AlarmTopicArn", "Subscribe operators here: every alarm notifies it", Ref("AlarmTopic"))
	if o.Version != "" {
		out(VersionOutput, "The snavio version that deployed the stack (snavio doctor compares it with its own)", o.Version)
	}
	return t, nil
}

func (x b) alarmTopic() {
	x.add("AlarmTopic", &sns.Topic{TopicName: ptr(x.n.AlarmTopic()), KmsMasterKeyId: ptr("alias/aws/sns"), Tags: stackTags(x.n.Env)})
}

// tables are the AWS store's four tables: on-demand, pk/sk strings (as
// awsstore.TableInput), TTL on expires_at where items expire, the
// outbox's stream of new images, point-in-time recovery, and Retain so a
// destroyed stack keeps the registry.
func (x b) tables() {
	for _, tb := range Tables {
		r := &dynamodb.Table{
			TableName:   ptr(x.n.Table(tb.Kind)),
			BillingMode: ptr("PAY_PER_REQUEST"),
			AttributeDefinitions: []dynamodb.Table_AttributeDefinition{
				{AttributeName: "pk", AttributeType: "S"}, {AttributeName: "sk", AttributeType: "S"},
			},
			KeySchema: []dynamodb.Table_KeySchema{
				{AttributeName: "pk", KeyType: "HASH"}, {AttributeName: "sk", KeyType: "RANGE"},
			},
			PointInTimeRecoverySpecification:     &dynamodb.Table_PointInTimeRecoverySpecification{PointInTimeRecoveryEnabled: ptr(true)},
			SSESpecification:                     &dynamodb.Table_SSESpecification{SSEEnabled: true},
			Tags:                                 stackTags(x.n.Env),
			AWSCloudFormationDeletionPolicy:      policies.DeletionPolicy("Retain"),
			AWSCloudFormationUpdateReplacePolicy: policies.UpdateReplacePolicy("Retain"),
		}
		if tb.TTL {
			r.TimeToLiveSpecification = &dynamodb.Table_TimeToLiveSpecification{AttributeName: ptr(TTLAttribute), Enabled: true}
		}
		if tb.Stream != "" {
			r.StreamSpecification = &dynamodb.Table_StreamSpecification{StreamViewType: tb.Stream}
		}
		x.add(tb.ID, r)
	}
}

func (x b) bucket() {
	x.add("SnapshotBucket", &s3.Bucket{
		BucketName: ptr(Sub(x.n.SnapshotBucket("${AWS::AccountId}"))),
		BucketEncryption: &s3.Bucket_BucketEncryption{ServerSideEncryptionConfiguration: []s3.Bucket_ServerSideEncryptionRule{{
			BucketKeyEnabled:              ptr(true),
			ServerSideEncryptionByDefault: &s3.Bucket_ServerSideEncryptionByDefault{SSEAlgorithm: "aws:kms"},
		}}},
		VersioningConfiguration: &s3.Bucket_VersioningConfiguration{Status: "Enabled"},
		PublicAccessBlockConfiguration: &s3.Bucket_PublicAccessBlockConfiguration{
			BlockPublicAcls: ptr(true), BlockPublicPolicy: ptr(true), IgnorePublicAcls: ptr(true), RestrictPublicBuckets: ptr(true),
		},
		OwnershipControls: &s3.Bucket_OwnershipControls{Rules: []s3.Bucket_OwnershipControlsRule{{ObjectOwnership: ptr("BucketOwnerEnforced")}}},
		LifecycleConfiguration: &s3.Bucket_LifecycleConfiguration{Rules: []s3.Bucket_Rule{{
			Id: ptr("expire-noncurrent"), Status: "Enabled",
			NoncurrentVersionExpiration: &s3.Bucket_NoncurrentVersionExpiration{NoncurrentDays: 7},
		}}},
		Tags:                                 stackTags(x.n.Env),
		AWSCloudFormationDeletionPolicy:      policies.DeletionPolicy("Retain"),
		AWSCloudFormationUpdateReplacePolicy: policies.UpdateReplacePolicy("Retain"),
	})
}

// bucketPolicy: only the dispatcher functions and operators read
// snapshots, only the snapshot writer writes, and nothing without TLS.
// Deny statements, so that no identity policy in the account can widen it.
func (x b) bucketPolicy() {
	objects := Sub("${SnapshotBucket.Arn}/*")
	readers := []string{
		roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnIngest)),
		roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnSlow)),
		roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnSnapshot)),
		roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnControl)),
		roleARN(x.n.OperatorRolePath(), "*"),
	}
	// The control function publishes on request (POST /v1/snapshots/generate).
	writers := []string{roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnSnapshot)), roleARN(x.n.FunctionRolePath(), x.n.FunctionRole(FnControl))}
	doc := policy.Document{Version: policy.Version, Statement: []policy.Statement{
		{Sid: "OnlyDispatchersAndOperatorsRead", Effect: policy.Deny, Principal: &policy.Principal{Any: true},
			Action: []string{"s3:GetObject", "s3:GetObjectVersion"}, Resource: []string{objects},
			Condition: policy.Condition{"ArnNotLike": {"aws:PrincipalArn": readers}}},
		{Sid: "OnlySnapshotWriterWrites", Effect: policy.Deny, Principal: &policy.Principal{Any: true},
			Action: []string{"s3:PutObject", "s3:DeleteObject", "s3:DeleteObjectVersion"}, Resource: []string{objects},
			Condition: policy.Condition{"ArnNotLike": {"aws:PrincipalArn": writers}}},
		{Sid: "TLSOnly", Effect: policy.Deny, Principal: &policy.Principal{Any: true},
			Action: []string{"s3:*"}, Resource: []string{GetAtt("SnapshotBucket", "Arn"), objects},
			Condition: policy.Condition{"Bool": {"aws:SecureTransport": {"false"}}}},
	}}
	x.add("SnapshotBucketPolicy", &s3.BucketPolicy{Bucket: Ref("SnapshotBucket"), PolicyDocument: doc})
}

// queue makes a standard queue with SQS-managed encryption. (SSE-KMS with
// the AWS-managed key would refuse EventBridge and Lambda destinations,
// which cannot use that key.)
func (x b) queue(id, name string, visibility int, dlqID string, maxReceives int) {
	q := &sqs.Queue{
		QueueName:              ptr(x.n.Queue(name)),
		SqsManagedSseEnabled:   ptr(true),
		MessageRetentionPeriod: ptr(14 * 24 * 3600),
		Tags:                   stackTags(x.n.Env),
	}
	if visibility > 0 {
		q.VisibilityTimeout = ptr(visibility)
	}
	if dlqID != "" {
		q.RedrivePolicy = map[string]any{"deadLetterTargetArn": GetAtt(dlqID, "Arn"), "maxReceiveCount": maxReceives}
		q.MessageRetentionPeriod = ptr(4 * 24 * 3600)
		q.MaximumMessageSize = ptr(262144)
	}
	x.add(id, q)
}

func (x b) queues() {
	x.queue("EscalationDLQ", "escalation-dlq", 0, "", 0)
	// Visibility six times the slow function's timeout, as Lambda's event
	// source mapping asks; one receive more than the slow function's give-up.
	x.queue("EscalationQueue", "escalation", 6*30, "EscalationDLQ", slowMaxReceives+1)
	x.queue("CommandRuleDLQ", "command-rule-dlq", 0, "", 0)
	x.queue("OutboxDLQ", "outbox-dlq", 0, "", 0)
	for _, s := range specs() {
		if s.asyncDLQ {
			x.queue(s.id+"DLQ", s.key+"-dlq", 0, "", 0)
		}
	}
	// EventBridge may send the rule's undeliverable commands to its DLQ.
	x.add("CommandRuleDLQPolicy", &sqs.QueuePolicy{
		Queues: []string{Ref("CommandRuleDLQ")},
		PolicyDocument: policy.Document{Version: policy.Version, Statement: []policy.Statement{{
			Sid: "CommandRuleDeadLetters", Effect: policy.Allow,
			Principal: &policy.Principal{Service: []string{"events.amazonaws.com"}},
			Action:    []string{"sqs:SendMessage"}, Resource: []string{GetAtt("CommandRuleDLQ", "Arn")},
			Condition: policy.Condition{"ArnEquals": {"aws:SourceArn": {GetAtt("CommandRule", "Arn")}}},
		}}},
	})
}

func (x b) bus() {
	busARN := arn("events", "event-bus/"+x.n.Bus())
	x.add("CommandBus", &events.EventBus{
		Name:   x.n.Bus(),
		Policy: policy.BusPolicy(Sub("arn:${AWS::Partition}:iam::${AWS::AccountId}:root"), busARN, roleARN(x.n.EmitRolePath(), "*")),
		Tags:   stackTags(x.n.Env),
	})
	pattern := map[string]any{"detail-type": []string{"snavio.command-sent"}}
	x.add("CommandRule", &events.Rule{
		Name:         ptr(x.n.prefix() + "command-sent"),
		Description:  ptr("Every snavio.command-sent event to the ingest function"),
		EventBusName: ptr(Ref("CommandBus")),
		EventPattern: pattern,
		State:        ptr("ENABLED"),
		Targets: []events.Rule_Target{{
			Id:               "ingest",
			Arn:              x.ingestTarget(),
			RetryPolicy:      &events.Rule_RetryPolicy{MaximumRetryAttempts: ptr(185), MaximumEventAgeInSeconds: ptr(86400)},
			DeadLetterConfig: &events.Rule_DeadLetterConfig{Arn: ptr(GetAtt("CommandRuleDLQ", "Arn"))},
		}},
	})
	x.add("CommandArchive", &events.Archive{
		ArchiveName:   ptr(x.n.Archive()),
		Description:   ptr("Every command put on the bus, for replay"),
		SourceArn:     GetAtt("CommandBus", "Arn"),
		EventPattern:  pattern,
		RetentionDays: ptr(30),
	})
}

// tableARN is a table's ARN and, with suffix, a sub-resource of it.
func tableARN(id, suffix string) string { return Sub("${" + id + ".Arn}" + suffix) }

var (
	ddbRead   = []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:Scan"}
	ddbWrite  = []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem", "dynamodb:ConditionCheckItem"}
	ddbOutbox = []string{"dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"}
)

func concat(a ...[]string) []string {
	var out []string
	for _, s := range a {
		out = append(out, s...)
	}
	return out
}

// statements is each function's permission policy: least privilege for
// what its handler calls (docs/deploy.md lists them with the reasons).
func (x b) statements(key string) []policy.Statement {
	snapshots := Sub("${SnapshotBucket.Arn}/" + snapshotPrefix + "*")
	targetQueues := Sub("arn:${AWS::Partition}:sqs:*:*:*")
	topics := arn("sns", x.n.TelemetryTopicPrefix()+"*")
	outbox := policy.Allowing("Outbox", ddbOutbox, tableARN("OutboxTable", ""))
	registryRead := policy.Allowing("RegistryRead", ddbRead, tableARN("RegistryTable", ""))
	switch key {
	case FnIngest:
		return []policy.Statement{
			policy.Allowing("Flow", concat(ddbRead, ddbWrite), tableARN("FlowTable", "")),
			registryRead, outbox,
			policy.Allowing("SnapshotRead", []string{"s3:GetObject"}, snapshots),
			policy.Allowing("Escalate", []string{"sqs:SendMessage"}, GetAtt("EscalationQueue", "Arn")),
			// Target queues are data (routes), in any account; each target
			// queue's own policy decides whether the dispatcher may send.
			policy.Allowing("Deliver", []string{"sqs:SendMessage", "sqs:GetQueueUrl"}, targetQueues),
			policy.Allowing("FailedInvocations", []string{"sqs:SendMessage"}, GetAtt("IngestDLQ", "Arn")),
		}
	case FnSlow:
		return []policy.Statement{
			policy.Allowing("Flow", concat(ddbRead, ddbWrite), tableARN("FlowTable", "")),
			registryRead, outbox,
			policy.Allowing("SnapshotRead", []string{"s3:GetObject"}, snapshots),
			policy.Allowing("Escalations", []string{"sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:GetQueueAttributes"}, GetAtt("EscalationQueue", "Arn")),
			policy.Allowing("Deliver", []string{"sqs:SendMessage", "sqs:GetQueueUrl"}, targetQueues),
		}
	case FnOutbox:
		return []policy.Statement{
			policy.Allowing("OutboxStream", []string{"dynamodb:DescribeStream", "dynamodb:GetRecords", "dynamodb:GetShardIterator", "dynamodb:ListStreams"}, tableARN("OutboxTable", "/stream/*")),
			outbox,
			policy.Allowing("Publish", []string{"sns:Publish"}, topics),
			policy.Allowing("FailedBatches", []string{"sqs:SendMessage"}, GetAtt("OutboxDLQ", "Arn")),
		}
	case FnSnapshot:
		return []policy.Statement{
			registryRead, outbox,
			policy.Allowing("SnapshotWrite", []string{"s3:PutObject", "s3:GetObject"}, snapshots),
			policy.Allowing("SnapshotList", []string{"s3:ListBucket"}, GetAtt("SnapshotBucket", "Arn")),
			policy.Allowing("FailedInvocations", []string{"sqs:SendMessage"}, GetAtt("SnapshotDLQ", "Arn")),
		}
	case FnMonitor:
		return []policy.Statement{
			registryRead, outbox,
			policy.Allowing("InspectTargets", []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}, targetQueues),
			// CloudWatch metric reads and writes take no resource ARN.
			policy.Allowing("QueueMetrics", []string{"cloudwatch:GetMetricData"}, "*"),
			{Sid: "PublishMetrics", Effect: policy.Allow, Action: []string{"cloudwatch:PutMetricData"}, Resource: []string{"*"},
				Condition: policy.Condition{"StringEquals": {"cloudwatch:namespace": {"Snavio"}}}},
			policy.Allowing("FailedInvocations", []string{"sqs:SendMessage"}, GetAtt("MonitorDLQ", "Arn")),
		}
	case FnAuditor:
		return []policy.Statement{
			policy.Allowing("Flow", concat(ddbRead, ddbWrite), tableARN("FlowTable", "")),
			registryRead, outbox,
			policy.Allowing("FailedInvocations", []string{"sqs:SendMessage"}, GetAtt("AuditorDLQ", "Arn")),
		}
	case FnControl:
		return []policy.Statement{
			policy.Allowing("Registry", concat(ddbRead, ddbWrite), tableARN("RegistryTable", "")),
			policy.Allowing("Changelog", []string{"dynamodb:PutItem", "dynamodb:Query"}, tableARN("ChangelogTable", "")),
			outbox,
			// Explain's dispatcher reads the global ban list; it takes no token.
			policy.Allowing("FlowRead", ddbRead, tableARN("FlowTable", "")),
			// The replayer writes replay audits and their sent ids, only
			// in their own partitions (awsstore.ReplayAudits).
			{Sid: "ReplayAudits", Effect: policy.Allow, Action: []string{"dynamodb:PutItem", "dynamodb:UpdateItem", "dynamodb:ConditionCheckItem"},
				Resource:  []string{tableARN("FlowTable", "")},
				Condition: policy.Condition{"ForAllValues:StringLike": {"dynamodb:LeadingKeys": {"replay", "replaysent#*"}}}},
			policy.Allowing("SnapshotWrite", []string{"s3:PutObject", "s3:GetObject", "s3:GetObjectVersion"}, snapshots),
			policy.Allowing("SnapshotList", []string{"s3:ListBucket"}, GetAtt("SnapshotBucket", "Arn")),
			// Registration test-routes each route's target queue
			// (controlapi.SQSRouteQueues): attributes and policy only.
			policy.Allowing("TestRouting", []string{"sqs:GetQueueUrl", "sqs:GetQueueAttributes"}, targetQueues),
		}
	}
	panic("stack: no statements for function " + key)
}

func (x b) function(s fnSpec) {
	name := x.n.Function(s.key)
	logGroup := "/aws/lambda/" + name
	x.add(s.id+"LogGroup", &logs.LogGroup{LogGroupName: ptr(logGroup), RetentionInDays: ptr(30), Tags: stackTags(x.n.Env)})
	stmts := append([]policy.Statement{
		policy.Allowing("Logs", []string{"logs:CreateLogStream", "logs:PutLogEvents"}, arn("logs", "log-group:"+logGroup+":*")),
	}, x.statements(s.key)...)
	x.add(s.id+"Role", &iam.Role{
		RoleName:                 ptr(x.n.FunctionRole(s.key)),
		Path:                     ptr(x.n.FunctionRolePath()),
		Description:              ptr("snavio " + s.key + " function, environment " + x.n.Env),
		AssumeRolePolicyDocument: policy.LambdaTrust(),
		Policies:                 []iam.Role_Policy{{PolicyName: s.key, PolicyDocument: policy.Document{Version: policy.Version, Statement: stmts}}},
		Tags:                     stackTags(x.n.Env),
	})
	desc := s.description
	if x.o.Version != "" {
		// A new version of snavio is a change of every function, so the
		// version output below is never the only change of an update.
		desc += " (snavio " + x.o.Version + ")"
	}
	x.add(s.id+"Function", &lambda.Function{
		FunctionName:  ptr(name),
		Description:   ptr(desc),
		Runtime:       ptr("provided.al2023"),
		Handler:       ptr("bootstrap"),
		Architectures: []string{Ref(ParamArchitecture)},
		Code:          &lambda.Function_Code{S3Bucket: ptr(Ref(ParamCodeBucket)), S3Key: ptr(Ref(ParamCodeKey))},
		MemorySize:    ptr(s.memory),
		Timeout:       ptr(s.timeout),
		Role:          GetAtt(s.id+"Role", "Arn"),
		Environment:   &lambda.Function_Environment{Variables: x.environment(s.key)},
		LoggingConfig: &lambda.Function_LoggingConfig{LogGroup: ptr(Ref(s.id + "LogGroup")), LogFormat: ptr("JSON")},
		Tags:          stackTags(x.n.Env),
	})
	if s.asyncDLQ {
		x.add(s.id+"InvokeConfig", &lambda.EventInvokeConfig{
			FunctionName:         Ref(s.id + "Function"),
			Qualifier:            x.qualifier(s.key),
			MaximumRetryAttempts: ptr(2),
			DestinationConfig: &lambda.EventInvokeConfig_DestinationConfig{
				OnFailure: &lambda.EventInvokeConfig_OnFailure{Destination: GetAtt(s.id+"DLQ", "Arn")},
			},
		})
		x.dlqAlarm(s.id+"DLQ", s.key+"-dlq")
	}
	if s.schedule != "" {
		x.add(s.id+"Schedule", &events.Rule{
			// "run-<key>": EventBridge allows 64 characters, and
			// "<key>-schedule" of fairness-auditor is 65 with a 32-character env.
			Name:               ptr(x.n.prefix() + "run-" + s.key),
			Description:        ptr("Runs the " + s.key + " job"),
			ScheduleExpression: ptr(s.schedule),
			State:              ptr(state(s.built)),
			Targets:            []events.Rule_Target{{Id: s.key, Arn: GetAtt(s.id+"Function", "Arn")}},
		})
		x.add(s.id+"SchedulePermission", &lambda.Permission{
			Action: "lambda:InvokeFunction", FunctionName: Ref(s.id + "Function"),
			Principal: "events.amazonaws.com", SourceArn: ptr(GetAtt(s.id+"Schedule", "Arn")),
		})
	}
	x.alarms(s, name)
}

// environment is exactly what function key's configuration reads
// (lambda.FromEnv for the stages, lambda.JobConfigFromEnv for the jobs;
// TestEnvironmentsAreAccepted feeds each to its parser).
func (x b) environment(key string) map[string]string {
	vars := map[string]string{envFunction: key, envEnv: x.n.Env}
	switch key {
	case FnIngest, FnSlow:
		vars[envEscalationQueue] = Ref("EscalationQueue")
		vars[envDeliveryKey] = Ref(ParamDeliveryKey)
		// The cold start reads the snapshot the snapshot function signs.
		vars[envSnapshotBucket] = Ref("SnapshotBucket")
		vars[envSnapshotKeys] = Sub(snapshotKeyID + "=${" + ParamSnapshotPublicKey + "}")
		if key == FnSlow {
			vars[envMaxReceives] = fmt.Sprint(slowMaxReceives)
		}
	case FnOutbox:
		// The tenants' telemetry topics are in the stack's account.
		vars[envAccountID] = Ref("AWS::AccountId")
	case FnSnapshot:
		vars[envSnapshotBucket] = Ref("SnapshotBucket")
		vars[envSnapshotSigning] = Ref(ParamSnapshotSigningKey)
		vars[envSnapshotKeyID] = snapshotKeyID
	case FnControl:
		// Callers must be roles of the stack's account; snapshots are
		// generated on request as the snapshot function does; delivery
		// keys are derived from the master key.
		vars[envAccountID] = Ref("AWS::AccountId")
		vars[envSnapshotBucket] = Ref("SnapshotBucket")
		vars[envSnapshotSigning] = Ref(ParamSnapshotSigningKey)
		vars[envSnapshotKeyID] = snapshotKeyID
		vars[envDeliveryKey] = Ref(ParamDeliveryKey)
	}
	return vars
}

func state(enabled bool) string {
	if enabled {
		return "ENABLED"
	}
	return "DISABLED"
}

func spec(key string) fnSpec {
	for _, s := range specs() {
		if s.key == key {
			return s
		}
	}
	panic("stack: no function " + key)
}

// triggers wires the functions that are not on a schedule.
func (x b) triggers() {
	x.add("IngestRulePermission", &lambda.Permission{
		Action: "lambda:InvokeFunction", FunctionName: x.ingestTarget(),
		Principal: "events.amazonaws.com", SourceArn: ptr(GetAtt("CommandRule", "Arn")),
	})
	x.add("SlowEscalations", &lambda.EventSourceMapping{
		FunctionName:                   Ref("SlowFunction"),
		EventSourceArn:                 ptr(GetAtt("EscalationQueue", "Arn")),
		BatchSize:                      ptr(10),
		MaximumBatchingWindowInSeconds: ptr(0),
		FunctionResponseTypes:          []string{"ReportBatchItemFailures"},
		// Bounds the slow stage's load on DynamoDB whatever the backlog.
		ScalingConfig: &lambda.EventSourceMapping_ScalingConfig{MaximumConcurrency: ptr(20)},
	})
	x.add("OutboxStream", &lambda.EventSourceMapping{
		FunctionName:     Ref("OutboxFunction"),
		EventSourceArn:   ptr(GetAtt("OutboxTable", "StreamArn")),
		StartingPosition: ptr("TRIM_HORIZON"),
		// The spec's "up to 1 s or 10 messages", as the outbox drain
		// expects (docs/lambda.md, "The outbox function").
		BatchSize:                      ptr(10),
		MaximumBatchingWindowInSeconds: ptr(1),
		BisectBatchOnFunctionError:     ptr(true),
		Enabled:                        ptr(spec(FnOutbox).built),
		MaximumRetryAttempts:           ptr(10),
		FunctionResponseTypes:          []string{"ReportBatchItemFailures"},
		DestinationConfig: &lambda.EventSourceMapping_DestinationConfig{
			OnFailure: &lambda.EventSourceMapping_OnFailure{Destination: ptr(GetAtt("OutboxDLQ", "Arn"))},
		},
	})
	x.add("ControlFunctionUrl", &lambda.Url{AuthType: "AWS_IAM", TargetFunctionArn: GetAtt("ControlFunction", "Arn")})
	x.dlqAlarm("EscalationDLQ", "escalation-dlq")
	x.dlqAlarm("CommandRuleDLQ", "command-rule-dlq")
	x.dlqAlarm("OutboxDLQ", "outbox-dlq")
}

func (x b) alarm(id, name, desc, ns, metric, stat string, dims []cloudwatch.Alarm_Dimension, threshold float64) {
	a := &cloudwatch.Alarm{
		AlarmName:          ptr(x.n.prefix() + name),
		AlarmDescription:   ptr(desc),
		Namespace:          ptr(ns),
		MetricName:         ptr(metric),
		Dimensions:         dims,
		Period:             ptr(300),
		EvaluationPeriods:  1,
		Threshold:          ptr(threshold),
		ComparisonOperator: "GreaterThanThreshold",
		TreatMissingData:   ptr("notBreaching"),
		AlarmActions:       []string{Ref("AlarmTopic")},
		OKActions:          []string{Ref("AlarmTopic")},
	}
	if stat[0] == 'p' {
		a.ExtendedStatistic = ptr(stat)
	} else {
		a.Statistic = ptr(stat)
	}
	x.add(id, a)
}

// alarms: p95 duration, errors and throttles of every function.
func (x b) alarms(s fnSpec, name string) {
	dims := []cloudwatch.Alarm_Dimension{{Name: "FunctionName", Value: Ref(s.id + "Function")}}
	x.alarm(s.id+"LatencyAlarm", s.key+"-p95-latency", fmt.Sprintf("%s: p95 duration over %.0f ms for 5 minutes", name, s.p95ms), "AWS/Lambda", "Duration", "p95", dims, s.p95ms)
	x.alarm(s.id+"ErrorsAlarm", s.key+"-errors", name+": invocations failed in the last 5 minutes", "AWS/Lambda", "Errors", "Sum", dims, 0)
	x.alarm(s.id+"ThrottlesAlarm", s.key+"-throttles", name+": invocations throttled in the last 5 minutes", "AWS/Lambda", "Throttles", "Sum", dims, 0)
}

// dlqAlarm fires when a dead-letter queue holds anything.
func (x b) dlqAlarm(queueID, name string) {
	dims := []cloudwatch.Alarm_Dimension{{Name: "QueueName", Value: GetAtt(queueID, "QueueName")}}
	x.alarm(queueID+"Alarm", name+"-not-empty", x.n.Queue(name)+" holds messages: inspect and redrive them", "AWS/SQS", "ApproximateNumberOfMessagesVisible", "Maximum", dims, 0)
}
