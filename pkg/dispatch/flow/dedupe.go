package flow

import (
	"sync"
	"time"
)

// seenSet is the fast path's bounded, sharded set of command ids known to
// be DELIVERED, per tenant (as the claims are), with their payload hash
// and dedupe expiry. Only a delivered
// id with the same payload hash makes a copy a duplicate on the fast path;
// an id that was merely forwarded to the slow path is not in it, because
// that delivery may still fail and the retry must go through, and an id
// reused with another payload is left to the slow path, which refuses it as
// a conflict. Lookups take one shard lock and never allocate.
type seenSet struct {
	shards [seenShards]seenShard
	per    int
}

const seenShards = 32

// seenKey is a command id within its tenant.
type seenKey struct{ tenant, id string }

type seenEntry struct {
	expiry int64  // unix ns
	hash   string // hex SHA-256 of the canonical payload delivered
}

type seenShard struct {
	mu   sync.Mutex
	m    map[seenKey]seenEntry
	ring []seenKey // insertion order, for eviction at capacity
	head int
}

func newSeenSet(capacity int) *seenSet {
	s := &seenSet{per: max(1, capacity/seenShards)}
	for i := range s.shards {
		s.shards[i].m = make(map[seenKey]seenEntry)
	}
	return s
}

func (s *seenSet) shard(id string) *seenShard {
	// FNV-1a over the id alone (the tenant adds nothing to the spread),
	// inline so it does not allocate.
	h := uint32(2166136261)
	for i := 0; i < len(id); i++ {
		h ^= uint32(id[i])
		h *= 16777619
	}
	return &s.shards[h%seenShards]
}

// delivered reports whether tenant's id is known delivered and still
// inside its dedupe TTL at now, and the payload hash it was delivered with.
func (s *seenSet) delivered(tenant, id string, now time.Time) (hash string, ok bool) {
	sh := s.shard(id)
	sh.mu.Lock()
	e, ok := sh.m[seenKey{tenant, id}]
	sh.mu.Unlock()
	if !ok || now.UnixNano() >= e.expiry {
		return "", false
	}
	return e.hash, true
}

// add remembers tenant's id as delivered with payload hash until expiry,
// evicting the oldest entry of the shard at capacity (the set is bounded;
// an evicted id only costs a slow-path claim, which is authoritative).
func (s *seenSet) add(tenant, id, hash string, expiry time.Time) {
	k := seenKey{tenant, id}
	sh := s.shard(id)
	sh.mu.Lock()
	defer sh.mu.Unlock()
	e := seenEntry{expiry: expiry.UnixNano(), hash: hash}
	if _, ok := sh.m[k]; ok {
		sh.m[k] = e
		return
	}
	if len(sh.ring) < s.per {
		sh.ring = append(sh.ring, k)
	} else {
		delete(sh.m, sh.ring[sh.head])
		sh.ring[sh.head] = k
		sh.head = (sh.head + 1) % s.per
	}
	sh.m[k] = e
}

// size returns the number of ids held (tests, metrics).
func (s *seenSet) size() int {
	n := 0
	for i := range s.shards {
		s.shards[i].mu.Lock()
		n += len(s.shards[i].m)
		s.shards[i].mu.Unlock()
	}
	return n
}
