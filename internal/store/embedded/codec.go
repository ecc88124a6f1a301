package embedded

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/snavio/snavio/internal/store/storecodec"
)

// The binary records of the hot paths (queue messages, queue configs,
// archived events, telemetry records and stream positions). They replaced
// JSON (store format 1), whose encoding, and the base64 of every body, cost
// most of the committer's time (docs/store/embedded.md, "Throughput").
// Their layout rules are package storecodec's.

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
	b = binary.BigEndian.AppendUint64(b, uint64(storecodec.Nanos(e.ReceivedAt)))
	b = append(b, vb)
	for _, s := range [...]string{e.EventID, e.Source, e.DetailType, e.Target, e.Command, e.Reason, e.KeyVersion} {
		b = storecodec.AppendStr(b, s)
	}
	return append(b, e.Detail...)
}

// archVersion reads an archived record's version byte (1 or 2).
func archVersion(r *storecodec.Reader) byte {
	v := r.Byte()
	if r.Err == nil && v != storecodec.V1 && v != recArchV2 {
		r.Fail(fmt.Errorf("archive record version %d, this snavio reads %d and %d", v, storecodec.V1, recArchV2))
	}
	return v
}

// verdict reads an archived record's verdict byte.
func readVerdict(r *storecodec.Reader) Verdict {
	vb := r.Byte()
	if r.Err == nil && int(vb) >= len(archVerdicts) {
		r.Fail(fmt.Errorf("unknown verdict %d", vb))
	}
	if r.Err != nil {
		return ""
	}
	return archVerdicts[vb]
}

// decodeArchived decodes an archived event; its detail is a copy.
func decodeArchived(rec []byte) (ArchivedEvent, error) {
	r := storecodec.Reader{B: rec}
	v := archVersion(&r)
	var e ArchivedEvent
	e.ReceivedAt = time.Unix(0, int64(r.U64())).UTC()
	if v == recArchV2 {
		e.Verdict = readVerdict(&r)
	}
	e.EventID = r.Str(maxKeyLen)
	e.Source = r.Str(maxKeyLen)
	e.DetailType = r.Str(maxKeyLen)
	e.Target = r.Str(maxKeyLen)
	e.Command = r.Str(maxKeyLen)
	if v == recArchV2 {
		e.Reason = r.Str(maxKeyLen)
		e.KeyVersion = r.Str(maxKeyLen)
	}
	if r.Err != nil {
		return ArchivedEvent{}, r.Err
	}
	e.Detail = append([]byte(nil), r.B...)
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
	r := storecodec.Reader{B: rec}
	v := archVersion(&r)
	r.U64()
	var h archHead
	if v == recArchV2 {
		h.verdict = readVerdict(&r)
	}
	h.id = r.Str(maxKeyLen)
	h.source = r.Str(maxKeyLen)
	return h, r.Err
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
	b = append(b, storecodec.V1)
	b = binary.BigEndian.AppendUint64(b, r.Global)
	b = binary.BigEndian.AppendUint64(b, uint64(storecodec.Nanos(r.AppendedAt)))
	b = storecodec.AppendStr(b, r.Name)
	return append(b, r.Event...)
}

// decodeTelemetry decodes a record; its event is a copy.
func decodeTelemetry(rec []byte) (TelemetryRecord, error) {
	r := storecodec.Reader{B: rec}
	r.Version("telemetry")
	var t TelemetryRecord
	t.Global = r.U64()
	t.AppendedAt = time.Unix(0, int64(r.U64())).UTC()
	t.Name = r.Str(maxKeyLen)
	if r.Err != nil {
		return TelemetryRecord{}, r.Err
	}
	t.Event = append([]byte(nil), r.B...)
	return t, nil
}

// decodeTelemetryHeader reads a record's global position and append time
// without copying its name or event (the purge needs no more).
func decodeTelemetryHeader(rec []byte) (global uint64, appendedAt int64, err error) {
	r := storecodec.Reader{B: rec}
	r.Version("telemetry")
	global = r.U64()
	appendedAt = int64(r.U64())
	return global, appendedAt, r.Err
}

// telemetryName reads a record's event name only.
func telemetryName(rec []byte) (string, error) {
	r := storecodec.Reader{B: rec}
	r.Version("telemetry")
	r.U64()
	r.U64()
	name := r.Str(maxKeyLen)
	return name, r.Err
}

// Stream positions: version, last, cursor, ack_at (ns, 0: never).
const metaLen = 25

func encodeMeta(m streamMeta) []byte {
	b := make([]byte, 0, metaLen)
	b = append(b, storecodec.V1)
	b = binary.BigEndian.AppendUint64(b, m.Last)
	b = binary.BigEndian.AppendUint64(b, m.Cursor)
	return binary.BigEndian.AppendUint64(b, uint64(m.AckAt))
}

func decodeMeta(rec []byte) (streamMeta, error) {
	r := storecodec.Reader{B: rec}
	r.Version("telemetry stream")
	m := streamMeta{Last: r.U64(), Cursor: r.U64(), AckAt: int64(r.U64())}
	if r.Err == nil && len(r.B) != 0 {
		r.Fail(errors.New("trailing bytes"))
	}
	return m, r.Err
}
