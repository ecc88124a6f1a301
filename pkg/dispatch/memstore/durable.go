package memstore

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Archive is an in-memory dispatch.Archive. The zero value is ready to
// use; safe for concurrent use.
type Archive struct {
	mu     sync.Mutex
	events map[string]dispatch.Archived
}

var _ dispatch.Archive = (*Archive)(nil)

// Append implements dispatch.Archive.
func (a *Archive) Append(_ context.Context, events []dispatch.Archived) error {
	if len(events) == 0 || len(events) > dispatch.MaxArchiveBatch {
		return fmt.Errorf("memstore archive: %d events: give 1 to %d per call", len(events), dispatch.MaxArchiveBatch)
	}
	for _, e := range events {
		if e.EventID == "" || e.ReceivedAt.IsZero() {
			return fmt.Errorf("memstore archive: event %q: an event id and a received time are required", e.EventID)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.events == nil {
		a.events = map[string]dispatch.Archived{}
	}
	for _, e := range events {
		if _, ok := a.events[e.EventID]; !ok {
			e.Detail = slices.Clone(e.Detail)
			a.events[e.EventID] = e
		}
	}
	return nil
}

// Get returns the archived event id, and whether there is one.
func (a *Archive) Get(_ context.Context, id string) (dispatch.Archived, bool, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	e, ok := a.events[id]
	e.Detail = slices.Clone(e.Detail)
	return e, ok, nil
}

// Handoff is an in-memory dispatch.HandoffQueue whose visibility timeouts
// run on a clock. Build it with NewHandoff; safe for concurrent use.
type Handoff struct {
	clk   clock.Clock
	mu    sync.Mutex
	seq   int
	items []*handoffItem // in put order
}

type handoffItem struct {
	payload  []byte
	visible  time.Time
	receives int
	handle   string
}

var _ dispatch.HandoffQueue = (*Handoff)(nil)

// NewHandoff returns an empty hand-off on clk.
func NewHandoff(clk clock.Clock) *Handoff { return &Handoff{clk: clk} }

// Put implements dispatch.Handoff.
func (h *Handoff) Put(_ context.Context, payload []byte) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.items = append(h.items, &handoffItem{payload: slices.Clone(payload)})
	return nil
}

// Take implements dispatch.HandoffQueue.
func (h *Handoff) Take(_ context.Context, n int, visibility time.Duration) ([]dispatch.HandoffItem, error) {
	if n < 1 || n > 10 {
		return nil, fmt.Errorf("memstore hand-off: take %d items: give 1 to 10", n)
	}
	now := h.clk.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []dispatch.HandoffItem
	for _, it := range h.items {
		if len(out) == n {
			break
		}
		if now.Before(it.visible) {
			continue
		}
		h.seq++
		it.receives++
		it.visible = now.Add(visibility)
		it.handle = strconv.Itoa(h.seq)
		out = append(out, dispatch.HandoffItem{Handle: it.handle, Payload: slices.Clone(it.payload), Receives: it.receives})
	}
	return out, nil
}

// errStaleHandle: the item was taken again since, or deleted.
var errStaleHandle = errors.New("memstore hand-off: unknown or stale handle")

func (h *Handoff) find(handle string) int {
	return slices.IndexFunc(h.items, func(it *handoffItem) bool { return it.handle == handle })
}

// Done implements dispatch.HandoffQueue.
func (h *Handoff) Done(_ context.Context, it dispatch.HandoffItem) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.find(it.Handle)
	if i < 0 {
		return errStaleHandle
	}
	h.items = slices.Delete(h.items, i, i+1)
	return nil
}

// Retry implements dispatch.HandoffQueue.
func (h *Handoff) Retry(_ context.Context, it dispatch.HandoffItem, d time.Duration) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := h.find(it.Handle)
	if i < 0 {
		return errStaleHandle
	}
	h.items[i].visible = h.clk.Now().Add(d)
	return nil
}
