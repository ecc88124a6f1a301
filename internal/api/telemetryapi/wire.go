package telemetryapi

import (
	"encoding/json"
	"time"
)

// Record is one telemetry event of a tenant's stream, as the API returns
// it.
type Record struct {
	// Seq is the record's number in its tenant's stream: from 1, in append
	// order, no gaps (a jump means records aged out of retention).
	Seq uint64 `json:"seq"`
	// Global is the record's number across all tenants, in append order:
	// the position `after` counts in a read of every tenant. Only a read
	// of every tenant carries it (a tenant's read would otherwise learn
	// how busy the other tenants are).
	Global uint64 `json:"global,omitempty"`
	Tenant string `json:"tenant"`
	// At is when the outbox appended the event.
	At time.Time `json:"at"`
	// Event is the telemetry event: a JSON object whose "event" member
	// names it (docs/security/telemetry.md).
	Event json.RawMessage `json:"event"`
}

// Page is the answer of GET /v1/telemetry. Records empty after the wait
// is the heartbeat: the server is alive and there is nothing new.
type Page struct {
	Records []Record `json:"records"`
	// NextAfter is the after of the next read: the last record's Seq
	// (one tenant) or Global (every tenant), or the request's after when
	// there are no records.
	NextAfter  uint64    `json:"next_after"`
	ServerTime time.Time `json:"server_time"`
}

// Stream is one tenant's stream as GET /v1/telemetry/streams shows it.
type Stream struct {
	Tenant string `json:"tenant"`
	// LastSeq is the newest record's sequence number (0: none ever).
	LastSeq uint64 `json:"last_seq"`
	// Cursor is the last sequence number the tenant's consumer
	// acknowledged.
	Cursor uint64 `json:"cursor"`
	// Stored is how many records are retained; Unconsumed how many of
	// them are after the cursor.
	Stored     int `json:"stored"`
	Unconsumed int `json:"unconsumed"`
	// Oldest is when the oldest retained record was appended.
	Oldest *time.Time `json:"oldest,omitempty"`
	// OldestUnconsumed is the same for the records after the cursor.
	OldestUnconsumed *time.Time `json:"oldest_unconsumed,omitempty"`
	// LastAckAt is when the consumer last acknowledged.
	LastAckAt *time.Time `json:"last_ack_at,omitempty"`
}

// Streams is the answer of GET /v1/telemetry/streams.
type Streams struct {
	Streams    []Stream  `json:"streams"`
	ServerTime time.Time `json:"server_time"`
}
