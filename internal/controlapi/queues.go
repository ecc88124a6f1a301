// This file is the control API of the local target queues of
// `snavio dispatch serve`: list with stats, get, create, receive (with an
// SQS-style long poll), delete by receipt handle, and purge.
//
// # Endpoints
//
//	GET    /v1/queues                          list with stats (?limit=1..1000, ?after=NAME pages by name)
//	GET    /v1/queues/{name}                   one queue with stats
//	POST   /v1/queues                          create (CreateRequest); 201 created, 200 same config exists
//	POST   /v1/queues/{name}/receive           receive (ReceiveRequest): up to 10 messages, optional wait up to 20 s
//	POST   /v1/queues/{name}/messages/delete   delete up to 10 messages by receipt handle (DeleteRequest)
//	POST   /v1/queues/{name}/purge             delete every message
//
// # Who may do what
//
// Every request is authenticated (Endpoints.Handle).
// Tenants may list and get queues: names, configuration and counts, the
// operational metadata a producing or consuming team needs to see whether
// its commands are landing or backing up, and nothing of the messages.
// Everything that reads or changes messages or queues (create, receive,
// delete, purge) is for the operator: a local queue stands in for a target
// team's SQS queue, whose consumers hold their own AWS credentials, so
// there is no tenant identity to scope messages by on a local server.
//
// # Bounds
//
// Request bodies are at most Options.MaxBody (64 KiB); a list page is at
// most 1000 queues (the store holds at most embedded.MaxQueues); a receive
// returns at most 10 messages and waits at most 20 s. A long poll holds
// only its own request goroutine, re-checking the queue at a backoff
// interval (Options.PollInterval up to Options.MaxPollInterval), and at
// most Options.MaxWaiters requests wait at once; beyond that a waiting
// receive is refused with 429 and Retry-After, so long polls can never
// take every control-API slot of the server.
//
// Errors are JSON {"error","fix"} (Error): 400 bad input
// (including a change to a reserved queue), 401/403 authentication, 404
// no such queue, 409 a queue exists with another configuration or the
// store is full of queues, 429 too many waiting receives, 500 storage
// failure.

package controlapi

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// QueueStore is the port the API serves: the embedded store implements it.
// Implementations must be safe for concurrent use; the errors wrap
// localqueue.ErrQueueNotFound, ErrQueueExists, ErrStaleReceipt and
// ErrTooManyQueues where those apply.
type QueueStore interface {
	ListQueues(ctx context.Context) ([]localqueue.QueueStats, error)
	CreateQueue(ctx context.Context, cfg localqueue.QueueConfig) (localqueue.Queue, error)
	Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]localqueue.Received, error)
	DeleteMessage(ctx context.Context, queue, receipt string) error
	PurgeQueue(ctx context.Context, queue string) (int, error)
}

var _ QueueStore = (*embedded.Store)(nil)

// QueueOptions configure New.
type QueueOptions struct {
	// QueueStore is the store. Required.
	Queues QueueStore
	// Clock measures long-poll deadlines. Default clock.System().
	Clock clock.Clock
	// After returns a channel that delivers after d, for the long poll's
	// pauses between checks. Default time.After; tests pass one that
	// moves a fake clock.
	After func(d time.Duration) <-chan time.Time
	// PollInterval is the first pause of a long poll between two checks
	// of an empty queue (default 50 ms); each pause doubles up to
	// MaxPollInterval (default 500 ms).
	PollInterval, MaxPollInterval time.Duration
	// Changed, when set, returns a channel closed at the next send to any
	// queue (Broadcaster's Changed, notified by the sender):
	// a long poll then wakes as soon as a message arrives instead of at
	// its next timed check. Nil: timed checks only.
	Changed func() <-chan struct{}
	// Reserved names the dispatcher's own queues (the slow stage's
	// hand-off): they are listed, flagged reserved, but create, receive,
	// delete and purge refuse them, so that no CLI command can take or
	// drop an escalated command. Nil: none.
	Reserved func(name string) bool
	// MaxWaiters bounds the receives waiting at once (default 8).
	MaxWaiters int
	// MaxBody bounds request bodies (default 64 KiB).
	MaxBody int64
	// Logger logs storage failures; nil discards.
	Logger *slog.Logger
}

// QueueAPI serves the queue endpoints.
type QueueAPI struct {
	o       QueueOptions
	ep      Endpoints
	waiting atomic.Int64
}

// NewQueueAPI returns the API.
func NewQueueAPI(o QueueOptions) (*QueueAPI, error) {
	if o.Queues == nil {
		return nil, errors.New("controlapi: QueueOptions.Queues is nil; pass the embedded store")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.After == nil {
		o.After = time.After
	}
	if o.PollInterval <= 0 {
		o.PollInterval = 50 * time.Millisecond
	}
	if o.MaxPollInterval < o.PollInterval {
		o.MaxPollInterval = max(500*time.Millisecond, o.PollInterval)
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = 8
	}
	if o.MaxBody <= 0 {
		o.MaxBody = 64 << 10
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &QueueAPI{o: o, ep: Endpoints{Errors: queueErrors, Logger: o.Logger}}, nil
}

// queueOperator is the access of everything but list and get.
var queueOperator = OperatorOnly("do this: creating queues and receiving, deleting or purging messages needs the operator",
	"use the operator token (operator.token in the server's data directory); tenants may only list queues")

// ErrTooManyWaiters: Poll found Options.MaxWaiters receives already waiting.
var ErrTooManyWaiters = errors.New("too many receives waiting")

// queueErrors maps the store's queue errors to refusals.
func queueErrors(err error) *Error {
	switch {
	case errors.Is(err, localqueue.ErrQueueNotFound):
		return Refuse(http.StatusNotFound, err.Error(), "list the queues with `snavio queue list`, or create it with `snavio queue create`")
	case errors.Is(err, localqueue.ErrQueueExists):
		return Refuse(http.StatusConflict, err.Error(), "create it with the same settings, or use another name")
	case errors.Is(err, localqueue.ErrTooManyQueues):
		return Refuse(http.StatusConflict, err.Error(), "a local server holds at most "+strconv.Itoa(localqueue.MaxQueues)+" queues; reuse one")
	case errors.Is(err, embedded.ErrClosed):
		return &Error{Status: http.StatusServiceUnavailable, Msg: "the store is closed: the server is shutting down", Fix: "retry once the server is back", RetryAfter: time.Second}
	}
	return nil
}

// decode reads one JSON object of at most MaxBody bytes into v, refusing
// unknown fields. An empty body leaves v as it is.
func (a *QueueAPI) decode(r *http.Request, v any) error {
	b, err := ReadBody(r, a.o.MaxBody, "send fewer items per request")
	if err != nil || len(strings.TrimSpace(string(b))) == 0 {
		return err
	}
	return DecodeJSON(b, v, "send the JSON object this endpoint documents")
}

func (a *QueueAPI) info(s localqueue.QueueStats) wire.QueueInfo {
	return wire.QueueInfo{Reserved: a.reserved(s.Name),
		Name: s.Name, ARN: s.ARN, DeadLetterQueue: s.DeadLetterQueue, MaxReceives: s.MaxReceives,
		VisibilityTimeoutSeconds: s.VisibilityTimeout.Seconds(), MaxDepth: s.MaxDepth, CreatedAt: s.CreatedAt,
		Visible: s.Visible, InFlight: s.InFlight, OldestAgeSeconds: wire.SecondsMS(s.OldestAge),
	}
}

func (a *QueueAPI) list(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	q := r.URL.Query()
	limit := wire.QueueDefaultPage
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > wire.QueueMaxPage {
			return BadRequest(fmt.Sprintf("limit %q is not a number from 1 to %d", s, wire.QueueMaxPage), "pass ?limit=1.."+strconv.Itoa(wire.QueueMaxPage))
		}
		limit = n
	}
	after := q.Get("after")
	if len(after) > localqueue.MaxQueueNameLen {
		return BadRequest("after is longer than a queue name", "pass the next value of the previous page")
	}
	all, err := a.o.Queues.ListQueues(r.Context())
	if err != nil {
		return err
	}
	sort.Slice(all, func(i, j int) bool { return all[i].Name < all[j].Name })
	out := wire.QueueList{Queues: []wire.QueueInfo{}}
	for _, s := range all {
		if s.Name <= after {
			continue
		}
		if len(out.Queues) == limit {
			next := out.Queues[limit-1].Name
			out.Next = &next
			break
		}
		out.Queues = append(out.Queues, a.info(s))
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// stats returns the queue name with its counts.
func (a *QueueAPI) stats(ctx context.Context, name string) (wire.QueueInfo, error) {
	if err := wire.CheckQueueName("queue", name); err != nil {
		return wire.QueueInfo{}, BadRequest(err.Error(), "pass a queue name as `snavio queue list` shows it")
	}
	all, err := a.o.Queues.ListQueues(ctx)
	if err != nil {
		return wire.QueueInfo{}, err
	}
	for _, s := range all {
		if s.Name == name {
			return a.info(s), nil
		}
	}
	return wire.QueueInfo{}, fmt.Errorf("queue %s: %w", name, localqueue.ErrQueueNotFound)
}

func (a *QueueAPI) get(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	in, err := a.stats(r.Context(), r.PathValue("name"))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, in)
	return nil
}

func (a *QueueAPI) reserved(name string) bool { return a.o.Reserved != nil && a.o.Reserved(name) }

// refuseReserved refuses changes to a reserved queue.
func (a *QueueAPI) refuseReserved(name string) error {
	if a.reserved(name) {
		return BadRequest("queue "+name+" is the dispatcher's own (reserved): receiving, deleting or purging its messages would take or lose commands in flight",
			"leave it to the dispatcher; its backlog is in `snavio queue list`")
	}
	return nil
}

// storeConfig checks every field of c and returns the store configuration.
func storeConfig(c wire.QueueCreateRequest) (localqueue.QueueConfig, error) {
	c, err := c.Normalize()
	if err != nil {
		return localqueue.QueueConfig{}, err
	}
	return localqueue.QueueConfig{
		Name: c.Name, DeadLetterQueue: c.DeadLetterQueue, MaxReceives: c.MaxReceives,
		VisibilityTimeout: time.Duration(c.VisibilityTimeoutSeconds) * time.Second, MaxDepth: c.MaxDepth,
	}, nil
}

func (a *QueueAPI) create(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	var req wire.QueueCreateRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	cfg, err := storeConfig(req)
	if err != nil {
		return BadRequest(err.Error(), "fix the field named; see `snavio queue create --help`")
	}
	if err := a.refuseReserved(cfg.Name); err != nil {
		return err
	}
	before, err := a.o.Queues.ListQueues(r.Context())
	if err != nil {
		return err
	}
	existed := false
	for _, s := range before {
		existed = existed || s.Name == cfg.Name
	}
	if _, err := a.o.Queues.CreateQueue(r.Context(), cfg); err != nil {
		return err
	}
	in, err := a.stats(r.Context(), cfg.Name)
	if err != nil {
		return err
	}
	status := http.StatusCreated
	if existed {
		status = http.StatusOK
	}
	WriteJSON(w, status, wire.QueueCreateResult{Created: !existed, QueueInfo: in})
	return nil
}

func message(m localqueue.Received) wire.QueueMessage {
	out := wire.QueueMessage{ID: m.ID, Attributes: m.Attributes, SentAt: m.SentAt, ReceiptHandle: m.ReceiptHandle,
		ReceiveCount: m.ReceiveCount, FirstReceivedAt: m.FirstReceivedAt}
	if utf8.Valid(m.Body) {
		out.Body, out.BodyEncoding = string(m.Body), "utf-8"
	} else {
		out.Body, out.BodyEncoding = base64.StdEncoding.EncodeToString(m.Body), "base64"
	}
	return out
}

func (a *QueueAPI) receive(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	name := r.PathValue("name")
	if err := wire.CheckQueueName("queue", name); err != nil {
		return BadRequest(err.Error(), "pass a queue name as `snavio queue list` shows it")
	}
	if err := a.refuseReserved(name); err != nil {
		return err
	}
	var req wire.QueueReceiveRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	if req.Max == 0 {
		req.Max = 1
	}
	if req.Max < 1 || req.Max > localqueue.MaxReceiveBatch {
		return BadRequest(fmt.Sprintf("max %d: must be 1 to %d", req.Max, localqueue.MaxReceiveBatch), "ask for at most 10 messages per receive, as SQS")
	}
	maxVT := int(localqueue.MaxVisibilityTimeout / time.Second)
	if req.VisibilityTimeoutSeconds < 0 || req.VisibilityTimeoutSeconds > maxVT {
		return BadRequest(fmt.Sprintf("visibility timeout %d s: must be 0 to %d s", req.VisibilityTimeoutSeconds, maxVT), "pass 0 for the queue's own timeout")
	}
	if req.WaitSeconds < 0 || time.Duration(req.WaitSeconds)*time.Second > wire.QueueMaxWait {
		return BadRequest(fmt.Sprintf("wait %d s: must be 0 to %d s", req.WaitSeconds, int(wire.QueueMaxWait/time.Second)), "long polls wait at most 20 s, as SQS; poll again after")
	}
	msgs, err := a.Poll(r.Context(), name, req.Max, time.Duration(req.VisibilityTimeoutSeconds)*time.Second, time.Duration(req.WaitSeconds)*time.Second)
	if err != nil {
		return err
	}
	out := wire.QueueReceived{Queue: name, Messages: make([]wire.QueueMessage, 0, len(msgs))}
	for _, m := range msgs {
		out.Messages = append(out.Messages, message(m))
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// Poll receives from queue, waiting up to wait for a message to become
// visible (the SQS API's ReceiveMessage shares it). It runs on the request's goroutine: between checks it pauses
// on a timer, with a backoff from PollInterval to MaxPollInterval, and
// returns as soon as a check finds messages, the wait ends, or ctx ends.
func (a *QueueAPI) Poll(ctx context.Context, queue string, n int, vt, wait time.Duration) ([]localqueue.Received, error) {
	// The change channel is taken before each check, so a send between
	// the check and the pause still wakes the pause.
	changed := a.changed()
	msgs, err := a.o.Queues.Receive(ctx, queue, n, vt)
	if err != nil || len(msgs) > 0 || wait <= 0 {
		return msgs, err
	}
	if a.waiting.Add(1) > int64(a.o.MaxWaiters) {
		a.waiting.Add(-1)
		return nil, &Error{Status: http.StatusTooManyRequests, RetryAfter: time.Second, Err: ErrTooManyWaiters,
			Msg: fmt.Sprintf("%d receives are already waiting, the most this server holds at once", a.o.MaxWaiters),
			Fix: "retry after the Retry-After delay, or receive without --wait"}
	}
	defer a.waiting.Add(-1)
	deadline := a.o.Clock.Now().Add(wait)
	pause := a.o.PollInterval
	for {
		left := deadline.Sub(a.o.Clock.Now())
		if left <= 0 {
			return msgs, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-changed:
		case <-a.o.After(min(pause, left)):
		}
		pause = min(2*pause, a.o.MaxPollInterval)
		changed = a.changed()
		if msgs, err = a.o.Queues.Receive(ctx, queue, n, vt); err != nil || len(msgs) > 0 {
			return msgs, err
		}
	}
}

// Waiting reports how many receives are waiting now, each holding one of
// Options.MaxWaiters.
func (a *QueueAPI) Waiting() int { return int(a.waiting.Load()) }

// changed returns the wake-up channel of the next send, or nil (never
// ready) without Options.Changed.
func (a *QueueAPI) changed() <-chan struct{} {
	if a.o.Changed == nil {
		return nil
	}
	return a.o.Changed()
}

func (a *QueueAPI) deleteMessages(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	name := r.PathValue("name")
	if err := wire.CheckQueueName("queue", name); err != nil {
		return BadRequest(err.Error(), "pass a queue name as `snavio queue list` shows it")
	}
	if err := a.refuseReserved(name); err != nil {
		return err
	}
	var req wire.QueueDeleteRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	if n := len(req.ReceiptHandles); n < 1 || n > wire.QueueMaxDeleteBatch {
		return BadRequest(fmt.Sprintf("%d receipt handles: send 1 to %d", n, wire.QueueMaxDeleteBatch), "split the handles into batches of at most 10")
	}
	for i, h := range req.ReceiptHandles {
		if h == "" || len(h) > wire.QueueMaxReceiptLen {
			return BadRequest(fmt.Sprintf("receipt handle %d is empty or longer than %d bytes", i+1, wire.QueueMaxReceiptLen), "pass the receipt handles a receive returned, unchanged")
		}
	}
	if _, err := a.stats(r.Context(), name); err != nil {
		return err
	}
	out := wire.QueueDeleteResult{Queue: name, Results: make([]wire.QueueDeleteOutcome, 0, len(req.ReceiptHandles))}
	for _, h := range req.ReceiptHandles {
		err := a.o.Queues.DeleteMessage(r.Context(), name, h)
		o := wire.QueueDeleteOutcome{ReceiptHandle: h, Deleted: err == nil}
		switch {
		case err == nil:
		case errors.Is(err, localqueue.ErrStaleReceipt):
			o.Code, o.Error = "stale_receipt", err.Error()
		case errors.Is(err, localqueue.ErrQueueNotFound), errors.Is(err, embedded.ErrClosed),
			errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
			return err
		case strings.Contains(err.Error(), "malformed"):
			o.Code, o.Error = "invalid_receipt", err.Error()
		default:
			return err
		}
		out.Results = append(out.Results, o)
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *QueueAPI) purge(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	name := r.PathValue("name")
	if err := wire.CheckQueueName("queue", name); err != nil {
		return BadRequest(err.Error(), "pass a queue name as `snavio queue list` shows it")
	}
	if err := a.refuseReserved(name); err != nil {
		return err
	}
	n, err := a.o.Queues.PurgeQueue(r.Context(), name)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wire.QueuePurgeResult{Queue: name, Purged: n})
	return nil
}
