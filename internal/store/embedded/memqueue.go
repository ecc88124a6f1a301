package embedded

import (
	"container/heap"
	"fmt"
)

// The queues' messages live in memory (and durably in the write-ahead
// log): a map by id and a heap in visibility order per queue. Everything
// here is guarded by Store.qmu.

// memQueue is one queue's messages.
type memQueue struct {
	q    Queue
	msgs map[string]*memMsg
	vis  visHeap
	// reserved counts sends queued to the log and not yet durable: they
	// count towards MaxDepth before they are in msgs.
	reserved int
}

// full says whether a send would exceed the queue's MaxDepth.
func (q *memQueue) full() bool { return len(q.msgs)+q.reserved >= q.q.MaxDepth }

func newMemQueue(q Queue) *memQueue {
	return &memQueue{q: q, msgs: make(map[string]*memMsg)}
}

// memMsg is a queued message: its state, and where its record (id,
// attributes, body) is in the log. h.Seq is the lsn of the frame that
// sent it: the tie-break of the visibility order.
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

// msgRef is where a message's record is, taken under Store.qmu with a
// reference on its segment; load reads it afterwards, without the lock.
type msgRef struct {
	seg *segment
	off int64
	n   int
	rec []byte
}

func (m *memMsg) ref() msgRef {
	m.seg.refs.Add(1)
	return msgRef{m.seg, m.off, m.n, m.rec}
}

// load returns a copy of the record and releases the reference.
func (r msgRef) load() ([]byte, error) {
	defer r.seg.refs.Add(-1)
	if r.rec != nil {
		return append([]byte(nil), r.rec...), nil
	}
	rec := make([]byte, r.n)
	if _, err := r.seg.f.ReadAt(rec, r.off); err != nil {
		return nil, fmt.Errorf("read message record from log segment %s: %w", r.seg.name, err)
	}
	return rec, nil
}

func (q *memQueue) add(m *memMsg) {
	q.msgs[m.id] = m
	heap.Push(&q.vis, m)
	m.seg.live++
}

func (q *memQueue) remove(m *memMsg) {
	delete(q.msgs, m.id)
	heap.Remove(&q.vis, m.idx)
	m.seg.live--
}

// visHeap orders messages by the time they become visible, then by when
// they were sent.
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
