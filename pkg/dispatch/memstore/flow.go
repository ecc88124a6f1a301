package memstore

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// Flow is an in-memory flow.Store: counters, leases, dedupe claims, the ban
// ledger, global bans and rollups. It honours every expiry against the
// caller's now, as the DynamoDB conditions do, and never deletes in the
// background: expired records are dead to every reader and replaced by the
// next writer. The zero value is not usable; call NewFlow. Safe for
// concurrent use.
type Flow struct {
	mu       sync.Mutex
	counters map[string]counter
	leases   map[string]lease
	dedupe   map[string]flow.DedupeRecord // by DedupeRecord.Key
	bans     map[flow.BanKey][]time.Time
	global   map[string]flow.Ban
	rollups  map[rollupKey]rollupRec
}

type counter struct {
	n         int64
	expiresAt time.Time
}

type lease struct {
	holders   map[string]bool
	expiresAt time.Time
}

type rollupKey struct {
	instance                string
	window                  int64
	source, target, command string
}

type rollupRec struct {
	r         flow.Rollup
	expiresAt time.Time
}

var _ flow.Store = (*Flow)(nil)

// NewFlow returns an empty in-memory flow store.
func NewFlow() *Flow {
	return &Flow{
		counters: map[string]counter{},
		leases:   map[string]lease{},
		dedupe:   map[string]flow.DedupeRecord{},
		bans:     map[flow.BanKey][]time.Time{},
		global:   map[string]flow.Ban{},
		rollups:  map[rollupKey]rollupRec{},
	}
}

func live(expiresAt, now time.Time) bool { return expiresAt.After(now) }

// Take implements flow.Counters.
func (s *Flow) Take(ctx context.Context, key string, n, limit int64, expiresAt, now time.Time) (int64, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	if n < 0 || limit < 0 {
		return 0, fmt.Errorf("take %q: negative n %d or limit %d", key, n, limit)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.counters[key]
	if !ok || !live(c.expiresAt, now) {
		c = counter{expiresAt: expiresAt}
	}
	granted := min(n, max(0, limit-c.n))
	c.n += granted
	s.counters[key] = c
	return granted, nil
}

// Acquire implements flow.Leases.
func (s *Flow) Acquire(ctx context.Context, key, holder string, maxHolders int, expiresAt, now time.Time) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	l, ok := s.leases[key]
	if !ok || !live(l.expiresAt, now) {
		l = lease{holders: map[string]bool{}, expiresAt: expiresAt}
	}
	if l.holders[holder] {
		return true, nil
	}
	if len(l.holders) >= maxHolders {
		return false, nil
	}
	l.holders[holder] = true
	s.leases[key] = l
	return true, nil
}

// Claim implements flow.DedupeClaims.
func (s *Flow) Claim(ctx context.Context, rec flow.DedupeRecord, now time.Time) (bool, flow.DedupeRecord, error) {
	if err := ctx.Err(); err != nil {
		return false, flow.DedupeRecord{}, err
	}
	if rec.State != flow.ClaimInProgress || rec.Tenant == "" || rec.ID == "" || rec.Owner == "" {
		return false, flow.DedupeRecord{}, fmt.Errorf("claim %q: a claim must be in progress with a tenant, an id and an owner", rec.ID)
	}
	key := rec.Key()
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.dedupe[key]; ok && live(old.ExpiresAt, now) {
		return false, old, nil
	}
	s.dedupe[key] = rec
	return true, flow.DedupeRecord{}, nil
}

// Complete implements flow.DedupeClaims.
func (s *Flow) Complete(ctx context.Context, key, owner string, expiresAt, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.dedupe[key]
	if !ok || !live(rec.ExpiresAt, now) || rec.State != flow.ClaimInProgress || rec.Owner != owner {
		return flow.ErrNotOwner
	}
	rec.State = flow.ClaimDelivered
	rec.ExpiresAt = expiresAt
	s.dedupe[key] = rec
	return nil
}

// Release implements flow.DedupeClaims.
func (s *Flow) Release(ctx context.Context, key, owner string, now time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, ok := s.dedupe[key]
	if !ok || !live(rec.ExpiresAt, now) || rec.State != flow.ClaimInProgress || rec.Owner != owner {
		return flow.ErrNotOwner
	}
	delete(s.dedupe, key)
	return nil
}

// RecordBan implements flow.BanLedger.
func (s *Flow) RecordBan(ctx context.Context, key flow.BanKey, at time.Time, window time.Duration) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	kept := s.bans[key][:0]
	for _, t := range s.bans[key] {
		if t.After(at.Add(-window)) {
			kept = append(kept, t)
		}
	}
	kept = append(kept, at)
	s.bans[key] = kept
	n := 0
	for _, t := range kept {
		if !t.After(at) {
			n++
		}
	}
	return n, nil
}

// PutBan implements flow.GlobalBans.
func (s *Flow) PutBan(ctx context.Context, b flow.Ban) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if b.Source == "" {
		return fmt.Errorf("put ban: empty source")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if old, ok := s.global[b.Source]; ok && old.Until.After(b.Until) {
		return nil
	}
	s.global[b.Source] = b
	return nil
}

// Bans implements flow.GlobalBans.
func (s *Flow) Bans(ctx context.Context, now time.Time) ([]flow.Ban, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []flow.Ban
	for _, b := range s.global {
		if live(b.Until, now) {
			out = append(out, b)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}

// PutRollups implements flow.Rollups.
func (s *Flow) PutRollups(ctx context.Context, rs []flow.Rollup, expiresAt time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range rs {
		k := rollupKey{instance: r.Instance, window: r.WindowStart.UnixNano(), source: r.Source, target: r.Target, command: r.Command}
		s.rollups[k] = rollupRec{r: r, expiresAt: expiresAt}
	}
	return nil
}

// ReadRollups implements flow.Rollups.
func (s *Flow) ReadRollups(ctx context.Context, since, now time.Time) ([]flow.Rollup, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []flow.Rollup
	for _, rec := range s.rollups {
		if live(rec.expiresAt, now) && !rec.r.WindowStart.Before(since) {
			out = append(out, rec.r)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if !a.WindowStart.Equal(b.WindowStart) {
			return a.WindowStart.Before(b.WindowStart)
		}
		if a.Instance != b.Instance {
			return a.Instance < b.Instance
		}
		if a.Source != b.Source {
			return a.Source < b.Source
		}
		if a.Target != b.Target {
			return a.Target < b.Target
		}
		return a.Command < b.Command
	})
	return out, nil
}
