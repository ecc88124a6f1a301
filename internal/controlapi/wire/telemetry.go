package wire

import (
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// Limits of GET /v1/telemetry.
const (
	// TelemetryDefaultLimit is the page size when limit is not given.
	TelemetryDefaultLimit = 100
	// TelemetryMaxLimit is the largest page (the store's largest read; a
	// test of the server checks that they agree).
	TelemetryMaxLimit = 1000
)

// TelemetryRecord is one telemetry event of a tenant's stream, as the API
// returns it.
type TelemetryRecord struct {
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

// TelemetryPage is the answer of GET /v1/telemetry. Records empty after
// the wait is the heartbeat: the server is alive and there is nothing new.
type TelemetryPage struct {
	Records []TelemetryRecord `json:"records"`
	// NextAfter is the after of the next read: the last record's Seq
	// (one tenant) or Global (every tenant), or the request's after when
	// there are no records.
	NextAfter  uint64    `json:"next_after"`
	ServerTime time.Time `json:"server_time"`
}

// TelemetryStream is one tenant's stream as GET /v1/telemetry/streams
// shows it.
type TelemetryStream struct {
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

// TelemetryStreams is the answer of GET /v1/telemetry/streams.
type TelemetryStreams struct {
	Streams    []TelemetryStream `json:"streams"`
	ServerTime time.Time         `json:"server_time"`
}

// TelemetryAck is the body of POST /v1/telemetry/ack: the tenant's
// consumer has everything up to Seq. Acknowledged records count as
// consumed: when they age out of retention no snavio.telemetry.dropped is
// raised for them.
type TelemetryAck struct {
	Tenant string `json:"tenant"`
	Seq    uint64 `json:"seq"`
}

// TelemetryQuery is a read of GET /v1/telemetry: the client's request and
// the server's parsed view of it.
type TelemetryQuery struct {
	// Tenant is the stream; empty: the caller's own (tenant token) or
	// every tenant's (operator).
	Tenant string
	// After continues a read: the tenant's sequence number with Tenant,
	// the global append number without it.
	After uint64
	// HasAfter says after was given.
	HasAfter bool
	// Since, when not zero, starts the read at the first record appended
	// at or after it (instead of After).
	Since time.Time
	// Limit is the page size, 1 to TelemetryMaxLimit (0: the default).
	Limit int
	// Wait is how long to hold the request when nothing is there yet.
	Wait time.Duration
}

// Values encodes q as the query string of GET /v1/telemetry.
func (q TelemetryQuery) Values() url.Values {
	v := url.Values{}
	if q.Tenant != "" {
		v.Set("tenant", q.Tenant)
	}
	if q.HasAfter {
		v.Set("after", strconv.FormatUint(q.After, 10))
	}
	if !q.Since.IsZero() {
		v.Set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Limit > 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Wait > 0 {
		v.Set("wait", q.Wait.String())
	}
	return v
}
