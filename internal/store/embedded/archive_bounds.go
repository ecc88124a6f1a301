package embedded

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
)

// The archive's per-tenant bounds (docs/replay.md, "The archive's
// bounds"): one tenant's traffic, junk above all, cannot fill the archive.
//
//   - Every tenant's archived records (by the tenant of their bus source)
//     may take up to TenantBytes; beyond it ArchivePurgeOverBudget deletes
//     the tenant's oldest records first, and nothing of other tenants.
//   - Records the shield did not accept (rejected, not a command) take at
//     most TenantUnacceptedBytes of that: beyond it they are counted, not
//     stored, until age or the byte bound purges older ones. An accepted
//     command is always stored: its acknowledgement waits for it.
//   - Age: every record goes after the archive's retention (ArchivePurge).
//
// The usage is counted in memory, from a scan of the archive when the store
// opens, then kept at each append and purge. An event id appended twice (a
// no-op in the archive) is counted twice, until the next Open.

// Default archive bounds.
const (
	DefaultArchiveTenantBytes           = 256 << 20
	DefaultArchiveTenantUnacceptedBytes = 4 << 20
)

// ArchiveBounds bound each tenant's share of the archive. Zero fields take
// the defaults.
type ArchiveBounds struct {
	// TenantBytes bounds a tenant's archived records; its oldest go first.
	TenantBytes int64
	// TenantUnacceptedBytes bounds, within TenantBytes, the records the
	// shield did not accept; beyond it they are counted, not stored.
	TenantUnacceptedBytes int64
}

func (b ArchiveBounds) withDefaults() ArchiveBounds {
	if b.TenantBytes <= 0 {
		b.TenantBytes = DefaultArchiveTenantBytes
	}
	if b.TenantUnacceptedBytes <= 0 {
		b.TenantUnacceptedBytes = DefaultArchiveTenantUnacceptedBytes
	}
	return b
}

// ArchiveUsage is one tenant's share of the archive.
type ArchiveUsage struct {
	// Bytes are the tenant's archived records, Unaccepted those of them
	// the shield did not accept.
	Bytes, Unaccepted int64
	// Dropped counts records not stored since Open because the tenant's
	// unaccepted records were at their bound.
	Dropped int64
}

// archiveLedger counts each tenant's archive usage.
type archiveLedger struct {
	mu      sync.Mutex
	bounds  ArchiveBounds
	tenants map[string]*ArchiveUsage
}

// SetArchiveBounds sets the per-tenant bounds of the archive.
func (s *Store) SetArchiveBounds(b ArchiveBounds) error {
	if b.TenantBytes < 0 || b.TenantUnacceptedBytes < 0 {
		return fmt.Errorf("archive bounds: negative bytes (%d, %d): give 0 for the default or a positive size", b.TenantBytes, b.TenantUnacceptedBytes)
	}
	b = b.withDefaults()
	if b.TenantUnacceptedBytes > b.TenantBytes {
		return fmt.Errorf("archive bounds: %d bytes for unaccepted records is over the tenant's %d: give at most the tenant's bound", b.TenantUnacceptedBytes, b.TenantBytes)
	}
	s.arch.mu.Lock()
	s.arch.bounds = b
	s.arch.mu.Unlock()
	return nil
}

// ArchiveUsage returns every tenant's share of the archive.
func (s *Store) ArchiveUsage(ctx context.Context) (map[string]ArchiveUsage, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	l := &s.arch
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]ArchiveUsage, len(l.tenants))
	for t, u := range l.tenants {
		out[t] = *u
	}
	return out, nil
}

// tenantOf is the tenant of a bus source (all of it without a '/').
func tenantOf(source string) string {
	t, _, _ := strings.Cut(source, "/")
	return t
}

// accepted reports whether a verdict counts as accepted: a record written
// before verdicts counts with the commands (a replay verifies it again).
func accepted(v Verdict) bool { return v == VerdictAccepted || v == "" }

// archivedSize is the size of e's record (encodeArchived).
func archivedSize(e *ArchivedEvent) int64 {
	n := 10 + len(e.Detail)
	for _, s := range [...]string{e.EventID, e.Source, e.DetailType, e.Target, e.Command, e.Reason, e.KeyVersion} {
		n += uvarintLen(uint64(len(s))) + len(s)
	}
	return int64(n)
}

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

// loadArchiveLedger counts the archive's records by tenant. Open calls it
// once recovery has applied the log to the file and before the store's
// goroutines start, so the file holds every archived record and nothing
// changes it meanwhile.
func (s *Store) loadArchiveLedger() error {
	tenants := map[string]*ArchiveUsage{}
	count := func(source string, size int64, v Verdict) {
		u := tenants[tenantOf(source)]
		if u == nil {
			u = &ArchiveUsage{}
			tenants[tenantOf(source)] = u
		}
		u.Bytes += size
		if !accepted(v) {
			u.Unaccepted += size
		}
	}
	err := s.db.View(func(tx *bolt.Tx) error {
		ev := tx.Bucket(bArchive).Bucket(bArchEv)
		if ev == nil {
			return nil
		}
		return ev.ForEach(func(k, v []byte) error {
			h, err := archivedHead(v)
			if err != nil {
				return storecodec.Corrupt("archived event", fmt.Sprintf("%x", k), err)
			}
			count(h.source, int64(len(v)), h.verdict)
			return nil
		})
	})
	if err != nil {
		return fmt.Errorf("embedded store: count the archive's usage: %w", err)
	}
	l := &s.arch
	l.mu.Lock()
	defer l.mu.Unlock()
	l.tenants = tenants
	if l.bounds == (ArchiveBounds{}) {
		l.bounds = l.bounds.withDefaults()
	}
	return nil
}

// admitArchived counts events in their tenants' usage and returns those
// to store: an event the shield did not accept is dropped (and counted)
// when its tenant's unaccepted records are at their bound. undo takes the
// admitted events back out when their write fails.
func (s *Store) admitArchived(events []ArchivedEvent) (keep []ArchivedEvent, undo func()) {
	l := &s.arch
	l.mu.Lock()
	defer l.mu.Unlock()
	keep = events
	dropped := false
	for i := range events {
		e := &events[i]
		u := l.usage(e.Source)
		size := archivedSize(e)
		if !accepted(e.Verdict) {
			if u.Unaccepted+size > l.bounds.TenantUnacceptedBytes {
				u.Dropped++
				if !dropped {
					keep, dropped = append(make([]ArchivedEvent, 0, len(events)), events[:i]...), true
				}
				continue
			}
			u.Unaccepted += size
		}
		u.Bytes += size
		if dropped {
			keep = append(keep, *e)
		}
	}
	undo = func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		for i := range keep {
			l.release(keep[i].Source, archivedSize(&keep[i]), keep[i].Verdict)
		}
	}
	return keep, undo
}

// usage returns the usage of source's tenant, made if missing. l.mu is
// held.
func (l *archiveLedger) usage(source string) *ArchiveUsage {
	t := tenantOf(source)
	u := l.tenants[t]
	if u == nil {
		if l.tenants == nil {
			l.tenants = map[string]*ArchiveUsage{}
		}
		u = &ArchiveUsage{}
		l.tenants[t] = u
	}
	return u
}

// release takes a record of size bytes out of its tenant's usage. l.mu is
// held.
func (l *archiveLedger) release(source string, size int64, v Verdict) {
	u := l.tenants[tenantOf(source)]
	if u == nil {
		return
	}
	u.Bytes = max(0, u.Bytes-size)
	if !accepted(v) {
		u.Unaccepted = max(0, u.Unaccepted-size)
	}
}

// purgedRecord is a record a purge deleted, to release from the ledger.
type purgedRecord struct {
	source  string
	size    int64
	verdict Verdict
}

// releasePurged takes purged records out of the ledger.
func (s *Store) releasePurged(recs []purgedRecord) {
	l := &s.arch
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range recs {
		l.release(r.source, r.size, r.verdict)
	}
}

// ArchivePurgeOverBudget deletes, oldest first, up to limit (1 to 100000)
// records of the tenants over their byte bound until each is within it,
// and returns how many it deleted (call again while it returns limit).
func (s *Store) ArchivePurgeOverBudget(ctx context.Context, limit int) (int, error) {
	if limit < 1 || limit > MaxPurgeBatch {
		return 0, fmt.Errorf("archive purge: limit %d outside 1..%d", limit, MaxPurgeBatch)
	}
	l := &s.arch
	l.mu.Lock()
	over := map[string]int64{} // tenant -> bytes to free
	for t, u := range l.tenants {
		if u.Bytes > l.bounds.TenantBytes {
			over[t] = u.Bytes - l.bounds.TenantBytes
		}
	}
	l.mu.Unlock()
	if len(over) == 0 {
		return 0, nil
	}
	if err := s.awaitApplied(ctx); err != nil {
		return 0, err
	}
	return s.purgeArchive(ctx, limit, func() pickFunc {
		need := maps.Clone(over)
		return func(_ []byte, h archHead, size int64) (take, stop bool) {
			t := tenantOf(h.source)
			left, ok := need[t]
			if !ok {
				return false, len(need) == 0
			}
			if left -= size; left <= 0 {
				delete(need, t)
			} else {
				need[t] = left
			}
			return true, false
		}
	})
}
