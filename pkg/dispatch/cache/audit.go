package cache

import (
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// auditRevocations is the ACL table's revocation audit, run after every
// refresh swaps generations. Each cached ACL entry remembers the
// millisecond of its latest use (one atomic word per entry, written at
// most once per millisecond: bounded by the table's size, no allocation on
// the lookup path). For every grant of the old generation that was used
// and that the new data shows revoked, it emits
// snavio.command.executed_after_acl_revoked if the latest use was at or
// after the revocation:
//
//   - revoked with a revocation record (registry.Revoke): the revocation
//     time is the record's revoked_at, exact;
//   - deleted outright: the registry no longer says when, so the time is
//     the moment the old data was read, the earliest the deletion can have
//     happened (an upper bound on the exposure: revoke, do not delete);
//   - expired (its expires_at passed): not a revocation; lookups stopped
//     using it at expires_at.
//
// stale_duration_seconds is the exposure: how long after the revocation
// the cached grant kept authorising commands (latest use minus
// revocation). One event per entry and refresh, not per command: the
// telemetry event carries no command id, and a flood of identical alerts
// helps nobody.
func (c *Caches) auditRevocations(old, cur *generation[registry.ACLKey, *registry.ACL], now time.Time) {
	for i := range old.ents {
		e := &old.ents[i]
		used := e.lastUse.Load()
		if used == 0 || !e.v.Allow {
			continue
		}
		usedAt := time.UnixMilli(used)
		var revokedAt time.Time
		if j, ok := cur.idx[e.v.Key()]; ok {
			n := cur.ents[j].v
			if n.Allow || n.RevokedAt.IsZero() {
				continue
			}
			revokedAt = n.RevokedAt
		} else {
			if e.expiresAt != 0 && e.expiresAt <= now.UnixNano() {
				continue
			}
			revokedAt = time.Unix(0, old.loadedAt)
		}
		// Uses are recorded at millisecond precision, rounded down.
		if usedAt.Before(revokedAt.Truncate(time.Millisecond)) {
			continue
		}
		c.env.tel.Emit(telemetry.ExecutedAfterACLRevoked{
			Source: e.v.Source, Target: e.v.Target, CommandName: e.v.Command,
			StaleDurationSeconds:   max(0, usedAt.Sub(revokedAt).Seconds()),
			ACLRevocationTimestamp: revokedAt.UTC(),
		})
	}
}
