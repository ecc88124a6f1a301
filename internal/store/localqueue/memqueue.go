package localqueue

import (
	"cmp"
	"container/heap"
	"fmt"
	"slices"
	"unsafe"

	"github.com/google/uuid"
)

// The queues' index lives in memory; the messages' records (id,
// attributes, body) stay in the write-ahead log and are read back when
// received. Per queue, two parts:
//
//   - fresh: the messages never received, in the order they became
//     receivable (their frames' lsn order). Sends append, receives take
//     from the front, nothing else removes one but a purge, so a backlog
//     is a FIFO of 56-byte entries, in chunks freed as they empty (docs/store/embedded.md, Queues).
//   - received: the messages received at least once (in flight, or
//     visible again), by id, with a heap in visibility order: deletes and
//     visibility changes find them by their receipt's id.
//
// Everything here is guarded by Queues.mu.

// memQueue is one queue's index.
type memQueue struct {
	q     Queue
	fresh freshQueue
	msgs  map[string]*memMsg
	vis   visHeap
	// peak is the most received messages msgs held since it was made: a
	// map does not shrink, so an emptied large one is made anew.
	peak int
	// reserved counts sends queued to the log and not yet durable: they
	// count towards MaxDepth before they are in the index.
	reserved int
	// recovering holds the fresh messages by id while Open replays the
	// log (whose frames find them by id); endRecovery queues them.
	recovering map[uuid.UUID]freshMsg
}

// endRecovery puts the fresh messages recovery found in the FIFO, in the
// order they were queued.
func (q *memQueue) endRecovery() {
	es := make([]freshMsg, 0, len(q.recovering))
	for _, e := range q.recovering {
		es = append(es, e)
	}
	q.recovering = nil
	slices.SortFunc(es, func(a, b freshMsg) int {
		if c := cmp.Compare(a.seq, b.seq); c != 0 {
			return c
		}
		if c := cmp.Compare(a.seg.First(), b.seg.First()); c != 0 {
			return c
		}
		return cmp.Compare(a.off, b.off)
	})
	for _, e := range es {
		q.fresh.push(e, nil)
	}
	q.peak = len(q.msgs)
}

// depth is how many messages the queue holds.
func (q *memQueue) depth() int { return q.fresh.n + len(q.msgs) }

// full says whether a send would exceed the queue's MaxDepth.
func (q *memQueue) full() bool { return q.depth()+q.reserved >= q.q.MaxDepth }

func newMemQueue(q Queue) *memQueue {
	return &memQueue{q: q, msgs: make(map[string]*memMsg)}
}

// memMsg is a received message: its state, and where its record is in
// the log. h.Seq is the lsn of the frame that put it in its queue: the
// tie-break of the visibility order.
type memMsg struct {
	id  string
	h   msgHeader
	seg *segment
	off int64
	n   int
	// rec is the record itself in an ephemeral store, whose log is not
	// written anywhere.
	rec []byte
	idx int // in vis
}

// msgRef is where a message's record is, taken under Queues.mu with a
// reference on its segment; load reads it afterwards, without the lock.
type msgRef struct {
	seg *segment
	off int64
	n   int
	rec []byte
}

func (m *memMsg) ref() msgRef {
	m.seg.Acquire()
	return msgRef{m.seg, m.off, m.n, m.rec}
}

// load returns a copy of the record and releases the reference.
func (r msgRef) load() ([]byte, error) {
	defer r.seg.Release()
	if r.rec != nil {
		return append([]byte(nil), r.rec...), nil
	}
	rec, err := r.seg.ReadAt(r.off, r.n)
	if err != nil {
		return nil, fmt.Errorf("message record: %w", err)
	}
	return rec, nil
}

// addReceived indexes m, just received (or back from recovery), as
// received.
func (q *memQueue) addReceived(m *memMsg) {
	q.msgs[m.id] = m
	q.peak = max(q.peak, len(q.msgs))
	heap.Push(&q.vis, m)
}

// removeReceived takes m out of the queue; the caller adjusts its
// segment's live count.
func (q *memQueue) removeReceived(m *memMsg) {
	delete(q.msgs, m.id)
	heap.Remove(&q.vis, m.idx)
	q.shrink()
}

// shrink makes an emptied map and heap anew once they had grown: a Go map
// keeps its buckets when its entries are deleted.
func (q *memQueue) shrink() {
	if len(q.msgs) == 0 && q.peak > 256 {
		q.msgs, q.vis, q.peak = make(map[string]*memMsg), nil, 0
	}
}

// clearAll empties the queue (a purge), keeping the segments' live
// counts, and returns how many messages it removed.
func (q *memQueue) clearAll(qs *Queues) int {
	n := q.depth()
	for _, m := range q.msgs {
		m.seg.Drop(m.n)
		qs.memRelease(m.n)
	}
	q.msgs, q.vis, q.peak = make(map[string]*memMsg), nil, 0
	q.fresh.each(func(c *freshChunk, i int) bool {
		e := &c.ents[i]
		e.seg.Drop(int(e.n))
		qs.memRelease(int(e.n))
		e.seg = nil // a compaction's move in flight finds it gone
		return true
	})
	q.fresh = freshQueue{}
	return n
}

// freshMsg is a message never received: its id (the store makes every id
// a UUID), where its record is, the lsn of the frame that put it in the
// queue (seq), when it was sent and when it became visible (a message
// moved to a dead-letter queue keeps its sent time).
type freshMsg struct {
	seg    *segment
	seq    uint64
	visAt  int64
	sentAt int64
	id     uuid.UUID
	off    uint32
	n      uint32
}

// header is the header of a fresh message.
func (e *freshMsg) header() msgHeader {
	return msgHeader{Seq: e.seq, VisibleAt: e.visAt, SentAt: e.sentAt}
}

// freshChunkLen is how many entries a chunk of the fresh FIFO holds
// (56 KiB): small enough that an almost empty queue holds little.
const freshChunkLen = 1024

// freshChunk is a piece of the FIFO: entries [head, len(ents)) are
// queued. recs holds their records in an ephemeral store.
type freshChunk struct {
	ents []freshMsg
	recs [][]byte
	head int
	next *freshChunk
}

// freshQueue is the FIFO of a queue's fresh messages.
type freshQueue struct {
	first, last *freshChunk
	n           int
}

// push appends e (and its record rec in an ephemeral store) and returns
// its place.
func (f *freshQueue) push(e freshMsg, rec []byte) (*freshChunk, int) {
	c := f.last
	if c == nil || len(c.ents) == freshChunkLen {
		c = &freshChunk{ents: make([]freshMsg, 0, freshChunkLen)}
		if rec != nil {
			c.recs = make([][]byte, 0, freshChunkLen)
		}
		if f.last == nil {
			f.first = c
		} else {
			f.last.next = c
		}
		f.last = c
	}
	c.ents = append(c.ents, e)
	if rec != nil {
		c.recs = append(c.recs, rec)
	}
	f.n++
	return c, len(c.ents) - 1
}

// front returns the oldest entry and its record, if any.
func (f *freshQueue) front() (*freshMsg, []byte, bool) {
	if f.n == 0 {
		return nil, nil, false
	}
	c := f.first
	var rec []byte
	if c.recs != nil {
		rec = c.recs[c.head]
	}
	return &c.ents[c.head], rec, true
}

// pop removes the oldest entry (front's).
func (f *freshQueue) pop() {
	f.n--
	f.advance()
}

// advance moves past the first chunk's head entry; a chunk is let go once
// empty.
func (f *freshQueue) advance() {
	c := f.first
	if c.recs != nil {
		c.recs[c.head] = nil
	}
	c.ents[c.head].seg = nil
	c.head++
	if c.head == len(c.ents) && (len(c.ents) == freshChunkLen || c.next == nil) {
		f.first = c.next
		if f.first == nil {
			f.last = nil
		}
	}
}

// each calls fn for every queued entry, oldest first, until fn returns
// false.
func (f *freshQueue) each(fn func(c *freshChunk, i int) bool) {
	for c := f.first; c != nil; c = c.next {
		for i := c.head; i < len(c.ents); i++ {
			if !fn(c, i) {
				return
			}
		}
	}
}

// next returns the message a Receive takes next, visible at now, or nil:
// the earlier of the received ones' first and the fresh ones' first (by
// visibility, then seq), a fresh one becoming received.
func (q *memQueue) next(now int64) *memMsg {
	e, rec, ok := q.fresh.front()
	ok = ok && e.visAt <= now
	if len(q.vis) > 0 {
		top := q.vis[0]
		if top.h.VisibleAt <= now && (!ok || top.h.VisibleAt < e.visAt || top.h.VisibleAt == e.visAt && top.h.Seq < e.seq) {
			return top
		}
	}
	if !ok {
		return nil
	}
	m := &memMsg{id: e.id.String(), h: e.header(), seg: e.seg, off: int64(e.off), n: int(e.n), rec: rec}
	q.fresh.pop()
	q.addReceived(m)
	return m
}

// parseID returns the UUID of a message id the store made.
func parseID(id string) (uuid.UUID, error) {
	u, err := uuid.Parse(id)
	if err != nil || u.String() != id {
		return uuid.UUID{}, fmt.Errorf("message id %.60q is not a UUID as the store makes them", id)
	}
	return u, nil
}

// MsgOverhead is what the index costs per queued message in an ephemeral
// log's memory budget, beyond its record: its fresh entry and its
// record's slice header, with room for a received one's.
const MsgOverhead = 128

// EntryBytes is the index entry of a queued message never received: what
// it costs in memory on file, where its record stays on disk.
const EntryBytes = unsafe.Sizeof(freshMsg{})

// memReserve counts a record of n bytes against an ephemeral log's
// memory budget, unless it would exceed it (a forced reserve, for a
// message that must not be lost, always counts). qs.mu is held.
func (qs *Queues) memReserve(n int, force bool) bool {
	if !qs.ephemeral {
		return true
	}
	cost := int64(n) + MsgOverhead
	if !force && qs.memBytes+cost > qs.memBudget {
		return false
	}
	qs.memBytes += cost
	return true
}

// memRelease uncounts a record of n bytes. qs.mu is held.
func (qs *Queues) memRelease(n int) {
	if qs.ephemeral {
		qs.memBytes -= int64(n) + MsgOverhead
	}
}

// visHeap orders received messages by the time they become visible, then
// by when they were queued.
type visHeap []*memMsg

func (h visHeap) Len() int { return len(h) }
func (h visHeap) Less(i, j int) bool {
	if h[i].h.VisibleAt != h[j].h.VisibleAt {
		return h[i].h.VisibleAt < h[j].h.VisibleAt
	}
	return h[i].h.Seq < h[j].h.Seq
}
func (h visHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *visHeap) Push(x any) {
	m := x.(*memMsg)
	m.idx = len(*h)
	*h = append(*h, m)
}
func (h *visHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	m.idx = -1
	return m
}
