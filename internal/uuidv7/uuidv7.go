// Package uuidv7 makes time-ordered UUIDs (version 7, RFC 9562) from a
// time the caller gives, so that ids follow an injected Clock (uuid.NewV7
// reads the system clock).
package uuidv7

import (
	"time"

	"github.com/google/uuid"
)

// New returns a UUID version 7: now's Unix milliseconds in the first 48
// bits, then random bits. Ids made in later milliseconds sort after
// earlier ones, as bytes and as text.
func New(now time.Time) uuid.UUID {
	u := uuid.New() // version 4: random, with the variant bits set
	ms := uint64(now.UnixMilli())
	for i := range 6 {
		u[i] = byte(ms >> (40 - 8*i))
	}
	u[6] = u[6]&0x0f | 0x70
	return u
}

// String returns New(now) in its text form.
func String(now time.Time) string { return New(now).String() }
