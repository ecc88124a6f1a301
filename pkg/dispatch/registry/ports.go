package registry

import (
	"context"
	"errors"
	"time"
)

// Errors of the ports. Stores wrap them (errors.Is).
var (
	// ErrConflict: a conditional write named a version that is not the
	// stored one (another writer got there first). Re-read and retry.
	ErrConflict = errors.New("registry: version conflict")
	// ErrNotFound: the record does not exist or has expired.
	ErrNotFound = errors.New("registry: not found")
)

// Op is the operation of a change.
type Op string

// Operations.
const (
	OpPut    Op = "put"
	OpDelete Op = "delete"
)

// Actor is who makes a write and when.
type Actor struct {
	// Who identifies the principal (an IAM ARN, a CLI user, a job name).
	// Required.
	Who string
	// At is the time of the write; stores take time only from here.
	At time.Time
}

// Change is one changelog entry: every write records one.
type Change struct {
	// ID is the record changed.
	ID ID `json:"id"`
	// Version is the record's version after the change (for a delete, the
	// deleted version plus one). (ID, Version) identifies the change, so
	// that recording it is idempotent.
	Version int64 `json:"version"`
	// Who made the change and when.
	Who string    `json:"who"`
	At  time.Time `json:"at"`
	// Op is put or delete.
	Op Op `json:"op"`
	// Before is the record before (nil if it did not exist or had
	// expired); After the record after (nil for a delete).
	Before *Item `json:"before,omitempty"`
	After  *Item `json:"after,omitempty"`
}

// Kind returns the kind of the changed record.
func (c *Change) Kind() Kind { return c.ID.Kind() }

// Reader reads the registry. Implementations must be safe for concurrent
// use, honour ctx, and treat records whose ExpiresAt is at or before now
// as absent. Returned values are the caller's: later writes do not change
// them and the caller may modify them.
type Reader interface {
	// Load returns every live record of the given kinds (all kinds if none
	// are given), each slice sorted by key. This is the cold load and a
	// cache type's refresh.
	Load(ctx context.Context, now time.Time, kinds ...Kind) (Data, error)
	// Get returns the live record id, or ErrNotFound.
	Get(ctx context.Context, id ID, now time.Time) (Item, error)
	// History returns id's changelog, newest first, at most limit entries
	// (all if limit <= 0). The changelog of a deleted or expired record
	// stays readable.
	History(ctx context.Context, id ID, limit int) ([]Change, error)
}

// Writer writes the registry. Each method is one conditional write on the
// record's version (one DynamoDB call) followed by an idempotent changelog
// append. Implementations must be safe for concurrent use: of concurrent
// writers naming the same version, exactly one succeeds and the others
// get ErrConflict.
type Writer interface {
	// Put validates it with Validate (refusing with an error matching
	// ErrInvalid), then stores it if the stored version equals
	// it.Version(), where an absent or expired record has version 0 for
	// this comparison; otherwise ErrConflict. The record is stored with
	// version = previous stored version + 1 (versions never go back, even
	// across a delete or expiry) and the changelog entry is returned.
	Put(ctx context.Context, by Actor, it Item) (Change, error)
	// Delete removes id if its live stored version equals version; an
	// absent or expired record gives ErrNotFound, another version
	// ErrConflict.
	Delete(ctx context.Context, by Actor, id ID, version int64) (Change, error)
}

// Store is a registry store: both ports.
type Store interface {
	Reader
	Writer
}

// Revoke returns a copy of the grant a, revoked at: Allow false,
// RevokedAt at, and, if retain > 0 and the record would otherwise live
// longer, ExpiresAt at+retain so that revocation records do not
// accumulate. retain must exceed the largest ACL stale TTL in use, so that
// every cache sees the revocation before the record goes away.
func Revoke(a ACL, at time.Time, retain time.Duration) ACL {
	a.Allow = false
	a.RevokedAt = at.UTC()
	if retain > 0 {
		end := at.Add(retain)
		if e := end.Unix() + 1; a.ExpiresAt == 0 || a.ExpiresAt > e {
			a.ExpiresAt = e
		}
	}
	return a
}
