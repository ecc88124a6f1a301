package shield

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Defaults of the per-source invalid budget (docs/security/shield.md,
// "Invalid budget").
const (
	DefaultInvalidBudget   = 100
	DefaultInvalidInterval = time.Minute
	DefaultInvalidBanAfter = 5
	// maxBudgetSources bounds the sources the budget remembers; sources
	// beyond it share one window, reported to the platform.
	maxBudgetSources = 1 << 16
)

// throttledError is a rejection over its source's invalid budget: no
// event of its own (it is counted into the source's aggregate), and it
// must not be archived.
type throttledError struct{ error }

func (e throttledError) Unwrap() error { return e.error }

// Throttled reports whether err, a rejection from Check, came from a
// source over its invalid budget: its snavio.command.invalid was folded
// into the source's aggregate event, and the entry is not worth keeping.
func Throttled(err error) bool {
	var t throttledError
	return errors.As(err, &t)
}

// budget is the per-source invalid budget: fixed windows of interval per
// bus source; the first limit invalid entries of a window each get their
// own event, the rest are counted and reported as one aggregate Invalid
// (Suppressed, the first reason) once the window has ended. A source over
// its budget in banAfter consecutive windows is handed to ban.
type budget struct {
	limit    int
	interval time.Duration
	banAfter int
	ban      func(source string, invalid int64, at time.Time)
	sink     telemetry.Sink

	nextSweep atomic.Int64 // unix ns; Check sweeps ended windows after it
	mu        sync.Mutex
	m         map[string]*window // by bus source; "" for malformed sources and overflow
}

type window struct {
	start      time.Time
	n          int64 // invalid entries in the window
	suppressed int64 // those without an event of their own
	first      telemetry.Invalid
	streak     int // consecutive windows over budget, this one included once over
}

func newBudget(cfg Config, ban func(string, int64, time.Time), sink telemetry.Sink) *budget {
	if cfg.InvalidBudget < 0 {
		return nil
	}
	return &budget{limit: cfg.InvalidBudget, interval: cfg.InvalidInterval, banAfter: cfg.InvalidBanAfter, ban: ban, sink: sink,
		m: make(map[string]*window)}
}

// admit counts one invalid entry of ev.Source at now and reports whether
// it gets its own event (true) or is throttled. Aggregates of ended
// windows are emitted on the way.
func (b *budget) admit(ev telemetry.Invalid, now time.Time) bool {
	key := ev.Source
	var due []telemetry.Invalid
	var banN int64
	b.mu.Lock()
	w := b.m[key]
	if w == nil {
		if len(b.m) >= maxBudgetSources && now.UnixNano() >= b.nextSweep.Load() {
			due = b.sweepLocked(now, due) // at most once per interval
		}
		if len(b.m) >= maxBudgetSources {
			key, ev.Source = "", ""
			w = b.m[key]
		}
		if w == nil {
			w = &window{start: now}
			b.m[key] = w
		}
	}
	if !now.Before(w.start.Add(b.interval)) {
		due = w.roll(now, b, due)
	}
	w.n++
	own := w.n <= int64(b.limit)
	if !own {
		if w.suppressed == 0 {
			w.first = ev
			w.streak++
			if b.banAfter > 0 && w.streak >= b.banAfter && key != "" {
				banN = w.n
			}
		}
		w.suppressed++
	}
	b.mu.Unlock()
	b.emit(due)
	if banN > 0 && b.ban != nil {
		b.ban(key, banN, now)
	}
	return own
}

// roll ends w at now: its aggregate, if any, is appended to due, and the
// streak carries over only to the window right after an over-budget one.
func (w *window) roll(now time.Time, b *budget, due []telemetry.Invalid) []telemetry.Invalid {
	if w.suppressed > 0 {
		due = append(due, w.aggregate())
	}
	if w.suppressed == 0 || now.After(w.start.Add(2*b.interval)) {
		w.streak = 0
	}
	*w = window{start: now, streak: w.streak}
	return due
}

func (w *window) aggregate() telemetry.Invalid {
	ev := w.first
	ev.Suppressed = w.suppressed
	return ev
}

// sweep emits the aggregates of windows ended at now and forgets windows
// that ended with nothing to report; Check calls it once per interval.
func (b *budget) sweep(now time.Time) {
	if now.UnixNano() < b.nextSweep.Load() {
		return
	}
	b.mu.Lock()
	due := b.sweepLocked(now, nil)
	b.mu.Unlock()
	b.emit(due)
}

func (b *budget) sweepLocked(now time.Time, due []telemetry.Invalid) []telemetry.Invalid {
	b.nextSweep.Store(now.Add(b.interval).UnixNano())
	for k, w := range b.m {
		if now.Before(w.start.Add(b.interval)) {
			continue
		}
		if w.suppressed > 0 {
			// Keep the window (rolled) so that a streak can continue.
			due = w.roll(now, b, due)
			continue
		}
		delete(b.m, k)
	}
	return due
}

func (b *budget) emit(due []telemetry.Invalid) {
	for _, ev := range due {
		b.sink.Emit(ev)
	}
}

// throttle wraps a rejection over budget.
func throttle(err error) error {
	var re *reason.Error
	if errors.As(err, &re) {
		return throttledError{err}
	}
	return err
}
