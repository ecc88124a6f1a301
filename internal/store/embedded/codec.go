package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"
)

// The binary records of the hot paths (queue messages, queue configs,
// archived events, telemetry records and stream positions). They replaced
// JSON (store format 1), whose encoding, and the base64 of every body, cost
// most of the committer's time (docs/store/embedded.md, "Throughput").
//
// Every record starts with its version byte. Fixed-size fields come first,
// at fixed offsets, so the committer can read or patch them (a sequence
// number, a visibility time) without decoding the rest; variable fields are
// uvarint-length-prefixed; the largest field (a body, a detail, an event)
// is last and takes the rest of the record. Decoders check every length
// and never panic (FuzzDecode*).

const recV1 = 1

var errShort = errors.New("record truncated")

// reader reads a record's fields in order; the first failure sticks.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

func (r *reader) u64() uint64 {
	if r.err != nil || len(r.b) < 8 {
		r.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *reader) u32() uint32 {
	if r.err != nil || len(r.b) < 4 {
		r.fail(errShort)
		return 0
	}
	v := binary.BigEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *reader) byte() byte {
	if r.err != nil || len(r.b) < 1 {
		r.fail(errShort)
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n < 0 || len(r.b) < n {
		r.fail(errShort)
		return nil
	}
	v := r.b[:n:n]
	r.b = r.b[n:]
	return v
}

// str reads a uvarint-prefixed string of at most max bytes.
func (r *reader) str(max int) string {
	n := r.uvarint()
	if r.err == nil && n > uint64(max) {
		r.fail(fmt.Errorf("field of %d bytes, over %d", n, max))
	}
	if r.err != nil {
		return ""
	}
	return string(r.bytes(int(n)))
}

func (r *reader) uvarint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad length"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *reader) version(what string) {
	if v := r.byte(); r.err == nil && v != recV1 {
		r.fail(fmt.Errorf("%s record version %d, this snavio reads %d", what, v, recV1))
	}
}

func appendStr(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Queue messages: msgHeader at fixed offsets, then the id, the attributes
// and the body.
//
//	0  version      1
//	1  seq          8
//	9  visible_at   8 (ns)
//	17 sent_at      8 (ns)
//	25 first_recv   8 (ns, 0: never received)
//	33 receives     4
//	37 has_receipt  1
//	38 nonce        12 (the latest receipt handle's)
//	50 id, attribute count, attributes (name, value), body
const (
	msgOffSeq    = 1
	msgHeaderLen = 50
	nonceLen     = 12
)

// msgHeader is the mutable, fixed-size part of a stored message.
type msgHeader struct {
	Seq          uint64
	VisibleAt    int64
	SentAt       int64
	FirstRecv    int64
	ReceiveCount uint32
	HasReceipt   bool
	Nonce        [nonceLen]byte
}

// putHeader writes h over rec's header.
func putHeader(rec []byte, h *msgHeader) {
	rec[0] = recV1
	binary.BigEndian.PutUint64(rec[1:], h.Seq)
	binary.BigEndian.PutUint64(rec[9:], uint64(h.VisibleAt))
	binary.BigEndian.PutUint64(rec[17:], uint64(h.SentAt))
	binary.BigEndian.PutUint64(rec[25:], uint64(h.FirstRecv))
	binary.BigEndian.PutUint32(rec[33:], h.ReceiveCount)
	rec[37] = 0
	if h.HasReceipt {
		rec[37] = 1
	}
	copy(rec[38:], h.Nonce[:])
}

// encodeMsg returns the record of message m with header h.
func encodeMsg(h *msgHeader, m *Message) []byte {
	return appendMsg(make([]byte, 0, msgLen(m)), h, m)
}

// msgLen bounds the length of m's record.
func msgLen(m *Message) int {
	n := msgHeaderLen + 1 + len(m.ID) + 1 + len(m.Body)
	for k, v := range m.Attributes {
		n += 2*binary.MaxVarintLen32 + len(k) + len(v)
	}
	return n
}

// appendMsg appends the record of message m with header h to b.
func appendMsg(b []byte, h *msgHeader, m *Message) []byte {
	b = slices.Grow(b, msgLen(m))
	start := len(b)
	b = b[:start+msgHeaderLen]
	putHeader(b[start:], h)
	b = appendStr(b, m.ID)
	b = binary.AppendUvarint(b, uint64(len(m.Attributes)))
	for k, v := range m.Attributes {
		b = appendStr(b, k)
		b = appendStr(b, v)
	}
	return append(b, m.Body...)
}

// decodeMsgHeader reads rec's header and id only.
func decodeMsgHeader(rec []byte) (msgHeader, string, error) {
	r := reader{b: rec}
	h := readHeader(&r)
	id := r.str(maxKeyLen)
	return h, id, r.err
}

func readHeader(r *reader) msgHeader {
	var h msgHeader
	r.version("message")
	h.Seq = r.u64()
	h.VisibleAt = int64(r.u64())
	h.SentAt = int64(r.u64())
	h.FirstRecv = int64(r.u64())
	h.ReceiveCount = r.u32()
	switch r.byte() {
	case 0:
	case 1:
		h.HasReceipt = true
	default:
		r.fail(errors.New("bad receipt flag"))
	}
	copy(h.Nonce[:], r.bytes(nonceLen))
	return h
}

// decodeMsg decodes a whole record. The message's body aliases rec.
func decodeMsg(rec []byte) (msgHeader, Message, error) {
	r := reader{b: rec}
	h := readHeader(&r)
	m := Message{ID: r.str(maxKeyLen), SentAt: time.Unix(0, h.SentAt).UTC()}
	n := r.uvarint()
	if r.err == nil && n > MaxMessageAttributes+3 {
		r.fail(fmt.Errorf("%d attributes", n))
	}
	if r.err == nil && n > 0 {
		m.Attributes = make(map[string]string, n)
		for range n {
			k := r.str(MaxMessageBytes)
			m.Attributes[k] = r.str(MaxMessageBytes)
		}
	}
	if r.err != nil {
		return msgHeader{}, Message{}, r.err
	}
	m.Body = r.b
	return h, m, nil
}

// Queue configs:
//
//	0  version            1
//	1  created_at         8 (ns)
//	9  visibility_timeout 8 (ns)
//	17 max_receives       4
//	21 max_depth          4
//	25 name, dead-letter queue
func encodeQueue(q *Queue) []byte {
	b := make([]byte, 0, 25+2+len(q.Name)+len(q.DeadLetterQueue))
	b = append(b, recV1)
	b = binary.BigEndian.AppendUint64(b, uint64(nanos(q.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(q.VisibilityTimeout))
	b = binary.BigEndian.AppendUint32(b, uint32(q.MaxReceives))
	b = binary.BigEndian.AppendUint32(b, uint32(q.MaxDepth))
	b = appendStr(b, q.Name)
	return appendStr(b, q.DeadLetterQueue)
}

func decodeQueue(rec []byte) (Queue, error) {
	r := reader{b: rec}
	r.version("queue")
	var q Queue
	q.CreatedAt = time.Unix(0, int64(r.u64())).UTC()
	q.VisibilityTimeout = time.Duration(r.u64())
	q.MaxReceives = int(r.u32())
	q.MaxDepth = int(r.u32())
	q.Name = r.str(MaxQueueNameLen)
	q.DeadLetterQueue = r.str(MaxQueueNameLen)
	if r.err == nil && len(r.b) != 0 {
		r.fail(errors.New("trailing bytes"))
	}
	if r.err != nil {
		return Queue{}, r.err
	}
	q.ARN = QueueARN(q.Name)
	return q, nil
}

// Archived events (version 2; version 1, written before the shield's
// verdict was recorded, has no verdict byte, reason or key version and
// reads back with an empty Verdict):
//
//	0  version      1
//	1  received_at  8 (ns)
//	9  verdict      1 (v2 only: archVerdicts)
//	   id, source, detail-type, target, command, then (v2) reason and
//	   key version, then the detail
const recArchV2 = 2

// archVerdicts are the verdicts' bytes; 0 is "" (not recorded).
var archVerdicts = [...]Verdict{"", VerdictAccepted, VerdictRejected, VerdictNotCommand}

func verdictByte(v Verdict) (byte, bool) {
	for i, w := range archVerdicts {
		if w == v {
			return byte(i), true
		}
	}
	return 0, false
}

func encodeArchived(e *ArchivedEvent) []byte { return appendArchived(nil, e) }

// archivedLen is the size of e's record.
func archivedLen(e *ArchivedEvent) int {
	return 10 + 7*binary.MaxVarintLen16 + len(e.EventID) + len(e.Source) + len(e.DetailType) + len(e.Target) + len(e.Command) + len(e.Reason) + len(e.KeyVersion) + len(e.Detail)
}

// appendArchived appends e's record to b; e was checked (checkArchived),
// so its verdict is one of archVerdicts.
func appendArchived(b []byte, e *ArchivedEvent) []byte {
	b = slices.Grow(b, archivedLen(e))
	vb, _ := verdictByte(e.Verdict)
	b = append(b, recArchV2)
	b = binary.BigEndian.AppendUint64(b, uint64(nanos(e.ReceivedAt)))
	b = append(b, vb)
	for _, s := range [...]string{e.EventID, e.Source, e.DetailType, e.Target, e.Command, e.Reason, e.KeyVersion} {
		b = appendStr(b, s)
	}
	return append(b, e.Detail...)
}

// archVersion reads an archived record's version byte (1 or 2).
func (r *reader) archVersion() byte {
	v := r.byte()
	if r.err == nil && v != recV1 && v != recArchV2 {
		r.fail(fmt.Errorf("archive record version %d, this snavio reads %d and %d", v, recV1, recArchV2))
	}
	return v
}

// verdict reads an archived record's verdict byte.
func (r *reader) verdict() Verdict {
	vb := r.byte()
	if r.err == nil && int(vb) >= len(archVerdicts) {
		r.fail(fmt.Errorf("unknown verdict %d", vb))
	}
	if r.err != nil {
		return ""
	}
	return archVerdicts[vb]
}

// decodeArchived decodes an archived event; its detail is a copy.
func decodeArchived(rec []byte) (ArchivedEvent, error) {
	r := reader{b: rec}
	v := r.archVersion()
	var e ArchivedEvent
	e.ReceivedAt = time.Unix(0, int64(r.u64())).UTC()
	if v == recArchV2 {
		e.Verdict = r.verdict()
	}
	e.EventID = r.str(maxKeyLen)
	e.Source = r.str(maxKeyLen)
	e.DetailType = r.str(maxKeyLen)
	e.Target = r.str(maxKeyLen)
	e.Command = r.str(maxKeyLen)
	if v == recArchV2 {
		e.Reason = r.str(maxKeyLen)
		e.KeyVersion = r.str(maxKeyLen)
	}
	if r.err != nil {
		return ArchivedEvent{}, r.err
	}
	e.Detail = append([]byte(nil), r.b...)
	if e.Target == "" && e.Command == "" {
		// Derived when read, not when written: an event is archived
		// once per command, read back only by a replay.
		e.Target, e.Command = commandOf(e.Detail)
	}
	return e, nil
}

// archHead is what a purge needs of an archived record.
type archHead struct {
	id, source string
	verdict    Verdict
}

// archivedHead reads an archived event's id, source and verdict without
// copying the detail.
func archivedHead(rec []byte) (archHead, error) {
	r := reader{b: rec}
	v := r.archVersion()
	r.u64()
	var h archHead
	if v == recArchV2 {
		h.verdict = r.verdict()
	}
	h.id = r.str(maxKeyLen)
	h.source = r.str(maxKeyLen)
	return h, r.err
}

// archivedID reads an archived event's id only.
func archivedID(rec []byte) (string, error) {
	h, err := archivedHead(rec)
	return h.id, err
}

// Telemetry records:
//
//	0  version      1
//	1  global       8
//	9  appended_at  8 (ns)
//	17 name, then the event's JSON
const telOffGlobal = 1

func encodeTelemetry(r *TelemetryRecord) []byte {
	b := make([]byte, 0, 17+2+len(r.Name)+len(r.Event))
	b = append(b, recV1)
	b = binary.BigEndian.AppendUint64(b, r.Global)
	b = binary.BigEndian.AppendUint64(b, uint64(nanos(r.AppendedAt)))
	b = appendStr(b, r.Name)
	return append(b, r.Event...)
}

// decodeTelemetry decodes a record; its event is a copy.
func decodeTelemetry(rec []byte) (TelemetryRecord, error) {
	r := reader{b: rec}
	r.version("telemetry")
	var t TelemetryRecord
	t.Global = r.u64()
	t.AppendedAt = time.Unix(0, int64(r.u64())).UTC()
	t.Name = r.str(maxKeyLen)
	if r.err != nil {
		return TelemetryRecord{}, r.err
	}
	t.Event = append([]byte(nil), r.b...)
	return t, nil
}

// decodeTelemetryHeader reads a record's global position and append time
// without copying its name or event (the purge needs no more).
func decodeTelemetryHeader(rec []byte) (global uint64, appendedAt int64, err error) {
	r := reader{b: rec}
	r.version("telemetry")
	global = r.u64()
	appendedAt = int64(r.u64())
	return global, appendedAt, r.err
}

// telemetryName reads a record's event name only.
func telemetryName(rec []byte) (string, error) {
	r := reader{b: rec}
	r.version("telemetry")
	r.u64()
	r.u64()
	name := r.str(maxKeyLen)
	return name, r.err
}

// Stream positions: version, last, cursor, ack_at (ns, 0: never).
const metaLen = 25

func encodeMeta(m streamMeta) []byte {
	b := make([]byte, 0, metaLen)
	b = append(b, recV1)
	b = binary.BigEndian.AppendUint64(b, m.Last)
	b = binary.BigEndian.AppendUint64(b, m.Cursor)
	return binary.BigEndian.AppendUint64(b, uint64(m.AckAt))
}

func decodeMeta(rec []byte) (streamMeta, error) {
	r := reader{b: rec}
	r.version("telemetry stream")
	m := streamMeta{Last: r.u64(), Cursor: r.u64(), AckAt: int64(r.u64())}
	if r.err == nil && len(r.b) != 0 {
		r.fail(errors.New("trailing bytes"))
	}
	return m, r.err
}
