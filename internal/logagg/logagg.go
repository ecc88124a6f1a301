// Package logagg aggregates repeated log lines. Its Handler wraps a
// slog.Handler: per (level, message) it passes the first record of an
// interval through with its attributes and counts the repeats, and when
// the interval ends it logs one line with their count (none when nothing
// repeated). A condition that repeats thousands of times a second, such as
// a refused entry or a retried hand-off, then costs two lines an interval
// instead of one line each time.
//
// Memory is bounded: at most MaxKeys (level, message) pairs are tracked
// at once; the records of any other message share one overflow window,
// whose first record is passed through and the rest counted.
package logagg

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Defaults of Options.
const (
	DefaultInterval = 10 * time.Second
	DefaultMaxKeys  = 256
)

// Options configure New. Zero fields take the defaults.
type Options struct {
	// Interval is how long repeats of a message are counted before their
	// count is logged (DefaultInterval).
	Interval time.Duration
	// MaxKeys bounds the (level, message) pairs tracked at once
	// (DefaultMaxKeys).
	MaxKeys int
	// Clock times the intervals (clock.System()).
	Clock clock.Clock
	// OnSuppressed, when set, is called with the level of each record
	// suppressed (for a counter). It must be cheap and must not log.
	OnSuppressed func(slog.Level)
}

// Handler is the aggregating slog.Handler. Build it with New; it is safe
// for concurrent use, and the handlers WithAttrs and WithGroup derive
// share its windows.
type Handler struct {
	inner slog.Handler
	c     *core
}

type key struct {
	level slog.Level
	msg   string
}

// window counts the repeats of one key since its first record.
type window struct {
	start time.Time
	// h passed the first record through; the count goes through it too,
	// with the same attributes and groups.
	h       slog.Handler
	level   slog.Level
	msg     string
	repeats uint64
}

type core struct {
	clock        clock.Clock
	interval     time.Duration
	maxKeys      int
	onSuppressed func(slog.Level)

	mu   sync.Mutex
	keys map[key]*window
	// overflow holds the records of keys past maxKeys (nil: none yet
	// this interval).
	overflow *window
}

// OverflowMessage is the message of the count line of the overflow
// window: records of more distinct messages than MaxKeys in one interval.
const OverflowMessage = "log lines of other messages suppressed (too many distinct messages to count each)"

// New returns a Handler writing through inner.
func New(inner slog.Handler, o Options) *Handler {
	if o.Interval <= 0 {
		o.Interval = DefaultInterval
	}
	if o.MaxKeys <= 0 {
		o.MaxKeys = DefaultMaxKeys
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	return &Handler{inner: inner, c: &core{clock: o.Clock, interval: o.Interval, maxKeys: o.MaxKeys,
		onSuppressed: o.OnSuppressed, keys: make(map[key]*window)}}
}

// Enabled reports whether the wrapped handler takes records of level.
func (h *Handler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.inner.Enabled(ctx, level)
}

// WithAttrs returns a Handler adding attrs, sharing h's windows.
func (h *Handler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &Handler{inner: h.inner.WithAttrs(attrs), c: h.c}
}

// WithGroup returns a Handler opening group name, sharing h's windows.
func (h *Handler) WithGroup(name string) slog.Handler {
	return &Handler{inner: h.inner.WithGroup(name), c: h.c}
}

// Handle passes r through if it is the first of its (level, message) in
// the current interval, and counts it otherwise.
func (h *Handler) Handle(ctx context.Context, r slog.Record) error {
	c := h.c
	now := c.clock.Now()
	var ended [2]*window
	pass := false
	c.mu.Lock()
	k := key{r.Level, r.Message}
	w := c.keys[k]
	if w != nil && c.over(w, now) {
		ended[0] = w
		delete(c.keys, k)
		w = nil
	}
	switch {
	case w != nil:
		w.repeats++
	case len(c.keys) < c.maxKeys:
		c.keys[k] = &window{start: now, h: h.inner, level: r.Level, msg: r.Message}
		pass = true
	default:
		if o := c.overflow; o != nil && c.over(o, now) {
			ended[1] = o
			c.overflow = nil
		}
		if o := c.overflow; o != nil {
			o.repeats++
			o.level = max(o.level, r.Level)
		} else {
			c.overflow = &window{start: now, h: h.inner, level: r.Level, msg: OverflowMessage}
			pass = true
		}
	}
	c.mu.Unlock()
	var first error
	for _, e := range ended {
		if err := c.emit(ctx, e, now); err != nil && first == nil {
			first = err
		}
	}
	if pass {
		if err := h.inner.Handle(ctx, r); err != nil && first == nil {
			first = err
		}
	} else if c.onSuppressed != nil {
		c.onSuppressed(r.Level)
	}
	return first
}

// over says whether w's interval has ended at now.
func (c *core) over(w *window, now time.Time) bool { return now.Sub(w.start) >= c.interval }

// emit logs the count line of an ended window, if anything repeated.
func (c *core) emit(ctx context.Context, w *window, now time.Time) error {
	if w == nil || w.repeats == 0 {
		return nil
	}
	r := slog.NewRecord(now, w.level, w.msg, 0)
	r.AddAttrs(slog.Uint64("suppressed", w.repeats), slog.Duration("interval", now.Sub(w.start)))
	return w.h.Handle(ctx, r)
}

// Flush ends the windows whose interval is over, logging their counts;
// with all, it ends every window (at shutdown, so no count is lost).
func (h *Handler) Flush(all bool) error {
	c := h.c
	now := c.clock.Now()
	var ended []*window
	c.mu.Lock()
	for k, w := range c.keys {
		if all || c.over(w, now) {
			ended = append(ended, w)
			delete(c.keys, k)
		}
	}
	if o := c.overflow; o != nil && (all || c.over(o, now)) {
		ended = append(ended, o)
		c.overflow = nil
	}
	c.mu.Unlock()
	var first error
	for _, w := range ended {
		if err := c.emit(context.Background(), w, now); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Run flushes the windows as their intervals end, every tick of a ticker
// of a quarter interval, until ctx is done, then flushes all of them.
// (The ticker only paces the checks; the clock decides what has ended.)
func (h *Handler) Run(ctx context.Context) {
	t := time.NewTicker(h.c.interval / 4)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			_ = h.Flush(true)
			return
		case <-t.C:
			_ = h.Flush(false)
		}
	}
}

// LevelName is the lower-case name of a level, as a metric label.
func LevelName(l slog.Level) string {
	switch l {
	case slog.LevelDebug:
		return "debug"
	case slog.LevelInfo:
		return "info"
	case slog.LevelWarn:
		return "warn"
	case slog.LevelError:
		return "error"
	}
	return l.String()
}
