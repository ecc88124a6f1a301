package embedded

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/internal/store/wal"
)

// The archive of accepted events, like the EventBridge archive: every event
// the ingress accepted, raw, queryable by time range with filters, for
// replay.

// Archive limits.
const (
	// MaxArchivePage is the most events one ArchiveQuery returns.
	MaxArchivePage = 1000
	// DefaultArchivePage is the page size when the query gives none.
	DefaultArchivePage = 100
	// MaxArchiveDetail bounds an archived detail (EventBridge's entry
	// limit).
	MaxArchiveDetail = 256 << 10
	// archiveScanLimit bounds the events one query examines, so that a
	// selective filter over a long range returns a short page and a token
	// instead of walking the whole archive.
	archiveScanLimit = 10_000
)

// ArchivedEvent is one accepted bus event.
type ArchivedEvent struct {
	// EventID is the id the bus gave the event; appending the same id
	// again is a no-op.
	EventID    string    `json:"id"`
	Source     string    `json:"source"`
	DetailType string    `json:"detail_type"`
	Detail     []byte    `json:"detail"`
	ReceivedAt time.Time `json:"received_at"`
	// Target and Command are command.target and command.name. When both
	// are empty at append, they are read from Detail when the event is
	// read back (they stay empty for a detail that does not carry them
	// well-formed).
	Target  string `json:"target,omitempty"`
	Command string `json:"command,omitempty"`
	// Verdict is the shield's verdict on the event; empty for an event
	// archived before verdicts were recorded (a replay re-verifies it).
	Verdict Verdict `json:"verdict,omitempty"`
	// Reason is the shield's reason code for a rejected event.
	Reason string `json:"reason,omitempty"`
	// KeyVersion is the key version the shield verified an accepted
	// command with.
	KeyVersion string `json:"key_version,omitempty"`
}

// Verdict is what the dispatcher made of an archived event.
type Verdict string

// Verdicts.
const (
	// VerdictAccepted: a command the shield accepted (authentic, fresh,
	// well-formed); only these can be replayed.
	VerdictAccepted Verdict = "accepted"
	// VerdictRejected: a command the shield rejected, with its reason.
	VerdictRejected Verdict = "rejected"
	// VerdictNotCommand: an event whose detail-type the dispatcher does
	// not consume; kept for the record, never replayed.
	VerdictNotCommand Verdict = "not_command"
)

// ArchiveQuery selects archived events.
type ArchiveQuery struct {
	// From (inclusive) and To (exclusive) bound ReceivedAt; a zero To
	// means no upper bound.
	From, To time.Time
	// Source, Target and Command, when set, must equal the event's.
	Source, Target, Command string
	// Limit is the page size, 1 to 1000; 0 means 100.
	Limit int
	// PageToken continues a previous query (its NextToken); the other
	// fields must be the same as in that query.
	PageToken string
}

// Archive layout: bucket "archive" holds "ev" (timeKey(received, seq) ->
// encodeArchived record) and "ids" (event id -> its ev key).
var (
	bArchEv  = []byte("ev")
	bArchIDs = []byte("ids")
)

// commandOf reads command.target and command.name from a detail, leniently:
// the archive keeps events the shield later refused. A detail that is not
// one well-formed JSON value yields neither; a field that is not a string,
// or is over the key limit, is left empty; of repeated names the last one
// counts; names match case-insensitively, as encoding/json matched them;
// invalid UTF-8 is replaced. It streams the detail once with
// jsontext (a full encoding/json Unmarshal cost a tenth of the pipeline's
// CPU at load).
func commandOf(detail []byte) (target, name string) {
	d := decoders.Get().(*jsontext.Decoder)
	d.Reset(bytes.NewReader(detail), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	defer func() {
		d.Reset(bytes.NewReader(nil))
		decoders.Put(d)
	}()
	target, name, ok := readCommandOf(d)
	if !ok {
		return "", ""
	}
	// The rest must be well formed too, and nothing may follow.
	if _, err := d.ReadToken(); err != io.EOF {
		return "", ""
	}
	return target, name
}

var decoders = sync.Pool{New: func() any { return jsontext.NewDecoder(bytes.NewReader(nil)) }}

// readCommandOf reads one top-level value from d.
func readCommandOf(d *jsontext.Decoder) (target, name string, ok bool) {
	tok, err := d.ReadToken()
	if err != nil {
		return "", "", false
	}
	if tok.Kind() != '{' {
		return "", "", false
	}
	for d.PeekKind() != '}' {
		k, err := d.ReadToken()
		if err != nil {
			return "", "", false
		}
		if !strings.EqualFold(k.String(), "command") || d.PeekKind() == 'n' {
			if d.SkipValue() != nil {
				return "", "", false
			}
			continue
		}
		if d.PeekKind() != '{' {
			return "", "", false
		}
		if _, err := d.ReadToken(); err != nil {
			return "", "", false
		}
		for d.PeekKind() != '}' {
			f, err := d.ReadToken()
			if err != nil {
				return "", "", false
			}
			isTarget, isName := strings.EqualFold(f.String(), "target"), strings.EqualFold(f.String(), "name")
			if !isTarget && !isName || d.PeekKind() != '"' {
				if d.SkipValue() != nil {
					return "", "", false
				}
				if isTarget {
					target = ""
				} else if isName {
					name = ""
				}
				continue
			}
			v, err := d.ReadToken()
			if err != nil {
				return "", "", false
			}
			s := v.String()
			if len(s) > maxKeyLen {
				s = ""
			}
			if isTarget {
				target = s
			} else {
				name = s
			}
		}
		if _, err := d.ReadToken(); err != nil {
			return "", "", false
		}
	}
	if _, err := d.ReadToken(); err != nil {
		return "", "", false
	}
	return target, name, true
}

// ArchiveAppend stores e durably. An event id already archived is a no-op
// (a retried PutEvents entry is archived once).
func (s *Store) ArchiveAppend(ctx context.Context, e ArchivedEvent) error {
	return s.ArchiveAppendBatch(ctx, []ArchivedEvent{e})
}

// MaxArchiveBatch is the most events one ArchiveAppendBatch takes.
const MaxArchiveBatch = 1000

// ArchiveAppendBatch stores events (1 to 1000) durably in one write: all
// of them or, on an error, none. With a context from DeferSync it returns
// once the write is queued. An event id already archived, or
// repeated in events, is stored once.
func (s *Store) ArchiveAppendBatch(ctx context.Context, events []ArchivedEvent) error {
	if len(events) == 0 || len(events) > MaxArchiveBatch {
		return fmt.Errorf("archive: %d events: give 1 to %d per call", len(events), MaxArchiveBatch)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	for i := range events {
		e := events[i]
		if err := checkArchived(&e); err != nil {
			return err
		}
	}
	events, undo := s.admitArchived(events)
	if len(events) == 0 {
		return nil
	}
	size := 0
	for i := range events {
		size += wal.OpHeaderLen + archivedLen(&events[i])
	}
	// Sized once: growing a request's 10 events one by one allocated
	// about four times the frame.
	f := wal.NewFrame[localqueue.Changes](size)
	for _, e := range events {
		_ = checkArchived(&e) // checked above; fills the derived fields
		appendArchOp(f, &e)
	}
	g, err := s.wal.Add(f)
	if err != nil {
		undo()
		return err
	}
	return g.Settle(ctx)
}

// checkArchived validates e and fills its derived fields.
func checkArchived(e *ArchivedEvent) error {
	if err := checkKey("archive event id", e.EventID); err != nil {
		return fmt.Errorf("archive: %w", err)
	}
	if len(e.Detail) > MaxArchiveDetail {
		return fmt.Errorf("archive event %s: detail of %d bytes, over the limit of %d", e.EventID, len(e.Detail), MaxArchiveDetail)
	}
	if len(e.Source) > maxKeyLen || len(e.DetailType) > maxKeyLen || len(e.Target) > maxKeyLen || len(e.Command) > maxKeyLen || len(e.Reason) > maxKeyLen || len(e.KeyVersion) > maxKeyLen {
		return fmt.Errorf("archive event %s: source, detail-type, target, command, reason or key version over %d bytes", e.EventID, maxKeyLen)
	}
	if _, ok := verdictByte(e.Verdict); !ok {
		return fmt.Errorf("archive event %s: unknown verdict %.40q: use accepted, rejected, not_command or none", e.EventID, e.Verdict)
	}
	if e.ReceivedAt.IsZero() {
		return fmt.Errorf("archive event %s: no received time: set ReceivedAt", e.EventID)
	}
	e.ReceivedAt = e.ReceivedAt.UTC()
	return nil
}

// ArchiveGet returns the archived event id, and whether it exists.
func (s *Store) ArchiveGet(ctx context.Context, id string) (ArchivedEvent, bool, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return ArchivedEvent{}, false, err
	}
	var e ArchivedEvent
	var ok bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		ab := tx.Bucket(bArchive)
		ids, ev := ab.Bucket(bArchIDs), ab.Bucket(bArchEv)
		if ids == nil || id == "" {
			return nil
		}
		k := ids.Get([]byte(id))
		if k == nil {
			return nil
		}
		v := ev.Get(k)
		if v == nil {
			return storecodec.Corrupt("archive index", id, fmt.Errorf("no event at %x", k))
		}
		var err error
		if e, err = decodeArchived(v); err != nil {
			return storecodec.Corrupt("archived event", id, err)
		}
		ok = true
		return nil
	})
	return e, ok && err == nil, err
}

// pageTokenPrefix versions the archive's page tokens.
const pageTokenPrefix = "a1."

func encodePageToken(k []byte) string {
	return pageTokenPrefix + base64.RawURLEncoding.EncodeToString(k)
}

// parsePageToken returns the archive key a page token points at.
func parsePageToken(tok string) ([]byte, error) {
	rest, ok := strings.CutPrefix(tok, pageTokenPrefix)
	if !ok {
		return nil, fmt.Errorf("page token %.40q: not an archive page token: pass NextToken unchanged", tok)
	}
	k, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(k) != 16 {
		return nil, fmt.Errorf("page token %.40q: malformed: pass NextToken unchanged", tok)
	}
	return k, nil
}

// ArchiveQuery returns, in received order, up to q.Limit events matching
// q, and a token for the next page ("" when the range is exhausted). A
// page may be short, even empty, with a token when the filters skip many
// events: keep paging until the token is "".
func (s *Store) ArchiveQuery(ctx context.Context, q ArchiveQuery) ([]ArchivedEvent, string, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return nil, "", err
	}
	limit := q.Limit
	if limit == 0 {
		limit = DefaultArchivePage
	}
	if limit < 0 || limit > MaxArchivePage {
		return nil, "", fmt.Errorf("archive query: limit %d outside 1..%d", q.Limit, MaxArchivePage)
	}
	if !q.To.IsZero() && !q.To.After(q.From) {
		return nil, "", fmt.Errorf("archive query: To %s is not after From %s", q.To.Format(time.RFC3339Nano), q.From.Format(time.RFC3339Nano))
	}
	start := timeKey(storecodec.Nanos(q.From), 0)
	if q.PageToken != "" {
		k, err := parsePageToken(q.PageToken)
		if err != nil {
			return nil, "", fmt.Errorf("archive query: %w", err)
		}
		start = k
	}
	var out []ArchivedEvent
	var next string
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out, next = nil, ""
		ev := tx.Bucket(bArchive).Bucket(bArchEv)
		if ev == nil {
			return nil
		}
		c := ev.Cursor()
		scanned := 0
		for k, v := c.Seek(start); k != nil; k, v = c.Next() {
			if !q.To.IsZero() && int64(binary.BigEndian.Uint64(k[:8])) >= storecodec.Nanos(q.To) {
				return nil
			}
			if len(out) == limit || scanned == archiveScanLimit {
				next = encodePageToken(k)
				return nil
			}
			scanned++
			e, err := decodeArchived(v)
			if err != nil {
				return storecodec.Corrupt("archived event", fmt.Sprintf("%x", k), err)
			}
			if (q.Source == "" || e.Source == q.Source) && (q.Target == "" || e.Target == q.Target) && (q.Command == "" || e.Command == q.Command) {
				out = append(out, e)
			}
		}
		return nil
	})
	if err != nil {
		return nil, "", err
	}
	return out, next, nil
}

// ArchivePurge deletes up to limit (1 to 100000) events received before
// before, oldest first, and returns how many it deleted (call again while
// it returns limit): the archive's retention.
func (s *Store) ArchivePurge(ctx context.Context, before time.Time, limit int) (int, error) {
	if err := s.awaitApplied(ctx); err != nil {
		return 0, err
	}
	if limit < 1 || limit > MaxPurgeBatch {
		return 0, fmt.Errorf("archive purge: limit %d outside 1..%d", limit, MaxPurgeBatch)
	}
	end := storecodec.Nanos(before)
	return s.purgeArchive(ctx, limit, func() pickFunc {
		return func(k []byte, _ archHead, _ int64) (take, stop bool) {
			stop = int64(binary.BigEndian.Uint64(k[:8])) >= end
			return !stop, stop
		}
	})
}

// pickFunc decides, for each archived record oldest first, whether a purge
// deletes it and whether the walk stops there.
type pickFunc func(k []byte, h archHead, size int64) (take, stop bool)

// purgeArchive deletes in one transaction, oldest first, up to limit
// records a picker takes (newPick makes one per attempt of the
// transaction), releases them from the usage and returns how many it
// deleted.
func (s *Store) purgeArchive(ctx context.Context, limit int, newPick func() pickFunc) (int, error) {
	var purged []purgedRecord
	err := s.update(ctx, func(tx *bolt.Tx) error {
		purged = purged[:0]
		ab := tx.Bucket(bArchive)
		ev, ids := ab.Bucket(bArchEv), ab.Bucket(bArchIDs)
		if ev == nil {
			return nil
		}
		pick := newPick()
		type victim struct{ k, id []byte }
		var victims []victim
		c := ev.Cursor()
		for k, v := c.First(); k != nil && len(victims) < limit; k, v = c.Next() {
			h, err := archivedHead(v)
			if err != nil {
				return storecodec.Corrupt("archived event", fmt.Sprintf("%x", k), err)
			}
			take, stop := pick(k, h, int64(len(v)))
			if stop {
				break
			}
			if take {
				victims = append(victims, victim{k: append([]byte(nil), k...), id: []byte(h.id)})
				purged = append(purged, purgedRecord{source: h.source, size: int64(len(v)), verdict: h.verdict})
			}
		}
		for _, vi := range victims {
			if err := ev.Delete(vi.k); err != nil {
				return err
			}
			if err := ids.Delete(vi.id); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	s.releasePurged(purged)
	return len(purged), nil
}
