// Package snapshot writes and reads the registry snapshots that preload
// the dispatcher's caches at cold start (docs/registry/snapshots.md).
//
// There are three documents, each at its own configurable path: acl (the
// ACL entries), hmac (the HMAC keysets) and full (routes, ACLs, keysets,
// bans and quotas). Each carries version_id, generated_at and ttl_policy.
//
// A Generator reads the registry, validates it with registry.Validate (the
// one validation of registration and the cold load), refuses to publish
// documents above the size cap (emitting snavio.snapshot.too_large), signs
// each document and publishes all three in two phases over a Store: first
// every versioned object, then the latest pointers, so that no reader ever
// sees a partial or unsigned document.
//
// A Loader fetches the latest full document and never panics: a
// missing, oversized, malformed, truncated, unsigned, wrongly signed,
// expired or invalid snapshot is refused with a *LoadError, and ColdStart
// then falls back to a cold load from the registry, counting
// Snavio.Cache.SnapshotLoadFailure.
//
// The file format, what exactly is signed, and the failure handling are in
// docs/registry/snapshots.md.
package snapshot

import (
	"context"
	"errors"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// Kind is a snapshot document kind.
type Kind string

// Document kinds.
const (
	KindACL  Kind = "acl"
	KindHMAC Kind = "hmac"
	KindFull Kind = "full"
)

// Format is the format marker of every document.
const Format = "snavio.registry.snapshot/v1"

// Paths are the documents' well-known paths in the snapshot store: each
// names the "latest" object; versions live beside it (see Store).
type Paths struct {
	ACL  string
	HMAC string
	Full string
}

// DefaultPaths are the spec's default paths.
func DefaultPaths() Paths {
	return Paths{
		ACL:  "/snavio/registry/acl/latest.json",
		HMAC: "/snavio/registry/hmac/latest.json",
		Full: "/snavio/registry/snapshot/latest.json",
	}
}

func (p Paths) withDefaults() Paths {
	d := DefaultPaths()
	if p.ACL == "" {
		p.ACL = d.ACL
	}
	if p.HMAC == "" {
		p.HMAC = d.HMAC
	}
	if p.Full == "" {
		p.Full = d.Full
	}
	return p
}

// Of returns the path of kind k, "" for an unknown kind.
func (p Paths) Of(k Kind) string {
	p = p.withDefaults()
	switch k {
	case KindACL:
		return p.ACL
	case KindHMAC:
		return p.HMAC
	case KindFull:
		return p.Full
	}
	return ""
}

// TTL is a pair of cache lifetimes in seconds, as written in ttl_policy.
type TTL struct {
	FreshSeconds float64 `json:"fresh_seconds"`
	StaleSeconds float64 `json:"stale_seconds"`
}

// TTLPolicy is the ttl_policy section: the cache TTLs in force when the
// snapshot was generated, for consistency checks and TTL tuning. Loaders
// do not take TTLs from it: each dispatcher uses its own configuration.
type TTLPolicy struct {
	Routing  TTL                      `json:"routing"`
	HMAC     TTL                      `json:"hmac"`
	Bans     TTL                      `json:"bans"`
	Profiles map[registry.Profile]TTL `json:"acl_profiles"`
}

// Document is one snapshot document: the registry data of its kind and
// its metadata.
type Document struct {
	// Format is always Format.
	Format string `json:"format"`
	// Kind says which records the document holds: acl (ACLs), hmac
	// (keysets) or full (all).
	Kind Kind `json:"kind"`
	// VersionID names this version; it is also the versioned object's
	// name in the store.
	VersionID string `json:"version_id"`
	// GeneratedAt is when the registry was read.
	GeneratedAt time.Time `json:"generated_at"`
	// TTLPolicy is the generator's TTL configuration.
	TTLPolicy TTLPolicy `json:"ttl_policy"`
	// Data holds the records, inline (routes, acls, keys, bans, quotas).
	registry.Data `json:",inline"`
}

// Errors of the snapshot store port. Stores wrap them (errors.Is).
var (
	// ErrNotFound: no such version, or no latest version yet.
	ErrNotFound = errors.New("snapshot: not found")
	// ErrExists: a version already exists with a different body.
	ErrExists = errors.New("snapshot: version exists with other content")
	// ErrTooLarge: the object is larger than the caller's limit.
	ErrTooLarge = errors.New("snapshot: object too large")
)

// Store is the snapshot store port (S3 on AWS, files locally). A document
// path names its latest object; versions are immutable objects stored
// beside it. Publication is two-phase: Put the version, then Promote it;
// a reader of Latest sees the previous complete version until Promote
// returns, and the new complete version after, never a mix.
// Implementations must be safe for concurrent use and honour ctx.
type Store interface {
	// Put stores body as version of path. Versions are immutable: putting
	// the same body again is a no-op, a different body ErrExists.
	Put(ctx context.Context, path, version string, body []byte) error
	// Promote makes version the latest of path, atomically. ErrNotFound if
	// the version was never Put.
	Promote(ctx context.Context, path, version string) error
	// Latest returns the latest version of path and its body; ErrNotFound
	// if none was promoted. A body longer than maxBytes gives ErrTooLarge
	// without reading more than maxBytes+1 bytes.
	Latest(ctx context.Context, path string, maxBytes int64) (version string, body []byte, err error)
	// Get returns the body of a version, with Latest's size limit.
	Get(ctx context.Context, path, version string, maxBytes int64) ([]byte, error)
	// Versions lists the versions of path in the order they were Put.
	Versions(ctx context.Context, path string) ([]string, error)
}
