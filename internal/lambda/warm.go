package lambda

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch"
)

// What keeps the warm fast path free of AWS calls besides the delivery
// (docs/lambda.md, "Zero calls once warm"): telemetry that acknowledges
// nothing is kept across invocations and stored in batches; background
// work (token prefetch, cache and ban refreshes) is tracked so that it
// can be awaited at shutdown.

// Limits of the kept telemetry: it is stored once it holds keepMaxEvents
// events (one outbox transaction) or its oldest event is keepMaxAge old,
// by the next invocation, or at shutdown. Only a busy environment keeps:
// one whose previous invocation settled less than keepMaxAge ago. A
// quiet one (a lone command, its first) stores at once, since its next
// invocation may be minutes away and `send --wait` waits for the event.
const (
	keepMaxEvents = 99
	keepMaxAge    = time.Second
	// shutdownBudget bounds the flush at SIGTERM: Lambda sends SIGKILL
	// about 500 ms after it.
	shutdownBudget = 400 * time.Millisecond
	// rollupEvery is how often a stage function stores its fairness
	// rollups, as dispatch serve's job does; rollupRetain is their
	// lifetime in the flow table, as there.
	rollupEvery  = time.Minute
	rollupRetain = time.Hour
)

// flushRollupsIfDue starts storing the fairness rollups (flow.FlushRollups,
// one BatchWriteItem per 25 source-route pairs) when rollupEvery has passed
// since the last flush, beside the invocation's own work, and returns what
// waits for it: the invocation answers only after it, so that Lambda does
// not freeze the environment mid-request. An environment runs nothing
// between invocations, so the cadence is checked by them, and Close
// flushes at SIGTERM. A failed flush keeps its counts for the next one
// and fails nothing: rollups acknowledge no command.
func (h *Host) flushRollupsIfDue(ctx context.Context) (wait func()) {
	now := h.cfg.Clock.Now()
	if now.Sub(h.rollupAt) < rollupEvery {
		return waitNothing
	}
	h.rollupAt = now
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := h.flow.FlushRollups(ctx, rollupRetain); err != nil {
			h.log.Warn("storing the fairness rollups failed; the next flush carries them", "err", err)
		}
	}()
	return func() { <-done }
}

func waitNothing() {}

// keeps reports whether an invocation that ended in o may leave its
// telemetry in memory: a delivered command is acknowledged by its
// delivery and an escalated one by its hand-off, so their events
// (delivered, escalated) answer nothing. A refusal's event is its answer
// and is stored before Ingest returns.
func keeps(o dispatch.Outcome) bool {
	return o == dispatch.Delivered || o == dispatch.Escalated
}

// settle ends an invocation's telemetry: it keeps the events of an
// invocation whose outcome keeps (and whose hand-off, if any, succeeded)
// while the kept ones are not due, and otherwise stores everything.
func (o *outbox) settle(ctx context.Context, outcome dispatch.Outcome, handedOff bool, now time.Time) error {
	o.mu.Lock()
	n := len(o.buf)
	if n > 0 && o.since.IsZero() {
		o.since = now
	}
	quiet := o.last.IsZero() || now.Sub(o.last) >= keepMaxAge
	o.last = now
	due := quiet || n >= keepMaxEvents || (n > 0 && now.Sub(o.since) >= keepMaxAge)
	if keeps(outcome) && handedOff && !due {
		o.keptN = n
		o.mu.Unlock()
		return nil
	}
	o.mu.Unlock()
	return o.storeAll(ctx)
}

// storeAll appends every event in memory. If that fails, the events kept
// from earlier invocations are kept again (their invocations answered
// already, nothing would emit them again), up to MaxOutboxAppend; this
// invocation's are dropped, and its retry emits them again.
func (o *outbox) storeAll(ctx context.Context) error {
	o.mu.Lock()
	prev, since := o.buf[:o.keptN:o.keptN], o.since
	o.keptN, o.since = 0, time.Time{}
	o.mu.Unlock()
	err := o.flush(ctx)
	if err != nil && len(prev) > 0 {
		if drop := len(prev) - awsstore.MaxOutboxAppend; drop > 0 {
			prev = prev[drop:]
			o.log.Error("the outbox keeps failing; dropping the oldest kept telemetry", "events", drop)
		}
		o.mu.Lock()
		o.buf = append(prev, o.buf...)
		o.keptN, o.since = len(prev), since
		o.mu.Unlock()
	}
	return err
}

// kept is the number of events waiting in memory.
func (o *outbox) kept() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.buf)
}

// background runs the dispatcher's background work (dispatch.Config's
// Executor) and tracks it, so that shutdown and tests can wait for it.
type background struct{ wg sync.WaitGroup }

func (b *background) run(f func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f()
	}()
}

// wait waits for the running work, or for ctx.
func (b *background) wait(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		b.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Close ends the host: it waits for background work, then stores the
// fairness rollups and the kept telemetry side by side, all within ctx.
// Lambda calls it at shutdown (SIGTERM).
func (h *Host) Close(ctx context.Context) error {
	if err := h.bg.wait(ctx); err != nil {
		h.log.Warn("background work still running at shutdown", "err", err)
	}
	rollups := make(chan error, 1)
	go func() { rollups <- h.flow.FlushRollups(ctx, rollupRetain) }()
	return errors.Join(h.out.storeAll(ctx), <-rollups)
}

// closeOnSIGTERM stores the kept telemetry when Lambda shuts the
// environment down. Lambda sends SIGTERM only to a runtime that
// registered an extension: the bootstrap starts with
// aws-lambda-go's WithEnableSIGTERM, which registers one.
func (h *Host) closeOnSIGTERM(log *slog.Logger) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	go func() {
		<-sig
		ctx, cancel := context.WithTimeout(context.Background(), shutdownBudget)
		defer cancel()
		n := h.out.kept()
		if err := h.Close(ctx); err != nil {
			log.Error("storing the kept telemetry or the fairness rollups at shutdown failed; what failed is lost", "events", n, "err", err)
			return
		}
		log.Info("kept telemetry and fairness rollups stored at shutdown", "events", n)
	}()
}
