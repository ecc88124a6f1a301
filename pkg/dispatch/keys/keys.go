// Package keys holds the per-service HMAC secrets with their versions, and
// decides which version a message may be signed with at a given time.
//
// Rotation model (docs/security/keys.md): every version has an activation
// time. At time t the current version of a service is the one activated most
// recently (at or before t); the version activated just before it is the
// previous version and stays accepted until the current one has been active
// for Policy.Overlap (7 days by default), or until the version after the
// current one activates, whichever comes first. Any other version is
// expired. A version may also carry a hard NotAfter (revocation). Rotation
// is due Policy.Rotation (30 days) after the current version activated.
//
// A Keyring is immutable once built and safe for concurrent use; to change
// keys, build a new one and swap it in.
package keys

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Policy defaults.
const (
	DefaultOverlap       = 7 * 24 * time.Hour
	DefaultRotation      = 30 * 24 * time.Hour
	DefaultPollInterval  = 12 * time.Hour
	DefaultExpiryWarning = 72 * time.Hour
)

// Policy is the rotation policy. Zero fields take the defaults.
type Policy struct {
	// Overlap is how long the previous version stays accepted after its
	// successor activates. Default 7 days.
	Overlap time.Duration
	// Rotation is the rotation cadence: a new version is due this long
	// after the current one activated. Default 30 days.
	Rotation time.Duration
	// PollInterval is how often producers are expected to poll their
	// tenant config; a producer whose last poll is older is overdue.
	// Default 12 hours.
	PollInterval time.Duration
	// ExpiryWarning is how close to the end of its acceptance a version
	// counts as soon to expire. Default 72 hours.
	ExpiryWarning time.Duration
}

// WithDefaults returns p with zero or negative fields set to the defaults.
func (p Policy) WithDefaults() Policy {
	if p.Overlap <= 0 {
		p.Overlap = DefaultOverlap
	}
	if p.Rotation <= 0 {
		p.Rotation = DefaultRotation
	}
	if p.PollInterval <= 0 {
		p.PollInterval = DefaultPollInterval
	}
	if p.ExpiryWarning <= 0 {
		p.ExpiryWarning = DefaultExpiryWarning
	}
	return p
}

// Version is one version of a service's secret.
type Version struct {
	// ID is the version id, hmac-v<N>; N increases with ActivatedAt.
	ID string
	// Secret is the HMAC secret, at least signing.MinSecretLen bytes.
	Secret []byte
	// ActivatedAt is when the version becomes current. Required.
	ActivatedAt time.Time
	// NotAfter, if not zero, is a hard end of acceptance (revocation).
	NotAfter time.Time
}

// Match is the outcome of a successful Resolve.
type Match struct {
	// Key verifies signatures made with the version.
	Key *signing.Key
	// Legacy reports that the version is the previous one: a newer version
	// is current and this one is accepted only during the overlap.
	Legacy bool
	// ExpiresAt is when the version stops being accepted; zero if no end
	// is scheduled yet.
	ExpiresAt time.Time
	// ExpiringSoon reports that ExpiresAt is within Policy.ExpiryWarning.
	ExpiringSoon bool
}

// Keyring is an immutable set of versioned secrets per source. It is safe
// for concurrent use.
type Keyring struct {
	policy   Policy
	services map[string][]entry // by source; entries sorted by ActivatedAt
}

type entry struct {
	Version
	key *signing.Key
}

// NewKeyring validates and indexes versions (by bus source
// <tenant-id>/<service>) under policy. It copies the secrets. Version ids
// must be unique per source, and their numbers must increase with
// activation time.
func NewKeyring(policy Policy, versions map[string][]Version) (*Keyring, error) {
	k := &Keyring{policy: policy.WithDefaults(), services: make(map[string][]entry, len(versions))}
	for source, vs := range versions {
		if !envelope.ValidSource(source) {
			return nil, fmt.Errorf("keys: source %q is not <tenant-id>/<service>", source)
		}
		es := make([]entry, 0, len(vs))
		for _, v := range vs {
			if v.ActivatedAt.IsZero() {
				return nil, fmt.Errorf("keys: %s %s has no activation time; set ActivatedAt", source, v.ID)
			}
			key, err := signing.NewKey(v.ID, v.Secret)
			if err != nil {
				return nil, fmt.Errorf("keys: %s: %w", source, err)
			}
			v.Secret = slices.Clone(v.Secret)
			es = append(es, entry{Version: v, key: key})
		}
		slices.SortFunc(es, func(a, b entry) int { return a.ActivatedAt.Compare(b.ActivatedAt) })
		for i := 1; i < len(es); i++ {
			if versionNumber(es[i].ID) <= versionNumber(es[i-1].ID) {
				return nil, fmt.Errorf("keys: %s: %s activates after %s but does not have a higher number; number versions in activation order",
					source, es[i].ID, es[i-1].ID)
			}
		}
		if len(es) > 0 {
			k.services[source] = es
		}
	}
	return k, nil
}

func versionNumber(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "hmac-v"))
	return n
}

// Policy returns the keyring's effective policy.
func (k *Keyring) Policy() Policy { return k.policy }

// acceptUntil returns the end of acceptance of es[i], zero if unbounded.
func (k *Keyring) acceptUntil(es []entry, i int) time.Time {
	var end time.Time
	min := func(t time.Time) {
		if !t.IsZero() && (end.IsZero() || t.Before(end)) {
			end = t
		}
	}
	if i+1 < len(es) {
		min(es[i+1].ActivatedAt.Add(k.policy.Overlap))
	}
	if i+2 < len(es) {
		min(es[i+2].ActivatedAt)
	}
	min(es[i].NotAfter)
	return end
}

// Resolve finds the key a message from source signed with versionID must be
// verified with at time now. It looks the version up by id and never tries
// other versions, so a verification costs one HMAC. It fails with a
// *reason.Error coded UnknownSource, UnknownKeyVersion, KeyNotYetValid or
// KeyExpired.
func (k *Keyring) Resolve(source, versionID string, now time.Time) (Match, error) {
	es, ok := k.services[source]
	if !ok {
		return Match{}, reason.New(reason.UnknownSource, "bus source",
			"no HMAC key is registered for "+source+": register the service, or send with the source it was registered under")
	}
	i := -1
	for j := range es {
		if es[j].ID == versionID {
			i = j
			break
		}
	}
	if i < 0 {
		return Match{}, reason.New(reason.UnknownKeyVersion, "metadata.version_id",
			versionID+" is not a key version of "+source+": sign with the current version from your tenant config")
	}
	e := &es[i]
	if now.Before(e.ActivatedAt) {
		return Match{}, reason.New(reason.KeyNotYetValid, "metadata.version_id",
			versionID+" activates at "+e.ActivatedAt.UTC().Format(time.RFC3339)+": sign with the current version until then")
	}
	end := k.acceptUntil(es, i)
	if !end.IsZero() && !now.Before(end) {
		return Match{}, reason.New(reason.KeyExpired, "metadata.version_id",
			versionID+" of "+source+" stopped being accepted at "+end.UTC().Format(time.RFC3339)+
				": poll your tenant config and sign with the current version")
	}
	return Match{
		Key:          e.key,
		Legacy:       i+1 < len(es) && !now.Before(es[i+1].ActivatedAt),
		ExpiresAt:    end,
		ExpiringSoon: !end.IsZero() && end.Sub(now) <= k.policy.ExpiryWarning,
	}, nil
}

// Current returns the version of source that is current at now and whether
// there is one.
func (k *Keyring) Current(source string, now time.Time) (Version, bool) {
	i := k.current(k.services[source], now)
	if i < 0 {
		return Version{}, false
	}
	return k.services[source][i].Version, true
}

// latestActivated returns the index of the version activated last at or
// before now, or -1.
func (k *Keyring) latestActivated(es []entry, now time.Time) int {
	cur := -1
	for i := range es {
		if !now.Before(es[i].ActivatedAt) {
			cur = i
		}
	}
	return cur
}

// current returns the index of the current version at now, or -1 if the
// latest activated one is revoked or none has activated.
func (k *Keyring) current(es []entry, now time.Time) int {
	cur := k.latestActivated(es, now)
	if cur >= 0 && !es[cur].NotAfter.IsZero() && !now.Before(es[cur].NotAfter) {
		return -1
	}
	return cur
}

// RotationDue reports whether source needs a new version at now: its
// current version activated Policy.Rotation or longer ago (or it has none
// current) and no later version is scheduled.
func (k *Keyring) RotationDue(source string, now time.Time) bool {
	es := k.services[source]
	i := k.current(es, now)
	if i < 0 {
		return len(es) == 0 || !now.Before(es[len(es)-1].ActivatedAt)
	}
	return i == len(es)-1 && !now.Before(es[i].ActivatedAt.Add(k.policy.Rotation))
}

// Sources returns the sources with keys, sorted.
func (k *Keyring) Sources() []string {
	out := make([]string, 0, len(k.services))
	for s := range k.services {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}

// ErrNoKeys reports that a tenant has no service with keys.
var ErrNoKeys = errors.New("keys: no service of this tenant has an HMAC key")
