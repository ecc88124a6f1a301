package registry

import (
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
)

// ErrInvalid is matched (errors.Is) by every error Validate returns.
var ErrInvalid = errors.New("registry: invalid record")

// MaxProblems bounds how many problems one Validate error lists; the rest
// are counted.
const MaxProblems = 20

// Limits on free-form fields.
const (
	MaxMetadataEntries = 32
	MaxMetadataKeyLen  = 64
	MaxMetadataValLen  = 512
	MaxReasonLen       = 256
	MaxKeyVersions     = 16
	// MaxTTLSeconds bounds TTL overrides (one day).
	MaxTTLSeconds = 86400
	// MaxDrainSeconds bounds expected_drain_seconds (14 days, SQS's
	// longest retention).
	MaxDrainSeconds = 14 * 86400
	// MaxPrefetchLeases bounds a route's prefetch lease override.
	MaxPrefetchLeases = 1000
)

// Problem is one validation failure.
type Problem struct {
	// ID names the record ("" if it has no usable key yet).
	ID ID
	// Field is the JSON name of the offending field.
	Field string
	// Msg says what is wrong and what to do.
	Msg string
}

func (p Problem) String() string {
	if p.ID == "" {
		return p.Field + ": " + p.Msg
	}
	return string(p.ID) + ": " + p.Field + ": " + p.Msg
}

// ValidationError lists the problems Validate found. It matches ErrInvalid.
type ValidationError struct {
	// Problems are the first MaxProblems problems, in input order.
	Problems []Problem
	// More counts the problems not listed.
	More int
}

func (e *ValidationError) Error() string {
	var b strings.Builder
	b.WriteString("registry: invalid: ")
	for i, p := range e.Problems {
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(p.String())
	}
	if e.More > 0 {
		fmt.Fprintf(&b, "; and %d more", e.More)
	}
	return b.String()
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

type checker struct{ e ValidationError }

func (c *checker) add(id ID, field, msg string) {
	if len(c.e.Problems) >= MaxProblems {
		c.e.More++
		return
	}
	c.e.Problems = append(c.e.Problems, Problem{ID: id, Field: field, Msg: msg})
}

// Validate checks every record of d and that no key appears twice within
// a kind. It is the one validation of the registry: registration (every
// Writer), snapshot generation and the cold load (from a store or a
// snapshot) all call it, so that what one accepts the others accept. It
// does not look at time: expiry is the readers' business. It returns nil
// or a *ValidationError.
func Validate(d *Data) error {
	var c checker
	routes := make(map[RouteKey]struct{}, len(d.Routes))
	for i := range d.Routes {
		r := &d.Routes[i]
		c.route(r)
		if _, dup := routes[r.Key()]; dup {
			c.add(RouteID(r.Target, r.Command), "target,command", "duplicate route key: keep one route per (target, command)")
		}
		routes[r.Key()] = struct{}{}
	}
	acls := make(map[ACLKey]struct{}, len(d.ACLs))
	for i := range d.ACLs {
		a := &d.ACLs[i]
		c.acl(a)
		if _, dup := acls[a.Key()]; dup {
			c.add(ACLID(a.Source, a.Target, a.Command), "source,target,command", "duplicate ACL key: keep one entry per (source, target, command)")
		}
		acls[a.Key()] = struct{}{}
	}
	ks := make(map[string]struct{}, len(d.Keys))
	for i := range d.Keys {
		k := &d.Keys[i]
		c.key(k)
		if _, dup := ks[k.Source]; dup {
			c.add(KeyID(k.Source), "source", "duplicate keyset: keep one keyset per source")
		}
		ks[k.Source] = struct{}{}
	}
	bans := make(map[ID]struct{}, len(d.Bans))
	for i := range d.Bans {
		b := &d.Bans[i]
		c.ban(b)
		id := BanID(b.Source, b.Kind)
		if _, dup := bans[id]; dup {
			c.add(id, "source,kind", "duplicate ban: keep one ban per source and kind")
		}
		bans[id] = struct{}{}
	}
	quotas := make(map[ACLKey]struct{}, len(d.Quotas))
	for i := range d.Quotas {
		q := &d.Quotas[i]
		c.quota(q)
		k := ACLKey{q.Source, q.Target, q.Command}
		if _, dup := quotas[k]; dup {
			c.add(QuotaID(q.Source, q.Target, q.Command), "source,target,command", "duplicate quota: keep one quota per (source, target, command)")
		}
		quotas[k] = struct{}{}
	}
	if len(c.e.Problems) == 0 {
		return nil
	}
	return &c.e
}

// ValidateItem validates one record with Validate.
func ValidateItem(it Item) error {
	if it.Kind() == "" {
		return &ValidationError{Problems: []Problem{{Field: "item", Msg: "set exactly one of route, acl, key, ban, quota"}}}
	}
	var d Data
	d.Add(it)
	return Validate(&d)
}

func (c *checker) common(id ID, version, expiresAt int64) {
	if version < 0 {
		c.add(id, "version", "must not be negative")
	}
	if expiresAt < 0 {
		c.add(id, "expires_at", "must be epoch seconds or 0 for none")
	}
}

func (c *checker) target(id ID, s string) {
	if !envelope.ValidTarget(s) {
		c.add(id, "target", fmt.Sprintf("%q is not a target name: 1-64 bytes of [a-z0-9._-] starting with a letter or digit", clip(s)))
	}
}

func (c *checker) command(id ID, s string) {
	if !envelope.ValidName(s) {
		c.add(id, "command", fmt.Sprintf("%q is not a command name: 1-128 bytes of [A-Za-z0-9._:-] starting with a letter or digit", clip(s)))
	}
}

func (c *checker) source(id ID, s string) {
	if !envelope.ValidSource(s) {
		c.add(id, "source", fmt.Sprintf("%q is not a bus source: use <tenant-id>/<service>", clip(s)))
	}
}

func (c *checker) profile(id ID, p Profile) {
	if !p.Valid() {
		c.add(id, "sensitivity_profile", fmt.Sprintf("unknown profile %q: use critical, moderate or low", clip(string(p))))
	}
}

func (c *checker) rateLimit(id ID, field string, r RateLimit, required bool) {
	switch {
	case r.Max < 0 || r.Burst < 0 || r.IntervalSeconds < 0 || r.CooldownSeconds < 0:
		c.add(id, field, "max, interval_seconds, burst and cooldown_seconds must not be negative")
	case r.Max == 0 && required:
		c.add(id, field+".max", "a quota needs max > 0")
	case r.Max == 0 && (r.Burst != 0 || r.IntervalSeconds != 0 || r.CooldownSeconds != 0):
		c.add(id, field+".max", "set max > 0, or leave the whole rate limit empty for none")
	case r.Max > 0 && r.IntervalSeconds == 0:
		c.add(id, field+".interval_seconds", "a rate limit needs interval_seconds > 0")
	case r.Burst > r.Max:
		c.add(id, field+".burst", "burst must not exceed max")
	case r.IntervalSeconds > MaxTTLSeconds || r.CooldownSeconds > MaxTTLSeconds:
		c.add(id, field, "interval_seconds and cooldown_seconds must be at most one day")
	}
}

func (c *checker) route(r *Route) {
	id := RouteID(r.Target, r.Command)
	c.common(id, r.Version, r.ExpiresAt)
	c.target(id, r.Target)
	c.command(id, r.Command)
	q, qerr := ParseQueueARN(r.QueueARN)
	if qerr != nil {
		c.add(id, "queue_arn", qerr.Error())
	}
	if r.DLQARN == "" {
		c.add(id, "dlq_arn", "a dead-letter queue is required: register the queue's DLQ ARN")
	} else if d, err := ParseQueueARN(r.DLQARN); err != nil {
		c.add(id, "dlq_arn", err.Error())
	} else if qerr == nil {
		switch {
		case d == q:
			c.add(id, "dlq_arn", "the DLQ must be a different queue from queue_arn")
		case d.Partition != q.Partition || d.Region != q.Region || d.Account != q.Account:
			c.add(id, "dlq_arn", "SQS requires the DLQ in the same partition, region and account as the queue")
		}
	}
	switch r.DedupeMode {
	case "", DedupeNone, DedupeStrict:
	default:
		c.add(id, "dedupe_mode", fmt.Sprintf("unknown mode %q: use none or strict", clip(string(r.DedupeMode))))
	}
	if r.ExpectedDrainSeconds < 0 || r.ExpectedDrainSeconds > MaxDrainSeconds {
		c.add(id, "expected_drain_seconds", fmt.Sprintf("must be 1-%d, or 0 for the default %d", MaxDrainSeconds, DefaultExpectedDrainSeconds))
	}
	c.profile(id, r.Profile)
	c.rateLimit(id, "rate_limit", r.RateLimit, false)
	f := r.Fairness
	switch {
	case !finite(f.DominantShare) || f.DominantShare < 0 || f.DominantShare > 1:
		c.add(id, "fairness.dominant_share", "must be in (0, 1], or 0 for the default 0.8")
	case !finite(f.CompetingShare) || f.CompetingShare < 0 || f.CompetingShare >= 1:
		c.add(id, "fairness.competing_share", "must be in (0, 1), or 0 for the default 0.1")
	case f.CompetingSources < 0 || f.WindowSeconds < 0 || f.BanSeconds < 0:
		c.add(id, "fairness", "competing_sources, window_seconds and ban_seconds must not be negative")
	case f.WindowSeconds > MaxTTLSeconds || f.BanSeconds > MaxTTLSeconds:
		c.add(id, "fairness", "window_seconds and ban_seconds must be at most one day")
	}
	if r.PrefetchLeases < 0 || r.PrefetchLeases > MaxPrefetchLeases {
		c.add(id, "prefetch_leases", fmt.Sprintf("must be 1-%d, or 0 for the dispatcher's default", MaxPrefetchLeases))
	}
	if len(r.Metadata) > MaxMetadataEntries {
		c.add(id, "metadata", fmt.Sprintf("at most %d entries", MaxMetadataEntries))
	}
	for k, v := range r.Metadata {
		if k == "" || len(k) > MaxMetadataKeyLen || len(v) > MaxMetadataValLen {
			c.add(id, "metadata", fmt.Sprintf("keys must be 1-%d bytes and values at most %d bytes", MaxMetadataKeyLen, MaxMetadataValLen))
			break
		}
	}
}

func (c *checker) acl(a *ACL) {
	id := ACLID(a.Source, a.Target, a.Command)
	c.common(id, a.Version, a.ExpiresAt)
	c.source(id, a.Source)
	c.target(id, a.Target)
	c.command(id, a.Command)
	c.profile(id, a.Profile)
	switch {
	case a.Allow && !a.RevokedAt.IsZero():
		c.add(id, "revoked_at", "an allowed entry cannot carry revoked_at: grant again with revoked_at empty")
	case !a.Allow && a.RevokedAt.IsZero():
		c.add(id, "revoked_at", "an entry that does not allow must be a revocation with revoked_at set; deny is the default, so simply omit entries never granted")
	}
	switch {
	case a.FreshTTLSeconds == 0 && a.StaleTTLSeconds == 0:
	case a.FreshTTLSeconds <= 0 || a.StaleTTLSeconds <= a.FreshTTLSeconds || a.StaleTTLSeconds > MaxTTLSeconds:
		c.add(id, "fresh_ttl_seconds,stale_ttl_seconds", fmt.Sprintf("set both with 0 < fresh < stale <= %d, or neither to use the profile's TTLs", MaxTTLSeconds))
	}
}

func (c *checker) key(k *ServiceKey) {
	id := KeyID(k.Source)
	c.common(id, k.Version, k.ExpiresAt)
	c.source(id, k.Source)
	switch {
	case len(k.Versions) == 0:
		c.add(id, "versions", "a keyset needs at least one version")
		return
	case len(k.Versions) > MaxKeyVersions:
		c.add(id, "versions", fmt.Sprintf("at most %d versions: delete versions past their overlap", MaxKeyVersions))
		return
	}
	seen := make(map[string]struct{}, len(k.Versions))
	vs := make([]keys.Version, len(k.Versions))
	for i, v := range k.Versions {
		if _, dup := seen[v.ID]; dup {
			c.add(id, "versions", fmt.Sprintf("duplicate version id %q", clip(v.ID)))
			return
		}
		seen[v.ID] = struct{}{}
		vs[i] = keys.Version{ID: v.ID, Secret: v.Secret, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter}
	}
	if !envelope.ValidSource(k.Source) {
		return // reported; the keyring would repeat it
	}
	// The keyring's rules (version id form, secret length, numbering in
	// activation order) are the shield's; reuse them rather than restate.
	if _, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{k.Source: vs}); err != nil {
		c.add(id, "versions", err.Error())
	}
}

func (c *checker) ban(b *Ban) {
	id := BanID(b.Source, b.Kind)
	c.common(id, b.Version, b.ExpiresAt)
	c.source(id, b.Source)
	switch b.Kind {
	case BanGlobal:
		if b.ExpiresAt == 0 {
			c.add(id, "expires_at", "a global ban needs an expiry")
		}
	case BanColdOnly:
	default:
		c.add(id, "kind", fmt.Sprintf("unknown ban kind %q: use global or cold_only", clip(string(b.Kind))))
	}
	if len(b.Reason) > MaxReasonLen {
		c.add(id, "reason", fmt.Sprintf("at most %d bytes", MaxReasonLen))
	}
}

func (c *checker) quota(q *Quota) {
	id := QuotaID(q.Source, q.Target, q.Command)
	c.common(id, q.Version, q.ExpiresAt)
	c.source(id, q.Source)
	c.target(id, q.Target)
	c.command(id, q.Command)
	c.rateLimit(id, "limit", q.Limit, true)
}

func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }

// clip shortens s for an error message.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// LocalPartition and LocalAccount form the queue ARNs of `snavio dispatch
// serve`: arn:snavio:sqs:local:000000000000:<name>.
const (
	LocalPartition = "snavio"
	LocalRegion    = "local"
	LocalAccount   = "000000000000"
)

// QueueARN is a parsed SQS queue ARN.
type QueueARN struct {
	Partition, Region, Account, Name string
}

// ParseQueueARN parses an SQS Standard queue ARN,
// arn:<partition>:sqs:<region>:<12 digits>:<name>, where partition is
// aws, aws-cn or aws-us-gov with a region such as eu-west-1, or the local
// form arn:snavio:sqs:local:000000000000:<name> of `snavio dispatch serve`.
// The name is 1-80 bytes of [A-Za-z0-9_-]. FIFO queues (names ending in
// .fifo) are refused: Snavio delivers to Standard queues only.
func ParseQueueARN(s string) (QueueARN, error) {
	parts := strings.Split(s, ":")
	if len(parts) != 6 || parts[0] != "arn" || parts[2] != "sqs" {
		return QueueARN{}, fmt.Errorf("%q is not an SQS queue ARN: use arn:aws:sqs:<region>:<account>:<queue> on AWS, or arn:snavio:sqs:local:000000000000:<queue> for a local dispatch serve (snavio queue list shows them)", clip(s))
	}
	a := QueueARN{Partition: parts[1], Region: parts[3], Account: parts[4], Name: parts[5]}
	if strings.HasSuffix(a.Name, ".fifo") {
		return QueueARN{}, fmt.Errorf("%q is a FIFO queue: Snavio supports SQS Standard queues only (design for reordering, or sequence in your service)", clip(s))
	}
	if a.Partition == LocalPartition {
		if a.Region != LocalRegion || a.Account != LocalAccount {
			return QueueARN{}, fmt.Errorf("%q: a local queue ARN is arn:snavio:sqs:local:000000000000:<queue>", clip(s))
		}
	} else {
		switch a.Partition {
		case "aws", "aws-cn", "aws-us-gov":
		default:
			return QueueARN{}, fmt.Errorf("%q: unknown partition %q: use aws, aws-cn or aws-us-gov", clip(s), clip(a.Partition))
		}
		if !validRegion(a.Region) {
			return QueueARN{}, fmt.Errorf("%q: %q is not an AWS region such as eu-west-1", clip(s), clip(a.Region))
		}
		if len(a.Account) != 12 || !allDigits(a.Account) {
			return QueueARN{}, fmt.Errorf("%q: the account id must be 12 digits", clip(s))
		}
	}
	if !validQueueName(a.Name) {
		return QueueARN{}, fmt.Errorf("%q: the queue name must be 1-80 characters of [A-Za-z0-9_-]", clip(s))
	}
	return a, nil
}

func allDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// validRegion accepts <letters>(-<letters>)+-<digits>, e.g. us-gov-west-1.
func validRegion(s string) bool {
	parts := strings.Split(s, "-")
	if len(parts) < 3 || len(s) > 32 {
		return false
	}
	for i, p := range parts {
		if p == "" {
			return false
		}
		last := i == len(parts)-1
		for j := 0; j < len(p); j++ {
			c := p[j]
			if last && (c < '0' || c > '9') || !last && (c < 'a' || c > 'z') {
				return false
			}
		}
	}
	return true
}

func validQueueName(s string) bool {
	if s == "" || len(s) > 80 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
