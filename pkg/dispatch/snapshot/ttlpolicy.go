package snapshot

import (
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// DefaultTTLPolicy is the ttl_policy of a snapshot whose readers use the
// cache package's default TTLs, as `dispatch serve` and the Lambda
// functions do.
func DefaultTTLPolicy() TTLPolicy {
	ttl := func(fresh, stale time.Duration) TTL {
		return TTL{FreshSeconds: fresh.Seconds(), StaleSeconds: stale.Seconds()}
	}
	p := TTLPolicy{
		Routing:  ttl(cache.DefaultRoutingFresh, cache.DefaultRoutingStale),
		HMAC:     ttl(cache.DefaultHMACFresh, cache.DefaultHMACStale),
		Bans:     ttl(cache.DefaultBansFresh, cache.DefaultBansStale),
		Profiles: map[registry.Profile]TTL{},
	}
	for _, pr := range []registry.Profile{registry.ProfileCritical, registry.ProfileModerate, registry.ProfileLow} {
		t := cache.DefaultProfileTTL(pr)
		p.Profiles[pr] = ttl(t.Fresh, t.Stale)
	}
	return p
}
