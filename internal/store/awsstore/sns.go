package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sns/types"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// One narrow interface per SNS operation the publisher calls; *sns.Client
// has both.
type (
	PublishAPI interface {
		Publish(ctx context.Context, in *sns.PublishInput, optFns ...func(*sns.Options)) (*sns.PublishOutput, error)
	}
	PublishBatchAPI interface {
		PublishBatch(ctx context.Context, in *sns.PublishBatchInput, optFns ...func(*sns.Options)) (*sns.PublishBatchOutput, error)
	}
)

// Message attributes of every published telemetry event, for consumers
// and for SNS subscription filter policies (docs/store/aws.md).
const (
	// AttrEvent is the event's name, e.g. snavio.command.delivered.
	AttrEvent = "snavio.event"
	// AttrTenant is the tenant whose topic the event is on.
	AttrTenant = "snavio.tenant"
	// AttrSeq is the event's number in its tenant's outbox stream (a
	// Number): consumers order by it and drop redeliveries.
	AttrSeq = "snavio.seq"
)

// SNS limits (docs/store/aws.md, "Telemetry on SNS").
const (
	// snsBatchEntries is PublishBatch's most entries.
	snsBatchEntries = 10
	// snsMaxBytes bounds one message and one batch's aggregate, attributes
	// included.
	snsMaxBytes = 256 << 10
)

// TelemetryMessage is one outbox event to publish to its tenant's topic.
type TelemetryMessage struct {
	Tenant string
	// Seq is the event's number in its tenant's outbox stream, from 1.
	Seq uint64
	// Name is the event's name; Event its JSON (telemetry.Marshal).
	Name  string
	Event []byte
}

// size is what SNS counts of m: its body and its attributes' names and
// values (types included, generously).
func (m *TelemetryMessage) size() int {
	return len(m.Event) + len(AttrEvent) + len(m.Name) + len(AttrTenant) + len(m.Tenant) + len(AttrSeq) + 20 + 3*len("String")
}

// PublishFailure is a message that was not published.
type PublishFailure struct {
	// Index is the message's position in Publish's argument.
	Index int
	// Code and Message say why (SNS's error code, or the store's check).
	Code, Message string
	// Retryable: publishing it again may succeed (a throttle, a server
	// fault); false for a message SNS or the store refuses as it is.
	Retryable bool
}

// SNSPublisher publishes telemetry events to one SNS topic per tenant,
// snavio-<env>-telemetry-<tenant>: a tenant's single event with Publish,
// several with PublishBatch, 10 a call. Build it with NewSNSPublisher; it
// is safe for concurrent use.
type SNSPublisher struct {
	publish PublishAPI
	batch   PublishBatchAPI
	// arnPrefix is every topic ARN up to the tenant part.
	arnPrefix string
}

// NewSNSPublisher returns the publisher of cfg's environment, on an SNS
// client built from cfg.AWSConfig and cfg.SNSOptions. Topics are in
// cfg.AccountID and the config's region.
func NewSNSPublisher(cfg Config) (*SNSPublisher, error) {
	cfg.SetDefaults()
	err := cfg.Validate()
	if cfg.AccountID == "" {
		err = errors.Join(err, errors.New("awsstore: no account id: set the 12-digit AWS account that holds the tenants' telemetry topics"))
	}
	if err != nil {
		return nil, err
	}
	c := sns.NewFromConfig(cfg.AWSConfig, cfg.SNSOptions...)
	return &SNSPublisher{publish: c, batch: c,
		arnPrefix: "arn:" + Partition(cfg.AWSConfig.Region) + ":sns:" + cfg.AWSConfig.Region + ":" + cfg.AccountID + ":" + cfg.TopicPrefix()}, nil
}

// Partition is the AWS partition of a region.
func Partition(region string) string {
	switch {
	case strings.HasPrefix(region, "cn-"):
		return "aws-cn"
	case strings.HasPrefix(region, "us-gov-"):
		return "aws-us-gov"
	default:
		return "aws"
	}
}

// TopicARN is the ARN of tenant's telemetry topic.
func (p *SNSPublisher) TopicARN(tenant string) (string, error) {
	part, err := topicPart(tenant)
	if err != nil {
		return "", err
	}
	return p.arnPrefix + part, nil
}

// topicPart encodes a telemetry stream (telemetry.ValidStream) in the
// characters SNS allows in a topic name ([A-Za-z0-9_-]): '_' becomes "__"
// and '.' "_d", so that distinct streams get distinct topics
// (FuzzTopicPart).
func topicPart(tenant string) (string, error) {
	if !telemetry.ValidStream(tenant) {
		return "", fmt.Errorf("tenant %.80q: give %s", tenant, telemetry.StreamRule)
	}
	var b strings.Builder
	b.Grow(2 * len(tenant))
	for i := 0; i < len(tenant); i++ {
		switch c := tenant[i]; c {
		case '_':
			b.WriteString("__")
		case '.':
			b.WriteString("_d")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

func strAttr(v string) types.MessageAttributeValue {
	return types.MessageAttributeValue{DataType: aws.String("String"), StringValue: aws.String(v)}
}

func (m *TelemetryMessage) attributes() map[string]types.MessageAttributeValue {
	return map[string]types.MessageAttributeValue{
		AttrEvent:  strAttr(m.Name),
		AttrTenant: strAttr(m.Tenant),
		AttrSeq:    {DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatUint(m.Seq, 10))},
	}
}

// check refuses a message SNS would refuse, or that a consumer could not
// place in its stream.
func (m *TelemetryMessage) check() error {
	switch {
	case m.Seq == 0:
		return errors.New("no sequence number: give the event's number in its tenant's outbox stream, from 1")
	case m.Name == "" || len(m.Name) > 256:
		return fmt.Errorf("event name %.80q: give the event's name, 1 to 256 bytes", m.Name)
	case len(m.Event) == 0:
		return errors.New("empty event: give the event's JSON")
	case m.size() > snsMaxBytes:
		return fmt.Errorf("%d bytes with its attributes, over SNS's %d", m.size(), snsMaxBytes)
	}
	return nil
}

// Publish publishes msgs, each to its tenant's topic, and returns those
// that were not published. Within a tenant, messages go out in the order
// given, in batches of up to 10 (and 256 KiB); SNS Standard topics do not
// keep that order on delivery, which is why every message carries
// AttrSeq. A refused message never holds back the others.
func (p *SNSPublisher) Publish(ctx context.Context, msgs []TelemetryMessage) []PublishFailure {
	var failed []PublishFailure
	refuse := func(i int, code string, err error, retryable bool) {
		failed = append(failed, PublishFailure{Index: i, Code: code, Message: err.Error(), Retryable: retryable})
	}
	// Group by tenant, keeping the order of first appearance and the order
	// within each tenant.
	byTenant := map[string][]int{}
	var tenants []string
	for i := range msgs {
		m := &msgs[i]
		if _, err := topicPart(m.Tenant); err != nil {
			refuse(i, "InvalidTenant", err, false)
			continue
		}
		if err := m.check(); err != nil {
			refuse(i, "InvalidMessage", fmt.Errorf("tenant %s seq %d: %w", m.Tenant, m.Seq, err), false)
			continue
		}
		if _, ok := byTenant[m.Tenant]; !ok {
			tenants = append(tenants, m.Tenant)
		}
		byTenant[m.Tenant] = append(byTenant[m.Tenant], i)
	}
	for _, tenant := range tenants {
		topic, _ := p.TopicARN(tenant) // checked above
		idx := byTenant[tenant]
		for len(idx) > 0 {
			n, bytes := 0, 0
			for n < len(idx) && n < snsBatchEntries && bytes+msgs[idx[n]].size() <= snsMaxBytes {
				bytes += msgs[idx[n]].size()
				n++
			}
			chunk := idx[:n]
			idx = idx[n:]
			if len(chunk) == 1 {
				failed = p.publishOne(ctx, topic, msgs, chunk[0], failed)
			} else {
				failed = p.publishBatch(ctx, topic, msgs, chunk, failed)
			}
		}
	}
	return failed
}

// callFailure is the failure of every message of a call that failed as a
// whole.
func callFailure(topic string, i int, err error) PublishFailure {
	code := apiCode(err)
	f := PublishFailure{Index: i, Code: code, Message: fmt.Sprintf("publish to %s: %v", topic, err), Retryable: true}
	switch code {
	case "NotFound":
		f.Message += " (the tenant's topic does not exist: create the tenant's telemetry topic, as tenant create does)"
		f.Retryable = false
	case "AuthorizationError", "InvalidParameter", "InvalidParameterValue", "KMSAccessDenied", "KMSDisabled", "KMSInvalidState", "KMSNotFound":
		f.Retryable = false
	}
	if f.Code == "" {
		f.Code = "RequestFailed"
	}
	return f
}

func (p *SNSPublisher) publishOne(ctx context.Context, topic string, msgs []TelemetryMessage, i int, failed []PublishFailure) []PublishFailure {
	m := &msgs[i]
	_, err := p.publish.Publish(ctx, &sns.PublishInput{
		TopicArn: aws.String(topic), Message: aws.String(string(m.Event)), MessageAttributes: m.attributes(),
	})
	if err != nil {
		failed = append(failed, callFailure(topic, i, err))
	}
	return failed
}

func (p *SNSPublisher) publishBatch(ctx context.Context, topic string, msgs []TelemetryMessage, chunk []int, failed []PublishFailure) []PublishFailure {
	in := &sns.PublishBatchInput{TopicArn: aws.String(topic), PublishBatchRequestEntries: make([]types.PublishBatchRequestEntry, len(chunk))}
	for j, i := range chunk {
		m := &msgs[i]
		in.PublishBatchRequestEntries[j] = types.PublishBatchRequestEntry{
			Id: aws.String(strconv.Itoa(j)), Message: aws.String(string(m.Event)), MessageAttributes: m.attributes(),
		}
	}
	out, err := p.batch.PublishBatch(ctx, in)
	if err != nil {
		for _, i := range chunk {
			failed = append(failed, callFailure(topic, i, err))
		}
		return failed
	}
	// Every entry must be answered, as published or failed; one that is
	// neither counts as failed, to be published again.
	answered := make([]bool, len(chunk))
	entry := func(id *string) (int, bool) {
		j, err := strconv.Atoi(aws.ToString(id))
		if err != nil || j < 0 || j >= len(chunk) || answered[j] {
			return 0, false
		}
		answered[j] = true
		return j, true
	}
	for _, s := range out.Successful {
		entry(s.Id)
	}
	for _, f := range out.Failed {
		if j, ok := entry(f.Id); ok {
			failed = append(failed, PublishFailure{Index: chunk[j], Code: aws.ToString(f.Code),
				Message: fmt.Sprintf("publish to %s: %s", topic, aws.ToString(f.Message)), Retryable: !f.SenderFault})
		}
	}
	for j, ok := range answered {
		if !ok {
			failed = append(failed, PublishFailure{Index: chunk[j], Code: "Unanswered",
				Message: fmt.Sprintf("publish to %s: PublishBatch answered neither success nor failure for this entry", topic), Retryable: true})
		}
	}
	return failed
}
