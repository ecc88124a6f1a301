package devserver

import (
	"context"
	"log/slog"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// freshRegistry is the registry the control API writes through: after
// each write it refreshes the dispatcher's cache of that kind before
// answering, so on one machine a route, ACL or key is usable (and a
// revocation effective) as soon as the write returns, instead of after the
// cache's fresh TTL. (On AWS the dispatchers are other processes, and the
// spec's TTL model is the contract.)
type freshRegistry struct {
	registry.Store
	caches *cache.Caches
	log    *slog.Logger
}

func cacheTypeOf(k registry.Kind) cache.Type {
	switch k {
	case registry.KindRoute:
		return cache.Routing
	case registry.KindACL:
		return cache.ACL
	case registry.KindKey:
		return cache.HMAC
	case registry.KindBan:
		return cache.Bans
	case registry.KindQuota:
		return cache.Quotas
	}
	return ""
}

func (r *freshRegistry) Put(ctx context.Context, by registry.Actor, it registry.Item) (registry.Change, error) {
	ch, err := r.Store.Put(ctx, by, it)
	if err == nil {
		r.refresh(ctx, ch.ID.Kind())
	}
	return ch, err
}

func (r *freshRegistry) Delete(ctx context.Context, by registry.Actor, id registry.ID, version int64) (registry.Change, error) {
	ch, err := r.Store.Delete(ctx, by, id, version)
	if err == nil {
		r.refresh(ctx, id.Kind())
	}
	return ch, err
}

// refresh runs two refreshes in a row: Refresh joins one already in
// flight, which may have read the registry before this write; the second
// one started after the first ended, so after this write.
func (r *freshRegistry) refresh(ctx context.Context, k registry.Kind) {
	t := cacheTypeOf(k)
	if t == "" {
		return
	}
	for range 2 {
		if err := r.caches.Refresh(ctx, t); err != nil {
			// The write stands; the cache catches up on its TTL.
			r.log.Warn("refreshing the cache after a registry write failed", "cache", t, "err", err)
			return
		}
	}
}
