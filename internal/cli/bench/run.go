package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/internal/cli/send"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Plan is what to send.
type Plan struct {
	Source, Target, Command string
	Payload                 []byte
	Key                     *signing.Key
	// Count is how many commands to send (0: until Duration ends).
	Count int
	// Duration bounds the sending (0: until Count are sent).
	Duration time.Duration
	// Concurrency is the number of PutEvents calls in flight; Batch the
	// entries per call (1 to platform.MaxEntries).
	Concurrency, Batch int
	// Wait is how long to wait for outcomes after the last put (0: none).
	Wait time.Duration
}

// Runner sends a Plan and measures it.
type Runner struct {
	Bus     platform.Bus
	Clock   clock.Clock
	Limiter *Limiter
	// Telemetry and Cursor follow outcomes (Plan.Wait > 0): one reader of
	// the tenant's telemetry for all commands, started at Cursor.
	Telemetry send.TelemetryAPI
	Cursor    send.Cursor
	// After fires after d (nil: time.After).
	After func(d time.Duration) <-chan time.Time

	claimed  atomic.Int64
	sent     atomic.Int64
	accepted atomic.Int64
	refused  atomic.Int64
	failedRq atomic.Int64
	decided  atomic.Int64
	requests atomic.Int64

	mu        sync.Mutex
	began     time.Time
	refusedBy map[string]int
	lastErr   string
	pending   map[string]time.Time
	outcomes  Outcomes
	allSent   bool
	allDone   chan struct{}
	doneOnce  sync.Once

	putLat, outLat Latencies
}

// Counts is a snapshot of the progress.
type Counts struct {
	Sent, Accepted, Refused, Decided int64
	Elapsed                          time.Duration
}

// Counts returns the progress so far (safe while Run runs).
func (r *Runner) Counts() Counts {
	var el time.Duration
	r.mu.Lock()
	began := r.began
	r.mu.Unlock()
	if !began.IsZero() {
		el = r.Clock.Now().Sub(began)
	}
	return Counts{Sent: r.sent.Load(), Accepted: r.accepted.Load(), Refused: r.refused.Load() + r.failedRq.Load(), Decided: r.decided.Load(), Elapsed: el}
}

// Run sends p until its count or duration is reached or ctx ends, then
// (with p.Wait) waits for the outcomes, and returns the summary. An error
// means following telemetry failed; the summary is still complete for
// what was sent.
func (r *Runner) Run(ctx context.Context, p Plan) (Summary, error) {
	r.mu.Lock()
	r.refusedBy, r.pending, r.allDone = map[string]int{}, map[string]time.Time{}, make(chan struct{})
	r.outcomes = Outcomes{Invalid: map[string]int{}, Failed: map[string]int{}}
	r.began = r.Clock.Now()
	r.mu.Unlock()
	var end time.Time
	if p.Duration > 0 {
		end = r.began.Add(p.Duration)
	}

	fctx, stopFollow := context.WithCancel(context.Background())
	defer stopFollow()
	followed := make(chan error, 1)
	if p.Wait > 0 {
		tenant, _, _ := strings.Cut(p.Source, "/")
		go func() { followed <- r.follow(fctx, tenant) }()
	}

	var wg sync.WaitGroup
	for range p.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.worker(ctx, p, end)
		}()
	}
	wg.Wait()
	sentAt := r.Clock.Now()

	var followErr error
	if p.Wait > 0 {
		after := r.After
		if after == nil {
			after = time.After
		}
		r.mu.Lock()
		r.allSent = true
		empty := len(r.pending) == 0
		r.mu.Unlock()
		if empty {
			r.doneOnce.Do(func() { close(r.allDone) })
		}
		select {
		case <-r.allDone:
		case <-after(p.Wait):
		case <-ctx.Done():
		case followErr = <-followed:
		}
		stopFollow()
		if followErr == nil {
			if err := <-followed; err != nil && fctx.Err() == nil {
				followErr = err
			}
		}
	}
	return r.summary(p, sentAt, ctx.Err() != nil), followErr
}

// claim reserves up to batch commands of the count; 0 when none are left.
func (r *Runner) claim(count, batch int) int {
	if count == 0 {
		return batch
	}
	for {
		c := r.claimed.Load()
		n := min(int64(batch), int64(count)-c)
		if n <= 0 {
			return 0
		}
		if r.claimed.CompareAndSwap(c, c+n) {
			return int(n)
		}
	}
}

func (r *Runner) worker(ctx context.Context, p Plan, end time.Time) {
	events := make([]platform.Event, 0, p.Batch)
	ids := make([]string, 0, p.Batch)
	for ctx.Err() == nil {
		if !end.IsZero() && !r.Clock.Now().Before(end) {
			return
		}
		n := r.claim(p.Count, p.Batch)
		if n == 0 {
			return
		}
		if err := r.Limiter.Take(ctx, n); err != nil {
			return
		}
		if !end.IsZero() && !r.Clock.Now().Before(end) {
			return
		}
		events, ids = events[:0], ids[:0]
		for range n {
			b, err := send.Build(p.Source, p.Target, p.Command, "", p.Payload, p.Key, r.Clock.Now())
			if err != nil {
				// The payload was built once before the run; only the
				// random source can fail here.
				r.requestFailed(1, err)
				continue
			}
			events = append(events, platform.Event{Source: p.Source, DetailType: envelope.EventType, Detail: b.Detail})
			ids = append(ids, b.Envelope.Metadata.ID)
		}
		if len(events) == 0 {
			continue
		}
		start := r.Clock.Now()
		if p.Wait > 0 {
			r.mu.Lock()
			for _, id := range ids {
				r.pending[id] = start
			}
			r.mu.Unlock()
		}
		out, err := r.Bus.PutEvents(ctx, events)
		r.putLat.Add(r.Clock.Now().Sub(start))
		r.requests.Add(1)
		r.sent.Add(int64(len(events)))
		if err == nil && len(out) != len(events) {
			err = fmt.Errorf("the bus answered %d results for %d entries", len(out), len(events))
		}
		if err != nil {
			r.forget(ids)
			r.requestFailed(len(events), err)
			continue
		}
		for i, res := range out {
			if res.ErrorCode == "" {
				r.accepted.Add(1)
				continue
			}
			r.refused.Add(1)
			r.forget(ids[i : i+1])
			r.mu.Lock()
			r.refusedBy[res.ErrorCode]++
			r.mu.Unlock()
		}
	}
}

func (r *Runner) requestFailed(n int, err error) {
	r.failedRq.Add(int64(n))
	r.mu.Lock()
	r.lastErr = err.Error()
	r.mu.Unlock()
}

// forget drops commands that were not put from those awaiting an outcome.
func (r *Runner) forget(ids []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, id := range ids {
		delete(r.pending, id)
	}
	r.checkDone()
}

// checkDone closes allDone once everything is sent and decided; r.mu held.
func (r *Runner) checkDone() {
	if r.allSent && len(r.pending) == 0 {
		r.doneOnce.Do(func() { close(r.allDone) })
	}
}

// follow reads the tenant's telemetry once for all commands and records
// each pending command's outcome and the time it took.
func (r *Runner) follow(ctx context.Context, tenant string) error {
	want := func(id string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		_, ok := r.pending[id]
		return ok
	}
	_, err := send.Follow(ctx, r.Telemetry, tenant, r.Cursor, time.Time{}, r.Clock.Now, func(seq uint64, raw json.RawMessage) (bool, error) {
		id, o, decided, err := send.Decide(raw, want, nil)
		if err != nil {
			return false, fmt.Errorf("telemetry record %d of tenant %s: %w", seq, tenant, err)
		}
		if !decided {
			return false, nil
		}
		now := r.Clock.Now()
		r.mu.Lock()
		at, ok := r.pending[id]
		if ok {
			delete(r.pending, id)
			r.outcomes.add(o)
		}
		r.checkDone()
		r.mu.Unlock()
		if ok {
			r.outLat.Add(now.Sub(at))
			r.decided.Add(1)
		}
		return false, nil
	})
	if ctx.Err() != nil {
		return nil
	}
	if err == nil {
		err = errors.New("the telemetry stream ended")
	}
	return err
}
