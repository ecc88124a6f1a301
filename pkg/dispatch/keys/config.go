package keys

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// PollTracker tells when a producer (by bus source) last fetched its tenant
// config. Implementations must be safe for concurrent use.
type PollTracker interface {
	// LastPoll returns the time of source's last poll, and false if none
	// is known.
	LastPoll(source string) (time.Time, bool)
}

// Polls is an in-memory PollTracker. The zero value is ready to use; it is
// safe for concurrent use.
type Polls struct {
	mu   sync.RWMutex
	last map[string]time.Time
}

// Record notes that source polled its tenant config at t. Older times than
// the one recorded are ignored.
func (p *Polls) Record(source string, t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		p.last = make(map[string]time.Time)
	}
	if prev, ok := p.last[source]; !ok || t.After(prev) {
		p.last[source] = t
	}
}

// LastPoll implements PollTracker.
func (p *Polls) LastPoll(source string) (time.Time, bool) {
	p.mu.RLock()
	defer p.mu.RUnlock()
	t, ok := p.last[source]
	return t, ok
}

// PollOverdue reports whether a producer whose last poll was at last (known
// says whether there was one) is overdue at now under policy: it never
// polled, or its last poll is older than PollInterval.
func PollOverdue(policy Policy, last time.Time, known bool, now time.Time) bool {
	return !known || now.Sub(last) > policy.WithDefaults().PollInterval
}

// TenantConfig is the document a producer polls (GET /tenant-config) to
// learn its signing keys and their timeline. It is served only to the
// authenticated tenant; it carries secrets.
type TenantConfig struct {
	// Tenant is the tenant id.
	Tenant string `json:"tenant"`
	// GeneratedAt is when the document was built.
	GeneratedAt time.Time `json:"generated_at"`
	// PollIntervalSeconds is how often producers must poll, at most.
	PollIntervalSeconds int64 `json:"poll_interval_seconds"`
	// OverlapSeconds is how long a previous version stays accepted after
	// its successor activates.
	OverlapSeconds int64 `json:"overlap_seconds"`
	// Services lists the tenant's services with keys, sorted by source.
	Services []ServiceKeys `json:"services"`
}

// ServiceKeys is one service's key timeline.
type ServiceKeys struct {
	// Source is the bus source to send with, <tenant-id>/<service>.
	Source string `json:"source"`
	// Current is the version to sign with now; absent if none is active
	// (for example the only version was revoked).
	Current *KeyInfo `json:"current,omitempty"`
	// Previous is the version still accepted during the overlap, if any.
	Previous *KeyInfo `json:"previous,omitempty"`
	// Next is a version scheduled to become current, if any. Producers
	// switch to it at its activated_at.
	Next *KeyInfo `json:"next,omitempty"`
	// NextRotationAt is when the platform will next rotate (the current
	// version's activation plus the rotation cadence); absent without a
	// current version.
	NextRotationAt time.Time `json:"next_rotation_at,omitzero"`
}

// KeyInfo describes one key version.
type KeyInfo struct {
	// VersionID goes in metadata.version_id of messages signed with it.
	VersionID string `json:"version_id"`
	// Secret is the HMAC secret (base64 in JSON).
	Secret []byte `json:"secret"`
	// ActivatedAt is when the version becomes (or became) current.
	ActivatedAt time.Time `json:"activated_at"`
	// ExpiresAt is when the dispatcher stops accepting it; absent while
	// no successor is scheduled.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
}

// TenantConfig builds the tenant-config document of tenant at now. Every
// service of the tenant with keys appears, with Current absent if no version
// is active (revoked, or the first one not activated yet).
func (k *Keyring) TenantConfig(tenant string, now time.Time) (TenantConfig, error) {
	cfg := TenantConfig{
		Tenant:              tenant,
		GeneratedAt:         now.UTC(),
		PollIntervalSeconds: int64(k.policy.PollInterval / time.Second),
		OverlapSeconds:      int64(k.policy.Overlap / time.Second),
	}
	for _, source := range k.Sources() {
		if !strings.HasPrefix(source, tenant+"/") {
			continue
		}
		es := k.services[source]
		info := func(i int) *KeyInfo {
			ki := &KeyInfo{VersionID: es[i].ID, Secret: append([]byte(nil), es[i].Secret...), ActivatedAt: es[i].ActivatedAt.UTC()}
			if end := k.acceptUntil(es, i); !end.IsZero() {
				end = end.UTC()
				ki.ExpiresAt = &end
			}
			return ki
		}
		sk := ServiceKeys{Source: source}
		cur := k.current(es, now)
		if cur >= 0 {
			sk.Current = info(cur)
			sk.NextRotationAt = es[cur].ActivatedAt.Add(k.policy.Rotation).UTC()
			if cur > 0 {
				if _, err := k.Resolve(source, es[cur-1].ID, now); err == nil {
					sk.Previous = info(cur - 1)
				}
			}
		}
		if la := k.latestActivated(es, now); la+1 < len(es) {
			sk.Next = info(la + 1)
		}
		cfg.Services = append(cfg.Services, sk)
	}
	if len(cfg.Services) == 0 {
		return TenantConfig{}, fmt.Errorf("%w: tenant %q", ErrNoKeys, tenant)
	}
	return cfg, nil
}

// Marshal encodes the document as JSON.
func (c *TenantConfig) Marshal() ([]byte, error) {
	return json.Marshal(c)
}

// ParseTenantConfig decodes a tenant-config document. Unknown members are
// ignored so that producers keep working when the platform adds fields;
// duplicate names and malformed values are errors.
func ParseTenantConfig(b []byte) (TenantConfig, error) {
	var c TenantConfig
	if err := json.Unmarshal(b, &c); err != nil {
		return TenantConfig{}, fmt.Errorf("keys: tenant config: %w", err)
	}
	return c, nil
}

// SigningKey returns the key source should sign with at now: Next once it
// has activated, otherwise Current. Producers call it before each send.
func (c *TenantConfig) SigningKey(source string, now time.Time) (*signing.Key, error) {
	for _, s := range c.Services {
		if s.Source != source {
			continue
		}
		ki := s.Current
		if s.Next != nil && !now.Before(s.Next.ActivatedAt) {
			ki = s.Next
		}
		if ki == nil {
			return nil, fmt.Errorf("keys: tenant config has no active key for %s yet; poll again later", source)
		}
		return signing.NewKey(ki.VersionID, ki.Secret)
	}
	return nil, fmt.Errorf("keys: tenant config of %s has no service %s; check the source you send with", c.Tenant, source)
}
