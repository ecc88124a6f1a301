package localqueue

import (
	"bytes"
	"container/heap"
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Bucket is the store file's bucket of queue configurations: one nested
// bucket per queue, its key kCfg holding the Queue (encodeQueue). The
// messages are in memory and in the write-ahead log.
var Bucket = []byte("queues")

// Op kinds this package writes to the log. The owner of the log gives
// its other ops kinds of their own (IsOp tells these apart).
const (
	OpMsg   byte = 1 // queue, then a message record (encodeMsg): a new message, or a message moved by compaction
	OpState byte = 2 // queue, id, then a message header (msgHeaderLen): the message's new state
	OpDel   byte = 3 // queue, id: the message is gone (deleted, or moved to a dead-letter queue)
	OpPurge byte = 4 // queue: every message sent before this frame is gone
)

// IsOp says whether kind is one of this package's ops.
func IsOp(kind byte) bool { return kind >= OpMsg && kind <= OpPurge }

// Changes is what a frame does to the queues once committed (Committed):
// the Meta of the log's frames.
type Changes struct {
	// inserts are messages to add to their queues once durable; moves
	// messages whose record compaction copied.
	inserts []insert
	moves   []move
	// purge, when set, empties the queue of every message sent before
	// this frame; purged is how many it removed.
	purge  string
	purged int
}

type (
	// Frame is a frame of the log the queues write to.
	Frame = wal.Frame[Changes]
	// Log is the log the queues write to.
	Log     = wal.Log[Changes]
	group   = wal.Group[Changes]
	segment = wal.Segment
)

// insert is a message to put in q: its id and header, and its record's
// offset in the frame and length.
type insert struct {
	queue string
	q     *memQueue
	id    uuid.UUID
	h     msgHeader
	n     int
	off   int
}

// move is a record compaction copied to the frame at off: of the received
// message m, or else of the fresh one at c.ents[i] (at fromOff in from).
type move struct {
	q       *memQueue
	m       *memMsg
	c       *freshChunk
	i       int
	from    *segment
	fromOff uint32
	off     int
}

// Config configures New.
type Config struct {
	// Clock is the time source of visibility and sent times.
	Clock clock.Clock
	// Update runs fn in a committed write transaction of the store file
	// (where the configurations are); fn may run more than once.
	Update func(ctx context.Context, fn func(tx *bolt.Tx) error) error
	// MemoryBudget, when positive, bounds the bytes the queued messages
	// of an ephemeral log hold (their records, and MsgOverhead each): a
	// send beyond it fails with ErrMemoryBudget. Ignored on file, where
	// the records stay on disk.
	MemoryBudget int64
}

// Queues are the local queues with the semantics of standard SQS queues
// (queue.go): their configurations in the store file, their messages in
// the write-ahead log, indexed in memory (memqueue.go). Build them with
// New, Load and Start; they are safe for concurrent use.
type Queues struct {
	clock  clock.Clock
	update func(ctx context.Context, fn func(tx *bolt.Tx) error) error
	log    *Log
	// closed: Close was called; every method refuses from then on.
	closed atomic.Bool

	// mu guards queues, the segments' live counts and memBytes, what an
	// ephemeral log's queued messages hold of memBudget.
	mu                  sync.Mutex
	queues              map[string]*memQueue
	memBytes, memBudget int64
	ephemeral           bool
}

// New returns queues to Load.
func New(cfg Config) *Queues {
	return &Queues{clock: cfg.Clock, update: cfg.Update, memBudget: cfg.MemoryBudget, queues: make(map[string]*memQueue)}
}

// Load reads every queue's configuration from the store file (at Open,
// before the log is replayed).
func (qs *Queues) Load(tx *bolt.Tx) error {
	root := tx.Bucket(Bucket)
	return root.ForEachBucket(func(name []byte) error {
		q, err := loadQueue(root.Bucket(name), string(name))
		if err != nil {
			return err
		}
		mq := newMemQueue(q)
		mq.recovering = make(map[uuid.UUID]freshMsg)
		qs.queues[q.Name] = mq
		return nil
	})
}

// Start indexes the messages Replay found, in the order they were queued,
// and writes to log from now on.
func (qs *Queues) Start(log *Log) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	qs.log, qs.ephemeral = log, log.Ephemeral()
	for _, q := range qs.queues {
		if q.recovering == nil {
			continue
		}
		q.endRecovery()
		q.vis = q.vis[:0]
		for _, m := range q.msgs {
			q.vis = append(q.vis, m)
		}
		for i, m := range q.vis {
			m.idx = i
		}
		heap.Init(&q.vis)
	}
}

// Close makes every later call fail with wal.ErrClosed (the store closes
// its log after).
func (qs *Queues) Close() { qs.closed.Store(true) }

// Locked runs fn holding the lock that guards the segments' live counts
// (the owner detaches a segment under it: wal.Log.DetachOldest).
func (qs *Queues) Locked(fn func()) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	fn()
}

// MemoryUse returns the bytes an ephemeral log's queued messages hold and
// the budget (Config.MemoryBudget); both 0 on file.
func (qs *Queues) MemoryUse() (used, budget int64) {
	if !qs.ephemeral {
		return 0, 0
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return qs.memBytes, qs.memBudget
}

// QueueFull says whether queue holds its MaxDepth of messages: a send to
// it now fails with ErrQueueFull.
func (qs *Queues) QueueFull(queue string) (bool, error) {
	q, err := qs.lockQueue(queue, "")
	if err != nil {
		return false, err
	}
	defer qs.mu.Unlock()
	return q.full(), nil
}

// Committed is the log's OnCommitted for the queues: it runs in lsn
// order once frames are durable (or written, with a sync interval), and
// makes their messages receivable and carries out their purges and
// moves.
func (qs *Queues) Committed(frames []*Frame) {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	for _, f := range frames {
		c := &f.Meta
		for _, in := range c.inserts {
			var rec []byte
			if qs.ephemeral {
				// A copy, so that the frame (the message's event and
				// archive too) is not kept alive by the message.
				rec = bytes.Clone(f.B[in.off : in.off+in.n])
			}
			in.q.reserved = max(0, in.q.reserved-1)
			in.q.fresh.push(freshMsg{seg: f.Segment(), seq: f.LSN(), visAt: in.h.VisibleAt, sentAt: in.h.SentAt, id: in.id,
				off: uint32(f.Offset(in.off)), n: uint32(in.n)}, rec)
			f.Segment().Hold(in.n)
		}
		for _, mv := range c.moves {
			to := uint32(f.Offset(mv.off))
			if mv.m != nil {
				if cur := mv.q.msgs[mv.m.id]; cur == mv.m && mv.m.seg == mv.from {
					mv.from.Drop(mv.m.n)
					mv.m.seg, mv.m.off = f.Segment(), int64(to)
					f.Segment().Hold(mv.m.n)
				}
				continue
			}
			if e := &mv.c.ents[mv.i]; mv.i >= mv.c.head && e.seg == mv.from && e.off == mv.fromOff {
				mv.from.Drop(int(e.n))
				e.seg, e.off = f.Segment(), to
				f.Segment().Hold(int(e.n))
			}
		}
		if c.purge != "" {
			if q := qs.queues[c.purge]; q != nil {
				c.purged = q.clearAll(qs)
			}
		}
	}
}

// Compact copies the messages still in seg to the end of the log and
// returns how many it copied, so that seg can be deleted.
func (qs *Queues) Compact(seg *segment) (int, error) {
	f := newFrame()
	qs.mu.Lock()
	var err error
	for name, q := range qs.queues {
		for _, m := range q.msgs {
			if m.seg != seg {
				continue
			}
			rec, lerr := m.ref().load()
			if lerr != nil {
				qs.mu.Unlock()
				return 0, fmt.Errorf("compact log segment %s: message %s: %w", seg.Name(), m.id, lerr)
			}
			putHeader(rec, &m.h)
			off := msgOp(f, name, rec)
			f.Meta.moves = append(f.Meta.moves, move{q: q, m: m, from: seg, off: off})
		}
		q.fresh.each(func(c *freshChunk, i int) bool {
			e := &c.ents[i]
			if e.seg != seg {
				return true
			}
			seg.Acquire()
			rec, lerr := msgRef{seg: seg, off: int64(e.off), n: int(e.n)}.load()
			if lerr != nil {
				err = fmt.Errorf("compact log segment %s: message %s: %w", seg.Name(), e.id, lerr)
				return false
			}
			// The copy carries the message's seq: recovery finds the
			// fresh message it moves by it (Replay).
			h := e.header()
			putHeader(rec, &h)
			off := msgOp(f, name, rec)
			f.Meta.moves = append(f.Meta.moves, move{q: q, c: c, i: i, from: seg, fromOff: e.off, off: off})
			return true
		})
		if err != nil {
			qs.mu.Unlock()
			return 0, err
		}
	}
	return len(f.Meta.moves), qs.commitUnlock(f)
}

// Sparse says whether seg's queued messages fill less than a quarter of
// it: worth copying forward so that the segment can go.
func (qs *Queues) Sparse(seg *segment) bool {
	qs.mu.Lock()
	defer qs.mu.Unlock()
	return seg.LiveBytes*4 < seg.Size()
}

// Replay replays one of this package's ops (IsOp) into the queues, at
// Open, before Start: the log's Config.Replay calls it for each.
func (qs *Queues) Replay(sg *segment, lsn uint64, op wal.Op) error {
	r := storecodec.Reader{B: op.Payload}
	switch op.Kind {
	case OpMsg:
		name := r.Str(MaxQueueNameLen)
		if r.Err != nil {
			return r.Err
		}
		q := qs.queues[name]
		if q == nil {
			return fmt.Errorf("message for unknown queue %q", name)
		}
		rec := r.B
		h, id, err := decodeMsgHeader(rec)
		if err != nil {
			return err
		}
		off := op.Off + int64(len(op.Payload)-len(rec))
		if m := q.msgs[id]; m != nil {
			// A received message copied by compaction moves here.
			m.seg.Drop(m.n)
			seq := m.h.Seq
			m.h, m.seg, m.off, m.n = h, sg, off, len(rec)
			m.h.Seq = seq
			sg.Hold(len(rec))
			return nil
		}
		uid, err := parseID(id)
		if err != nil {
			return err
		}
		if e, ok := q.recovering[uid]; ok {
			// A fresh message copied by compaction moves here.
			e.seg.Drop(int(e.n))
			e.seg, e.off, e.n = sg, uint32(off), uint32(len(rec))
			q.recovering[uid] = e
			sg.Hold(len(rec))
			return nil
		}
		// A message put in its queue by this frame, or a copy whose
		// earlier frames are gone with their segments.
		if h.Seq == 0 {
			h.Seq = lsn
		}
		if h.FirstRecv != 0 || h.ReceiveCount != 0 || h.HasReceipt {
			q.msgs[id] = &memMsg{id: id, h: h, seg: sg, off: off, n: len(rec)}
		} else {
			q.recovering[uid] = freshMsg{seg: sg, seq: h.Seq, visAt: h.VisibleAt, sentAt: h.SentAt, id: uid, off: uint32(off), n: uint32(len(rec))}
		}
		sg.Hold(len(rec))
	case OpState:
		name, id := r.Str(MaxQueueNameLen), r.Str(maxIDLen)
		if r.Err == nil && len(r.B) != msgHeaderLen {
			r.Fail(fmt.Errorf("state of %d bytes", len(r.B)))
		}
		if r.Err != nil {
			return r.Err
		}
		hr := storecodec.Reader{B: r.B}
		h := readHeader(&hr)
		if hr.Err != nil {
			return hr.Err
		}
		q := qs.queues[name]
		if q == nil {
			return nil
		}
		m := q.msgs[id]
		if m == nil {
			// The first receive of a fresh message.
			uid, err := parseID(id)
			if err != nil {
				return err
			}
			e, ok := q.recovering[uid]
			if !ok {
				return nil // purged
			}
			delete(q.recovering, uid)
			m = &memMsg{id: id, h: e.header(), seg: e.seg, off: int64(e.off), n: int(e.n)}
			q.msgs[id] = m
		}
		h.Seq = m.h.Seq
		m.h = h
	case OpDel:
		name, id := r.Str(MaxQueueNameLen), r.Str(maxIDLen)
		if r.Err != nil {
			return r.Err
		}
		if q := qs.queues[name]; q != nil {
			if m := q.msgs[id]; m != nil {
				delete(q.msgs, id)
				m.seg.Drop(m.n)
			}
		}
	case OpPurge:
		name := r.Str(MaxQueueNameLen)
		if r.Err != nil {
			return r.Err
		}
		if q := qs.queues[name]; q != nil {
			for _, m := range q.msgs {
				m.seg.Drop(m.n)
			}
			for _, e := range q.recovering {
				e.seg.Drop(int(e.n))
			}
			clear(q.msgs)
			clear(q.recovering)
		}
	default:
		return fmt.Errorf("op kind %d is not a queue's", op.Kind)
	}
	return nil
}

// newFrame returns an empty frame with room for a few small ops.
func newFrame() *Frame { return wal.NewFrame[Changes](512 - wal.HeaderLen) }

// msgOp appends to f a message record for queue and returns the record's
// offset in the frame.
func msgOp(f *Frame, queue string, rec []byte) int {
	p := f.Op(OpMsg)
	f.B = storecodec.AppendStr(f.B, queue)
	off := len(f.B)
	f.B = append(f.B, rec...)
	f.End(p)
	return off
}

// newMsgOp appends to f the record of a message sent to queue and returns
// its offset in the frame and its length.
func newMsgOp(f *Frame, queue string, h *msgHeader, m *Message) (off, n int) {
	p := f.Op(OpMsg)
	f.B = storecodec.AppendStr(f.B, queue)
	off = len(f.B)
	f.B = appendMsg(f.B, h, m)
	f.End(p)
	return off, len(f.B) - off
}

// stateOp appends to f m's new state.
func stateOp(f *Frame, queue string, m *memMsg) {
	p := f.Op(OpState)
	f.B = storecodec.AppendStr(f.B, queue)
	f.B = storecodec.AppendStr(f.B, m.id)
	f.B = append(f.B, make([]byte, msgHeaderLen)...)
	putHeader(f.B[len(f.B)-msgHeaderLen:], &m.h)
	f.End(p)
}

// delOp appends to f the deletion of message id.
func delOp(f *Frame, queue, id string) {
	p := f.Op(OpDel)
	f.B = storecodec.AppendStr(f.B, queue)
	f.B = storecodec.AppendStr(f.B, id)
	f.End(p)
}
