// Package registry is the Snavio registry model: routes, ACLs, HMAC keys,
// bans and per-source quotas; the one validation function that
// registration, snapshot generation and the cold load share (Validate);
// the changelog; and the ports through which stores are read (Reader) and
// written (Writer).
//
// Every record carries a Version for optimistic concurrency: a write names
// the version it replaces (0 for a record that does not exist) and the
// store refuses it with ErrConflict if another writer got there first, so
// a DynamoDB store can do each write as one conditional call. Every record
// with a lifetime carries ExpiresAt (epoch seconds, 0 for none) and every
// reader treats a record whose ExpiresAt is at or before now as absent,
// even if the store has not deleted it yet.
//
// docs/registry/model.md describes the model and docs/registry/validation.md
// every validation rule.
package registry

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// Kind names a record type of the registry.
type Kind string

// Record kinds. Each is also a cache type of the dispatcher except Quota,
// which only the slow stage reads.
const (
	KindRoute Kind = "route"
	KindACL   Kind = "acl"
	KindKey   Kind = "key"
	KindBan   Kind = "ban"
	KindQuota Kind = "quota"
)

// Kinds lists every kind, in a fixed order.
func Kinds() []Kind { return []Kind{KindRoute, KindACL, KindKey, KindBan, KindQuota} }

// Valid reports whether k is one of the record kinds.
func (k Kind) Valid() bool {
	switch k {
	case KindRoute, KindACL, KindKey, KindBan, KindQuota:
		return true
	}
	return false
}

// DedupeMode is a route's deduplication mode.
type DedupeMode string

// Dedupe modes. The empty mode means DedupeNone.
const (
	DedupeNone   DedupeMode = "none"
	DedupeStrict DedupeMode = "strict"
)

// Profile is a sensitivity profile: it selects the ACL cache TTLs.
type Profile string

// Sensitivity profiles and their default ACL TTLs (fresh, stale):
// critical 2 s / 4 s, moderate 10 s / 20 s, low 30 s / 90 s. The empty
// profile means ProfileModerate.
const (
	ProfileCritical Profile = "critical"
	ProfileModerate Profile = "moderate"
	ProfileLow      Profile = "low"
)

// Profiles lists the sensitivity profiles, most sensitive first.
func Profiles() []Profile { return []Profile{ProfileCritical, ProfileModerate, ProfileLow} }

// Valid reports whether p is a known profile or empty.
func (p Profile) Valid() bool {
	switch p {
	case "", ProfileCritical, ProfileModerate, ProfileLow:
		return true
	}
	return false
}

// OrDefault returns p, or ProfileModerate if p is empty.
func (p Profile) OrDefault() Profile {
	if p == "" {
		return ProfileModerate
	}
	return p
}

// DefaultExpectedDrainSeconds is a route's expected_drain_seconds when it
// sets none.
const DefaultExpectedDrainSeconds = 300

// Fairness defaults applied by the dispatcher when a route leaves the field
// zero (flow control owns the defaults; they are repeated here for the
// documentation of the model).
const (
	DefaultDominantShare  = 0.8
	DefaultCompetingShare = 0.1
	DefaultFairnessWindow = 30 * time.Second
)

// RouteKey identifies a route: (target, command).
type RouteKey struct {
	Target  string
	Command string
}

// ACLKey identifies an ACL entry: (source, target, command).
type ACLKey struct {
	Source  string
	Target  string
	Command string
}

// RateLimit is a rate limit: at most Max commands per Interval. A zero Max
// means no limit.
type RateLimit struct {
	// Max is the number of commands allowed per interval; 0 = unlimited.
	Max int64 `json:"max"`
	// IntervalSeconds is the window length; required when Max > 0.
	IntervalSeconds int64 `json:"interval_seconds"`
	// Burst is how many units one dispatcher instance may take per
	// prefetch; 0 = the dispatcher's default (max(1, Max/10)); at most Max.
	Burst int64 `json:"burst,omitempty"`
	// CooldownSeconds extends a local denylist past an exhausted window.
	CooldownSeconds int64 `json:"cooldown_seconds,omitempty"`
}

// Interval returns IntervalSeconds as a duration.
func (r RateLimit) Interval() time.Duration { return time.Duration(r.IntervalSeconds) * time.Second }

// Cooldown returns CooldownSeconds as a duration.
func (r RateLimit) Cooldown() time.Duration { return time.Duration(r.CooldownSeconds) * time.Second }

// Fairness are a route's warm-path fairness parameters. Zero fields take
// the dispatcher's defaults (dominant share 0.8, competing share 0.1,
// window 30 s, ...).
type Fairness struct {
	// Disabled turns warm-path fairness off for the route.
	Disabled bool `json:"disabled,omitempty"`
	// DominantShare, in (0, 1]: a source above it may be banned.
	DominantShare float64 `json:"dominant_share,omitempty"`
	// CompetingShare, in (0, 1): the others' share needed for a ban.
	CompetingShare float64 `json:"competing_share,omitempty"`
	// CompetingSources: this many other sources also allow a ban.
	CompetingSources int `json:"competing_sources,omitempty"`
	// WindowSeconds is the usage window.
	WindowSeconds int64 `json:"window_seconds,omitempty"`
	// BanSeconds is how long a dominant source leaves the warm path.
	BanSeconds int64 `json:"ban_seconds,omitempty"`
}

// Route is a registered route: commands (target, command) go to QueueARN.
type Route struct {
	Target  string `json:"target"`
	Command string `json:"command"`
	// QueueARN is the SQS Standard queue commands are delivered to.
	QueueARN string `json:"queue_arn"`
	// DLQARN is the queue's dead-letter queue. Required.
	DLQARN string `json:"dlq_arn"`
	// DedupeMode is none (default) or strict.
	DedupeMode DedupeMode `json:"dedupe_mode,omitempty"`
	// ExpectedDrainSeconds is the typical consumption time; 0 means
	// DefaultExpectedDrainSeconds.
	ExpectedDrainSeconds int64 `json:"expected_drain_seconds,omitempty"`
	// Profile is the command's sensitivity profile.
	Profile Profile `json:"sensitivity_profile,omitempty"`
	// RateLimit limits the route as a whole; zero Max means none.
	RateLimit RateLimit `json:"rate_limit,omitzero"`
	// Fairness overrides the dispatcher's fairness defaults.
	Fairness Fairness `json:"fairness,omitzero"`
	// PrefetchLeases overrides how many instances may prefetch tokens per
	// 1-second slot; 0 means the dispatcher's default (5).
	PrefetchLeases int `json:"prefetch_leases,omitempty"`
	// Metadata is free-form, for the target team; the dispatcher ignores
	// it.
	Metadata map[string]string `json:"metadata,omitempty"`
	// ExpiresAt ends an ephemeral route (epoch seconds); 0 = permanent.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Version is the stored version; 0 for a route not stored yet.
	Version int64 `json:"version"`
}

// Key returns the route's key.
func (r *Route) Key() RouteKey { return RouteKey{Target: r.Target, Command: r.Command} }

// Strict reports whether the route uses strict deduplication.
func (r *Route) Strict() bool { return r.DedupeMode == DedupeStrict }

// DrainSeconds returns ExpectedDrainSeconds or its default.
func (r *Route) DrainSeconds() int64 {
	if r.ExpectedDrainSeconds == 0 {
		return DefaultExpectedDrainSeconds
	}
	return r.ExpectedDrainSeconds
}

// ACL grants (or, once revoked, no longer grants) source the right to send
// command to target. Deny is the default: a triple without an entry is
// denied.
type ACL struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Command string `json:"command"`
	// Allow is true for a grant. A revoked grant stays as a record with
	// Allow false and RevokedAt set, so that caches learn when it was
	// revoked (the revocation audit) until the record expires.
	Allow bool `json:"allow"`
	// RevokedAt is when the grant was revoked; set if and only if Allow is
	// false.
	RevokedAt time.Time `json:"revoked_at,omitzero"`
	// Profile selects the cache TTLs; registration copies the route's
	// profile when the caller sets none. Empty means moderate.
	Profile Profile `json:"sensitivity_profile,omitempty"`
	// FreshTTLSeconds and StaleTTLSeconds override the profile's TTLs when
	// both are set (0 < fresh < stale).
	FreshTTLSeconds int64 `json:"fresh_ttl_seconds,omitempty"`
	StaleTTLSeconds int64 `json:"stale_ttl_seconds,omitempty"`
	// ExpiresAt ends the record (epoch seconds); 0 = permanent.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Version is the stored version; 0 for an entry not stored yet.
	Version int64 `json:"version"`
}

// Key returns the ACL's key.
func (a *ACL) Key() ACLKey { return ACLKey{Source: a.Source, Target: a.Target, Command: a.Command} }

// KeyVersion is one version of a service's HMAC secret.
type KeyVersion struct {
	// ID is hmac-v<N>; N increases with ActivatedAt.
	ID string `json:"id"`
	// Secret is the HMAC secret (at least 32 bytes); base64 in JSON.
	Secret []byte `json:"secret"`
	// ActivatedAt is when the version becomes current.
	ActivatedAt time.Time `json:"activated_at"`
	// NotAfter is a hard end of acceptance (revocation); zero = none.
	NotAfter time.Time `json:"not_after,omitzero"`
}

// ServiceKey is the HMAC keyset of one producing service (bus source).
type ServiceKey struct {
	// Source is the bus source <tenant-id>/<service>.
	Source string `json:"source"`
	// Versions are the service's secret versions.
	Versions []KeyVersion `json:"versions"`
	// ExpiresAt ends the record (epoch seconds); 0 = permanent.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Version is the stored version.
	Version int64 `json:"version"`
}

// BanKind is the kind of a ban.
type BanKind string

// Ban kinds.
const (
	// BanGlobal bars a source from the warm path until ExpiresAt
	// (required).
	BanGlobal BanKind = "global"
	// BanColdOnly puts a source on the cold-only denylist: every command
	// takes the slow stage. ExpiresAt is optional.
	BanColdOnly BanKind = "cold_only"
)

// Ban restricts a source.
type Ban struct {
	Source string  `json:"source"`
	Kind   BanKind `json:"kind"`
	// Reason says why, for operators.
	Reason string `json:"reason,omitempty"`
	// ExpiresAt ends the ban (epoch seconds); required for global bans.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Version is the stored version.
	Version int64 `json:"version"`
}

// Quota is a per-source quota on (source, target, command), evaluated on
// the slow stage for sources under a warm-path ban.
type Quota struct {
	Source  string    `json:"source"`
	Target  string    `json:"target"`
	Command string    `json:"command"`
	Limit   RateLimit `json:"limit"`
	// ExpiresAt ends the quota (epoch seconds); 0 = permanent.
	ExpiresAt int64 `json:"expires_at,omitempty"`
	// Version is the stored version.
	Version int64 `json:"version"`
}

// Live reports whether a record with expiresAt (epoch seconds, 0 = never)
// is alive at now: expiry is honoured by every reader even before the
// store deletes the record.
func Live(expiresAt int64, now time.Time) bool {
	return expiresAt == 0 || now.Unix() < expiresAt
}

// ID identifies one record across kinds: its kind and key parts joined by
// single spaces (no key part may contain a space). Build it with the
// ...ID functions.
type ID string

// RouteID returns the ID of route (target, command).
func RouteID(target, command string) ID { return ID(string(KindRoute) + " " + target + " " + command) }

// ACLID returns the ID of ACL (source, target, command).
func ACLID(source, target, command string) ID {
	return ID(string(KindACL) + " " + source + " " + target + " " + command)
}

// KeyID returns the ID of the keyset of source.
func KeyID(source string) ID { return ID(string(KindKey) + " " + source) }

// BanID returns the ID of source's ban of kind.
func BanID(source string, kind BanKind) ID {
	return ID(string(KindBan) + " " + source + " " + string(kind))
}

// QuotaID returns the ID of the quota on (source, target, command).
func QuotaID(source, target, command string) ID {
	return ID(string(KindQuota) + " " + source + " " + target + " " + command)
}

// Kind returns the kind part of id.
func (id ID) Kind() Kind {
	k, _, _ := strings.Cut(string(id), " ")
	return Kind(k)
}

// Item is one record of any kind: exactly one field is set.
type Item struct {
	Route *Route      `json:"route,omitempty"`
	ACL   *ACL        `json:"acl,omitempty"`
	Key   *ServiceKey `json:"key,omitempty"`
	Ban   *Ban        `json:"ban,omitempty"`
	Quota *Quota      `json:"quota,omitempty"`
}

// Kind returns the kind of the set field, or "" if none or several are
// set.
func (it Item) Kind() Kind {
	var k Kind
	n := 0
	if it.Route != nil {
		k, n = KindRoute, n+1
	}
	if it.ACL != nil {
		k, n = KindACL, n+1
	}
	if it.Key != nil {
		k, n = KindKey, n+1
	}
	if it.Ban != nil {
		k, n = KindBan, n+1
	}
	if it.Quota != nil {
		k, n = KindQuota, n+1
	}
	if n != 1 {
		return ""
	}
	return k
}

// ID returns the record's ID, or "" if Kind is "".
func (it Item) ID() ID {
	switch it.Kind() {
	case KindRoute:
		return RouteID(it.Route.Target, it.Route.Command)
	case KindACL:
		return ACLID(it.ACL.Source, it.ACL.Target, it.ACL.Command)
	case KindKey:
		return KeyID(it.Key.Source)
	case KindBan:
		return BanID(it.Ban.Source, it.Ban.Kind)
	case KindQuota:
		return QuotaID(it.Quota.Source, it.Quota.Target, it.Quota.Command)
	}
	return ""
}

// Version returns the record's version, 0 if Kind is "".
func (it Item) Version() int64 {
	switch it.Kind() {
	case KindRoute:
		return it.Route.Version
	case KindACL:
		return it.ACL.Version
	case KindKey:
		return it.Key.Version
	case KindBan:
		return it.Ban.Version
	case KindQuota:
		return it.Quota.Version
	}
	return 0
}

// ExpiresAt returns the record's expires_at, 0 if none or Kind is "".
func (it Item) ExpiresAt() int64 {
	switch it.Kind() {
	case KindRoute:
		return it.Route.ExpiresAt
	case KindACL:
		return it.ACL.ExpiresAt
	case KindKey:
		return it.Key.ExpiresAt
	case KindBan:
		return it.Ban.ExpiresAt
	case KindQuota:
		return it.Quota.ExpiresAt
	}
	return 0
}

// WithVersion returns a deep-enough copy of it (the record struct is
// copied; maps and slices are shared) with its version set to v.
func (it Item) WithVersion(v int64) Item {
	switch it.Kind() {
	case KindRoute:
		r := *it.Route
		r.Version = v
		return Item{Route: &r}
	case KindACL:
		a := *it.ACL
		a.Version = v
		return Item{ACL: &a}
	case KindKey:
		k := *it.Key
		k.Version = v
		return Item{Key: &k}
	case KindBan:
		b := *it.Ban
		b.Version = v
		return Item{Ban: &b}
	case KindQuota:
		q := *it.Quota
		q.Version = v
		return Item{Quota: &q}
	}
	return it
}

// Data is a set of records, as loaded by a Reader, held in a snapshot or
// validated by Validate.
type Data struct {
	Routes []Route      `json:"routes,omitempty"`
	ACLs   []ACL        `json:"acls,omitempty"`
	Keys   []ServiceKey `json:"keys,omitempty"`
	Bans   []Ban        `json:"bans,omitempty"`
	Quotas []Quota      `json:"quotas,omitempty"`
}

// Add appends it to the slice of its kind; an Item without exactly one
// record is ignored.
func (d *Data) Add(it Item) {
	switch it.Kind() {
	case KindRoute:
		d.Routes = append(d.Routes, *it.Route)
	case KindACL:
		d.ACLs = append(d.ACLs, *it.ACL)
	case KindKey:
		d.Keys = append(d.Keys, *it.Key)
	case KindBan:
		d.Bans = append(d.Bans, *it.Ban)
	case KindQuota:
		d.Quotas = append(d.Quotas, *it.Quota)
	}
}

// Len returns the number of records of all kinds.
func (d *Data) Len() int {
	return len(d.Routes) + len(d.ACLs) + len(d.Keys) + len(d.Bans) + len(d.Quotas)
}

// Clone returns a deep copy of it: no map, slice or pointer is shared.
func (it Item) Clone() Item {
	switch it.Kind() {
	case KindRoute:
		r := *it.Route
		r.Metadata = maps.Clone(r.Metadata)
		return Item{Route: &r}
	case KindACL:
		a := *it.ACL
		return Item{ACL: &a}
	case KindKey:
		k := *it.Key
		k.Versions = slices.Clone(k.Versions)
		for i := range k.Versions {
			k.Versions[i].Secret = slices.Clone(k.Versions[i].Secret)
		}
		return Item{Key: &k}
	case KindBan:
		b := *it.Ban
		return Item{Ban: &b}
	case KindQuota:
		q := *it.Quota
		return Item{Quota: &q}
	}
	return Item{}
}
