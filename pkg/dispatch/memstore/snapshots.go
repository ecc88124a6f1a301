package memstore

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Snapshots is an in-memory snapshot.Store. Promote swaps the latest
// pointer under a lock, so a reader sees the previous or the new complete
// version. Use NewSnapshots; safe for concurrent use.
type Snapshots struct {
	mu   sync.RWMutex
	docs map[string]*snapDoc
}

type snapDoc struct {
	versions map[string][]byte
	order    []string
	latest   string
}

func (d *snapDoc) get(version string) ([]byte, bool) {
	if d == nil {
		return nil, false
	}
	b, ok := d.versions[version]
	return b, ok
}

// NewSnapshots returns an empty Snapshots.
func NewSnapshots() *Snapshots { return &Snapshots{docs: make(map[string]*snapDoc)} }

var _ snapshot.Store = (*Snapshots)(nil)

// Put implements snapshot.Store.
func (s *Snapshots) Put(ctx context.Context, path, version string, body []byte) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if path == "" || version == "" {
		return fmt.Errorf("memstore: snapshot put needs a path and a version")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.docs[path]
	if d == nil {
		d = &snapDoc{versions: make(map[string][]byte)}
		s.docs[path] = d
	}
	if old, ok := d.versions[version]; ok {
		if bytes.Equal(old, body) {
			return nil
		}
		return fmt.Errorf("memstore: %s version %s: %w", path, version, snapshot.ErrExists)
	}
	d.versions[version] = bytes.Clone(body)
	d.order = append(d.order, version)
	return nil
}

// Promote implements snapshot.Store.
func (s *Snapshots) Promote(ctx context.Context, path, version string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	d := s.docs[path]
	if _, ok := d.get(version); !ok {
		return fmt.Errorf("memstore: promote %s version %s: %w", path, version, snapshot.ErrNotFound)
	}
	d.latest = version
	return nil
}

// Latest implements snapshot.Store.
func (s *Snapshots) Latest(ctx context.Context, path string, maxBytes int64) (string, []byte, error) {
	if err := ctx.Err(); err != nil {
		return "", nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	d := s.docs[path]
	if d == nil || d.latest == "" {
		return "", nil, fmt.Errorf("memstore: %s has no latest version: %w", path, snapshot.ErrNotFound)
	}
	b, err := limited(d.versions[d.latest], maxBytes)
	if err != nil {
		return "", nil, fmt.Errorf("memstore: %s: %w", path, err)
	}
	return d.latest, b, nil
}

// Get implements snapshot.Store.
func (s *Snapshots) Get(ctx context.Context, path, version string, maxBytes int64) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	body, ok := s.docs[path].get(version)
	if !ok {
		return nil, fmt.Errorf("memstore: %s version %s: %w", path, version, snapshot.ErrNotFound)
	}
	b, err := limited(body, maxBytes)
	if err != nil {
		return nil, fmt.Errorf("memstore: %s version %s: %w", path, version, err)
	}
	return b, nil
}

// Versions implements snapshot.Store.
func (s *Snapshots) Versions(ctx context.Context, path string) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if d := s.docs[path]; d != nil {
		return slices.Clone(d.order), nil
	}
	return nil, nil
}

func limited(b []byte, maxBytes int64) ([]byte, error) {
	if int64(len(b)) > maxBytes {
		return nil, snapshot.ErrTooLarge
	}
	return bytes.Clone(b), nil
}
