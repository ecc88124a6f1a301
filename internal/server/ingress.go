package server

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// Limits bound the work the server accepts at once. Nothing waits for a
// slot: a request that does not fit is refused at once with 503 and
// Retry-After. The zero value means the defaults.
type Limits struct {
	// MaxInFlightRequests is the most PutEvents requests being read or
	// ingested at once (default 64). It also bounds request-body memory:
	// at most MaxInFlightRequests * MaxBodyBytes.
	MaxInFlightRequests int
	// MaxInFlightEntries is the most entries inside Pipeline.Ingest at once
	// (default 10 * MaxInFlightRequests). At least MaxEntries.
	MaxInFlightEntries int
	// MaxEntriesBytes is the PutEvents size limit, computed as EventBridge
	// computes it (default 256 KiB, EventBridge's documented limit).
	MaxEntriesBytes int
	// MaxBodyBytes caps the raw request body before it is parsed (default
	// 6*MaxEntriesBytes + 64 KiB: room for a Detail whose every byte is
	// JSON-escaped as \u00XX). Larger bodies get 413.
	MaxBodyBytes int64
	// MaxInFlightControl is the most control-API requests at once (default 32).
	MaxInFlightControl int
	// RetryAfter is what a saturated server tells clients to wait (default
	// 1s; sent in whole seconds, at least 1).
	RetryAfter time.Duration
	// HeaderTimeout bounds reading a request's headers (default 10s), and
	// BodyTimeout reading a PutEvents body (default 10s). The body is read
	// before a request slot is taken, so a slow sender holds only its own
	// connection.
	HeaderTimeout, BodyTimeout time.Duration
	// MaxConnsPerClient is the most open connections from one client IP
	// address (default 128); more are answered 503 and closed.
	MaxConnsPerClient int
	// MaxReadingBytes bounds the bytes of PutEvents bodies received and not
	// yet answered, over all requests (default 4 * MaxInFlightRequests *
	// MaxBodyBytes). It is taken as bytes arrive, so slow senders hold
	// only what they sent; past it, requests get 503.
	MaxReadingBytes int64
}

func (l Limits) withDefaults() Limits {
	if l.MaxInFlightRequests == 0 {
		l.MaxInFlightRequests = 64
	}
	if l.MaxInFlightEntries == 0 {
		l.MaxInFlightEntries = MaxEntries * l.MaxInFlightRequests
	}
	if l.MaxEntriesBytes == 0 {
		l.MaxEntriesBytes = DefaultMaxEntriesBytes
	}
	if l.MaxBodyBytes == 0 {
		l.MaxBodyBytes = 6*int64(l.MaxEntriesBytes) + 64<<10
	}
	if l.MaxInFlightControl == 0 {
		l.MaxInFlightControl = 32
	}
	if l.RetryAfter == 0 {
		l.RetryAfter = time.Second
	}
	if l.HeaderTimeout == 0 {
		l.HeaderTimeout = 10 * time.Second
	}
	if l.BodyTimeout == 0 {
		l.BodyTimeout = 10 * time.Second
	}
	if l.MaxConnsPerClient == 0 {
		l.MaxConnsPerClient = 128
	}
	if l.MaxReadingBytes == 0 {
		l.MaxReadingBytes = 4 * int64(l.MaxInFlightRequests) * l.MaxBodyBytes
	}
	return l
}

func (l Limits) validate() error {
	switch {
	case l.MaxInFlightRequests < 1:
		return fmt.Errorf("server: Limits.MaxInFlightRequests is %d; set it to 1 or more (or 0 for the default 64)", l.MaxInFlightRequests)
	case l.MaxInFlightEntries < MaxEntries:
		return fmt.Errorf("server: Limits.MaxInFlightEntries is %d; set it to at least %d so one full PutEvents request fits (or 0 for the default)", l.MaxInFlightEntries, MaxEntries)
	case l.MaxEntriesBytes < 1:
		return fmt.Errorf("server: Limits.MaxEntriesBytes is %d; set it to a positive size (or 0 for the default 256 KiB)", l.MaxEntriesBytes)
	case l.MaxBodyBytes < int64(l.MaxEntriesBytes):
		return fmt.Errorf("server: Limits.MaxBodyBytes is %d, below MaxEntriesBytes %d; raise it (or 0 for the default)", l.MaxBodyBytes, l.MaxEntriesBytes)
	case l.MaxInFlightControl < 1:
		return fmt.Errorf("server: Limits.MaxInFlightControl is %d; set it to 1 or more (or 0 for the default 32)", l.MaxInFlightControl)
	case l.RetryAfter < 0:
		return fmt.Errorf("server: Limits.RetryAfter is %v; set it to a positive duration (or 0 for the default 1s)", l.RetryAfter)
	case l.HeaderTimeout < 0 || l.BodyTimeout < 0:
		return fmt.Errorf("server: Limits.HeaderTimeout %v and BodyTimeout %v must be positive (or 0 for the default 10s)", l.HeaderTimeout, l.BodyTimeout)
	case l.MaxConnsPerClient < 1:
		return fmt.Errorf("server: Limits.MaxConnsPerClient is %d; set it to 1 or more (or 0 for the default 128)", l.MaxConnsPerClient)
	case l.MaxReadingBytes < l.MaxBodyBytes:
		return fmt.Errorf("server: Limits.MaxReadingBytes is %d, below MaxBodyBytes %d; raise it (or 0 for the default)", l.MaxReadingBytes, l.MaxBodyBytes)
	}
	return nil
}

// IngressOptions configure an Ingress.
type IngressOptions struct {
	// Pipeline takes the valid entries. Required.
	Pipeline Pipeline
	// Limits bound the in-flight work; zero fields take the defaults.
	Limits Limits
	// Metrics records rejections and entry outcomes; nil records nothing.
	Metrics *Metrics
	// Logger logs pipeline contract violations; nil discards.
	Logger *slog.Logger
	// Auth verifies each request's SigV4 signature and binds its entries'
	// sources to the signer's tenant. Nil leaves the ingress open: only
	// the benchmarks' floor runs so; `dispatch serve` always authenticates.
	Auth *SigV4Verifier
	// Refusals reports authentication and access refusals (rate-limited)
	// on the platform's telemetry; nil reports none.
	Refusals *RefusalReporter
}

// Ingress is the EventBridge PutEvents endpoint: POST / with
// Content-Type application/x-amz-json-1.1 and X-Amz-Target
// AWSEvents.PutEvents, signed with SigV4 by a tenant's ingress credential
// (docs/security/ingress-auth.md).
type Ingress struct {
	pipeline Pipeline
	limits   Limits
	requests *limiter
	entries  *limiter
	reading  *limiter
	metrics  *Metrics
	log      *slog.Logger
	auth     *SigV4Verifier
	refusals *RefusalReporter
}

// NewIngress builds an Ingress.
func NewIngress(opts IngressOptions) (*Ingress, error) {
	if opts.Pipeline == nil {
		return nil, errors.New("server: IngressOptions.Pipeline is nil; pass the dispatcher's pipeline (or a sink for benchmarks)")
	}
	l := opts.Limits.withDefaults()
	if err := l.validate(); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	in := &Ingress{
		pipeline: opts.Pipeline,
		limits:   l,
		requests: newLimiter(l.MaxInFlightRequests),
		entries:  newLimiter(l.MaxInFlightEntries),
		reading:  newLimiter64(l.MaxReadingBytes),
		metrics:  opts.Metrics,
		log:      log,
		auth:     opts.Auth,
		refusals: opts.Refusals,
	}
	opts.Metrics.setSaturation(in.requests.saturation)
	return in, nil
}

// Limits returns the limits in force, defaults filled in.
func (in *Ingress) Limits() Limits { return in.limits }

func (in *Ingress) throttled(what string, limit int) *awsError {
	return &awsError{
		Status: http.StatusServiceUnavailable, Type: ErrCodeThrottling, Reason: "saturated_" + what,
		RetryAfter: in.limits.RetryAfter,
		Message: fmt.Sprintf("Rate exceeded: %d %s are already in flight, the most this server takes at once; retry after %s (SDKs retry this on their own)",
			limit, what, retryAfterSeconds(in.limits.RetryAfter)+"s"),
	}
}

// ServeHTTP answers one PutEvents request.
func (in *Ingress) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	reqID := uuid.NewString()
	fail := func(e *awsError) {
		in.metrics.reject("putevents", e.Reason)
		writeAWSError(w, reqID, e)
	}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		fail(&awsError{Status: http.StatusMethodNotAllowed, Type: ErrCodeUnknownOperation, Reason: "unknown_operation",
			Message: "method " + r.Method + " is not supported on /; PutEvents is POST / with X-Amz-Target: " + TargetPutEvents})
		return
	}
	switch target := r.Header.Get("X-Amz-Target"); target {
	case TargetPutEvents:
	case "":
		fail(&awsError{Status: 400, Type: ErrCodeUnknownOperation, Reason: "unknown_operation",
			Message: "the X-Amz-Target header is missing; set it to " + TargetPutEvents})
		return
	default:
		fail(&awsError{Status: 400, Type: ErrCodeUnknownOperation, Reason: "unknown_operation",
			Message: "operation " + target + " is not supported: this ingress speaks only " + TargetPutEvents})
		return
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != ContentTypeAWSJSON11 {
		fail(&awsError{Status: 400, Type: ErrCodeSerialization, Reason: "malformed",
			Message: "Content-Type is " + quoteOrMissing(r.Header.Get("Content-Type")) + "; set it to " + ContentTypeAWSJSON11})
		return
	}
	if r.ContentLength > in.limits.MaxBodyBytes {
		fail(in.bodyTooLarge())
		return
	}

	body, release, aerr := in.readBody(w, r)
	defer release()
	if aerr != nil {
		fail(aerr)
		return
	}
	var caller Caller
	if in.auth != nil {
		if caller, aerr = in.auth.Verify(r, body); aerr != nil {
			in.refusals.Refused(aerr.Reason, caller.AccessKeyID, caller.Tenant, "")
			fail(aerr)
			return
		}
	}
	out, failed, aerr := in.ingest(r.Context(), body, caller)
	if aerr != nil {
		fail(aerr)
		return
	}
	in.metrics.entries(len(out.results)-failed, failed)
	writeAWSJSON(w, reqID, out.body)
}

type ingestOutput struct {
	body    []byte
	results []EntryResult
}

// ingest does the bounded part of a request: it holds a request slot while
// it parses and ingests a body already read and authenticated, and gives
// it back before the response is written, so a client that has its answer
// can count on the slot being free.
func (in *Ingress) ingest(ctx context.Context, body []byte, caller Caller) (ingestOutput, int, *awsError) {
	if !in.requests.tryAcquire(1) {
		return ingestOutput{}, 0, in.throttled("requests", in.limits.MaxInFlightRequests)
	}
	defer in.requests.release(1)

	req, aerr := parsePutEvents(body, in.limits.MaxEntriesBytes)
	if aerr != nil {
		return ingestOutput{}, 0, aerr
	}
	if in.auth != nil {
		in.bindSources(req, caller)
	}
	valid := req.valid()
	results := req.refusals
	if len(valid) > 0 {
		if !in.entries.tryAcquire(len(valid)) {
			return ingestOutput{}, 0, in.throttled("entries", in.limits.MaxInFlightEntries)
		}
		got := func() []EntryResult {
			defer in.entries.release(len(valid)) // even if Ingest panics
			return in.pipeline.Ingest(ctx, valid)
		}()
		in.merge(results, valid, got)
	}
	b, failed := encodePutEventsResponse(results)
	return ingestOutput{body: b, results: results}, failed, nil
}

// bindSources refuses, with EventBridge's AccessDeniedException, every
// entry whose Source is not <caller's tenant>/<service>: such entries never
// reach the pipeline, so they are neither archived nor streamed.
func (in *Ingress) bindSources(req *putEventsRequest, caller Caller) {
	for i := range req.entries {
		if req.refusals[i].ErrorCode != "" {
			continue
		}
		src := req.entries[i].Source
		tenant, service, ok := strings.Cut(src, "/")
		if ok && tenant == caller.Tenant && service != "" {
			continue
		}
		req.refusals[i] = Refused(EntryErrAccessDenied, fmt.Sprintf(
			"User: %s (tenant %s) is not authorized to perform: events:PutEvents with source %q: its credentials may put only sources %s/<service>; sign with %s ingress credentials",
			caller.AccessKeyID, caller.Tenant, truncate(src, maxSourceLen), caller.Tenant, quoteTenant(tenant)))
		in.metrics.accessDenied()
		in.refusals.Refused("access_denied", caller.AccessKeyID, caller.Tenant, src)
	}
}

func quoteTenant(t string) string {
	if envelope.ValidTenant(t) {
		return "tenant " + t + "'s"
	}
	return "the source's tenant"
}

// merge puts the pipeline's results into their entries' slots, turning a
// broken pipeline contract into per-entry internal errors.
func (in *Ingress) merge(results []EntryResult, valid []Entry, got []EntryResult) {
	if len(got) != len(valid) {
		in.log.Error("pipeline returned the wrong number of results", "entries", len(valid), "results", len(got))
	}
	for i, e := range valid {
		var r EntryResult
		if i < len(got) {
			r = got[i]
		}
		if (r.EventID == "") == (r.ErrorCode == "") {
			in.log.Error("pipeline returned a result with neither or both of an event id and an error code", "entry", e.Index)
			r = Refused(EntryErrInternal, "the dispatcher gave no outcome for this entry; it was not accepted, send it again")
		}
		results[e.Index] = r
	}
}

func (in *Ingress) bodyTooLarge() *awsError {
	return &awsError{Status: http.StatusRequestEntityTooLarge, Type: ErrCodeValidation, Reason: "too_large",
		Message: fmt.Sprintf("Total size of the entries in the request is over the limit: the body exceeds %d bytes; send fewer or smaller entries", in.limits.MaxBodyBytes)}
}

// readBody reads at most MaxBodyBytes of the request body within
// BodyTimeout, taking from the reading budget as bytes arrive. release
// gives the bytes back; call it once the request is answered.
func (in *Ingress) readBody(w http.ResponseWriter, r *http.Request) (_ []byte, release func(), _ *awsError) {
	if err := http.NewResponseController(w).SetReadDeadline(time.Now().Add(in.limits.BodyTimeout)); err != nil && !errors.Is(err, http.ErrNotSupported) {
		in.log.Debug("setting the body deadline failed", "err", err)
	}
	br := &budgetReader{r: http.MaxBytesReader(w, r.Body, in.limits.MaxBodyBytes), budget: in.reading}
	release = func() { in.reading.release(int(br.held)) }
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		// Grown by what arrives beyond this: a sender that announces a
		// large body and sends little costs little.
		buf.Grow(int(min(r.ContentLength, initialBodyBuffer)))
	}
	_, err := buf.ReadFrom(br)
	if err == nil {
		return buf.Bytes(), release, nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		return nil, release, in.bodyTooLarge()
	case errors.Is(err, errReadingBudget):
		return nil, release, in.throttled("body bytes", int(in.limits.MaxReadingBytes))
	case errors.Is(err, os.ErrDeadlineExceeded):
		return nil, release, &awsError{Status: http.StatusRequestTimeout, Type: ErrCodeSerialization, Reason: "body_timeout",
			Message: fmt.Sprintf("the request body did not arrive within %s; send the whole body at once", in.limits.BodyTimeout)}
	}
	return nil, release, &awsError{Status: 400, Type: ErrCodeSerialization, Reason: "malformed",
		Message: "the request body could not be read (" + err.Error() + "); send the whole body with a correct Content-Length"}
}

// initialBodyBuffer is the most readBody allocates before bytes arrive.
const initialBodyBuffer = 16 << 10

const errReadingBudget = authError("server: the reading budget is spent")

// budgetReader takes each chunk it reads from the shared byte budget.
type budgetReader struct {
	r      io.Reader
	budget *limiter
	held   int64
}

func (b *budgetReader) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if n > 0 {
		if !b.budget.tryAcquire(n) {
			return 0, errReadingBudget
		}
		b.held += int64(n)
	}
	return n, err
}

func quoteOrMissing(s string) string {
	if s == "" {
		return "missing"
	}
	return fmt.Sprintf("%q", s)
}
