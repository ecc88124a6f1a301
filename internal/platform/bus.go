package platform

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"
)

// DefaultBusName is the command bus of an aws profile without bus_name.
const DefaultBusName = "snavio-command-bus"

// DefaultRegion is the region a local profile signs for when it names none.
const DefaultRegion = "us-east-1"

// MaxEntries is PutEvents' limit of entries per request.
const MaxEntries = 10

// Event is one PutEvents entry.
type Event struct {
	Source     string
	DetailType string
	Detail     []byte
}

// PutResult is the outcome of one entry, in request order: an EventID when
// the bus accepted it, otherwise EventBridge's error code and message.
type PutResult struct {
	EventID      string `json:"event_id,omitempty"`
	ErrorCode    string `json:"error_code,omitempty"`
	ErrorMessage string `json:"error_message,omitempty"`
}

// Bus puts events on the command bus: the EventBridge bus of an aws
// profile, or the PutEvents ingress of a local `snavio dispatch serve`,
// which speaks the same protocol. Both go through the AWS SDK's
// EventBridge client: one code path, the one producers use.
type Bus interface {
	// PutEvents puts up to MaxEntries events. It returns one result per
	// event, in order, or an error when the request as a whole failed
	// (the bus is unreachable, refused the credentials, throttled past
	// the SDK's retries).
	PutEvents(ctx context.Context, events []Event) ([]PutResult, error)
}

// BusOptions tune NewBus. The zero value is the production setting.
type BusOptions struct {
	// HTTPClient replaces the SDK's HTTP client (tests).
	HTTPClient *http.Client
	// MaxAttempts bounds the SDK's attempts per request (0: the SDK's
	// default, 3). The SDK retries throttling and 5xx answers with
	// backoff; the local ingress answers 503 with Retry-After when
	// saturated.
	MaxAttempts int
	// Credentials sign requests to a local target: the tenant's ingress
	// credentials (internal/ingresscred finds them). Nil: placeholder
	// credentials, which an authenticating ingress refuses.
	Credentials awssdk.CredentialsProvider
}

// NewBus returns the bus of t. It builds no client and loads no AWS
// configuration until the first PutEvents.
func NewBus(t Target, o BusOptions) Bus { return &sdkBus{target: t, opts: o} }

// placeholderCredentials sign requests to a local dispatcher when no
// ingress credentials were given: the ingress answers
// UnrecognizedClientException, which names the fix.
func placeholderCredentials() awssdk.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider("snavio-local", "snavio-local-secret", "")
}

// sdkBus wraps the SDK's EventBridge client, built on first use.
type sdkBus struct {
	target Target
	opts   BusOptions
	once   sync.Once
	client *eventbridge.Client
	err    error
}

func (b *sdkBus) get(ctx context.Context) (*eventbridge.Client, error) {
	b.once.Do(func() { b.client, b.err = b.newClient(ctx) })
	return b.client, b.err
}

func (b *sdkBus) newClient(ctx context.Context) (*eventbridge.Client, error) {
	t := b.target
	var cfg awssdk.Config
	switch t.Kind {
	case "local":
		if t.Endpoint == "" {
			return nil, errors.New("the local profile has no endpoint: set one with `snavio profile set NAME --endpoint-url URL`")
		}
		creds := b.opts.Credentials
		if creds == nil {
			creds = placeholderCredentials()
		}
		cfg = awssdk.Config{Region: firstNonEmpty(t.Region, DefaultRegion), Credentials: creds}
	case "aws":
		// The caller's credentials assume the tenant's emit role; the
		// session's credentials sign PutEvents (spec B.2).
		base, err := AWSConfig(ctx, t, t.Region)
		if err != nil {
			return nil, err
		}
		if b.opts.HTTPClient != nil {
			base.HTTPClient = b.opts.HTTPClient
		}
		creds, err := assumeEmitRole(ctx, base, t)
		if err != nil {
			return nil, err
		}
		cfg = base.Copy()
		cfg.Credentials = creds
	default:
		return nil, fmt.Errorf("unknown profile kind %q: use local or aws", t.Kind)
	}
	if b.opts.HTTPClient != nil {
		cfg.HTTPClient = b.opts.HTTPClient
	}
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		if t.Endpoint != "" {
			o.BaseEndpoint = awssdk.String(t.Endpoint)
		}
		if b.opts.MaxAttempts > 0 {
			o.RetryMaxAttempts = b.opts.MaxAttempts
		}
	}), nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// busName is the EventBusName entries carry: the profile's bus on AWS;
// none locally (the local ingress has one bus, "default").
func (b *sdkBus) busName() *string {
	if b.target.Kind != "aws" {
		return nil
	}
	return awssdk.String(BusNameOf(b.target))
}

// PutEvents implements Bus.
func (b *sdkBus) PutEvents(ctx context.Context, events []Event) ([]PutResult, error) {
	if len(events) == 0 || len(events) > MaxEntries {
		return nil, fmt.Errorf("PutEvents takes 1 to %d events, not %d", MaxEntries, len(events))
	}
	c, err := b.get(ctx)
	if err != nil {
		return nil, err
	}
	in := &eventbridge.PutEventsInput{Entries: make([]ebtypes.PutEventsRequestEntry, len(events))}
	for i, e := range events {
		in.Entries[i] = ebtypes.PutEventsRequestEntry{
			Source:       awssdk.String(e.Source),
			DetailType:   awssdk.String(e.DetailType),
			Detail:       awssdk.String(string(e.Detail)),
			EventBusName: b.busName(),
		}
	}
	out, err := c.PutEvents(ctx, in)
	if err != nil {
		return nil, b.explain(ctx, err)
	}
	if len(out.Entries) != len(events) {
		return nil, fmt.Errorf("the bus at %s answered %d results for %d events; check that the endpoint is an EventBridge PutEvents endpoint", b.where(), len(out.Entries), len(events))
	}
	res := make([]PutResult, len(out.Entries))
	for i, e := range out.Entries {
		res[i] = PutResult{EventID: awssdk.ToString(e.EventId), ErrorCode: awssdk.ToString(e.ErrorCode), ErrorMessage: awssdk.ToString(e.ErrorMessage)}
		if res[i].EventID == "" && res[i].ErrorCode == "" {
			return nil, fmt.Errorf("the bus at %s answered entry %d with neither an event id nor an error code", b.where(), i)
		}
	}
	return res, nil
}

func (b *sdkBus) where() string {
	if b.target.Endpoint != "" {
		return b.target.Endpoint
	}
	return "EventBridge in " + firstNonEmpty(b.target.Region, "the configured region")
}

// explain turns an SDK error into one line that says what to do; the SDK's
// own error stays wrapped for -v.
func (b *sdkBus) explain(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	var ce *CredentialsError
	if errors.As(err, &ce) {
		return ce
	}
	if b.target.Kind == "aws" {
		return b.explainAWS(err)
	}
	where := b.where()
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		if b.target.Kind == "local" {
			return &Error{Msg: fmt.Sprintf("cannot reach the dispatcher's PutEvents ingress at %s (%v): start it with `snavio dispatch serve`, or check --endpoint-url and the profile (`snavio profile show`)", where, opErr.Err), Err: err}
		}
		return &Error{Msg: fmt.Sprintf("cannot reach %s (%v): check the network and the endpoint", where, opErr.Err), Err: err}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		return &Error{Msg: fmt.Sprintf("%s refused PutEvents: %s: %s", where, apiErr.ErrorCode(), strings.TrimSpace(apiErr.ErrorMessage())), Err: err}
	}
	return &Error{Msg: fmt.Sprintf("PutEvents to %s failed: %v", where, err), Err: err}
}

// Error is a platform error with a one-line message; Unwrap gives the
// underlying (SDK or network) error for -v.
type Error struct {
	Msg string
	Err error
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Err }

// explainAWS names the PutEvents step of an aws profile's failure.
func (b *sdkBus) explainAWS(err error) error {
	where := b.where() + " (bus " + BusNameOf(b.target) + ")"
	var opErr *net.OpError
	if errors.As(err, &opErr) {
		return &StepError{Step: StepPutEvents, Retryable: true, Msg: fmt.Sprintf("cannot reach %s (%v): check the network, the region and the endpoint", where, opErr.Err), Err: err}
	}
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		hint := "check the profile's bus_name and env"
		if c := apiErr.ErrorCode(); c == "AccessDeniedException" || c == "NotAuthorizedForSourceException" {
			hint = "the emit role may not put events with this source on this bus: check --source against the role's tenant and the profile's bus_name"
		}
		return &StepError{Step: StepPutEvents, Retryable: apiErr.ErrorFault() == smithy.FaultServer, Msg: fmt.Sprintf("%s refused the request: %s: %s; %s", where, apiErr.ErrorCode(), strings.TrimSpace(apiErr.ErrorMessage()), hint), Err: err}
	}
	return &StepError{Step: StepPutEvents, Msg: fmt.Sprintf("putting on %s failed: %v", where, err), Err: err}
}
