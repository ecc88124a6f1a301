package flow

import (
	"context"
	"errors"
	"time"
)

// The ports of flow control. Each is shaped so that DynamoDB can do every
// method in one conditional call, and every record with a lifetime carries
// an expiry that every condition checks against the caller's now, because
// DynamoDB's TTL deletion lags by up to days. Implementations must be safe
// for concurrent use; the contract suites in pkg/dispatch/dispatchtest
// (TestCounters, TestLeases, TestDedupe, TestBanLedger, TestRollups) define
// the behaviour precisely.

// Counters are fixed-window counters: the authoritative rate-limit budget.
type Counters interface {
	// Take adds up to n units to the counter key without letting it exceed
	// limit and returns how many units it added (0..n). A counter whose
	// expiry is at or before now counts as zero, deleted or not. expiresAt
	// is stored when the counter is created or revived.
	// DynamoDB: UpdateItem ADD with the condition count + n <= limit OR
	// expires_at <= now (an adapter may halve n on a failed condition).
	Take(ctx context.Context, key string, n, limit int64, expiresAt, now time.Time) (granted int64, err error)
}

// Leases bound how many holders act at once for a key (the token prefetch
// coordination of the spec: at most N instances per route per 1-second
// slot).
type Leases interface {
	// Acquire makes holder one of at most max holders of key, which expires
	// at expiresAt. It returns true if holder holds the key after the call
	// (acquiring again as the same holder is idempotent) and false if max
	// other holders already hold it. An expired key has no holders.
	// DynamoDB: UpdateItem ADD holders :h with the condition
	// size(holders) < :max OR contains(holders, :h) OR expires_at <= :now.
	Acquire(ctx context.Context, key, holder string, max int, expiresAt, now time.Time) (bool, error)
}

// ClaimState is the state of a dedupe record.
type ClaimState string

// Dedupe record states (the idempotency-record pattern).
const (
	// ClaimInProgress: an instance is delivering the command. The record
	// has a short expiry of its own, so a crash between claim and delivery
	// cannot swallow the command: after the expiry a retry claims it.
	ClaimInProgress ClaimState = "in_progress"
	// ClaimDelivered: the command was delivered; the record lives for the
	// dedupe TTL (default 300 s) and makes every copy a duplicate.
	ClaimDelivered ClaimState = "delivered"
)

// DedupeRecord is one command id's write-once record. It keeps a hash of the
// payload, never the payload.
type DedupeRecord struct {
	// Tenant scopes the record: the tenant of the command's source. One
	// delivery per id holds within a tenant, so a tenant that learns
	// another's command id cannot suppress that command. Required.
	Tenant      string
	ID          string
	PayloadHash string
	State       ClaimState
	// Owner identifies the claim (instance and attempt); only the owner
	// completes or releases it.
	Owner     string
	ExpiresAt time.Time
}

// Key is the record's key in a store: ClaimKey(Tenant, ID).
func (r DedupeRecord) Key() string { return ClaimKey(r.Tenant, r.ID) }

// ClaimKey is the store key of command id's claim in tenant: tenant "/" id.
// A tenant id never contains "/", so two tenants' keys never collide.
// Stores written before claims were scoped by tenant hold bare ids.
func ClaimKey(tenant, id string) string { return tenant + "/" + id }

// ErrNotOwner is returned by Complete and Release when the record is missing,
// expired, not in progress, or owned by someone else.
var ErrNotOwner = errors.New("dedupe record is not held by this owner")

// ErrClaimInProgress is the slow stage's answer for a strict command whose
// id another attempt has claimed and not yet delivered: that attempt may
// still deliver it, or may have died (a crash between claim and
// delivery). Either way the command is not a duplicate yet: retry it after
// the claim's in-progress expiry, when it is either delivered (then a
// duplicate) or free to take over. Dropping it here would lose a command
// whose first attempt crashed.
var ErrClaimInProgress = errors.New("command id is claimed by an attempt still in progress")

// DedupeClaims store write-once records for strict-mode command ids.
type DedupeClaims interface {
	// Claim stores rec (which must be in progress, with a tenant) unless a
	// live record under rec.Key() exists: records of the same id in other
	// tenants do not count. It returns claimed=true on success; otherwise
	// the live record is returned as existing. A record expired at now is
	// not live, deleted or not. DynamoDB: PutItem keyed by rec.Key() with
	// attribute_not_exists(id) OR expires_at <= :now,
	// ReturnValuesOnConditionCheckFailure=ALL_OLD.
	Claim(ctx context.Context, rec DedupeRecord, now time.Time) (claimed bool, existing DedupeRecord, err error)
	// Complete turns owner's live in-progress record under key (the
	// claim's DedupeRecord.Key) into a delivered record expiring at
	// expiresAt. ErrNotOwner otherwise.
	Complete(ctx context.Context, key, owner string, expiresAt, now time.Time) error
	// Release deletes owner's live in-progress record under key, so that a
	// retry of an undelivered command can claim it. ErrNotOwner otherwise.
	Release(ctx context.Context, key, owner string, now time.Time) error
}

// BanKey names a (source, target, command) triplet.
type BanKey struct {
	Source, Target, Command string
}

// BanLedger counts warm-path bans for the durable escalation to a global
// ban: N bans within M minutes.
type BanLedger interface {
	// RecordBan records a warm-path ban of key at `at` and returns how many
	// bans of key happened in (at-window, at], this one included. Entries
	// older than window may be forgotten.
	RecordBan(ctx context.Context, key BanKey, at time.Time, window time.Duration) (count int, err error)
}

// Ban excludes a source from the warm path until Until.
type Ban struct {
	Source string
	Until  time.Time
	// Reason says why: "repeat-warm-path-bans", "abuse-detected" or
	// "repeat-invalid".
	Reason string
}

// GlobalBans is the durable list of sources banned from the warm path. It
// is written by the slow path and the fairness auditor and read into a
// cache: never queried on the hot path.
type GlobalBans interface {
	// PutBan stores b, extending (never shortening) an existing ban of the
	// same source.
	PutBan(ctx context.Context, b Ban) error
	// Bans returns the bans live at now.
	Bans(ctx context.Context, now time.Time) ([]Ban, error)
}

// Rollup is one instance's dispatch count for a source on a route in one
// rollup window.
type Rollup struct {
	Instance    string
	WindowStart time.Time
	Source      string
	Target      string
	Command     string
	Dispatches  int64
}

// Rollups is the aggregation store of per-source dispatch statistics that
// instances push every 60 s and the fairness auditor reads.
type Rollups interface {
	// PutRollups stores rs (idempotently per instance, window, source,
	// target and command), each expiring at expiresAt.
	PutRollups(ctx context.Context, rs []Rollup, expiresAt time.Time) error
	// ReadRollups returns the live rollups whose window starts at or after
	// since.
	ReadRollups(ctx context.Context, since, now time.Time) ([]Rollup, error)
}

// Store is everything flow control needs from storage.
type Store interface {
	Counters
	Leases
	DedupeClaims
	BanLedger
	GlobalBans
	Rollups
}
