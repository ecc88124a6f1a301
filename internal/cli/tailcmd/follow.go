package tailcmd

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Fetch reads one page of a telemetry stream.
type Fetch func(ctx context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error)

// Sink receives what a Follower reads. Its methods run on the follower's
// goroutine, one at a time.
type Sink interface {
	// Record takes the next record: each once, in order per tenant.
	// An error stops the follower and is returned by Run.
	Record(r wire.TelemetryRecord) error
	// Heartbeat says the server answered at serverTime.
	Heartbeat(serverTime time.Time)
	// Connection reports a change: connected (err nil), or the connection
	// lost (err says why) and a retry in retryIn.
	Connection(connected bool, err error, retryIn time.Duration)
	// Gap reports records of tenant's stream that will never be read:
	// sequence numbers from to to (they aged out of retention first).
	Gap(tenant string, from, to uint64)
	// Reset reports that the stream restarted from its beginning: the
	// position at was past its end (a server on an ephemeral store
	// restarted). Reading continues from the new beginning.
	Reset(at uint64)
}

// Follower reads a telemetry stream page by page: each record once, no
// gap it does not report, across server restarts. After a failure it
// retries with backoff and resumes after the last record it handed to
// the sink, so the records missed while the server was down are read
// (backfilled) with no duplicate.
type Follower struct {
	Fetch Fetch
	Sink  Sink
	// Tenant is the stream to read; empty: the caller's own (tenant
	// token) or every tenant's (operator).
	Tenant string
	// Since, when not zero, starts the read at that append time;
	// otherwise it starts at the oldest retained record.
	Since time.Time
	// Follow keeps reading as records arrive; false stops at the end.
	Follow bool
	// Wait is the long-poll wait of a read when following (default 10 s):
	// the server answers at least this often, which is the heartbeat.
	Wait time.Duration
	// Limit is the page size (default 1000).
	Limit int
	// Backoff returns the delay before retry number attempt (from 1).
	// Default: Backoff.
	Backoff func(attempt int) time.Duration
	// Sleep waits d or until ctx ends (default: a timer).
	Sleep func(ctx context.Context, d time.Duration) error

	last map[string]uint64
	// Duplicates counts records dropped because their sequence number was
	// already handed over (none from a correct server).
	Duplicates int
}

// Backoff is the default retry delay: 250 ms doubling to 10 s.
func Backoff(attempt int) time.Duration {
	d := 250 * time.Millisecond
	for i := 1; i < attempt && d < 10*time.Second; i++ {
		d *= 2
	}
	return min(d, 10*time.Second)
}

// retryable reports whether err may pass if tried again later, and the
// least delay the server asked for.
func retryable(err error) (bool, time.Duration) {
	var ue *platform.UnreachableError
	if errors.As(err, &ue) {
		return true, 0
	}
	var ae *platform.APIError
	if errors.As(err, &ae) && (ae.Status == http.StatusTooManyRequests || ae.Status >= 500) {
		return true, ae.RetryAfter
	}
	var se *platform.StepError
	if errors.As(err, &se) && se.Retryable {
		return true, 0
	}
	return false, 0
}

// Run reads until ctx ends (nil), the end of the stream when not
// following (nil), or an error that retrying cannot fix. The first read
// is not retried: a wrong endpoint or token fails at once.
func (f *Follower) Run(ctx context.Context) error {
	if f.Wait <= 0 {
		f.Wait = 10 * time.Second
	}
	if f.Limit <= 0 || f.Limit > wire.TelemetryMaxLimit {
		f.Limit = wire.TelemetryMaxLimit
	}
	if f.Backoff == nil {
		f.Backoff = Backoff
	}
	if f.Sleep == nil {
		f.Sleep = clock.Sleep
	}
	f.last = map[string]uint64{}
	var (
		cursor    uint64
		hasCursor bool
		connected bool
		attempt   int
	)
	for {
		q := wire.TelemetryQuery{Tenant: f.Tenant, Limit: f.Limit}
		switch {
		case hasCursor:
			q.After, q.HasAfter = cursor, true
		case !f.Since.IsZero():
			q.Since = f.Since
		}
		if f.Follow {
			q.Wait = f.Wait
		}
		page, err := f.Fetch(ctx, q)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if platform.StatusOf(err) == http.StatusConflict && hasCursor {
				// The stream is shorter than where we are: it restarted.
				f.Sink.Reset(cursor)
				cursor, f.last = 0, map[string]uint64{}
				continue
			}
			again, least := retryable(err)
			if !again || !connected || !f.Follow {
				return err
			}
			attempt++
			d := max(f.Backoff(attempt), least)
			f.Sink.Connection(false, err, d)
			if f.Sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		if !connected || attempt > 0 {
			connected, attempt = true, 0
			f.Sink.Connection(true, nil, 0)
		}
		for _, r := range page.Records {
			if !f.take(r) {
				continue
			}
			if err := f.Sink.Record(r); err != nil {
				return err
			}
		}
		f.Sink.Heartbeat(page.ServerTime)
		if len(page.Records) > 0 && page.NextAfter == cursor && hasCursor {
			return fmt.Errorf("the server answered records but did not move next_after past %d; check that snavio and the server are the same version (`snavio version`)", cursor)
		}
		cursor, hasCursor = page.NextAfter, true
		if !f.Follow && len(page.Records) < f.Limit {
			return nil
		}
	}
}

// take checks r against what was handed over for its tenant: a sequence
// number already seen is dropped, a jump is reported as a gap.
func (f *Follower) take(r wire.TelemetryRecord) bool {
	last, seen := f.last[r.Tenant]
	if seen && r.Seq <= last {
		f.Duplicates++
		return false
	}
	if seen && r.Seq > last+1 {
		f.Sink.Gap(r.Tenant, last+1, r.Seq-1)
	}
	f.last[r.Tenant] = r.Seq
	return true
}
