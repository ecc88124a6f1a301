// This file serves the telemetry streams of `snavio dispatch
// serve` over the control API: a long-polling read of one tenant's stream
// (or, for the operator, of every tenant's), and per-tenant stream stats.
//
//	GET /v1/telemetry?tenant=T&after=SEQ&since=RFC3339&limit=N&wait=5s
//	GET /v1/telemetry/streams[?tenant=T]
//
// The read answers {"records":[{"seq","tenant","at","event"}],
// "next_after","server_time"} (see Page). With tenant, after and
// next_after count the tenant's sequence numbers (from 1, no gaps); without
// tenant (the operator's view of every tenant) they count the global
// append number, which each record then carries as "global" (its seq is
// still its tenant's). since starts
// a read at the first record appended at or after a time. When nothing
// is after `after`, the request waits up to `wait` (capped at 30 s) for an
// append and then answers with no records: that empty answer is the
// heartbeat. An after past the end of the stream (the server restarted on
// an ephemeral store) is 409: read again from 0.
//
// Access: a tenant token reads only its own tenant (tenant omitted means
// its own; another tenant is 403); the operator reads any tenant, or every
// tenant with tenant omitted. Waiting is bounded: beyond MaxWaiters
// concurrent waits the answer is 503, beyond MaxWaitersPerPrincipal for
// one caller 429, both with Retry-After. A read never moves the tenant's
// consumer cursor (tailing is watching, not consuming).

package controlapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// TelemetryStore is what the API reads; *embedded.Store implements it.
type TelemetryStore interface {
	ReadTelemetry(ctx context.Context, tenant string, after uint64, limit int) ([]embedded.TelemetryRecord, error)
	ReadAllTelemetry(ctx context.Context, after uint64, limit int) ([]embedded.TelemetryRecord, error)
	TelemetryStreams(ctx context.Context) ([]embedded.TelemetryStream, error)
	AckTelemetry(ctx context.Context, tenant string, seq uint64) error
}

// TelemetryOptions configure the API.
type TelemetryOptions struct {
	// TelemetryStore holds the streams. Required.
	Store TelemetryStore
	// Changed returns a channel closed at the next telemetry append (a
	// Broadcaster's Changed). Required: long polls wait on it.
	Changed func() <-chan struct{}
	// Clock stamps server_time. Default: clock.System().
	Clock clock.Clock
	// NewTimer starts the wait of a long poll: it returns a channel that
	// fires after d and a stop function. Default: time.NewTimer.
	NewTimer func(d time.Duration) (<-chan time.Time, func() bool)
	// MaxWait caps the wait parameter. Default DefaultMaxWait (30 s).
	MaxWait time.Duration
	// MaxWaiters bounds the requests waiting at once. Default 256.
	MaxWaiters int
	// MaxWaitersPerPrincipal bounds one caller's waiting requests.
	// Default 16.
	MaxWaitersPerPrincipal int
	// RetryAfter is the Retry-After of a refused wait. Default 1 s.
	RetryAfter time.Duration
	// Logger logs store failures. Default: discard.
	Logger *slog.Logger
}

// TelemetryAPI serves the telemetry endpoints.
type TelemetryAPI struct {
	o  TelemetryOptions
	ep Endpoints

	mu      sync.Mutex
	waiting int
	per     map[string]int

	// onWait, when set (tests), is called when a request starts waiting.
	onWait func()
}

// NewTelemetryAPI returns the API.
func NewTelemetryAPI(o TelemetryOptions) (*TelemetryAPI, error) {
	if o.Store == nil || o.Changed == nil {
		return nil, errors.New("controlapi: TelemetryOptions: Store and Changed are required (Changed: a Broadcaster's Changed, notified after each telemetry append)")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.NewTimer == nil {
		o.NewTimer = func(d time.Duration) (<-chan time.Time, func() bool) {
			t := time.NewTimer(d)
			return t.C, t.Stop
		}
	}
	if o.MaxWait <= 0 {
		o.MaxWait = DefaultMaxWait
	}
	if o.MaxWaiters <= 0 {
		o.MaxWaiters = 256
	}
	if o.MaxWaitersPerPrincipal <= 0 {
		o.MaxWaitersPerPrincipal = 16
	}
	if o.RetryAfter <= 0 {
		o.RetryAfter = time.Second
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &TelemetryAPI{o: o, ep: Endpoints{Logger: o.Logger}, per: map[string]int{}}, nil
}

// ack moves a tenant's consumer cursor (never backwards). A tenant acks
// its own stream; the operator any.
func (a *TelemetryAPI) ack(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var in wire.TelemetryAck
	if err := Decode(r, 4<<10, &in, `send {"tenant":"T","seq":N}`); err != nil {
		return err
	}
	if in.Tenant == "" && p.Tenant != "" {
		in.Tenant = p.Tenant
	}
	if !telemetry.ValidStream(in.Tenant) || in.Seq == 0 {
		return BadRequest(fmt.Sprintf("tenant %.60q, seq %d: want a tenant id and a sequence number from 1", in.Tenant, in.Seq),
			`send {"tenant":"T","seq":N} with N a seq you have read`)
	}
	if _, err := scope(p, in.Tenant); err != nil {
		return err
	}
	if err := a.o.Store.AckTelemetry(r.Context(), in.Tenant, in.Seq); err != nil {
		if strings.Contains(err.Error(), "acknowledge a sequence number you have read") || strings.Contains(err.Error(), "has no telemetry stream") {
			return Refuse(http.StatusConflict, err.Error(), "acknowledge only sequence numbers a read returned")
		}
		return fmt.Errorf("acknowledging telemetry: %w", err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// Waiting reports how many requests are waiting now (for metrics).
func (a *TelemetryAPI) Waiting() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.waiting
}

// scope returns the tenant p reads ("" for every tenant), or the refusal.
func scope(p server.Principal, tenant string) (string, error) {
	switch {
	case tenant == "" && p.Operator:
		return "", nil
	case tenant == "" && p.Tenant != "":
		return p.Tenant, nil
	case tenant == "":
		return "", Refuse(http.StatusForbidden, p.String()+" has no tenant to read", "use a tenant token or the operator token")
	case !p.CanAccessTenant(tenant):
		return "", Refuse(http.StatusForbidden, p.String()+" may not read the telemetry of tenant "+strconv.Quote(tenant),
			"read your own tenant (omit tenant), or use the operator token")
	}
	return tenant, nil
}

func (a *TelemetryAPI) read(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	q, err := ParseTelemetryQuery(r.URL.Query(), a.o.MaxWait)
	if err != nil {
		var qe *TelemetryQueryError
		errors.As(err, &qe)
		return BadRequest(err.Error(), qe.Fix)
	}
	if q.Tenant, err = scope(p, q.Tenant); err != nil {
		return err
	}
	ctx := r.Context()
	after := q.After
	if !q.Since.IsZero() {
		if after, err = a.seek(ctx, q.Tenant, q.Since); err != nil {
			return readFailed(err)
		}
	}
	var (
		fired   <-chan time.Time
		release func()
	)
	defer func() {
		if release != nil {
			release()
		}
	}()
	for {
		changed := a.o.Changed() // before the read: an append after it wakes us
		recs, err := a.page(ctx, q.Tenant, after, q.Limit)
		if err != nil {
			return readFailed(err)
		}
		if len(recs) > 0 || q.Wait <= 0 {
			a.answer(w, q.Tenant, after, recs)
			return nil
		}
		if fired == nil {
			// First empty read: is after past the end of the stream?
			if after > 0 {
				head, err := a.head(ctx, q.Tenant)
				if err != nil {
					return readFailed(err)
				}
				if after > head {
					return Refuse(http.StatusConflict,
						fmt.Sprintf("after %d is past the end of the stream (%d): the stream was reset, as when a server on an ephemeral store restarts", after, head),
						"read again from after=0, or start at a time with since")
				}
			}
			var status int
			if release, status = a.acquire(p.String()); release == nil {
				what := "too many telemetry reads are waiting on this server"
				if status == http.StatusTooManyRequests {
					what = p.String() + " has too many telemetry reads waiting"
				}
				return &Error{Status: status, Msg: what, Fix: "retry after the Retry-After delay, or read with wait=0", RetryAfter: a.o.RetryAfter}
			}
			var stop func() bool
			fired, stop = a.o.NewTimer(q.Wait)
			defer stop()
			if a.onWait != nil {
				a.onWait()
			}
		}
		select {
		case <-changed:
		case <-fired:
			a.answer(w, q.Tenant, after, nil)
			return nil
		case <-ctx.Done():
			return nil // the client went away
		}
	}
}

// acquire takes a waiting slot for who, or returns nil and the status of
// the refusal.
func (a *TelemetryAPI) acquire(who string) (func(), int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.waiting >= a.o.MaxWaiters {
		return nil, http.StatusServiceUnavailable
	}
	if a.per[who] >= a.o.MaxWaitersPerPrincipal {
		return nil, http.StatusTooManyRequests
	}
	a.waiting++
	a.per[who]++
	return func() {
		a.mu.Lock()
		defer a.mu.Unlock()
		a.waiting--
		if a.per[who]--; a.per[who] == 0 {
			delete(a.per, who)
		}
	}, 0
}

func (a *TelemetryAPI) page(ctx context.Context, tenant string, after uint64, limit int) ([]embedded.TelemetryRecord, error) {
	if tenant == "" {
		return a.o.Store.ReadAllTelemetry(ctx, after, limit)
	}
	return a.o.Store.ReadTelemetry(ctx, tenant, after, limit)
}

// head returns the last position ever assigned in tenant's stream, or
// across every stream (tenant ""): each append takes one global number
// and one number of its tenant, and streams are never deleted, so the
// newest global number is the sum of the streams' last sequence numbers.
func (a *TelemetryAPI) head(ctx context.Context, tenant string) (uint64, error) {
	streams, err := a.o.Store.TelemetryStreams(ctx)
	if err != nil {
		return 0, err
	}
	var sum uint64
	for _, s := range streams {
		if s.Tenant == tenant {
			return s.LastSeq, nil
		}
		sum += s.LastSeq
	}
	if tenant != "" {
		return 0, nil
	}
	return sum, nil
}

// seek returns the after that starts a read at the first record appended
// at or after since: a binary search over positions, one single-record
// read per step. Append times follow positions (one clock, one writer),
// which is what makes the search valid.
func (a *TelemetryAPI) seek(ctx context.Context, tenant string, since time.Time) (uint64, error) {
	lo, hi := uint64(0), uint64(0)
	head, err := a.head(ctx, tenant)
	if err != nil {
		return 0, err
	}
	hi = head
	for lo < hi {
		mid := lo + (hi-lo)/2
		recs, err := a.page(ctx, tenant, mid, 1)
		if err != nil {
			return 0, err
		}
		if len(recs) == 0 || !recs[0].AppendedAt.Before(since) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo, nil
}

func (a *TelemetryAPI) answer(w http.ResponseWriter, tenant string, after uint64, recs []embedded.TelemetryRecord) {
	page := wire.TelemetryPage{Records: make([]wire.TelemetryRecord, len(recs)), NextAfter: after, ServerTime: a.o.Clock.Now().UTC()}
	for i, r := range recs {
		page.Records[i] = wire.TelemetryRecord{Seq: r.Seq, Tenant: r.Tenant, At: r.AppendedAt.UTC(), Event: r.Event}
		if tenant == "" {
			page.Records[i].Global = r.Global
			page.NextAfter = r.Global
		} else {
			page.NextAfter = r.Seq
		}
	}
	WriteJSON(w, http.StatusOK, page)
}

// readFailed is a failed read of the telemetry store.
func readFailed(err error) error { return fmt.Errorf("reading telemetry: %w", err) }

func (a *TelemetryAPI) streams(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	v := r.URL.Query()
	tenant := ""
	for k, vals := range v {
		if k != "tenant" || len(vals) != 1 {
			return BadRequest(fmt.Sprintf("query parameter %.40q: unknown or repeated", k), "the only parameter is tenant, once")
		}
		if tenant = vals[0]; !telemetry.ValidStream(tenant) {
			return BadRequest(fmt.Sprintf("query parameter tenant: %.60q is not a tenant id", tenant),
				"give the part of a source before '/': "+telemetry.StreamRule)
		}
	}
	tenant, err := scope(p, tenant)
	if err != nil {
		return err
	}
	all, err := a.o.Store.TelemetryStreams(r.Context())
	if err != nil {
		return readFailed(err)
	}
	out := wire.TelemetryStreams{Streams: []wire.TelemetryStream{}, ServerTime: a.o.Clock.Now().UTC()}
	for _, s := range all {
		if tenant != "" && s.Tenant != tenant {
			continue
		}
		out.Streams = append(out.Streams, wire.TelemetryStream{
			Tenant: s.Tenant, LastSeq: s.LastSeq, Cursor: s.Cursor, Stored: s.Stored, Unconsumed: s.Unconsumed,
			Oldest: timePtr(s.Oldest), OldestUnconsumed: timePtr(s.OldestUnconsumed), LastAckAt: timePtr(s.LastAckAt),
		})
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}
