package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/internal/atomicfile"
)

// secretFileVersion is the version of every issued-secret file.
const secretFileVersion = 1

// secretKind describes one kind of issued secret kept in a file of the
// data directory as {"version":1,"<member>":[records]}: how it is named
// in errors, how a record is checked, and the key it is looked up by.
type secretKind[T any, K comparable] struct {
	what   string // the records in errors: "ingress credentials"
	file   string // the file in errors: "an ingress credentials file"
	member string // the JSON member holding the records
	noun   string // one record in errors: "credential"
	redo   string // the fix for a lost file: "create the credentials again"
	valid  func(T) bool
	key    func(T) K
}

// decode parses and checks a file's content: every record valid, no key
// repeated.
func (k secretKind[T, K]) decode(b []byte) ([]T, error) {
	var f map[string]jsontext.Value
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("not %s (%v); restore it from a backup, or remove it and %s", k.file, err, k.redo)
	}
	var version int
	if v, ok := f["version"]; ok {
		if err := json.Unmarshal(v, &version); err != nil {
			return nil, fmt.Errorf("not %s (version: %v); restore it from a backup, or remove it and %s", k.file, err, k.redo)
		}
	}
	if version != secretFileVersion {
		return nil, fmt.Errorf("version %d, this snavio reads version %d; upgrade snavio", version, secretFileVersion)
	}
	var recs []T
	if m, ok := f[k.member]; ok {
		if err := json.Unmarshal(m, &recs); err != nil {
			return nil, fmt.Errorf("not %s (%v); restore it from a backup, or remove it and %s", k.file, err, k.redo)
		}
	}
	seen := make(map[K]bool, len(recs))
	for i, r := range recs {
		if !k.valid(r) || seen[k.key(r)] {
			return nil, fmt.Errorf("%s %d is damaged or repeated; remove it from the file", k.noun, i+1)
		}
		seen[k.key(r)] = true
	}
	return recs, nil
}

// encode returns the file's content for recs.
func (k secretKind[T, K]) encode(recs []T) ([]byte, error) {
	if recs == nil {
		recs = []T{}
	}
	b, err := json.Marshal(recs)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"version":%d,%q:%s}`+"\n", secretFileVersion, k.member, b), nil
}

// secretStore keeps the records of one kind of issued secret in one JSON
// file (mode 0600), replaced atomically on every change, indexed by key.
// It is safe for concurrent use within one process; lookups take a read
// lock.
type secretStore[T any, K comparable] struct {
	kind secretKind[T, K]
	path string

	mu    sync.RWMutex
	recs  []T
	byKey map[K]int
}

// openSecretStore opens (or starts empty) the file at path, refusing one
// that others may read or write or that is damaged.
func openSecretStore[T any, K comparable](path string, kind secretKind[T, K]) (*secretStore[T, K], error) {
	if err := ensureDir(filepath.Dir(path)); err != nil {
		return nil, err
	}
	s := &secretStore[T, K]{kind: kind, path: path}
	fi, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		s.index(nil)
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("server: %s: %w", kind.what, err)
	}
	if err := checkPrivate(path, fi); err != nil {
		return nil, fmt.Errorf("server: refusing the %s: %w", kind.what, err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("server: reading %s: %w", kind.what, err)
	}
	recs, err := kind.decode(b)
	if err != nil {
		return nil, fmt.Errorf("server: %s: %w", path, err)
	}
	s.index(recs)
	return s, nil
}

func (s *secretStore[T, K]) index(recs []T) {
	s.recs = recs
	s.byKey = make(map[K]int, len(recs))
	for i, r := range recs {
		s.byKey[s.kind.key(r)] = i
	}
}

// add stores r after the others.
func (s *secretStore[T, K]) add(r T) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	next := append(slices.Clip(s.recs), r)
	if err := s.save(next); err != nil {
		return err
	}
	s.index(next)
	return nil
}

// remove deletes the first record that match accepts and returns it; ok
// is false when none does.
func (s *secretStore[T, K]) remove(match func(T) bool) (gone T, ok bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i := slices.IndexFunc(s.recs, match)
	if i < 0 {
		return gone, false, nil
	}
	gone = s.recs[i]
	next := slices.Delete(slices.Clone(s.recs), i, i+1)
	if err := s.save(next); err != nil {
		return gone, true, err
	}
	s.index(next)
	return gone, true, nil
}

// lookup returns the record with key k.
func (s *secretStore[T, K]) lookup(k K) (T, bool) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	i, ok := s.byKey[k]
	if !ok {
		var zero T
		return zero, false
	}
	return s.recs[i], true
}

// list returns a copy of the records, oldest first.
func (s *secretStore[T, K]) list() []T {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return slices.Clone(s.recs)
}

func (s *secretStore[T, K]) save(recs []T) error {
	b, err := s.kind.encode(recs)
	if err != nil {
		return fmt.Errorf("server: encoding %s: %w", s.kind.what, err)
	}
	if err := atomicfile.Write(s.path, b, 0o600); err != nil {
		return fmt.Errorf("server: writing %s %s: %w; check the data directory is writable", s.kind.what, s.path, err)
	}
	return nil
}
