package replay

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// EventBridgeAPI is what an archive replay calls of EventBridge.
type EventBridgeAPI interface {
	DescribeEventBus(ctx context.Context, in *eventbridge.DescribeEventBusInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeEventBusOutput, error)
	DescribeArchive(ctx context.Context, in *eventbridge.DescribeArchiveInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeArchiveOutput, error)
	PutRule(ctx context.Context, in *eventbridge.PutRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutRuleOutput, error)
	PutTargets(ctx context.Context, in *eventbridge.PutTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.PutTargetsOutput, error)
	RemoveTargets(ctx context.Context, in *eventbridge.RemoveTargetsInput, optFns ...func(*eventbridge.Options)) (*eventbridge.RemoveTargetsOutput, error)
	DeleteRule(ctx context.Context, in *eventbridge.DeleteRuleInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DeleteRuleOutput, error)
	StartReplay(ctx context.Context, in *eventbridge.StartReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.StartReplayOutput, error)
	DescribeReplay(ctx context.Context, in *eventbridge.DescribeReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.DescribeReplayOutput, error)
	CancelReplay(ctx context.Context, in *eventbridge.CancelReplayInput, optFns ...func(*eventbridge.Options)) (*eventbridge.CancelReplayOutput, error)
}

// CaptureSQSAPI is what an archive replay calls of SQS for its capture
// queue.
type CaptureSQSAPI interface {
	CreateQueue(ctx context.Context, in *sqs.CreateQueueInput, optFns ...func(*sqs.Options)) (*sqs.CreateQueueOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
	SetQueueAttributes(ctx context.Context, in *sqs.SetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.SetQueueAttributesOutput, error)
	ReceiveMessage(ctx context.Context, in *sqs.ReceiveMessageInput, optFns ...func(*sqs.Options)) (*sqs.ReceiveMessageOutput, error)
	DeleteMessageBatch(ctx context.Context, in *sqs.DeleteMessageBatchInput, optFns ...func(*sqs.Options)) (*sqs.DeleteMessageBatchOutput, error)
	DeleteQueue(ctx context.Context, in *sqs.DeleteQueueInput, optFns ...func(*sqs.Options)) (*sqs.DeleteQueueOutput, error)
	ListQueues(ctx context.Context, in *sqs.ListQueuesInput, optFns ...func(*sqs.Options)) (*sqs.ListQueuesOutput, error)
}

// EBArchiveOptions configure an EventBridge archive source.
type EBArchiveOptions struct {
	Events EventBridgeAPI
	SQS    CaptureSQSAPI
	// Bus and Archive name the environment's command bus and its archive.
	Bus, Archive string
	// Name names the run's capture rule, queue and EventBridge replay
	// (unique per run: snavio-<env>-replay-<id>-<n>; at most 64
	// characters of letters, digits, '.', '-' and '_').
	Name string
	// Tags mark the capture rule and queue (env, replay id) so that a
	// crashed run's leftovers can be found.
	Tags map[string]string
	// Filter bounds the replay: Start and End (required) are its event
	// times.
	Filter wire.ReplayFilter
	// Verifier decides each event's Refusal.
	Verifier ArchiveVerifier
	// Wait is the capture queue's long poll (0: 1 s; negative: none).
	Wait time.Duration
}

// EBArchive reads the EventBridge archive of the bus. An archive cannot
// be read directly: the source creates a capture queue and a rule on the
// bus that matches only its own replay's events (by replay-name), starts
// an EventBridge replay of the time range to that rule alone, and reads
// the queue until the replay has completed and the queue is drained.
// Every event is verified again (Verifier: the EventBridge archive keeps
// every event put on the bus, with no verdict), and the run's own copies
// are deleted from the capture queue as they are read. Close deletes the
// rule and the queue. A resumed run replays the range again; the engine
// skips what was sent.
type EBArchive struct {
	o EBArchiveOptions

	started, completed bool
	empties            int
	queueURL, ruleARN  string
}

// NewEBArchive checks o and returns the source; nothing is created until
// the first Next.
func NewEBArchive(o EBArchiveOptions) (*EBArchive, error) {
	switch {
	case o.Events == nil || o.SQS == nil || o.Verifier == nil:
		return nil, errors.New("replay: EBArchiveOptions: Events, SQS and Verifier are required")
	case o.Bus == "" || o.Archive == "" || o.Name == "" || len(o.Name) > 64:
		return nil, fmt.Errorf("replay: EBArchiveOptions: Bus, Archive and a Name of 1-64 characters are required (name %q)", o.Name)
	case o.Filter.Start.IsZero() || o.Filter.End.IsZero() || !o.Filter.Start.Before(o.Filter.End):
		return nil, errors.New("replay: an archive replay needs a start before its end")
	}
	if o.Wait == 0 {
		o.Wait = time.Second
	}
	return &EBArchive{o: o}, nil
}

// Name implements Source.
func (s *EBArchive) Name() string { return wire.ReplayOriginArchive }

// Tag adds a tag to the capture rule and queue; call it before the
// first Next.
func (s *EBArchive) Tag(key, value string) {
	if s.o.Tags == nil {
		s.o.Tags = map[string]string{}
	}
	s.o.Tags[key] = value
}

// ReplayName is the EventBridge replay's (and the capture rule's and
// queue's) name.
func (s *EBArchive) ReplayName() string { return s.o.Name }

func (s *EBArchive) start(ctx context.Context) error {
	s.started = true
	bus, err := s.o.Events.DescribeEventBus(ctx, &eventbridge.DescribeEventBusInput{Name: aws.String(s.o.Bus)})
	if err != nil {
		return fmt.Errorf("describe the bus %s: %w", s.o.Bus, err)
	}
	arch, err := s.o.Events.DescribeArchive(ctx, &eventbridge.DescribeArchiveInput{ArchiveName: aws.String(s.o.Archive)})
	if err != nil {
		return fmt.Errorf("describe the archive %s (is the environment deployed?): %w", s.o.Archive, err)
	}
	q, err := s.o.SQS.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(s.o.Name), Tags: s.o.Tags,
		Attributes: map[string]string{string(sqstypes.QueueAttributeNameMessageRetentionPeriod): strconv.Itoa(int((24 * time.Hour).Seconds()))}})
	if err != nil {
		return fmt.Errorf("create the capture queue %s: %w", s.o.Name, err)
	}
	s.queueURL = aws.ToString(q.QueueUrl)
	qa, err := s.o.SQS.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: q.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameQueueArn}})
	if err != nil {
		return fmt.Errorf("read the capture queue's ARN: %w", err)
	}
	queueARN := qa.Attributes[string(sqstypes.QueueAttributeNameQueueArn)]
	pattern, _ := json.Marshal(map[string][]string{"replay-name": {s.o.Name}})
	var tags []ebtypes.Tag
	for k, v := range s.o.Tags {
		tags = append(tags, ebtypes.Tag{Key: aws.String(k), Value: aws.String(v)})
	}
	rule, err := s.o.Events.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(s.o.Name), EventBusName: aws.String(s.o.Bus),
		EventPattern: aws.String(string(pattern)), State: ebtypes.RuleStateEnabled, Tags: tags,
		Description: aws.String("snavio replay capture: only this replay's events, to its queue; deleted when the replay ends")})
	if err != nil {
		return fmt.Errorf("create the capture rule %s: %w", s.o.Name, err)
	}
	s.ruleARN = aws.ToString(rule.RuleArn)
	policy, _ := json.Marshal(map[string]any{"Version": "2012-10-17", "Statement": []any{map[string]any{
		"Sid": "ReplayCapture", "Effect": "Allow", "Principal": map[string]string{"Service": "events.amazonaws.com"},
		"Action": "sqs:SendMessage", "Resource": queueARN, "Condition": map[string]any{"ArnEquals": map[string]string{"aws:SourceArn": s.ruleARN}},
	}}})
	if _, err := s.o.SQS.SetQueueAttributes(ctx, &sqs.SetQueueAttributesInput{QueueUrl: q.QueueUrl,
		Attributes: map[string]string{string(sqstypes.QueueAttributeNamePolicy): string(policy)}}); err != nil {
		return fmt.Errorf("let the capture rule send to its queue: %w", err)
	}
	if out, err := s.o.Events.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(s.o.Name), EventBusName: aws.String(s.o.Bus),
		Targets: []ebtypes.Target{{Id: aws.String("capture"), Arn: aws.String(queueARN)}}}); err != nil || out.FailedEntryCount > 0 {
		return fmt.Errorf("point the capture rule at its queue: %v", errors.Join(err, failedTargets(out)))
	}
	_, err = s.o.Events.StartReplay(ctx, &eventbridge.StartReplayInput{
		ReplayName: aws.String(s.o.Name), EventSourceArn: arch.ArchiveArn,
		EventStartTime: aws.Time(s.o.Filter.Start), EventEndTime: aws.Time(s.o.Filter.End),
		Destination: &ebtypes.ReplayDestination{Arn: bus.Arn, FilterArns: []string{s.ruleARN}},
		Description: aws.String("snavio replay: to its capture rule only"),
	})
	if err != nil {
		return fmt.Errorf("start the EventBridge replay %s of %s: %w", s.o.Name, s.o.Archive, err)
	}
	return nil
}

func failedTargets(out *eventbridge.PutTargetsOutput) error {
	if out == nil || out.FailedEntryCount == 0 {
		return nil
	}
	e := out.FailedEntries[0]
	return fmt.Errorf("%s: %s", aws.ToString(e.ErrorCode), aws.ToString(e.ErrorMessage))
}

// Next implements Source: the captured events, verified. It ends (no
// records) once the EventBridge replay completed and two receives after
// that found the queue empty.
func (s *EBArchive) Next(ctx context.Context, cursor string, limit int) ([]Record, string, error) {
	if !s.started {
		if err := s.start(ctx); err != nil {
			return nil, cursor, err
		}
	}
	wait := int32(max(s.o.Wait, 0) / time.Second)
	for {
		out, err := s.o.SQS.ReceiveMessage(ctx, &sqs.ReceiveMessageInput{QueueUrl: aws.String(s.queueURL),
			MaxNumberOfMessages: int32(min(max(limit, 1), sqsMaxBatch)), WaitTimeSeconds: wait, VisibilityTimeout: 60})
		if err != nil {
			return nil, archiveCursor, fmt.Errorf("receive from the capture queue: %w", err)
		}
		if len(out.Messages) > 0 {
			return s.records(ctx, out.Messages)
		}
		if s.completed {
			if s.empties++; s.empties >= 2 {
				return nil, archiveCursor, nil
			}
			continue
		}
		d, err := s.o.Events.DescribeReplay(ctx, &eventbridge.DescribeReplayInput{ReplayName: aws.String(s.o.Name)})
		if err != nil {
			return nil, archiveCursor, fmt.Errorf("describe the EventBridge replay %s: %w", s.o.Name, err)
		}
		switch d.State {
		case ebtypes.ReplayStateCompleted:
			s.completed = true
		case ebtypes.ReplayStateFailed, ebtypes.ReplayStateCancelled, ebtypes.ReplayStateCancelling:
			return nil, archiveCursor, fmt.Errorf("the EventBridge replay %s ended %s: %s", s.o.Name, d.State, aws.ToString(d.StateReason))
		}
		if ctx.Err() != nil {
			return nil, archiveCursor, ctx.Err()
		}
	}
}

// archiveCursor is the cursor of an archive source once it has begun.
const archiveCursor = "archive"

// records decodes and verifies the captured messages and deletes them
// from the capture queue (the archive keeps the originals).
func (s *EBArchive) records(ctx context.Context, msgs []sqstypes.Message) ([]Record, string, error) {
	recs := make([]Record, 0, len(msgs))
	var check []Archived
	var at []int // the index in recs of each event in check
	del := make([]sqstypes.DeleteMessageBatchRequestEntry, 0, len(msgs))
	for i, m := range msgs {
		del = append(del, sqstypes.DeleteMessageBatchRequestEntry{Id: aws.String(strconv.Itoa(i)), ReceiptHandle: m.ReceiptHandle})
		ev, err := DecodeCapturedEvent([]byte(aws.ToString(m.Body)))
		if err != nil || ev.ReplayName != s.o.Name {
			// Not one of this replay's events: the rule matches nothing
			// else, so it was put in the queue by hand.
			recs = append(recs, Record{Ref: aws.ToString(m.MessageId), Detail: []byte(aws.ToString(m.Body)), Refusal: RefuseNotCaptured})
			continue
		}
		at = append(at, len(recs))
		recs = append(recs, Record{Ref: ev.ID, Source: ev.Source, Detail: ev.Detail, At: ev.Time})
		check = append(check, Archived{Source: ev.Source, DetailType: ev.DetailType, Detail: ev.Detail, ReceivedAt: ev.Time})
	}
	if len(check) > 0 {
		why, err := s.o.Verifier.Refusals(ctx, check)
		if err != nil {
			return nil, archiveCursor, fmt.Errorf("verify the captured events: %w", err)
		}
		if len(why) != len(check) {
			return nil, archiveCursor, fmt.Errorf("verify the captured events: %d answers for %d events", len(why), len(check))
		}
		for i, w := range why {
			recs[at[i]].Refusal = w
		}
	}
	if _, err := s.o.SQS.DeleteMessageBatch(ctx, &sqs.DeleteMessageBatchInput{QueueUrl: aws.String(s.queueURL), Entries: del}); err != nil {
		return nil, archiveCursor, fmt.Errorf("delete from the capture queue: %w", err)
	}
	return recs, archiveCursor, nil
}

// RefuseNotCaptured: a message in the capture queue that is not an event
// of this replay.
const RefuseNotCaptured = "not_from_the_archive"

// Ack implements Source: nothing to do (the capture copy is deleted when
// read; the archive keeps the original).
func (s *EBArchive) Ack(context.Context, Record) error { return nil }

// Close cancels the EventBridge replay if it still runs and deletes the
// capture rule and queue. It uses ctx even when the run's context ended.
func (s *EBArchive) Close(ctx context.Context) error {
	if !s.started {
		return nil
	}
	var errs []error
	if !s.completed {
		if _, err := s.o.Events.CancelReplay(ctx, &eventbridge.CancelReplayInput{ReplayName: aws.String(s.o.Name)}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("cancel the EventBridge replay %s: %w", s.o.Name, err))
		}
	}
	if s.ruleARN != "" {
		if _, err := s.o.Events.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(s.o.Name), EventBusName: aws.String(s.o.Bus), Ids: []string{"capture"}}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("remove the capture rule's target: %w", err))
		}
		if _, err := s.o.Events.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(s.o.Name), EventBusName: aws.String(s.o.Bus)}); err != nil && !notFound(err) {
			errs = append(errs, fmt.Errorf("delete the capture rule %s: %w", s.o.Name, err))
		}
	}
	if s.queueURL != "" {
		if _, err := s.o.SQS.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(s.queueURL)}); err != nil {
			errs = append(errs, fmt.Errorf("delete the capture queue %s: %w", s.o.Name, err))
		}
	}
	return errors.Join(errs...)
}

func notFound(err error) bool {
	var nf *ebtypes.ResourceNotFoundException
	return errors.As(err, &nf)
}

// CapturedEvent is an EventBridge event as a rule's SQS target receives
// it.
type CapturedEvent struct {
	ID         string
	DetailType string
	Source     string
	Time       time.Time
	Detail     []byte
	ReplayName string
}

// DecodeCapturedEvent reads an event from the capture queue: an object
// with id, detail-type, source, time (RFC 3339) and a JSON object detail.
func DecodeCapturedEvent(b []byte) (CapturedEvent, error) {
	var raw struct {
		ID         string         `json:"id"`
		DetailType string         `json:"detail-type"`
		Source     string         `json:"source"`
		Time       string         `json:"time"`
		Detail     jsontext.Value `json:"detail"`
		ReplayName string         `json:"replay-name"`
	}
	if err := jsonv2.Unmarshal(b, &raw); err != nil {
		return CapturedEvent{}, fmt.Errorf("not an EventBridge event: %w", err)
	}
	if raw.ID == "" || raw.DetailType == "" || raw.Source == "" {
		return CapturedEvent{}, errors.New("an EventBridge event needs id, detail-type and source")
	}
	t, err := time.Parse(time.RFC3339, raw.Time)
	if err != nil {
		return CapturedEvent{}, fmt.Errorf("event time %.40q: %w", raw.Time, err)
	}
	if raw.Detail.Kind() != '{' {
		return CapturedEvent{}, errors.New("an EventBridge event's detail is a JSON object")
	}
	return CapturedEvent{ID: raw.ID, DetailType: raw.DetailType, Source: raw.Source, Time: t.UTC(), Detail: []byte(raw.Detail), ReplayName: raw.ReplayName}, nil
}

// CaptureMaxAge is how old a capture queue must be before SweepCaptures
// deletes it: a day, the capture queue's own retention.
const CaptureMaxAge = 24 * time.Hour

// SweepCaptures deletes the capture queues (and their rules) that runs
// which did not end cleanly (a crash, a kill) left behind: the queues
// named prefix... on bus older than CaptureMaxAge at now. It returns the
// names it deleted.
func SweepCaptures(ctx context.Context, q CaptureSQSAPI, ev EventBridgeAPI, bus, prefix string, now time.Time) ([]string, error) {
	var deleted []string
	p := sqs.NewListQueuesPaginator(q, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(prefix)})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return deleted, fmt.Errorf("list capture queues %s*: %w", prefix, err)
		}
		for _, u := range page.QueueUrls {
			a, err := q.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(u), AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameCreatedTimestamp}})
			if err != nil {
				if queueMissing(err) {
					continue
				}
				return deleted, fmt.Errorf("read the age of %s: %w", u, err)
			}
			created, err := strconv.ParseInt(a.Attributes[string(sqstypes.QueueAttributeNameCreatedTimestamp)], 10, 64)
			if err != nil || now.Sub(time.Unix(created, 0)) < CaptureMaxAge {
				continue
			}
			name := u[strings.LastIndexByte(u, '/')+1:]
			if _, err := ev.RemoveTargets(ctx, &eventbridge.RemoveTargetsInput{Rule: aws.String(name), EventBusName: aws.String(bus), Ids: []string{"capture"}}); err != nil && !notFound(err) {
				return deleted, fmt.Errorf("remove the target of the leftover capture rule %s: %w", name, err)
			}
			if _, err := ev.DeleteRule(ctx, &eventbridge.DeleteRuleInput{Name: aws.String(name), EventBusName: aws.String(bus)}); err != nil && !notFound(err) {
				return deleted, fmt.Errorf("delete the leftover capture rule %s: %w", name, err)
			}
			if _, err := q.DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: aws.String(u)}); err != nil && !queueMissing(err) {
				return deleted, fmt.Errorf("delete the leftover capture queue %s: %w", name, err)
			}
			deleted = append(deleted, name)
		}
	}
	return deleted, nil
}
