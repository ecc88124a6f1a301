package memstore

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Registry is an in-memory registry.Store. Like the DynamoDB store it
// never deletes expired records in the background: readers skip them
// against the caller's now and the next writer replaces them. Use
// NewRegistry; safe for concurrent use.
type Registry struct {
	mu      sync.RWMutex
	items   map[registry.ID]registry.Item // stored records, possibly expired
	last    map[registry.ID]int64         // highest version ever written, survives deletes
	changes map[registry.ID][]registry.Change
}

// NewRegistry returns an empty Registry.
func NewRegistry() *Registry {
	return &Registry{
		items:   make(map[registry.ID]registry.Item),
		last:    make(map[registry.ID]int64),
		changes: make(map[registry.ID][]registry.Change),
	}
}

var _ registry.Store = (*Registry)(nil)

// live returns the stored record id if it is alive at now.
func (m *Registry) live(id registry.ID, now time.Time) (registry.Item, bool) {
	it, ok := m.items[id]
	if !ok || !registry.Live(it.ExpiresAt(), now) {
		return registry.Item{}, false
	}
	return it, true
}

// Put implements registry.Writer.
func (m *Registry) Put(ctx context.Context, by registry.Actor, it registry.Item) (registry.Change, error) {
	if err := ctx.Err(); err != nil {
		return registry.Change{}, err
	}
	if by.Who == "" {
		return registry.Change{}, fmt.Errorf("memstore: registry write without an actor: %w", registry.ErrInvalid)
	}
	if err := registry.ValidateItem(it); err != nil {
		return registry.Change{}, err
	}
	id := it.ID()
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.live(id, by.At)
	var have int64
	if exists {
		have = cur.Version()
	}
	if it.Version() != have {
		return registry.Change{}, fmt.Errorf("memstore: put %s at version %d, stored %d: %w", id, it.Version(), have, registry.ErrConflict)
	}
	next := m.last[id] + 1
	stored := it.Clone().WithVersion(next)
	m.items[id] = stored
	m.last[id] = next
	ch := registry.Change{ID: id, Version: next, Who: by.Who, At: by.At.UTC(), Op: registry.OpPut}
	if exists {
		b := cur.Clone()
		ch.Before = &b
	}
	a := stored.Clone()
	ch.After = &a
	m.changes[id] = append(m.changes[id], ch)
	return cloneChange(ch), nil
}

// Delete implements registry.Writer.
func (m *Registry) Delete(ctx context.Context, by registry.Actor, id registry.ID, version int64) (registry.Change, error) {
	if err := ctx.Err(); err != nil {
		return registry.Change{}, err
	}
	if by.Who == "" {
		return registry.Change{}, fmt.Errorf("memstore: registry write without an actor: %w", registry.ErrInvalid)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	cur, exists := m.live(id, by.At)
	if !exists {
		return registry.Change{}, fmt.Errorf("memstore: delete %s: %w", id, registry.ErrNotFound)
	}
	if cur.Version() != version {
		return registry.Change{}, fmt.Errorf("memstore: delete %s at version %d, stored %d: %w", id, version, cur.Version(), registry.ErrConflict)
	}
	delete(m.items, id)
	next := m.last[id] + 1
	m.last[id] = next
	b := cur.Clone()
	ch := registry.Change{ID: id, Version: next, Who: by.Who, At: by.At.UTC(), Op: registry.OpDelete, Before: &b}
	m.changes[id] = append(m.changes[id], ch)
	return cloneChange(ch), nil
}

// Load implements registry.Reader.
func (m *Registry) Load(ctx context.Context, now time.Time, kinds ...registry.Kind) (registry.Data, error) {
	if err := ctx.Err(); err != nil {
		return registry.Data{}, err
	}
	want := make(map[registry.Kind]bool, len(kinds))
	for _, k := range kinds {
		if !k.Valid() {
			return registry.Data{}, fmt.Errorf("memstore: load: unknown kind %q", k)
		}
		want[k] = true
	}
	m.mu.RLock()
	ids := make([]registry.ID, 0, len(m.items))
	for id, it := range m.items {
		if (len(want) == 0 || want[id.Kind()]) && registry.Live(it.ExpiresAt(), now) {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	var d registry.Data
	for _, id := range ids {
		d.Add(m.items[id].Clone())
	}
	m.mu.RUnlock()
	return d, nil
}

// Get implements registry.Reader.
func (m *Registry) Get(ctx context.Context, id registry.ID, now time.Time) (registry.Item, error) {
	if err := ctx.Err(); err != nil {
		return registry.Item{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	it, ok := m.live(id, now)
	if !ok {
		return registry.Item{}, fmt.Errorf("memstore: %s: %w", id, registry.ErrNotFound)
	}
	return it.Clone(), nil
}

// History implements registry.Reader.
func (m *Registry) History(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	cs := m.changes[id]
	out := make([]registry.Change, 0, len(cs))
	for i := len(cs) - 1; i >= 0 && (limit <= 0 || len(out) < limit); i-- {
		out = append(out, cloneChange(cs[i]))
	}
	slices.SortStableFunc(out, func(a, b registry.Change) int { return cmp.Compare(b.Version, a.Version) })
	return out, nil
}

func cloneChange(c registry.Change) registry.Change {
	if c.Before != nil {
		b := c.Before.Clone()
		c.Before = &b
	}
	if c.After != nil {
		a := c.After.Clone()
		c.After = &a
	}
	return c
}
