package cache

import (
	"time"

	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/shield"
)

// KeyCache is the HMAC keyset cache. It implements shield.KeyResolver.
type KeyCache struct {
	t     *Table[string, *keys.Keyring]
	empty keys.Keyring
}

var _ shield.KeyResolver = (*KeyCache)(nil)

// Resolve implements shield.KeyResolver from the cached keysets. The
// shield cannot wait for I/O, so an expired (or never loaded) keyset is
// still used (every key version carries its own validity, so a revoked
// version stays refused) and a background refresh is started; a stale one
// is used and refreshed as for every cache. A source without a cached
// keyset gets the keyring's unknown_source error.
func (k *KeyCache) Resolve(source, versionID string, now time.Time) (keys.Match, error) {
	ring, st, ok := k.t.Lookup(source, now)
	if st == Expired {
		k.t.refreshAsync(now.UnixNano())
	}
	if !ok {
		return k.empty.Resolve(source, versionID, now)
	}
	return ring.Resolve(source, versionID, now)
}

// Table returns the underlying table (state, refresh, size).
func (k *KeyCache) Table() *Table[string, *keys.Keyring] { return k.t }

// BanState is the cached restriction of one source. Times are epoch
// seconds; 0 means none.
type BanState struct {
	// GlobalUntil ends a global warm-path ban.
	GlobalUntil int64
	// ColdOnly puts the source on the cold-only denylist, until
	// ColdOnlyUntil if that is not 0.
	ColdOnly      bool
	ColdOnlyUntil int64
}

// Restricted reports whether the state bars the source from the warm
// path at now.
func (b BanState) Restricted(now time.Time) bool {
	s := now.Unix()
	return s < b.GlobalUntil || b.ColdOnly && (b.ColdOnlyUntil == 0 || s < b.ColdOnlyUntil)
}

// BanCache is the ban list cache. It implements shield.BanList.
type BanCache struct {
	t *Table[string, BanState]
}

var _ shield.BanList = (*BanCache)(nil)

// Ban implements shield.BanList: a source under a live global ban or on
// the cold-only denylist is shield.ColdOnly (its commands take the slow
// stage); registry bans never block outright. Bans apply to every target
// and command of the source. Like the key cache, an expired ban list is
// still used while a background refresh runs.
func (b *BanCache) Ban(source, _, _ string, now time.Time) shield.Ban {
	s, st, ok := b.t.Lookup(source, now)
	if st == Expired {
		b.t.refreshAsync(now.UnixNano())
	}
	if ok && s.Restricted(now) {
		return shield.ColdOnly
	}
	return shield.NotBanned
}

// Table returns the underlying table.
func (b *BanCache) Table() *Table[string, BanState] { return b.t }
