// Package sqsapi serves the local queues of `snavio dispatch serve` over the
// SQS JSON protocol (POST / with Content-Type application/x-amz-json-1.0
// and X-Amz-Target AmazonSQS.<Action>), so that a target team's own
// consumer, written with an AWS SDK or the AWS CLI, runs against the local
// server unchanged (docs/sqs.md).
//
// Requests are signed with SigV4 for service "sqs" by an ingress
// credential the platform issued to a tenant. A tenant owns the queues
// named "<tenant>-..." and may act on those only; the dispatcher's own
// queues are nobody's (docs/sqs.md, "Who may use which queue").
//
// Actions: GetQueueUrl, ListQueues, GetQueueAttributes, ReceiveMessage,
// DeleteMessage(Batch), ChangeMessageVisibility(Batch) and SendMessage.
// Errors carry SQS's codes: `__type` with the model's shape name and the
// X-Amzn-Query-Error header with the code SDKs report.
package sqsapi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// ContentType is the content type of SQS JSON requests and responses.
const ContentType = "application/x-amz-json-1.0"

// TargetPrefix starts the X-Amz-Target of every SQS action.
const TargetPrefix = "AmazonSQS."

// AccountID is the account in every local queue URL.
const AccountID = "000000000000"

// Queues is the store port: the embedded store implements it.
type Queues interface {
	ListQueues(ctx context.Context) ([]localqueue.QueueStats, error)
	DeleteMessageBatch(ctx context.Context, queue string, receipts []string) ([]error, error)
	ChangeMessageVisibility(ctx context.Context, queue, receipt string, visibility time.Duration) error
	Send(ctx context.Context, queue string, body []byte, attrs map[string]string) (string, error)
}

var _ Queues = (*embedded.Store)(nil)

// Poll receives up to n messages of queue, waiting up to wait for one
// (controlapi.QueueAPI.Poll: the control API's long poll, woken by the store's
// change notification).
type Poll func(ctx context.Context, queue string, n int, vt, wait time.Duration) ([]localqueue.Received, error)

// Options configure New.
type Options struct {
	// Queues is the store. Required.
	Queues Queues
	// Poll receives with a long poll. Required.
	Poll Poll
	// Verifier checks SigV4 signatures scoped to service "sqs". Required.
	Verifier *server.SigV4Verifier
	// Refusals reports authentication and access refusals on the
	// platform's stream, as the PutEvents ingress does; nil: none.
	Refusals *server.RefusalReporter
	// Reserved names the dispatcher's own queues: no tenant owns them.
	Reserved func(name string) bool
	// Tenants lists the tenants that hold ingress credentials: of two
	// whose names prefix a queue's ("acme-" and "acme-corp-" of
	// acme-corp-jobs), the longer owns it. Nil: none known besides the
	// caller.
	Tenants func() []string
	// MaxBody bounds request bodies (default 2 MiB + 64 KiB: a SendMessage
	// of the largest message with room for JSON escapes).
	MaxBody int64
	// Logger logs storage failures; nil discards.
	Logger *slog.Logger
}

// API is the SQS JSON endpoint.
type API struct {
	o Options
}

// New returns the API.
func New(o Options) (*API, error) {
	switch {
	case o.Queues == nil:
		return nil, errors.New("sqsapi: Options.Queues is nil; pass the embedded store")
	case o.Poll == nil:
		return nil, errors.New("sqsapi: Options.Poll is nil; pass the queue API's Poll")
	case o.Verifier == nil:
		return nil, errors.New("sqsapi: Options.Verifier is nil; pass the server's SigV4 verifier for service sqs")
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 2*localqueue.MaxMessageBytes + 64<<10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{o: o}, nil
}

// Owns reports whether tenant may act on queue: the queue is named
// "<tenant>-...", no known tenant with a longer name prefixes it so, and
// it is not reserved.
func (a *API) Owns(tenant, queue string) bool {
	if tenant == "" || !strings.HasPrefix(queue, tenant+"-") || a.o.Reserved != nil && a.o.Reserved(queue) {
		return false
	}
	if a.o.Tenants != nil {
		for _, u := range a.o.Tenants() {
			if len(u) > len(tenant) && strings.HasPrefix(queue, u+"-") {
				return false
			}
		}
	}
	return true
}

// call is one request being served.
type call struct {
	r         *http.Request
	tenant    string
	accessKey string
	host      string
}

func (a *API) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rid := uuid.NewString()
	if err := a.serve(w, r, rid); err != nil {
		a.fail(w, r, rid, err)
	}
}

func (a *API) serve(w http.ResponseWriter, r *http.Request, rid string) error {
	if r.Method != http.MethodPost {
		return &Error{Status: http.StatusMethodNotAllowed, Type: "InvalidAction", Message: "the SQS JSON protocol takes POST / only"}
	}
	action, _ := strings.CutPrefix(r.Header.Get("X-Amz-Target"), TargetPrefix)
	ct := r.Header.Get("Content-Type")
	if ct, _, _ = strings.Cut(ct, ";"); strings.TrimSpace(ct) != ContentType {
		return invalidParam("Content-Type %q: the SQS JSON protocol sends %s", truncate(ct, 60), ContentType)
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, a.o.MaxBody+1))
	if err != nil {
		return invalidParam("reading the request body: %v", err)
	}
	if int64(len(body)) > a.o.MaxBody {
		return &Error{Status: http.StatusRequestEntityTooLarge, Type: "RequestEntityTooLarge", Message: fmt.Sprintf("the request body is over %d bytes", a.o.MaxBody)}
	}
	caller, aerr := a.o.Verifier.Verify(r, body)
	if aerr != nil {
		a.o.Refusals.Refused(aerr.Reason, caller.AccessKeyID, caller.Tenant, "")
		msg := aerr.Message
		if aerr.Type == server.ErrCodeMissingAuthToken {
			msg = "Missing Authentication Token: sign SQS requests with SigV4 using the tenant's ingress credentials (AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY; create them with `snavio tenant credentials create`)"
		}
		return &Error{Status: aerr.Status, Type: aerr.Type, Message: msg}
	}
	c := &call{r: r, tenant: caller.Tenant, accessKey: caller.AccessKeyID, host: r.Host}
	out, err := a.dispatch(c, action, body)
	if err != nil {
		return err
	}
	writeJSON(w, rid, http.StatusOK, out)
	return nil
}

func (a *API) dispatch(c *call, action string, body []byte) (any, error) {
	switch action {
	case "GetQueueUrl":
		return handle(c, body, a.getQueueURL)
	case "ListQueues":
		return handle(c, body, a.listQueues)
	case "GetQueueAttributes":
		return handle(c, body, a.getQueueAttributes)
	case "ReceiveMessage":
		return handle(c, body, a.receiveMessage)
	case "DeleteMessage":
		return handle(c, body, a.deleteMessage)
	case "DeleteMessageBatch":
		return handle(c, body, a.deleteMessageBatch)
	case "ChangeMessageVisibility":
		return handle(c, body, a.changeMessageVisibility)
	case "ChangeMessageVisibilityBatch":
		return handle(c, body, a.changeMessageVisibilityBatch)
	case "SendMessage":
		return handle(c, body, a.sendMessage)
	}
	return nil, &Error{Status: http.StatusBadRequest, Type: "InvalidAction", Query: "InvalidAction",
		Message: fmt.Sprintf("the action %q is not served locally: this server answers GetQueueUrl, ListQueues, GetQueueAttributes, ReceiveMessage, DeleteMessage(Batch), ChangeMessageVisibility(Batch) and SendMessage; queues are created with `snavio queue create`", truncate(action, 60))}
}

// handle decodes the request into In and runs f.
func handle[In any](c *call, body []byte, f func(*call, *In) (any, error)) (any, error) {
	in, err := Decode[In](body)
	if err != nil {
		return nil, err
	}
	return f(c, in)
}

// queue resolves a QueueUrl the caller may use to its queue name.
func (a *API) queue(c *call, url *string) (string, error) {
	if url == nil || *url == "" {
		return "", missing("QueueUrl")
	}
	name, err := ParseQueueURL(*url)
	if err != nil {
		return "", err
	}
	if err := a.authorize(c, name); err != nil {
		return "", err
	}
	return name, nil
}

func (a *API) authorize(c *call, name string) error {
	if !a.Owns(c.tenant, name) {
		a.o.Refusals.Refused("sqs_access_denied", c.accessKey, c.tenant, embedded.QueueARN(name))
		return &Error{Status: http.StatusForbidden, Type: "AccessDenied", Query: "AccessDenied",
			Message: fmt.Sprintf("tenant %s may not use queue %s: a tenant's credentials act on the queues named %s-... only (docs/sqs.md)", c.tenant, name, c.tenant)}
	}
	return nil
}

// ParseQueueURL returns the queue name of a URL http(s)://<host>/<account>/<name>.
func ParseQueueURL(u string) (string, error) {
	rest := u
	for _, p := range []string{"http://", "https://"} {
		if r, ok := strings.CutPrefix(u, p); ok {
			rest = r
			break
		}
	}
	parts := strings.Split(rest, "/")
	if rest == u || len(parts) != 3 || parts[0] == "" || parts[1] != AccountID {
		return "", &Error{Status: http.StatusBadRequest, Type: "InvalidAddress", Query: "InvalidAddress",
			Message: fmt.Sprintf("QueueUrl %q is not a local queue URL: use http://<host>/%s/<name>, as GetQueueUrl returns it", truncate(u, 120), AccountID)}
	}
	if err := checkName(parts[2]); err != nil {
		return "", err
	}
	return parts[2], nil
}

// URL returns the URL of queue name on the server the request reached.
func (c *call) url(name string) string {
	return "http://" + c.host + "/" + AccountID + "/" + name
}

// stats returns the queue's configuration and counts.
func (a *API) stats(ctx context.Context, name string) (localqueue.QueueStats, error) {
	all, err := a.o.Queues.ListQueues(ctx)
	if err != nil {
		return localqueue.QueueStats{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return s, nil
		}
	}
	return localqueue.QueueStats{}, queueNotFound(name)
}

func (a *API) fail(w http.ResponseWriter, r *http.Request, rid string, err error) {
	var e *Error
	switch {
	case errors.As(err, &e):
	case errors.Is(err, localqueue.ErrQueueNotFound):
		e = &Error{Status: http.StatusBadRequest, Type: "QueueDoesNotExist", Query: "AWS.SimpleQueueService.NonExistentQueue", Message: err.Error()}
	case errors.Is(err, localqueue.ErrQueueFull):
		e = &Error{Status: http.StatusForbidden, Type: "OverLimit", Query: "OverLimit", Message: err.Error()}
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.Is(err, embedded.ErrClosed):
		e = &Error{Status: http.StatusServiceUnavailable, Type: "ServiceUnavailable", Query: "ServiceUnavailable", Receiver: true, Message: "the server is shutting down or the request was cancelled: " + err.Error(), RetryAfter: time.Second}
	default:
		a.o.Logger.Error("SQS API: storage failure", "target", r.Header.Get("X-Amz-Target"), "err", err)
		e = &Error{Status: http.StatusInternalServerError, Type: "InternalError", Query: "InternalError", Receiver: true, Message: "storage failure: " + err.Error()}
	}
	writeError(w, rid, e)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

func itoa(n int) string { return strconv.Itoa(n) }
