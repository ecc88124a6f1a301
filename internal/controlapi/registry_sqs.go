package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// SQSQueueAPI is the SQS calls of the AWS test routing; *sqs.Client has
// them.
type SQSQueueAPI interface {
	GetQueueUrl(ctx context.Context, in *sqs.GetQueueUrlInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueUrlOutput, error)
	GetQueueAttributes(ctx context.Context, in *sqs.GetQueueAttributesInput, optFns ...func(*sqs.Options)) (*sqs.GetQueueAttributesOutput, error)
}

// DispatcherRoles are the roles whose access a target queue must allow:
// the functions that deliver (the ingest and slow functions' roles) send
// to it, the queue monitor reads its attributes.
type DispatcherRoles struct {
	Senders []string
	Monitor string
}

// SQSRouteQueues is the RouteQueues port on SQS, for the control API on
// AWS (docs/registry/test-routing.md). A route's queue must exist, be a
// Standard queue with a RedrivePolicy (testRouting compares its DLQ),
// be encrypted at rest (SSE-KMS or SSE-SQS), and its policy must let
// every sender role call sqs:SendMessage and sqs:GetQueueUrl and the
// monitor role sqs:GetQueueAttributes and sqs:GetQueueUrl. region is c's region: a queue of another
// region is asked there.
func SQSRouteQueues(c SQSQueueAPI, region string, roles DispatcherRoles) (RouteQueues, error) {
	if c == nil {
		return nil, errors.New("controlapi: SQSRouteQueues: the SQS client is nil")
	}
	if len(roles.Senders) == 0 || roles.Monitor == "" {
		return nil, errors.New("controlapi: SQSRouteQueues: give the sender roles (ingest, slow) and the monitor role")
	}
	for _, r := range append(slices.Clone(roles.Senders), roles.Monitor) {
		if _, err := roleAccount(r); err != nil {
			return nil, fmt.Errorf("controlapi: SQSRouteQueues: %w", err)
		}
	}
	q := &sqsQueues{c: c, region: region, roles: roles}
	return RouteQueuesFunc(q.queue), nil
}

type sqsQueues struct {
	c      SQSQueueAPI
	region string
	roles  DispatcherRoles
}

// roleAccount returns the account of an IAM role ARN.
func roleAccount(arn string) (string, error) {
	parts := strings.SplitN(arn, ":", 6)
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "iam" || len(parts[4]) != 12 || !strings.HasPrefix(parts[5], "role/") {
		return "", fmt.Errorf("%q is not an IAM role ARN (arn:aws:iam::<account>:role/<path/><name>)", arn)
	}
	return parts[4], nil
}

// sqsCode is the error code of an SQS error: the JSON protocol's typed
// error or the query protocol's code, which emulators answer with.
func sqsCode(err error) string {
	var missing *sqstypes.QueueDoesNotExist
	if errors.As(err, &missing) {
		return "QueueDoesNotExist"
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func (s *sqsQueues) queue(ctx context.Context, arn string) (QueueInfo, error) {
	a, err := registry.ParseQueueARN(arn)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("%w: %v", ErrNoQueue, err)
	}
	if a.Partition == registry.LocalPartition {
		return QueueInfo{}, fmt.Errorf("%w: %s is a queue of a local dispatch serve, not an SQS queue", ErrNoQueue, arn)
	}
	var opts []func(*sqs.Options)
	if a.Region != s.region {
		opts = append(opts, func(o *sqs.Options) { o.Region = a.Region })
	}
	u, err := s.c.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(a.Name), QueueOwnerAWSAccountId: aws.String(a.Account)}, opts...)
	switch code := sqsCode(err); {
	case err == nil:
	case code == "QueueDoesNotExist" || code == "AWS.SimpleQueueService.NonExistentQueue":
		// SQS answers so for a queue of another account that denies
		// GetQueueUrl, too.
		return QueueInfo{}, fmt.Errorf("%w: %s (for a queue of another account: its policy must allow sqs:GetQueueUrl to the dispatcher's roles)", ErrNoQueue, arn)
	default:
		return QueueInfo{}, fmt.Errorf("sqs GetQueueUrl %s: %w", arn, err)
	}
	out, err := s.c.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}}, opts...)
	switch code := sqsCode(err); {
	case err == nil:
	case code == "QueueDoesNotExist" || code == "AWS.SimpleQueueService.NonExistentQueue":
		return QueueInfo{}, fmt.Errorf("%w: %s", ErrNoQueue, arn)
	case code == "AccessDenied" || code == "AccessDeniedException" || code == "AccessDenied.SQS":
		return QueueInfo{Opaque: true, Problems: []QueueProblem{{
			Problem: "the control API may not read its attributes (" + code + ")",
			Fix:     "let the control API's role and the queue monitor's role " + s.roles.Monitor + " call sqs:GetQueueAttributes in the queue's policy",
		}}}, nil
	default:
		return QueueInfo{}, fmt.Errorf("sqs GetQueueAttributes %s: %w", arn, err)
	}
	return s.check(arn, a, out.Attributes), nil
}

// check judges a queue by its attributes.
func (s *sqsQueues) check(arn string, a registry.QueueARN, attrs map[string]string) QueueInfo {
	info := QueueInfo{FIFO: attrs["FifoQueue"] == "true"}
	if rp := attrs["RedrivePolicy"]; rp != "" {
		var p struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
		}
		if err := json.Unmarshal([]byte(rp), &p); err != nil || p.DeadLetterTargetArn == "" {
			info.Problems = append(info.Problems, QueueProblem{"its RedrivePolicy names no deadLetterTargetArn", "set a RedrivePolicy with the route's DLQ (aws sqs set-queue-attributes)"})
		}
		info.DeadLetterARN = p.DeadLetterTargetArn
	}
	kms := attrs["KmsMasterKeyId"]
	switch {
	case kms != "":
		if strings.HasSuffix(kms, "alias/aws/sqs") && slices.ContainsFunc(s.roles.Senders, func(r string) bool { acct, _ := roleAccount(r); return acct != a.Account }) {
			info.Problems = append(info.Problems, QueueProblem{
				"it is encrypted with the AWS-managed key alias/aws/sqs, which the dispatcher's roles in another account cannot use",
				"encrypt it with a customer managed key whose policy allows kms:GenerateDataKey and kms:Decrypt to the dispatcher's roles, or with SSE-SQS (SqsManagedSseEnabled)",
			})
		}
	case attrs["SqsManagedSseEnabled"] == "true":
	default:
		info.Problems = append(info.Problems, QueueProblem{"it is not encrypted at rest",
			"turn on SSE-SQS (aws sqs set-queue-attributes --attributes SqsManagedSseEnabled=true) or SSE-KMS with a key the dispatcher's roles may use"})
	}
	doc, err := parseQueuePolicy(attrs["Policy"])
	if err != nil {
		info.Problems = append(info.Problems, QueueProblem{"its policy cannot be read: " + err.Error(), "fix the queue's Policy attribute"})
		return info
	}
	// The senders resolve the queue's URL (GetQueueUrl with the owner's
	// account) and send; the monitor resolves it and reads attributes.
	need := []struct {
		role    string
		actions []string
	}{}
	for _, r := range s.roles.Senders {
		need = append(need, struct {
			role    string
			actions []string
		}{r, []string{"sqs:SendMessage", "sqs:GetQueueUrl"}})
	}
	need = append(need, struct {
		role    string
		actions []string
	}{s.roles.Monitor, []string{"sqs:GetQueueAttributes", "sqs:GetQueueUrl"}})
	for _, n := range need {
		var missing, why []string
		for _, action := range n.actions {
			if w := doc.allows(n.role, action, arn, a.Account); w != "" {
				missing = append(missing, action)
				if !slices.Contains(why, w) {
					why = append(why, w)
				}
			}
		}
		if len(missing) > 0 {
			info.Problems = append(info.Problems, QueueProblem{
				fmt.Sprintf("its policy does not let %s call %s: %s", n.role, strings.Join(missing, ", "), strings.Join(why, "; ")),
				fmt.Sprintf("add a statement allowing %s to principal %s on %s, and remove any Deny that covers it", strings.Join(missing, ", "), n.role, arn),
			})
		}
	}
	return info
}
