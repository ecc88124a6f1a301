package embedded

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Snapshots is the store's snapshot.Store: immutable versions of each
// document path and an atomically promoted latest pointer, all in the one
// file. Get it from Store.Snapshots. A reader's transaction sees the
// pointer and the body of one committed state, so it never sees a mix.
type Snapshots struct{ s *Store }

var _ snapshot.Store = (*Snapshots)(nil)

// Snapshots returns the snapshot view of the store.
func (s *Store) Snapshots() *Snapshots { return &Snapshots{s: s} }

// Snapshot limits.
const (
	// MaxSnapshotBytes bounds one version's body.
	MaxSnapshotBytes = 256 << 20
	// maxSnapshotName bounds a path or a version name.
	maxSnapshotName = 1024
)

// Snapshot layout: bucket "snapshots" holds one bucket per path, with key
// "latest" (the promoted version), bucket "bodies" (version -> body) and
// bucket "order" (u64 put sequence -> version).
var (
	bSnapshots = []byte("snapshots")
	bBodies    = []byte("bodies")
	bOrder     = []byte("order")
	kLatest    = []byte("latest")
)

func checkSnapshotNames(op, path, version string) error {
	if path == "" || len(path) > maxSnapshotName {
		return fmt.Errorf("embedded snapshots: %s: path %.40q must be 1 to %d bytes", op, path, maxSnapshotName)
	}
	if version == "" || len(version) > maxSnapshotName {
		return fmt.Errorf("embedded snapshots: %s %s: version %.40q must be 1 to %d bytes", op, path, version, maxSnapshotName)
	}
	return nil
}

func snapshotPath(tx *bolt.Tx, path string) *bolt.Bucket {
	return tx.Bucket(bSnapshots).Bucket([]byte(path))
}

// Put implements snapshot.Store.
func (n *Snapshots) Put(ctx context.Context, path, version string, body []byte) error {
	if err := checkSnapshotNames("put", path, version); err != nil {
		return err
	}
	if len(body) > MaxSnapshotBytes {
		return fmt.Errorf("embedded snapshots: put %s %s: %d bytes, over the limit of %d: %w", path, version, len(body), MaxSnapshotBytes, snapshot.ErrTooLarge)
	}
	body = bytes.Clone(body)
	var failure error
	err := n.s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		pb, err := tx.Bucket(bSnapshots).CreateBucketIfNotExists([]byte(path))
		if err != nil {
			return err
		}
		bodies, err := pb.CreateBucketIfNotExists(bBodies)
		if err != nil {
			return err
		}
		order, err := pb.CreateBucketIfNotExists(bOrder)
		if err != nil {
			return err
		}
		if old := bodies.Get([]byte(version)); old != nil {
			if !bytes.Equal(old, body) {
				failure = fmt.Errorf("embedded snapshots: %s version %s: %w: versions are immutable, name a new one", path, version, snapshot.ErrExists)
			}
			return nil
		}
		seq, err := order.NextSequence()
		if err != nil {
			return err
		}
		if err := order.Put(u64(seq), []byte(version)); err != nil {
			return err
		}
		// bbolt refuses a nil value; an empty body is stored as empty.
		return bodies.Put([]byte(version), append([]byte{}, body...))
	})
	if err != nil {
		return err
	}
	return failure
}

// Promote implements snapshot.Store.
func (n *Snapshots) Promote(ctx context.Context, path, version string) error {
	if err := checkSnapshotNames("promote", path, version); err != nil {
		return err
	}
	var failure error
	err := n.s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		pb := snapshotPath(tx, path)
		if pb == nil || pb.Bucket(bBodies).Get([]byte(version)) == nil {
			failure = fmt.Errorf("embedded snapshots: promote %s version %s: put it first: %w", path, version, snapshot.ErrNotFound)
			return nil
		}
		return pb.Put(kLatest, []byte(version))
	})
	if err != nil {
		return err
	}
	return failure
}

func readBody(b []byte, maxBytes int64) ([]byte, error) {
	if int64(len(b)) > maxBytes {
		return nil, fmt.Errorf("%d bytes, over the caller's limit of %d: %w", len(b), maxBytes, snapshot.ErrTooLarge)
	}
	return bytes.Clone(b), nil
}

// Latest implements snapshot.Store.
func (n *Snapshots) Latest(ctx context.Context, path string, maxBytes int64) (string, []byte, error) {
	var version string
	var body []byte
	var failure error
	err := n.s.view(ctx, func(tx *bolt.Tx) error {
		pb := snapshotPath(tx, path)
		var v []byte
		if pb != nil {
			v = pb.Get(kLatest)
		}
		if v == nil {
			failure = fmt.Errorf("embedded snapshots: %s has no latest version: %w", path, snapshot.ErrNotFound)
			return nil
		}
		version = string(v)
		var err error
		if body, err = readBody(pb.Bucket(bBodies).Get(v), maxBytes); err != nil {
			failure = fmt.Errorf("embedded snapshots: %s version %s: %w", path, version, err)
		}
		return nil
	})
	if err != nil {
		return "", nil, err
	}
	if failure != nil {
		return "", nil, failure
	}
	return version, body, nil
}

// Get implements snapshot.Store.
func (n *Snapshots) Get(ctx context.Context, path, version string, maxBytes int64) ([]byte, error) {
	var body []byte
	var failure error
	err := n.s.view(ctx, func(tx *bolt.Tx) error {
		pb := snapshotPath(tx, path)
		var b []byte
		if pb != nil {
			b = pb.Bucket(bBodies).Get([]byte(version))
		}
		if b == nil {
			failure = fmt.Errorf("embedded snapshots: %s version %s: %w", path, version, snapshot.ErrNotFound)
			return nil
		}
		var err error
		if body, err = readBody(b, maxBytes); err != nil {
			failure = fmt.Errorf("embedded snapshots: %s version %s: %w", path, version, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return body, failure
}

// Versions implements snapshot.Store.
func (n *Snapshots) Versions(ctx context.Context, path string) ([]string, error) {
	var out []string
	err := n.s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		pb := snapshotPath(tx, path)
		if pb == nil {
			return nil
		}
		return pb.Bucket(bOrder).ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return storecodec.Corrupt("snapshot order", path, fmt.Errorf("key %x", k))
			}
			_ = binary.BigEndian.Uint64(k)
			out = append(out, string(v))
			return nil
		})
	})
	return out, err
}
