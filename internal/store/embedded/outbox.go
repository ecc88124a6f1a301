package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// The telemetry outbox: per-tenant streams of telemetry events, appended
// durably and in order (each tenant's sequence numbers start at 1 and have
// no gaps), read by the tenant after a sequence number and by an operator
// across all tenants in append order, acknowledged by the tenant's
// consumer (a cursor), and purged after a retention, reporting what aged
// out unconsumed as the fields of snavio.telemetry.dropped.

// Outbox limits.
const (
	// MaxAppendBatch is the most entries one AppendTelemetry takes.
	MaxAppendBatch = 1000
	// MaxEventBytes bounds one marshalled event.
	MaxEventBytes = 64 << 10
	// MaxReadPage is the most records one read returns.
	MaxReadPage = 1000
	// MaxTenantLen bounds a tenant name.
	MaxTenantLen = 256
	// MaxPurgeBatch bounds the records one PurgeTelemetry deletes.
	MaxPurgeBatch = 100_000
)

// OutboxEntry is one event for one tenant's stream.
type OutboxEntry struct {
	Tenant string
	Event  telemetry.Event
}

// TelemetryRecord is one stored event.
type TelemetryRecord struct {
	Tenant string `json:"-"`
	// Seq is the record's number in its tenant's stream, from 1, no gaps.
	Seq uint64 `json:"-"`
	// Global is the record's number across all tenants, in append order.
	Global     uint64    `json:"global"`
	AppendedAt time.Time `json:"appended_at"`
	// Name is the event's name, e.g. snavio.command.delivered.
	Name string `json:"name"`
	// Event is the event as telemetry.Marshal wrote it.
	Event json.RawMessage `json:"event"`
}

// Decode returns the record's event.
func (r TelemetryRecord) Decode() (telemetry.Event, error) { return telemetry.Unmarshal(r.Event) }

// TelemetryStream is one tenant's stream: its position and its consumer's.
type TelemetryStream struct {
	Tenant string
	// LastSeq is the newest record's sequence number (0: none ever).
	LastSeq uint64
	// Cursor is the last sequence number the consumer acknowledged.
	Cursor uint64
	// Stored is how many records are kept; Unconsumed how many of them are
	// after the cursor.
	Stored, Unconsumed int
	// Oldest is when the oldest kept record was appended (zero if none);
	// OldestUnconsumed the same for the records after the cursor.
	Oldest, OldestUnconsumed time.Time
	// LastAckAt is when the consumer last acknowledged (zero: never).
	LastAckAt time.Time
}

type streamMeta struct {
	Last, Cursor uint64
	// AckAt is the last acknowledgement's time in ns (0: never).
	AckAt int64
}

// Outbox layout: bucket "tenants" holds one bucket per tenant with key
// "meta" (encodeMeta) and bucket "ev" (u64 seq -> encodeTelemetry);
// bucket "all" maps u64 global -> u64 seq + tenant.
var (
	bTenants = []byte("tenants")
	bAll     = []byte("all")
	bEv      = []byte("ev")
	kMeta    = []byte("meta")
)

func checkTenant(t string) error {
	if t == "" || len(t) > MaxTenantLen {
		return fmt.Errorf("tenant %.40q: must be 1 to %d bytes (the part of a source before '/')", t, MaxTenantLen)
	}
	return nil
}

func outboxBuckets(tx *bolt.Tx) (tenants, all *bolt.Bucket, err error) {
	ob := tx.Bucket(bOutbox)
	if tx.Writable() {
		if tenants, err = ob.CreateBucketIfNotExists(bTenants); err != nil {
			return nil, nil, err
		}
		if all, err = ob.CreateBucketIfNotExists(bAll); err != nil {
			return nil, nil, err
		}
		return tenants, all, nil
	}
	return ob.Bucket(bTenants), ob.Bucket(bAll), nil
}

func loadMeta(tb *bolt.Bucket, tenant string) (streamMeta, error) {
	m, err := decodeMeta(tb.Get(kMeta))
	if err != nil {
		return m, storecodec.Corrupt("telemetry stream", tenant, err)
	}
	return m, nil
}

// AppendTelemetry appends entries (1 to 1000) to their tenants' streams in
// one durable write, in order, and returns each entry's sequence number in
// its tenant's stream. The records are durable when it returns.
func (s *Store) AppendTelemetry(ctx context.Context, entries []OutboxEntry) ([]uint64, error) {
	if len(entries) == 0 || len(entries) > MaxAppendBatch {
		return nil, fmt.Errorf("append telemetry: %d entries: give 1 to %d per call", len(entries), MaxAppendBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	recs := make([]telRecord, len(entries))
	for i, e := range entries {
		var err error
		if recs[i], err = encodeOutboxEntry(e, now); err != nil {
			return nil, fmt.Errorf("append telemetry entry %d: %w", i, err)
		}
	}
	seqs := make([]uint64, len(entries))
	g, err := s.addTelemetry(newFrame(), recs, seqs)
	if err != nil {
		return nil, err
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return seqs, nil
}

// telRecord is an outbox entry encoded before its write is queued:
// addTelemetry only numbers it (patching Global in place).
type telRecord struct {
	tenant []byte
	record []byte
}

func encodeOutboxEntry(e OutboxEntry, now time.Time) (telRecord, error) {
	if err := checkTenant(e.Tenant); err != nil {
		return telRecord{}, err
	}
	body, err := telemetry.Marshal(e.Event)
	if err != nil {
		return telRecord{}, err
	}
	if len(body) > MaxEventBytes {
		return telRecord{}, fmt.Errorf("%s: %d bytes, over the limit of %d", e.Event.EventName(), len(body), MaxEventBytes)
	}
	return telRecord{[]byte(e.Tenant), encodeTelemetry(&TelemetryRecord{AppendedAt: now, Name: e.Event.EventName(), Event: body})}, nil
}

// addTelemetry numbers recs in their tenants' streams and across all of
// them, appends them to f and queues f to the log, all under s.tmu so that
// the numbers follow the log's order. seqs, if not nil, receives each
// record's sequence number.
func (s *Store) addTelemetry(f *frame, recs []telRecord, seqs []uint64) (*walGroup, error) {
	s.tmu.Lock()
	defer s.tmu.Unlock()
	for i, r := range recs {
		last := s.telLast[string(r.tenant)] + 1
		s.telLast[string(r.tenant)] = last
		s.telGlobal++
		binary.BigEndian.PutUint64(r.record[telOffGlobal:], s.telGlobal)
		appendTelOp(f, r.tenant, last, r.record)
		if seqs != nil {
			seqs[i] = last
		}
	}
	// The log refuses a frame only once it is closed or failed, after
	// which nothing is numbered again: the numbers taken need no undoing.
	return s.wal.Add(f)
}

// loadTelemetryPositions reads each stream's last sequence number and the
// last global number (at Open, after recovery).
func (s *Store) loadTelemetryPositions() error {
	return s.db.View(func(tx *bolt.Tx) error {
		tenants, all, _ := outboxBuckets(tx)
		if all != nil {
			s.telGlobal = all.Sequence()
		}
		if tenants == nil {
			return nil
		}
		return tenants.ForEachBucket(func(name []byte) error {
			m, err := loadMeta(tenants.Bucket(name), string(name))
			if err != nil {
				return err
			}
			s.telLast[string(name)] = m.Last
			return nil
		})
	})
}

func checkPage(what string, limit int) error {
	if limit < 1 || limit > MaxReadPage {
		return fmt.Errorf("%s: limit %d outside 1..%d", what, limit, MaxReadPage)
	}
	return nil
}

func decodeRecord(v []byte, tenant string, seq uint64) (TelemetryRecord, error) {
	r, err := decodeTelemetry(v)
	if err != nil {
		return r, storecodec.Corrupt("telemetry record", fmt.Sprintf("%s#%d", tenant, seq), err)
	}
	r.Tenant, r.Seq = tenant, seq
	return r, nil
}

// ReadTelemetry returns up to limit (1 to 1000) records of tenant's stream
// with a sequence number after after, in order. A tenant with no stream
// has no records. Reading does not move the cursor: AckTelemetry does.
func (s *Store) ReadTelemetry(ctx context.Context, tenant string, after uint64, limit int) ([]TelemetryRecord, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return nil, err
	}
	if err := checkTenant(tenant); err != nil {
		return nil, fmt.Errorf("read telemetry: %w", err)
	}
	if err := checkPage("read telemetry of "+tenant, limit); err != nil {
		return nil, err
	}
	var out []TelemetryRecord
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		tenants, _, _ := outboxBuckets(tx)
		if tenants == nil || tenants.Bucket([]byte(tenant)) == nil {
			return nil
		}
		c := tenants.Bucket([]byte(tenant)).Bucket(bEv).Cursor()
		if after == ^uint64(0) {
			return nil
		}
		for k, v := c.Seek(u64(after + 1)); k != nil && len(out) < limit; k, v = c.Next() {
			r, err := decodeRecord(v, tenant, binary.BigEndian.Uint64(k))
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// ReadAllTelemetry returns up to limit (1 to 1000) records of all tenants
// with a global number after after, in append order: the operator's view.
func (s *Store) ReadAllTelemetry(ctx context.Context, after uint64, limit int) ([]TelemetryRecord, error) {
	out, _, err := s.scanAll(ctx, "read all telemetry", after, limit, nil)
	return out, err
}

// ScanAllTelemetry examines up to limit (1 to 1000) records of all
// tenants with a global number after after, in append order, and returns
// those whose name keep accepts, decoded, with the global number of the
// last record it examined (after, if none): a reader that wants a few
// kinds of event skips the others without decoding them.
func (s *Store) ScanAllTelemetry(ctx context.Context, after uint64, limit int, keep func(name string) bool) ([]TelemetryRecord, uint64, error) {
	return s.scanAll(ctx, "scan all telemetry", after, limit, keep)
}

// scanAll is ScanAllTelemetry; a nil keep keeps every record. what names
// the caller in errors.
func (s *Store) scanAll(ctx context.Context, what string, after uint64, limit int, keep func(name string) bool) ([]TelemetryRecord, uint64, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return nil, after, err
	}
	if err := checkPage(what, limit); err != nil {
		return nil, after, err
	}
	var out []TelemetryRecord
	last := after
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out, last = nil, after
		tenants, all, _ := outboxBuckets(tx)
		if all == nil || after == ^uint64(0) {
			return nil
		}
		c := all.Cursor()
		n := 0
		for k, v := c.Seek(u64(after + 1)); k != nil && n < limit; k, v = c.Next() {
			n++
			global := binary.BigEndian.Uint64(k)
			if len(v) < 9 {
				return storecodec.Corrupt("telemetry index", fmt.Sprint(global), errors.New("short entry"))
			}
			seq, tenant := binary.BigEndian.Uint64(v[:8]), v[8:]
			tb := tenants.Bucket(tenant)
			if tb == nil {
				return storecodec.Corrupt("telemetry index", string(tenant), errors.New("no such stream"))
			}
			rv := tb.Bucket(bEv).Get(u64(seq))
			if rv == nil {
				return storecodec.Corrupt("telemetry index", fmt.Sprintf("%s#%d", tenant, seq), errors.New("no such record"))
			}
			last = global
			if keep != nil {
				name, err := telemetryName(rv)
				if err != nil {
					return storecodec.Corrupt("telemetry record", fmt.Sprintf("%s#%d", tenant, seq), err)
				}
				if !keep(name) {
					continue
				}
			}
			r, err := decodeRecord(rv, string(tenant), seq)
			if err != nil {
				return err
			}
			out = append(out, r)
		}
		return nil
	})
	return out, last, err
}

// AckTelemetry records that tenant's consumer has processed its stream up
// to and including seq. The cursor never moves back (an older seq is a
// no-op); a seq after the stream's last record is an error.
func (s *Store) AckTelemetry(ctx context.Context, tenant string, seq uint64) error {
	if err := s.awaitApplied(ctx); err != nil {
		return err
	}
	if err := checkTenant(tenant); err != nil {
		return fmt.Errorf("ack telemetry: %w", err)
	}
	now := s.clock.Now()
	var failure error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		tenants, _, err := outboxBuckets(tx)
		if err != nil {
			return err
		}
		tb := tenants.Bucket([]byte(tenant))
		if tb == nil {
			failure = fmt.Errorf("ack telemetry of %s at %d: the tenant has no telemetry stream", tenant, seq)
			return nil
		}
		m, err := loadMeta(tb, tenant)
		if err != nil {
			return err
		}
		if seq > m.Last {
			failure = fmt.Errorf("ack telemetry of %s at %d: the stream ends at %d: acknowledge a sequence number you have read", tenant, seq, m.Last)
			return nil
		}
		m.Cursor = max(m.Cursor, seq)
		m.AckAt = storecodec.Nanos(now)
		return tb.Put(kMeta, encodeMeta(m))
	})
	if err != nil {
		return err
	}
	return failure
}

// TelemetryStreams returns every tenant's stream, in tenant order.
func (s *Store) TelemetryStreams(ctx context.Context) ([]TelemetryStream, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return nil, err
	}
	var out []TelemetryStream
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		tenants, _, _ := outboxBuckets(tx)
		if tenants == nil {
			return nil
		}
		return tenants.ForEachBucket(func(name []byte) error {
			tb := tenants.Bucket(name)
			tenant := string(name)
			m, err := loadMeta(tb, tenant)
			if err != nil {
				return err
			}
			st := TelemetryStream{Tenant: tenant, LastSeq: m.Last, Cursor: m.Cursor}
			if m.AckAt != 0 {
				st.LastAckAt = time.Unix(0, m.AckAt).UTC()
			}
			c := tb.Bucket(bEv).Cursor()
			if k, v := c.First(); k != nil {
				first := binary.BigEndian.Uint64(k)
				st.Stored = int(m.Last - first + 1)
				r, err := decodeRecord(v, tenant, first)
				if err != nil {
					return err
				}
				st.Oldest = r.AppendedAt
				fu := max(first, m.Cursor+1)
				if fu <= m.Last {
					st.Unconsumed = int(m.Last - fu + 1)
					uv := tb.Bucket(bEv).Get(u64(fu))
					ur, err := decodeRecord(uv, tenant, fu)
					if err != nil {
						return err
					}
					st.OldestUnconsumed = ur.AppendedAt
				}
			}
			out = append(out, st)
			return nil
		})
	})
	return out, err
}

// PurgeTelemetry deletes, oldest first, up to limit (1 to 100000) records
// appended at or before the store clock's now minus retention, and returns
// one telemetry.Dropped per tenant that lost records its consumer had not
// acknowledged (DroppedEvents counts them, QueueAgeSeconds is the age of
// the oldest of them, LastReceivedAt the consumer's last acknowledgement)
// and how many records it deleted in all. Call it again while deleted ==
// limit. The caller emits the Dropped events.
func (s *Store) PurgeTelemetry(ctx context.Context, retention time.Duration, limit int) ([]telemetry.Dropped, int, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return nil, 0, err
	}
	if retention <= 0 {
		return nil, 0, fmt.Errorf("purge telemetry: retention %v must be positive", retention)
	}
	if limit < 1 || limit > MaxPurgeBatch {
		return nil, 0, fmt.Errorf("purge telemetry: limit %d outside 1..%d", limit, MaxPurgeBatch)
	}
	now := s.clock.Now().UTC()
	cutoff := now.Add(-retention)
	var dropped []telemetry.Dropped
	var deleted int
	err := s.update(ctx, func(tx *bolt.Tx) error {
		dropped, deleted = nil, 0
		tenants, all, err := outboxBuckets(tx)
		if err != nil {
			return err
		}
		var names []string
		if err := tenants.ForEachBucket(func(k []byte) error { names = append(names, string(k)); return nil }); err != nil {
			return err
		}
		for _, tenant := range names {
			if deleted >= limit {
				break
			}
			tb := tenants.Bucket([]byte(tenant))
			m, err := loadMeta(tb, tenant)
			if err != nil {
				return err
			}
			ev := tb.Bucket(bEv)
			// Only the headers: the purge never needs an event's body.
			type victim struct {
				Seq, Global uint64
				AppendedAt  time.Time
			}
			var victims []victim
			c := ev.Cursor()
			for k, v := c.First(); k != nil && deleted+len(victims) < limit; k, v = c.Next() {
				seq := binary.BigEndian.Uint64(k)
				global, at, err := decodeTelemetryHeader(v)
				if err != nil {
					return storecodec.Corrupt("telemetry record", fmt.Sprintf("%s#%d", tenant, seq), err)
				}
				if at > cutoff.UnixNano() {
					break
				}
				victims = append(victims, victim{Seq: seq, Global: global, AppendedAt: time.Unix(0, at).UTC()})
			}
			d := telemetry.Dropped{Tenant: tenant, Reason: telemetry.DroppedQueueUnconsumed}
			for _, r := range victims {
				if err := ev.Delete(u64(r.Seq)); err != nil {
					return err
				}
				if err := all.Delete(u64(r.Global)); err != nil {
					return err
				}
				if r.Seq > m.Cursor {
					if d.DroppedEvents == 0 {
						d.QueueAgeSeconds = int64(now.Sub(r.AppendedAt) / time.Second)
					}
					d.DroppedEvents++
				}
			}
			deleted += len(victims)
			if d.DroppedEvents > 0 {
				if m.AckAt != 0 {
					d.LastReceivedAt = time.Unix(0, m.AckAt).UTC()
				}
				dropped = append(dropped, d)
			}
		}
		return nil
	})
	if err != nil {
		return nil, 0, err
	}
	return dropped, deleted, nil
}
