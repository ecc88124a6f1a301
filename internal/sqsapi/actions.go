package sqsapi

import (
	"crypto/md5"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// Limits of the actions, as SQS's.
const (
	// MaxWaitSeconds is the longest ReceiveMessage long poll.
	MaxWaitSeconds = 20
	// MaxBatch is the most entries of a batch action.
	MaxBatch = 10
	// MaxListResults is the most queue URLs one ListQueues returns.
	MaxListResults = 1000
	// maxVisibility is the longest visibility timeout in seconds.
	maxVisibility = int(localqueue.MaxVisibilityTimeout / time.Second)
	// maxReceiptLen bounds one receipt handle.
	maxReceiptLen = wire.QueueMaxReceiptLen
)

// GetQueueUrlInput is the request of GetQueueUrl.
type GetQueueUrlInput struct {
	QueueName              *string
	QueueOwnerAWSAccountId *string
}

func (a *API) getQueueURL(c *call, in *GetQueueUrlInput) (any, error) {
	if in.QueueName == nil || *in.QueueName == "" {
		return nil, missing("QueueName")
	}
	if o := in.QueueOwnerAWSAccountId; o != nil && *o != AccountID {
		return nil, invalidParam("QueueOwnerAWSAccountId %q: local queues belong to account %s", truncate(*o, 20), AccountID)
	}
	name := *in.QueueName
	if err := checkName(name); err != nil {
		return nil, err
	}
	if err := a.authorize(c, name); err != nil {
		return nil, err
	}
	if _, err := a.stats(c.r.Context(), name); err != nil {
		return nil, err
	}
	return map[string]string{"QueueUrl": c.url(name)}, nil
}

// ListQueuesInput is the request of ListQueues.
type ListQueuesInput struct {
	QueueNamePrefix string
	NextToken       string
	MaxResults      *int
}

type listQueuesOutput struct {
	QueueUrls []string
	NextToken string `json:",omitempty"`
}

func (a *API) listQueues(c *call, in *ListQueuesInput) (any, error) {
	limit := MaxListResults
	if in.MaxResults != nil {
		if *in.MaxResults < 1 || *in.MaxResults > MaxListResults {
			return nil, invalidParam("MaxResults %d: must be 1 to %d", *in.MaxResults, MaxListResults)
		}
		limit = *in.MaxResults
	}
	if len(in.QueueNamePrefix) > localqueue.MaxQueueNameLen {
		return nil, invalidParam("QueueNamePrefix is longer than a queue name (%d characters)", localqueue.MaxQueueNameLen)
	}
	if in.NextToken != "" {
		if err := checkName(in.NextToken); err != nil {
			return nil, invalidParam("NextToken %q: pass the NextToken of the previous page, unchanged", truncate(in.NextToken, 90))
		}
	}
	all, err := a.o.Queues.ListQueues(c.r.Context())
	if err != nil {
		return nil, err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	out := listQueuesOutput{QueueUrls: []string{}}
	for _, s := range all {
		if s.Name <= in.NextToken || !strings.HasPrefix(s.Name, in.QueueNamePrefix) || !a.Owns(c.tenant, s.Name) {
			continue
		}
		if len(out.QueueUrls) == limit {
			if in.MaxResults != nil {
				out.NextToken, _ = strings.CutPrefix(out.QueueUrls[limit-1], c.url(""))
			}
			break
		}
		out.QueueUrls = append(out.QueueUrls, c.url(s.Name))
	}
	return out, nil
}

// GetQueueAttributesInput is the request of GetQueueAttributes.
type GetQueueAttributesInput struct {
	QueueUrl       *string
	AttributeNames []string
}

// queueAttrs are SQS's queue attribute names; answered marks those a local
// queue has (the others are left out of answers, as SQS leaves out what
// does not apply).
var queueAttrs = map[string]bool{
	"ApproximateNumberOfMessages": true, "ApproximateNumberOfMessagesNotVisible": true,
	"ApproximateNumberOfMessagesDelayed": true, "VisibilityTimeout": true, "CreatedTimestamp": true,
	"LastModifiedTimestamp": true, "QueueArn": true, "RedrivePolicy": true, "MaximumMessageSize": true,
	"DelaySeconds": true, "ReceiveMessageWaitTimeSeconds": true,
	"Policy": false, "MessageRetentionPeriod": false, "FifoQueue": false, "ContentBasedDeduplication": false,
	"KmsMasterKeyId": false, "KmsDataKeyReusePeriodSeconds": false, "DeduplicationScope": false,
	"FifoThroughputLimit": false, "RedriveAllowPolicy": false, "SqsManagedSseEnabled": false,
}

func (a *API) getQueueAttributes(c *call, in *GetQueueAttributesInput) (any, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	for _, n := range in.AttributeNames {
		if _, ok := queueAttrs[n]; !ok && n != "All" {
			return nil, &Error{Status: http.StatusBadRequest, Type: "InvalidAttributeName", Query: "InvalidAttributeName",
				Message: fmt.Sprintf("Unknown Attribute %s: ask for All or SQS queue attributes such as ApproximateNumberOfMessages", truncate(n, 60))}
		}
	}
	s, err := a.stats(c.r.Context(), name)
	if err != nil {
		return nil, err
	}
	all := QueueAttributes(s)
	out := map[string]string{}
	for _, n := range in.AttributeNames {
		if n == "All" {
			out = all
			break
		}
		if v, ok := all[n]; ok {
			out[n] = v
		}
	}
	return map[string]any{"Attributes": out}, nil
}

// QueueAttributes returns the SQS attributes of a local queue.
func QueueAttributes(s localqueue.QueueStats) map[string]string {
	created := strconv.FormatInt(s.CreatedAt.Unix(), 10)
	out := map[string]string{
		"ApproximateNumberOfMessages":           itoa(s.Visible),
		"ApproximateNumberOfMessagesNotVisible": itoa(s.InFlight),
		"ApproximateNumberOfMessagesDelayed":    "0",
		"VisibilityTimeout":                     itoa(int(s.VisibilityTimeout / time.Second)),
		"CreatedTimestamp":                      created,
		"LastModifiedTimestamp":                 created,
		"QueueArn":                              s.ARN,
		"MaximumMessageSize":                    itoa(localqueue.MaxMessageBytes),
		"DelaySeconds":                          "0",
		"ReceiveMessageWaitTimeSeconds":         "0",
	}
	if s.DeadLetterQueue != "" {
		b, _ := json.Marshal(struct {
			DeadLetterTargetArn string `json:"deadLetterTargetArn"`
			MaxReceiveCount     int    `json:"maxReceiveCount"`
		}{embedded.QueueARN(s.DeadLetterQueue), s.MaxReceives})
		out["RedrivePolicy"] = string(b)
	}
	return out
}

// ReceiveMessageInput is the request of ReceiveMessage.
type ReceiveMessageInput struct {
	QueueUrl                    *string
	MaxNumberOfMessages         *int
	VisibilityTimeout           *int
	WaitTimeSeconds             *int
	AttributeNames              []string
	MessageSystemAttributeNames []string
	MessageAttributeNames       []string
	ReceiveRequestAttemptId     string
}

// MessageAttributeValue is a message attribute as SQS carries it.
type MessageAttributeValue struct {
	DataType         string
	StringValue      *string  `json:",omitempty"`
	BinaryValue      []byte   `json:",omitempty"`
	StringListValues []string `json:",omitempty"`
	BinaryListValues [][]byte `json:",omitempty"`
}

type message struct {
	MessageId              string
	ReceiptHandle          string
	MD5OfBody              string
	Body                   string
	Attributes             map[string]string                `json:",omitempty"`
	MessageAttributes      map[string]MessageAttributeValue `json:",omitempty"`
	MD5OfMessageAttributes string                           `json:",omitempty"`
}

// systemAttrs are SQS's message system attribute names.
var systemAttrs = []string{"All", "SenderId", "SentTimestamp", "ApproximateReceiveCount", "ApproximateFirstReceiveTimestamp",
	"SequenceNumber", "MessageDeduplicationId", "MessageGroupId", "AWSTraceHeader", "DeadLetterQueueSourceArn"}

func (a *API) receiveMessage(c *call, in *ReceiveMessageInput) (any, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	n := 1
	if in.MaxNumberOfMessages != nil {
		n = *in.MaxNumberOfMessages
		if n < 1 || n > localqueue.MaxReceiveBatch {
			return nil, invalidParam("Value %d for parameter MaxNumberOfMessages is invalid. Reason: Must be between 1 and %d, if provided.", n, localqueue.MaxReceiveBatch)
		}
	}
	var vt time.Duration // zero: the queue's own timeout
	if in.VisibilityTimeout != nil {
		v := *in.VisibilityTimeout
		if v < 0 || v > maxVisibility {
			return nil, invalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and %d, if provided.", v, maxVisibility)
		}
		// The store reads 0 as the queue's timeout; SQS's 0 is "visible again at once".
		vt = max(time.Duration(v)*time.Second, time.Nanosecond)
	}
	var wait time.Duration
	if in.WaitTimeSeconds != nil {
		v := *in.WaitTimeSeconds
		if v < 0 || v > MaxWaitSeconds {
			return nil, invalidParam("Value %d for parameter WaitTimeSeconds is invalid. Reason: Must be >= 0 and <= %d, if provided.", v, MaxWaitSeconds)
		}
		wait = time.Duration(v) * time.Second
	}
	sys := append(slices.Clone(in.AttributeNames), in.MessageSystemAttributeNames...)
	for _, s := range sys {
		if !slices.Contains(systemAttrs, s) {
			return nil, &Error{Status: http.StatusBadRequest, Type: "InvalidAttributeName", Query: "InvalidAttributeName",
				Message: fmt.Sprintf("Unknown Attribute %s: ask for All, SentTimestamp, ApproximateReceiveCount, ApproximateFirstReceiveTimestamp or DeadLetterQueueSourceArn", truncate(s, 60))}
		}
	}
	for _, s := range in.MessageAttributeNames {
		if s == "" || len(s) > 256 {
			return nil, invalidParam("MessageAttributeNames: a name must be 1 to 256 characters")
		}
	}
	msgs, err := a.o.Poll(c.r.Context(), name, n, vt, wait)
	if errors.Is(err, controlapi.ErrTooManyWaiters) {
		return nil, &Error{Status: http.StatusServiceUnavailable, Type: "RequestThrottled", Query: "RequestThrottled", RetryAfter: time.Second,
			Message: "too many ReceiveMessage calls are waiting on this server at once: retry, or receive with a shorter WaitTimeSeconds"}
	}
	if err != nil {
		return nil, err
	}
	out := struct{ Messages []message }{Messages: make([]message, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, toMessage(m, sys, in.MessageAttributeNames))
	}
	return out, nil
}

// toMessage renders m with the system attributes sys and the message
// attributes names ask for.
func toMessage(m localqueue.Received, sys, names []string) message {
	body := strings.ToValidUTF8(string(m.Body), "\uFFFD")
	sum := md5.Sum([]byte(body))
	out := message{MessageId: m.ID, ReceiptHandle: m.ReceiptHandle, MD5OfBody: hex.EncodeToString(sum[:]), Body: body}
	all := slices.Contains(sys, "All")
	put := func(k, v string) {
		if all || slices.Contains(sys, k) {
			if out.Attributes == nil {
				out.Attributes = map[string]string{}
			}
			out.Attributes[k] = v
		}
	}
	put("SentTimestamp", strconv.FormatInt(m.SentAt.UnixMilli(), 10))
	put("ApproximateReceiveCount", itoa(m.ReceiveCount))
	put("ApproximateFirstReceiveTimestamp", strconv.FormatInt(m.FirstReceivedAt.UnixMilli(), 10))
	if src, ok := m.Attributes[localqueue.AttrDLQSourceQueue]; ok {
		put("DeadLetterQueueSourceArn", src)
	}
	for k, v := range m.Attributes {
		if !wanted(names, k) {
			continue
		}
		if out.MessageAttributes == nil {
			out.MessageAttributes = map[string]MessageAttributeValue{}
		}
		out.MessageAttributes[k] = MessageAttributeValue{DataType: "String", StringValue: &v}
	}
	if out.MessageAttributes != nil {
		out.MD5OfMessageAttributes = AttributesMD5(out.MessageAttributes)
	}
	return out
}

// wanted reports whether the attribute name matches MessageAttributeNames:
// All or .* for every one, prefix.* for a prefix, else the exact name.
func wanted(names []string, name string) bool {
	for _, n := range names {
		if n == "All" || n == ".*" || n == name {
			return true
		}
		if p, ok := strings.CutSuffix(n, ".*"); ok && strings.HasPrefix(name, p+".") {
			return true
		}
	}
	return false
}

// AttributesMD5 is SQS's MD5OfMessageAttributes: over the attributes in
// name order, each as length-prefixed name and data type, a transport
// byte (1 string, 2 binary) and the length-prefixed value.
func AttributesMD5(attrs map[string]MessageAttributeValue) string {
	names := make([]string, 0, len(attrs))
	for k := range attrs {
		names = append(names, k)
	}
	sort.Strings(names)
	h := md5.New()
	field := func(b []byte) {
		_ = binary.Write(h, binary.BigEndian, uint32(len(b)))
		h.Write(b)
	}
	for _, k := range names {
		v := attrs[k]
		field([]byte(k))
		field([]byte(v.DataType))
		if v.StringValue != nil {
			h.Write([]byte{1})
			field([]byte(*v.StringValue))
		} else {
			h.Write([]byte{2})
			field(v.BinaryValue)
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// DeleteMessageInput is the request of DeleteMessage.
type DeleteMessageInput struct {
	QueueUrl      *string
	ReceiptHandle *string
}

func (a *API) deleteMessage(c *call, in *DeleteMessageInput) (any, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := checkReceipt(in.ReceiptHandle); err != nil {
		return nil, err
	}
	errs, err := a.o.Queues.DeleteMessageBatch(c.r.Context(), name, []string{*in.ReceiptHandle})
	if err != nil {
		return nil, err
	}
	if errs[0] != nil {
		return nil, receiptInvalid("The input receipt handle " + truncate(*in.ReceiptHandle, 80) + " is not valid: " + errs[0].Error())
	}
	return struct{}{}, nil
}

func checkReceipt(h *string) error {
	if h == nil || *h == "" {
		return missing("ReceiptHandle")
	}
	if len(*h) > maxReceiptLen {
		return receiptInvalid(fmt.Sprintf("the receipt handle is longer than %d bytes: pass the ReceiptHandle ReceiveMessage returned, unchanged", maxReceiptLen))
	}
	return nil
}

// BatchEntry is an entry of DeleteMessageBatch and
// ChangeMessageVisibilityBatch.
type BatchEntry struct {
	Id                string
	ReceiptHandle     *string
	VisibilityTimeout *int
}

// BatchInput is the request of DeleteMessageBatch and
// ChangeMessageVisibilityBatch.
type BatchInput struct {
	QueueUrl *string
	Entries  []BatchEntry
}

type batchFailure struct {
	Id          string
	SenderFault bool
	Code        string
	Message     string
}

type batchOutput struct {
	Successful []map[string]string
	Failed     []batchFailure
}

// checkBatch validates the entries' count and ids.
func checkBatch(entries []BatchEntry) error {
	switch {
	case len(entries) == 0:
		return &Error{Status: http.StatusBadRequest, Type: "EmptyBatchRequest", Query: "AWS.SimpleQueueService.EmptyBatchRequest",
			Message: "There should be at least one entry in the request."}
	case len(entries) > MaxBatch:
		return &Error{Status: http.StatusBadRequest, Type: "TooManyEntriesInBatchRequest", Query: "AWS.SimpleQueueService.TooManyEntriesInBatchRequest",
			Message: fmt.Sprintf("Maximum number of entries per request are %d. You have sent %d.", MaxBatch, len(entries))}
	}
	seen := make(map[string]bool, len(entries))
	for _, e := range entries {
		if !validBatchID(e.Id) {
			return &Error{Status: http.StatusBadRequest, Type: "InvalidBatchEntryId", Query: "AWS.SimpleQueueService.InvalidBatchEntryId",
				Message: fmt.Sprintf("A batch entry id %q can only contain alphanumeric characters, hyphens and underscores. It can be at most 80 letters long.", truncate(e.Id, 90))}
		}
		if seen[e.Id] {
			return &Error{Status: http.StatusBadRequest, Type: "BatchEntryIdsNotDistinct", Query: "AWS.SimpleQueueService.BatchEntryIdsNotDistinct",
				Message: "Id " + e.Id + " repeated."}
		}
		seen[e.Id] = true
	}
	return nil
}

func validBatchID(id string) bool {
	if id == "" || len(id) > 80 {
		return false
	}
	for _, r := range id {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return false
		}
	}
	return true
}

func entryFailure(id string, err error) batchFailure {
	var e *Error
	if errors.As(err, &e) {
		return batchFailure{Id: id, SenderFault: !e.Receiver, Code: e.Query, Message: e.Message}
	}
	return batchFailure{Id: id, SenderFault: true, Code: "ReceiptHandleIsInvalid", Message: err.Error()}
}

// batch resolves a batch request's queue, checks its entries and returns
// the empty answer to fill in.
func (a *API) batch(c *call, in *BatchInput) (string, batchOutput, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return "", batchOutput{}, err
	}
	if err := checkBatch(in.Entries); err != nil {
		return "", batchOutput{}, err
	}
	return name, batchOutput{Successful: []map[string]string{}, Failed: []batchFailure{}}, nil
}

func (a *API) deleteMessageBatch(c *call, in *BatchInput) (any, error) {
	name, out, err := a.batch(c, in)
	if err != nil {
		return nil, err
	}
	var ids, handles []string
	for _, e := range in.Entries {
		if err := checkReceipt(e.ReceiptHandle); err != nil {
			out.Failed = append(out.Failed, entryFailure(e.Id, err))
			continue
		}
		ids, handles = append(ids, e.Id), append(handles, *e.ReceiptHandle)
	}
	if len(handles) > 0 {
		errs, err := a.o.Queues.DeleteMessageBatch(c.r.Context(), name, handles)
		if err != nil {
			return nil, err
		}
		for i, err := range errs {
			if err != nil {
				out.Failed = append(out.Failed, entryFailure(ids[i], err))
				continue
			}
			out.Successful = append(out.Successful, map[string]string{"Id": ids[i]})
		}
	}
	return out, nil
}

// ChangeMessageVisibilityInput is the request of ChangeMessageVisibility.
type ChangeMessageVisibilityInput struct {
	QueueUrl          *string
	ReceiptHandle     *string
	VisibilityTimeout *int
}

func (a *API) changeMessageVisibility(c *call, in *ChangeMessageVisibilityInput) (any, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if err := a.changeOne(c, name, in.ReceiptHandle, in.VisibilityTimeout); err != nil {
		return nil, err
	}
	return struct{}{}, nil
}

// changeOne changes one message's visibility; stale or malformed handles
// are ReceiptHandleIsInvalid.
func (a *API) changeOne(c *call, queue string, receipt *string, vt *int) error {
	if err := checkReceipt(receipt); err != nil {
		return err
	}
	if vt == nil {
		return missing("VisibilityTimeout")
	}
	if *vt < 0 || *vt > maxVisibility {
		return invalidParam("Value %d for parameter VisibilityTimeout is invalid. Reason: Must be between 0 and %d.", *vt, maxVisibility)
	}
	err := a.o.Queues.ChangeMessageVisibility(c.r.Context(), queue, *receipt, time.Duration(*vt)*time.Second)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, localqueue.ErrStaleReceipt), strings.Contains(err.Error(), "malformed"):
		return receiptInvalid("The input receipt handle " + truncate(*receipt, 80) + " is not valid: " + err.Error())
	}
	return err
}

func (a *API) changeMessageVisibilityBatch(c *call, in *BatchInput) (any, error) {
	name, out, err := a.batch(c, in)
	if err != nil {
		return nil, err
	}
	for _, e := range in.Entries {
		err := a.changeOne(c, name, e.ReceiptHandle, e.VisibilityTimeout)
		var se *Error
		switch {
		case err == nil:
			out.Successful = append(out.Successful, map[string]string{"Id": e.Id})
		case errors.As(err, &se):
			out.Failed = append(out.Failed, entryFailure(e.Id, err))
		default: // storage failure: the whole call fails, as SQS's 500
			return nil, err
		}
	}
	return out, nil
}

// SendMessageInput is the request of SendMessage.
type SendMessageInput struct {
	QueueUrl                *string
	MessageBody             *string
	DelaySeconds            *int
	MessageAttributes       map[string]MessageAttributeValue
	MessageSystemAttributes map[string]MessageAttributeValue
	MessageDeduplicationId  *string
	MessageGroupId          *string
}

func (a *API) sendMessage(c *call, in *SendMessageInput) (any, error) {
	name, err := a.queue(c, in.QueueUrl)
	if err != nil {
		return nil, err
	}
	if in.MessageBody == nil || *in.MessageBody == "" {
		return nil, missing("MessageBody")
	}
	switch {
	case in.DelaySeconds != nil && *in.DelaySeconds != 0:
		return nil, invalidParam("DelaySeconds %d: local queues deliver at once; send with DelaySeconds 0 or without it", *in.DelaySeconds)
	case in.MessageGroupId != nil || in.MessageDeduplicationId != nil:
		return nil, invalidParam("MessageGroupId and MessageDeduplicationId are for FIFO queues; local queues are standard queues: leave them out")
	case len(in.MessageSystemAttributes) > 0:
		return nil, invalidParam("MessageSystemAttributes are not kept by local queues: leave them out")
	case len(in.MessageAttributes) > localqueue.MaxMessageAttributes:
		return nil, invalidParam("%d message attributes: a message carries at most %d", len(in.MessageAttributes), localqueue.MaxMessageAttributes)
	}
	body := *in.MessageBody
	if err := checkBody(body); err != nil {
		return nil, err
	}
	size := len(body)
	attrs := make(map[string]string, len(in.MessageAttributes))
	for k, v := range in.MessageAttributes {
		if err := checkAttr(k, v); err != nil {
			return nil, err
		}
		attrs[k] = *v.StringValue
		size += len(k) + len(*v.StringValue)
	}
	if size > localqueue.MaxMessageBytes {
		return nil, invalidParam("the message is %d bytes (body and attributes), over the limit of %d", size, localqueue.MaxMessageBytes)
	}
	id, err := a.o.Queues.Send(c.r.Context(), name, []byte(body), attrs)
	if err != nil {
		return nil, err
	}
	sum := md5.Sum([]byte(body))
	out := map[string]string{"MessageId": id, "MD5OfMessageBody": hex.EncodeToString(sum[:])}
	if len(in.MessageAttributes) > 0 {
		out["MD5OfMessageAttributes"] = AttributesMD5(in.MessageAttributes)
	}
	return out, nil
}

// checkBody refuses characters SQS does not take in a body.
func checkBody(b string) error {
	if !utf8.ValidString(b) {
		return invalidParam("MessageBody is not valid UTF-8")
	}
	for i, r := range b {
		if !(r == 0x9 || r == 0xA || r == 0xD || r >= 0x20 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD || r >= 0x10000 && r <= 0x10FFFF) {
			return &Error{Status: http.StatusBadRequest, Type: "InvalidMessageContents", Query: "InvalidMessageContents",
				Message: fmt.Sprintf("Invalid characters found in MessageBody: %U at byte %d; SQS takes #x9, #xA, #xD and #x20 to #x10FFFF without surrogates and #xFFFE-#xFFFF", r, i)}
		}
	}
	return nil
}

// checkAttr validates one message attribute: an SQS name, a String or
// Number data type with a StringValue (local queues keep text only).
func checkAttr(name string, v MessageAttributeValue) error {
	if name == "" || len(name) > 256 || strings.Contains(name, "..") || name[0] == '.' || name[len(name)-1] == '.' {
		return invalidParam("message attribute name %q: 1 to 256 characters, no leading, trailing or doubled '.'", truncate(name, 60))
	}
	if l := strings.ToLower(name); strings.HasPrefix(l, "aws.") || strings.HasPrefix(l, "amazon.") {
		return invalidParam("message attribute name %q: names starting with AWS. or Amazon. are reserved", truncate(name, 60))
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.') {
			return invalidParam("message attribute name %q: character %q not allowed: use letters, digits, -, _ and .", truncate(name, 60), r)
		}
	}
	base, _, _ := strings.Cut(v.DataType, ".")
	switch {
	case v.DataType == "":
		return missing("MessageAttributes." + name + ".DataType")
	case base == "Binary":
		return invalidParam("message attribute %s: Binary attributes are not kept by local queues; send it as a String (base64)", name)
	case base != "String" && base != "Number":
		return invalidParam("message attribute %s: DataType %q: use String or Number", name, truncate(v.DataType, 60))
	case v.StringValue == nil:
		return missing("MessageAttributes." + name + ".StringValue")
	case len(v.StringListValues) > 0 || len(v.BinaryListValues) > 0 || len(v.BinaryValue) > 0:
		return invalidParam("message attribute %s: only StringValue is taken with DataType %s", name, base)
	}
	if base == "Number" {
		if _, err := strconv.ParseFloat(*v.StringValue, 64); err != nil {
			return invalidParam("message attribute %s: %q is not a number", name, truncate(*v.StringValue, 40))
		}
	}
	return nil
}
