package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/pkg/dispatch/flow"
)

var _ flow.Store = (*Store)(nil)

// maxKeyLen bounds every caller-supplied key (counter, lease, dedupe id,
// source); bbolt's own limit is 32 KiB, ours keeps the file small.
const maxKeyLen = 1024

// maxLeaseHolders bounds the max argument of Acquire.
const maxLeaseHolders = 10_000

// maxBanWindowEntries bounds one ban-ledger key's remembered bans.
const maxBanWindowEntries = 10_000

// maxRollupsPerPut bounds one PutRollups call.
const maxRollupsPerPut = 10_000

func checkKey(what, k string) error {
	if k == "" {
		return fmt.Errorf("%s: empty: give a non-empty key", what)
	}
	if len(k) > maxKeyLen {
		return fmt.Errorf("%s %.40q...: %d bytes, over the limit of %d", what, k, len(k), maxKeyLen)
	}
	return nil
}

func live(expiresAt, now int64) bool { return expiresAt > now }

type counterRec struct {
	N         int64 `json:"n"`
	ExpiresAt int64 `json:"exp"`
}

// Take implements flow.Counters.
func (s *Store) Take(ctx context.Context, key string, n, limit int64, expiresAt, now time.Time) (int64, error) {
	if err := checkKey("counter key", key); err != nil {
		return 0, err
	}
	if n < 0 || limit < 0 {
		return 0, fmt.Errorf("take %q: negative n %d or limit %d: both must be >= 0", key, n, limit)
	}
	var granted int64
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bCounters)
		var c counterRec
		v := b.Get([]byte(key))
		if v != nil {
			if err := json.Unmarshal(v, &c); err != nil {
				return storecodec.Corrupt("counter", key, err)
			}
		}
		if v == nil || !live(c.ExpiresAt, storecodec.Nanos(now)) {
			c = counterRec{ExpiresAt: storecodec.Nanos(expiresAt)}
		}
		granted = min(n, max(0, limit-c.N))
		c.N += granted
		return putJSON(b, []byte(key), c)
	})
	if err != nil {
		return 0, err
	}
	return granted, nil
}

type leaseRec struct {
	Holders   []string `json:"holders"`
	ExpiresAt int64    `json:"exp"`
}

// Acquire implements flow.Leases.
func (s *Store) Acquire(ctx context.Context, key, holder string, maxHolders int, expiresAt, now time.Time) (bool, error) {
	if err := checkKey("lease key", key); err != nil {
		return false, err
	}
	if err := checkKey("lease holder", holder); err != nil {
		return false, err
	}
	if maxHolders < 0 || maxHolders > maxLeaseHolders {
		return false, fmt.Errorf("acquire %q: max %d outside 0..%d", key, maxHolders, maxLeaseHolders)
	}
	var ok bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bLeases)
		var l leaseRec
		v := b.Get([]byte(key))
		if v != nil {
			if err := json.Unmarshal(v, &l); err != nil {
				return storecodec.Corrupt("lease", key, err)
			}
		}
		if v == nil || !live(l.ExpiresAt, storecodec.Nanos(now)) {
			l = leaseRec{ExpiresAt: storecodec.Nanos(expiresAt)}
		}
		switch {
		case slices.Contains(l.Holders, holder):
			ok = true
			return nil
		case len(l.Holders) >= maxHolders:
			ok = false
			return nil
		}
		ok = true
		l.Holders = append(l.Holders, holder)
		return putJSON(b, []byte(key), l)
	})
	return ok, err
}

type dedupeRec struct {
	PayloadHash string `json:"hash"`
	State       string `json:"state"`
	Owner       string `json:"owner"`
	ExpiresAt   int64  `json:"exp"`
}

func (r dedupeRec) record(tenant, id string) flow.DedupeRecord {
	return flow.DedupeRecord{Tenant: tenant, ID: id, PayloadHash: r.PayloadHash, State: flow.ClaimState(r.State), Owner: r.Owner, ExpiresAt: time.Unix(0, r.ExpiresAt).UTC()}
}

func checkClaim(rec flow.DedupeRecord) error {
	if rec.State != flow.ClaimInProgress || rec.Tenant == "" || rec.ID == "" || rec.Owner == "" {
		return fmt.Errorf("claim %q: a claim must be in state %q with a tenant, an id and an owner (got state %q, tenant %q, owner %q)", rec.ID, flow.ClaimInProgress, rec.State, rec.Tenant, rec.Owner)
	}
	if err := checkKey("dedupe key", rec.Key()); err != nil {
		return err
	}
	if len(rec.Owner) > maxKeyLen || len(rec.PayloadHash) > maxKeyLen {
		return fmt.Errorf("claim %q: owner or payload hash over %d bytes", rec.ID, maxKeyLen)
	}
	return nil
}

// claimTx is Claim inside tx. A live record under the bare id, written
// before claims were scoped by tenant, still holds the id (for every
// tenant) until it expires: a store upgraded in place keeps deduplicating
// the commands it claimed before. Such records expire within one dedupe
// TTL; none is written any more.
func claimTx(tx *bolt.Tx, rec flow.DedupeRecord, now time.Time) (bool, flow.DedupeRecord, error) {
	b := tx.Bucket(bDedupe)
	key := rec.Key()
	for _, k := range []struct{ key, tenant string }{{key, rec.Tenant}, {rec.ID, ""}} {
		v := b.Get([]byte(k.key))
		if v == nil {
			continue
		}
		var old dedupeRec
		if err := json.Unmarshal(v, &old); err != nil {
			return false, flow.DedupeRecord{}, storecodec.Corrupt("dedupe record", k.key, err)
		}
		if live(old.ExpiresAt, storecodec.Nanos(now)) {
			return false, old.record(k.tenant, rec.ID), nil
		}
	}
	nr := dedupeRec{PayloadHash: rec.PayloadHash, State: string(rec.State), Owner: rec.Owner, ExpiresAt: storecodec.Nanos(rec.ExpiresAt)}
	return true, flow.DedupeRecord{}, putJSON(b, []byte(key), nr)
}

// Claim implements flow.DedupeClaims.
func (s *Store) Claim(ctx context.Context, rec flow.DedupeRecord, now time.Time) (bool, flow.DedupeRecord, error) {
	if err := checkClaim(rec); err != nil {
		return false, flow.DedupeRecord{}, err
	}
	if err := s.awaitClaim(ctx, rec.Key()); err != nil {
		return false, flow.DedupeRecord{}, err
	}
	var claimed bool
	var existing flow.DedupeRecord
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		claimed, existing, err = claimTx(tx, rec, now)
		return err
	})
	if err != nil {
		return false, flow.DedupeRecord{}, err
	}
	return claimed, existing, nil
}

// ownedTx loads owner's live in-progress record under key, or reports
// ok=false.
func ownedTx(tx *bolt.Tx, key, owner string, now time.Time) (dedupeRec, bool, error) {
	v := tx.Bucket(bDedupe).Get([]byte(key))
	if v == nil {
		return dedupeRec{}, false, nil
	}
	var r dedupeRec
	if err := json.Unmarshal(v, &r); err != nil {
		return dedupeRec{}, false, storecodec.Corrupt("dedupe record", key, err)
	}
	ok := live(r.ExpiresAt, storecodec.Nanos(now)) && r.State == string(flow.ClaimInProgress) && r.Owner == owner
	return r, ok, nil
}

// completeTx is Complete inside tx; notOwner reports ErrNotOwner's case.
func completeTx(tx *bolt.Tx, key, owner string, expiresAt, now time.Time) (notOwner bool, err error) {
	if key == "" {
		return true, nil
	}
	r, ok, err := ownedTx(tx, key, owner, now)
	if err != nil || !ok {
		return !ok, err
	}
	r.State = string(flow.ClaimDelivered)
	r.ExpiresAt = storecodec.Nanos(expiresAt)
	return false, putJSON(tx.Bucket(bDedupe), []byte(key), r)
}

// Complete implements flow.DedupeClaims.
func (s *Store) Complete(ctx context.Context, key, owner string, expiresAt, now time.Time) error {
	if err := s.awaitClaim(ctx, key); err != nil {
		return err
	}
	var notOwner bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		notOwner, err = completeTx(tx, key, owner, expiresAt, now)
		return err
	})
	if err != nil {
		return err
	}
	if notOwner {
		return fmt.Errorf("complete %q as %q: %w", key, owner, flow.ErrNotOwner)
	}
	return nil
}

// Release implements flow.DedupeClaims.
func (s *Store) Release(ctx context.Context, key, owner string, now time.Time) error {
	if err := s.awaitClaim(ctx, key); err != nil {
		return err
	}
	var notOwner bool
	err := s.update(ctx, func(tx *bolt.Tx) error {
		if key == "" {
			notOwner = true
			return nil
		}
		_, ok, err := ownedTx(tx, key, owner, now)
		if err != nil {
			return err
		}
		notOwner = !ok
		if !ok {
			return nil
		}
		return tx.Bucket(bDedupe).Delete([]byte(key))
	})
	if err != nil {
		return err
	}
	if notOwner {
		return fmt.Errorf("release %q as %q: %w", key, owner, flow.ErrNotOwner)
	}
	return nil
}

// RecordBan implements flow.BanLedger.
func (s *Store) RecordBan(ctx context.Context, key flow.BanKey, at time.Time, window time.Duration) (int, error) {
	if err := checkKey("ban source", key.Source); err != nil {
		return 0, err
	}
	if window <= 0 {
		return 0, fmt.Errorf("record ban of %s: window %v must be positive", key.Source, window)
	}
	k := compositeKey(key.Source, key.Target, key.Command)
	var count int
	err := s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bBanLog)
		var times []int64
		if v := b.Get(k); v != nil {
			if err := json.Unmarshal(v, &times); err != nil {
				return storecodec.Corrupt("ban ledger", key.Source, err)
			}
		}
		from := storecodec.Nanos(at.Add(-window))
		kept := times[:0]
		for _, t := range times {
			if t > from {
				kept = append(kept, t)
			}
		}
		kept = append(kept, storecodec.Nanos(at))
		if len(kept) > maxBanWindowEntries {
			slices.Sort(kept)
			kept = kept[len(kept)-maxBanWindowEntries:]
		}
		count = 0
		for _, t := range kept {
			if t <= storecodec.Nanos(at) {
				count++
			}
		}
		return putJSON(b, k, kept)
	})
	return count, err
}

type banRec struct {
	Until  int64  `json:"until"`
	Reason string `json:"reason,omitempty"`
}

// PutBan implements flow.GlobalBans.
func (s *Store) PutBan(ctx context.Context, b flow.Ban) error {
	if err := checkKey("ban source", b.Source); err != nil {
		return fmt.Errorf("put ban: %w", err)
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		bk := tx.Bucket(bBans)
		if v := bk.Get([]byte(b.Source)); v != nil {
			var old banRec
			if err := json.Unmarshal(v, &old); err != nil {
				return storecodec.Corrupt("ban", b.Source, err)
			}
			if old.Until > storecodec.Nanos(b.Until) {
				return nil
			}
		}
		return putJSON(bk, []byte(b.Source), banRec{Until: storecodec.Nanos(b.Until), Reason: b.Reason})
	})
}

// Bans implements flow.GlobalBans, in source order.
func (s *Store) Bans(ctx context.Context, now time.Time) ([]flow.Ban, error) {
	var out []flow.Ban
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		return tx.Bucket(bBans).ForEach(func(k, v []byte) error {
			var r banRec
			if err := json.Unmarshal(v, &r); err != nil {
				return storecodec.Corrupt("ban", string(k), err)
			}
			if live(r.Until, storecodec.Nanos(now)) {
				out = append(out, flow.Ban{Source: string(k), Until: time.Unix(0, r.Until).UTC(), Reason: r.Reason})
			}
			return nil
		})
	})
	return out, err
}

type rollupRec struct {
	R         flow.Rollup `json:"r"`
	ExpiresAt int64       `json:"exp"`
}

// PutRollups implements flow.Rollups.
func (s *Store) PutRollups(ctx context.Context, rs []flow.Rollup, expiresAt time.Time) error {
	if len(rs) > maxRollupsPerPut {
		return fmt.Errorf("put rollups: %d rollups in one call, over the limit of %d: split the call", len(rs), maxRollupsPerPut)
	}
	for _, r := range rs {
		if err := checkKey("rollup instance", r.Instance); err != nil {
			return err
		}
		if len(r.Source)+len(r.Target)+len(r.Command) > 3*maxKeyLen {
			return fmt.Errorf("put rollups: source, target and command of %q too long", r.Source)
		}
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		b := tx.Bucket(bRollups)
		for _, r := range rs {
			// Ordered by window start, then the identity.
			k := binary.BigEndian.AppendUint64(nil, uint64(storecodec.Nanos(r.WindowStart)))
			k = append(k, compositeKey(r.Instance, r.Source, r.Target, r.Command)...)
			if err := putJSON(b, k, rollupRec{R: r, ExpiresAt: storecodec.Nanos(expiresAt)}); err != nil {
				return err
			}
		}
		return nil
	})
}

// ReadRollups implements flow.Rollups, ordered by window start, instance,
// source, target and command.
func (s *Store) ReadRollups(ctx context.Context, since, now time.Time) ([]flow.Rollup, error) {
	var out []flow.Rollup
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		c := tx.Bucket(bRollups).Cursor()
		start := binary.BigEndian.AppendUint64(nil, uint64(storecodec.Nanos(since)))
		for k, v := c.Seek(start); k != nil; k, v = c.Next() {
			var r rollupRec
			if err := json.Unmarshal(v, &r); err != nil {
				return storecodec.Corrupt("rollup", fmt.Sprintf("%x", k), err)
			}
			if live(r.ExpiresAt, storecodec.Nanos(now)) && !r.R.WindowStart.Before(since) {
				out = append(out, r.R)
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b flow.Rollup) int {
		if c := a.WindowStart.Compare(b.WindowStart); c != 0 {
			return c
		}
		return strings.Compare(a.Instance+"\x00"+a.Source+"\x00"+a.Target+"\x00"+a.Command, b.Instance+"\x00"+b.Source+"\x00"+b.Target+"\x00"+b.Command)
	})
	return out, nil
}

// PurgeExpired deletes the flow records (counters, leases, dedupe records,
// bans, rollups) that expired at or before now, at most limit of them (1 to
// 100000), and reports how many it deleted. Expired records are already
// dead to every reader; this only reclaims space, so a background job may
// call it as often as it likes.
func (s *Store) PurgeExpired(ctx context.Context, now time.Time, limit int) (int, error) {
	if limit < 1 || limit > 100_000 {
		return 0, fmt.Errorf("purge expired: limit %d outside 1..100000", limit)
	}
	var deleted int
	err := s.update(ctx, func(tx *bolt.Tx) error {
		deleted = 0
		n := storecodec.Nanos(now)
		expiry := func(name []byte) func(v []byte) (int64, error) {
			return func(v []byte) (int64, error) {
				var r struct {
					Exp   *int64 `json:"exp"`
					Until *int64 `json:"until"`
				}
				if err := json.Unmarshal(v, &r); err != nil {
					return 0, storecodec.Corrupt(string(name), "", err)
				}
				switch {
				case r.Exp != nil:
					return *r.Exp, nil
				case r.Until != nil:
					return *r.Until, nil
				}
				return 0, storecodec.Corrupt(string(name), "", errors.New("no expiry"))
			}
		}
		for _, name := range [][]byte{bCounters, bLeases, bDedupe, bBans, bRollups} {
			b := tx.Bucket(name)
			get := expiry(name)
			var dead [][]byte
			c := b.Cursor()
			for k, v := c.First(); k != nil && deleted+len(dead) < limit; k, v = c.Next() {
				exp, err := get(v)
				if err != nil {
					return err
				}
				if !live(exp, n) {
					dead = append(dead, slices.Clone(k))
				}
			}
			for _, k := range dead {
				if err := b.Delete(k); err != nil {
					return err
				}
			}
			deleted += len(dead)
		}
		return nil
	})
	return deleted, err
}

func putJSON(b *bolt.Bucket, k []byte, v any) error {
	data, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return b.Put(k, data)
}

// ErrCorrupt wraps a record the store cannot decode.
var ErrCorrupt = storecodec.ErrCorrupt
