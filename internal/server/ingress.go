package server

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"time"

	"github.com/google/uuid"
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
}

// Ingress is the EventBridge PutEvents endpoint: POST / with
// Content-Type application/x-amz-json-1.1 and X-Amz-Target
// AWSEvents.PutEvents. It does not verify SigV4 signatures (see
// docs/server/README.md); it ignores the signing headers.
type Ingress struct {
	pipeline Pipeline
	limits   Limits
	requests *limiter
	entries  *limiter
	metrics  *Metrics
	log      *slog.Logger
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
		metrics:  opts.Metrics,
		log:      log,
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

	out, failed, aerr := in.ingest(w, r)
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
// it reads, parses and ingests, and gives it back before the response is
// written, so a client that has its answer can count on the slot being free.
func (in *Ingress) ingest(w http.ResponseWriter, r *http.Request) (ingestOutput, int, *awsError) {
	if !in.requests.tryAcquire(1) {
		return ingestOutput{}, 0, in.throttled("requests", in.limits.MaxInFlightRequests)
	}
	defer in.requests.release(1)

	body, aerr := in.readBody(w, r)
	if aerr != nil {
		return ingestOutput{}, 0, aerr
	}
	req, aerr := parsePutEvents(body, in.limits.MaxEntriesBytes)
	if aerr != nil {
		return ingestOutput{}, 0, aerr
	}
	valid := req.valid()
	results := req.refusals
	if len(valid) > 0 {
		if !in.entries.tryAcquire(len(valid)) {
			return ingestOutput{}, 0, in.throttled("entries", in.limits.MaxInFlightEntries)
		}
		got := func() []EntryResult {
			defer in.entries.release(len(valid)) // even if Ingest panics
			return in.pipeline.Ingest(r.Context(), valid)
		}()
		in.merge(results, valid, got)
	}
	b, failed := encodePutEventsResponse(results)
	return ingestOutput{body: b, results: results}, failed, nil
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

// readBody reads at most MaxBodyBytes of the request body.
func (in *Ingress) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *awsError) {
	var buf bytes.Buffer
	if r.ContentLength > 0 {
		buf.Grow(int(r.ContentLength))
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, in.limits.MaxBodyBytes))
	if err == nil {
		return buf.Bytes(), nil
	}
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return nil, in.bodyTooLarge()
	}
	return nil, &awsError{Status: 400, Type: ErrCodeSerialization, Reason: "malformed",
		Message: "the request body could not be read (" + err.Error() + "); send the whole body with a correct Content-Length"}
}

func quoteOrMissing(s string) string {
	if s == "" {
		return "missing"
	}
	return fmt.Sprintf("%q", s)
}
