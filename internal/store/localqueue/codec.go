package localqueue

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/snavio/snavio/internal/store/storecodec"
)

// The records of the queues: a message (in the write-ahead log) and a
// queue's configuration (in the store file). Layout rules: package
// storecodec.

// maxIDLen bounds a message id as a record holds it (the store makes
// UUIDs; recovery reads any).
const maxIDLen = 1024

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
	rec[0] = storecodec.V1
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
	b = storecodec.AppendStr(b, m.ID)
	b = binary.AppendUvarint(b, uint64(len(m.Attributes)))
	for k, v := range m.Attributes {
		b = storecodec.AppendStr(b, k)
		b = storecodec.AppendStr(b, v)
	}
	return append(b, m.Body...)
}

// decodeMsgHeader reads rec's header and id only.
func decodeMsgHeader(rec []byte) (msgHeader, string, error) {
	r := storecodec.Reader{B: rec}
	h := readHeader(&r)
	id := r.Str(maxIDLen)
	return h, id, r.Err
}

func readHeader(r *storecodec.Reader) msgHeader {
	var h msgHeader
	r.Version("message")
	h.Seq = r.U64()
	h.VisibleAt = int64(r.U64())
	h.SentAt = int64(r.U64())
	h.FirstRecv = int64(r.U64())
	h.ReceiveCount = r.U32()
	switch r.Byte() {
	case 0:
	case 1:
		h.HasReceipt = true
	default:
		r.Fail(errors.New("bad receipt flag"))
	}
	copy(h.Nonce[:], r.Bytes(nonceLen))
	return h
}

// decodeMsg decodes a whole record. The message's body aliases rec.
func decodeMsg(rec []byte) (msgHeader, Message, error) {
	r := storecodec.Reader{B: rec}
	h := readHeader(&r)
	m := Message{ID: r.Str(maxIDLen), SentAt: time.Unix(0, h.SentAt).UTC()}
	n := r.Uvarint()
	if r.Err == nil && n > MaxMessageAttributes+3 {
		r.Fail(fmt.Errorf("%d attributes", n))
	}
	if r.Err == nil && n > 0 {
		m.Attributes = make(map[string]string, n)
		for range n {
			k := r.Str(MaxMessageBytes)
			m.Attributes[k] = r.Str(MaxMessageBytes)
		}
	}
	if r.Err != nil {
		return msgHeader{}, Message{}, r.Err
	}
	m.Body = r.B
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
	b = append(b, storecodec.V1)
	b = binary.BigEndian.AppendUint64(b, uint64(storecodec.Nanos(q.CreatedAt)))
	b = binary.BigEndian.AppendUint64(b, uint64(q.VisibilityTimeout))
	b = binary.BigEndian.AppendUint32(b, uint32(q.MaxReceives))
	b = binary.BigEndian.AppendUint32(b, uint32(q.MaxDepth))
	b = storecodec.AppendStr(b, q.Name)
	return storecodec.AppendStr(b, q.DeadLetterQueue)
}

func decodeQueue(rec []byte) (Queue, error) {
	r := storecodec.Reader{B: rec}
	r.Version("queue")
	var q Queue
	q.CreatedAt = time.Unix(0, int64(r.U64())).UTC()
	q.VisibilityTimeout = time.Duration(r.U64())
	q.MaxReceives = int(r.U32())
	q.MaxDepth = int(r.U32())
	q.Name = r.Str(MaxQueueNameLen)
	q.DeadLetterQueue = r.Str(MaxQueueNameLen)
	if r.Err == nil && len(r.B) != 0 {
		r.Fail(errors.New("trailing bytes"))
	}
	if r.Err != nil {
		return Queue{}, r.Err
	}
	q.ARN = QueueARN(q.Name)
	return q, nil
}
