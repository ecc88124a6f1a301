package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
)

// AWS JSON 1.1 protocol constants, as EventBridge speaks them.
const (
	// ContentTypeAWSJSON11 is the content type of every AWS JSON 1.1
	// request and response.
	ContentTypeAWSJSON11 = "application/x-amz-json-1.1"
	// TargetPutEvents is the X-Amz-Target of EventBridge PutEvents.
	TargetPutEvents = "AWSEvents.PutEvents"
)

// Error codes of whole-request failures (the `__type` of an AWS JSON 1.1
// error body). They are the codes EventBridge itself answers with, so SDKs
// classify them as they would on AWS.
const (
	ErrCodeSerialization    = "SerializationException"
	ErrCodeValidation       = "ValidationException"
	ErrCodeUnknownOperation = "UnknownOperationException"
	ErrCodeThrottling       = "ThrottlingException"
	ErrCodeInternal         = "InternalException"
)

// Per-entry error codes of a PutEvents response (PutEventsResultEntry.ErrorCode).
const (
	EntryErrInvalidArgument      = "InvalidArgument"
	EntryErrMalformedDetail      = "MalformedDetail"
	EntryErrNotAuthorizedForSrc  = "NotAuthorizedForSourceException"
	EntryErrInternal             = "InternalException"
	EntryErrThrottling           = "ThrottlingException"
	EntryErrAccessDenied         = "AccessDeniedException"
	EntryErrResourceNotFound     = "ResourceNotFoundException"
	EntryErrNotAuthorizedForType = "NotAuthorizedForDetailTypeException"
)

// awsError is a whole-request failure in the AWS JSON 1.1 shape.
type awsError struct {
	Status  int    `json:"-"`
	Type    string `json:"__type"`
	Message string `json:"message"`
	// Reason labels the rejection in snavio_http_rejected_total.
	Reason string `json:"-"`
	// RetryAfter, when positive, is sent as the Retry-After header.
	RetryAfter time.Duration `json:"-"`
}

func (e *awsError) Error() string { return e.Type + ": " + e.Message }

// writeAWSJSON writes a 200 AWS JSON 1.1 response.
func writeAWSJSON(w http.ResponseWriter, requestID string, body []byte) {
	h := w.Header()
	h.Set("Content-Type", ContentTypeAWSJSON11)
	h.Set("X-Amzn-Requestid", requestID)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

// writeAWSError writes e as AWS JSON 1.1 does: the code in `__type` and in
// the X-Amzn-ErrorType header, the message in `message`.
func writeAWSError(w http.ResponseWriter, requestID string, e *awsError) {
	body, err := json.Marshal(e)
	if err != nil { // cannot happen: two strings
		body = []byte(`{"__type":"InternalException","message":"error encoding failed"}`)
	}
	h := w.Header()
	h.Set("Content-Type", ContentTypeAWSJSON11)
	h.Set("X-Amzn-Requestid", requestID)
	h.Set("X-Amzn-Errortype", e.Type)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	if e.RetryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(e.RetryAfter))
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// retryAfterSeconds renders d as whole seconds, rounded up, at least 1.
func retryAfterSeconds(d time.Duration) string {
	s := int64((d + time.Second - 1) / time.Second)
	if s < 1 {
		s = 1
	}
	return strconv.FormatInt(s, 10)
}
