package sqsapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// Error is an SQS error answer: Type is the `__type` of the JSON body (the
// shape name of SQS's model, which SDKs map to their error types), Query
// the code of the X-Amzn-Query-Error header (what SDKs report as the error
// code in SQS's query-compatible mode).
type Error struct {
	Status  int
	Type    string
	Query   string
	Message string
	// Receiver marks a server-side fault; otherwise the sender's.
	Receiver   bool
	RetryAfter time.Duration
}

func (e *Error) Error() string { return e.Type + ": " + e.Message }

func invalidParam(format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "InvalidParameterValue", Query: "InvalidParameterValue", Message: fmt.Sprintf(format, args...)}
}

func missing(field string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "MissingParameter", Query: "MissingParameter",
		Message: "The request must contain the parameter " + field + "."}
}

func queueNotFound(name string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "QueueDoesNotExist", Query: "AWS.SimpleQueueService.NonExistentQueue",
		Message: "The specified queue " + name + " does not exist: list the queues with `snavio queue list`, or create it with `snavio queue create`"}
}

func receiptInvalid(msg string) *Error {
	return &Error{Status: http.StatusBadRequest, Type: "ReceiptHandleIsInvalid", Query: "ReceiptHandleIsInvalid", Message: msg}
}

func checkName(name string) error {
	if err := wire.CheckQueueName("queue", name); err != nil {
		return invalidParam("%v", err)
	}
	return nil
}

// Decode parses an SQS JSON request body into a new In. An empty body is
// an empty request; anything but one JSON object is refused. Fields it
// does not know are ignored, as SQS ignores them.
func Decode[In any](body []byte) (*In, error) {
	in := new(In)
	b := bytes.TrimSpace(body)
	if len(b) == 0 {
		return in, nil
	}
	if b[0] != '{' {
		return nil, invalidParam("the request body is not a JSON object: send the action's request as {...}")
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(in); err != nil {
		return nil, invalidParam("the request body: %v", err)
	}
	if dec.More() {
		return nil, invalidParam("the request body holds more than one JSON value: send one object")
	}
	return in, nil
}

func writeJSON(w http.ResponseWriter, rid string, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // the response types hold strings, numbers and maps of them
		writeError(w, rid, &Error{Status: http.StatusInternalServerError, Type: "InternalError", Query: "InternalError", Receiver: true, Message: "encoding the answer: " + err.Error()})
		return
	}
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("X-Amzn-Requestid", rid)
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

func writeError(w http.ResponseWriter, rid string, e *Error) {
	b, _ := json.Marshal(struct {
		Type    string `json:"__type"`
		Message string `json:"message"`
	}{e.Type, e.Message})
	h := w.Header()
	h.Set("Content-Type", ContentType)
	h.Set("X-Amzn-Requestid", rid)
	if e.Query != "" {
		fault := "Sender"
		if e.Receiver {
			fault = "Receiver"
		}
		h.Set("X-Amzn-Query-Error", e.Query+";"+fault)
	}
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}
