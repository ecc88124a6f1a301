package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Registry is the store's registry.Store: routes, ACLs, keys, bans and
// quotas with versioned conditional writes and a changelog. Get it from
// Store.Registry. Like the DynamoDB store it never deletes expired records
// in the background: readers skip them against the caller's now and the
// next writer replaces them.
type Registry struct{ s *Store }

var _ registry.Store = (*Registry)(nil)

// Registry returns the registry view of the store.
func (s *Store) Registry() *Registry { return &Registry{s: s} }

// Registry layout: bucket "registry" holds "items" (id -> Item JSON),
// "last" (id -> u64 highest version ever written, surviving deletes) and
// "changes" (compositeKey(id) + u64 version -> Change JSON).
var (
	bRegistry = []byte("registry")
	bItems    = []byte("items")
	bLast     = []byte("last")
	bChanges  = []byte("changes")
)

// maxRegistryID bounds an id; a record's key parts are short names.
const maxRegistryID = 4096

func registryBuckets(tx *bolt.Tx) (items, last, changes *bolt.Bucket, err error) {
	rb := tx.Bucket(bRegistry)
	if !tx.Writable() {
		return rb.Bucket(bItems), rb.Bucket(bLast), rb.Bucket(bChanges), nil
	}
	if items, err = rb.CreateBucketIfNotExists(bItems); err != nil {
		return
	}
	if last, err = rb.CreateBucketIfNotExists(bLast); err != nil {
		return
	}
	changes, err = rb.CreateBucketIfNotExists(bChanges)
	return
}

func liveItem(items *bolt.Bucket, id registry.ID, now time.Time) (registry.Item, bool, error) {
	if items == nil {
		return registry.Item{}, false, nil
	}
	v := items.Get([]byte(id))
	if v == nil {
		return registry.Item{}, false, nil
	}
	var it registry.Item
	if err := json.Unmarshal(v, &it); err != nil {
		return registry.Item{}, false, storecodec.Corrupt("registry record", string(id), err)
	}
	return it, registry.Live(it.ExpiresAt(), now), nil
}

func changeKey(id registry.ID, version int64) []byte {
	return binary.BigEndian.AppendUint64(compositeKey(string(id)), uint64(version))
}

func checkActor(by registry.Actor) error {
	if by.Who == "" {
		return fmt.Errorf("embedded registry: a write without an actor: set Actor.Who: %w", registry.ErrInvalid)
	}
	return nil
}

// write stores the change (and the item, or its deletion) in tx.
func writeChange(items, last, changes *bolt.Bucket, ch registry.Change) error {
	id := []byte(ch.ID)
	if ch.After != nil {
		if err := putJSON(items, id, ch.After); err != nil {
			return err
		}
	} else if err := items.Delete(id); err != nil {
		return err
	}
	if err := last.Put(id, u64(uint64(ch.Version))); err != nil {
		return err
	}
	return putJSON(changes, changeKey(ch.ID, ch.Version), ch)
}

// Put implements registry.Writer.
func (r *Registry) Put(ctx context.Context, by registry.Actor, it registry.Item) (registry.Change, error) {
	if err := checkActor(by); err != nil {
		return registry.Change{}, err
	}
	if err := registry.ValidateItem(it); err != nil {
		return registry.Change{}, err
	}
	id := it.ID()
	if len(id) > maxRegistryID {
		return registry.Change{}, fmt.Errorf("embedded registry: id of %d bytes, over %d: %w", len(id), maxRegistryID, registry.ErrInvalid)
	}
	it = it.Clone()
	var ch registry.Change
	var failure error
	err := r.s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		items, last, changes, err := registryBuckets(tx)
		if err != nil {
			return err
		}
		cur, exists, err := liveItem(items, id, by.At)
		if err != nil {
			return err
		}
		var have int64
		if exists {
			have = cur.Version()
		}
		if it.Version() != have {
			failure = fmt.Errorf("embedded registry: put %s at version %d, stored %d: re-read and retry: %w", id, it.Version(), have, registry.ErrConflict)
			return nil
		}
		var next int64 = 1
		if v := last.Get([]byte(id)); v != nil {
			next = int64(binary.BigEndian.Uint64(v)) + 1
		}
		stored := it.WithVersion(next)
		ch = registry.Change{ID: id, Version: next, Who: by.Who, At: by.At.UTC(), Op: registry.OpPut, After: &stored}
		if exists {
			ch.Before = &cur
		}
		return writeChange(items, last, changes, ch)
	})
	if err != nil {
		return registry.Change{}, err
	}
	if failure != nil {
		return registry.Change{}, failure
	}
	return cloneChange(ch), nil
}

// Delete implements registry.Writer.
func (r *Registry) Delete(ctx context.Context, by registry.Actor, id registry.ID, version int64) (registry.Change, error) {
	if err := checkActor(by); err != nil {
		return registry.Change{}, err
	}
	if id == "" || len(id) > maxRegistryID {
		return registry.Change{}, fmt.Errorf("embedded registry: delete: id of %d bytes: %w", len(id), registry.ErrNotFound)
	}
	var ch registry.Change
	var failure error
	err := r.s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		items, last, changes, err := registryBuckets(tx)
		if err != nil {
			return err
		}
		cur, exists, err := liveItem(items, id, by.At)
		if err != nil {
			return err
		}
		if !exists {
			failure = fmt.Errorf("embedded registry: delete %s: %w", id, registry.ErrNotFound)
			return nil
		}
		if cur.Version() != version {
			failure = fmt.Errorf("embedded registry: delete %s at version %d, stored %d: re-read and retry: %w", id, version, cur.Version(), registry.ErrConflict)
			return nil
		}
		next := int64(binary.BigEndian.Uint64(last.Get([]byte(id)))) + 1
		ch = registry.Change{ID: id, Version: next, Who: by.Who, At: by.At.UTC(), Op: registry.OpDelete, Before: &cur}
		return writeChange(items, last, changes, ch)
	})
	if err != nil {
		return registry.Change{}, err
	}
	if failure != nil {
		return registry.Change{}, failure
	}
	return cloneChange(ch), nil
}

// Load implements registry.Reader. Records come in id order, which is key
// order within each kind.
func (r *Registry) Load(ctx context.Context, now time.Time, kinds ...registry.Kind) (registry.Data, error) {
	for _, k := range kinds {
		if !k.Valid() {
			return registry.Data{}, fmt.Errorf("embedded registry: load: unknown kind %q: use one of %v", k, registry.Kinds())
		}
	}
	var d registry.Data
	err := r.s.view(ctx, func(tx *bolt.Tx) error {
		d = registry.Data{}
		items, _, _, _ := registryBuckets(tx)
		if items == nil {
			return nil
		}
		load := func(prefix []byte) error {
			c := items.Cursor()
			for k, v := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, v = c.Next() {
				var it registry.Item
				if err := json.Unmarshal(v, &it); err != nil {
					return storecodec.Corrupt("registry record", string(k), err)
				}
				if registry.Live(it.ExpiresAt(), now) {
					d.Add(it)
				}
			}
			return nil
		}
		if len(kinds) == 0 {
			return load(nil)
		}
		for _, k := range kinds {
			if err := load([]byte(string(k) + " ")); err != nil {
				return err
			}
		}
		return nil
	})
	return d, err
}

// Get implements registry.Reader.
func (r *Registry) Get(ctx context.Context, id registry.ID, now time.Time) (registry.Item, error) {
	var it registry.Item
	var ok bool
	err := r.s.view(ctx, func(tx *bolt.Tx) error {
		items, _, _, _ := registryBuckets(tx)
		var err error
		it, ok, err = liveItem(items, id, now)
		return err
	})
	if err != nil {
		return registry.Item{}, err
	}
	if !ok {
		return registry.Item{}, fmt.Errorf("embedded registry: %s: %w", id, registry.ErrNotFound)
	}
	return it, nil
}

// History implements registry.Reader.
func (r *Registry) History(ctx context.Context, id registry.ID, limit int) ([]registry.Change, error) {
	var out []registry.Change
	err := r.s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		_, _, changes, _ := registryBuckets(tx)
		if changes == nil {
			return nil
		}
		prefix := compositeKey(string(id))
		c := changes.Cursor()
		// Walk back from the end of id's range: newest first.
		var v []byte
		k, _ := c.Seek(append(slices.Clone(prefix), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff))
		if k == nil {
			k, v = c.Last()
		} else {
			k, v = c.Prev()
		}
		for ; k != nil && bytes.HasPrefix(k, prefix) && len(k) == len(prefix)+8 && (limit <= 0 || len(out) < limit); k, v = c.Prev() {
			var ch registry.Change
			if err := json.Unmarshal(v, &ch); err != nil {
				return storecodec.Corrupt("registry change", string(id), err)
			}
			out = append(out, ch)
		}
		return nil
	})
	return out, err
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
