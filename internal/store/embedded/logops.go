package embedded

import (
	"context"
	"sync"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/internal/store/wal"
)

// What the store writes to its write-ahead log (package wal): the hot
// path's writes (queue messages and their state changes, telemetry
// records, archived events, claim completions), each call one frame of
// the ops below. The queues live in the log only, indexed in memory
// (memqueue.go); the telemetry records, archived events and claim
// completions are also applied to the bbolt file in large background
// transactions (apply.go), which is where they are read. A segment is
// deleted once everything in it is applied and none of its messages is
// still in a queue (maintain; compact copies the last few forward).

// Op kinds inside a frame.
const (
	opMsg   byte = 1 // queue, then a message record (encodeMsg): a new message, or a message moved by compaction
	opState byte = 2 // queue, id, then a message header (msgHeaderLen): the message's new state
	opDel   byte = 3 // queue, id: the message is gone (deleted, or moved to a dead-letter queue)
	opPurge byte = 4 // queue: every message sent before this frame is gone
	opTel   byte = 5 // tenant, seq, then a telemetry record (encodeTelemetry)
	opArch  byte = 6 // an archived event (encodeArchived)
	opClaim byte = 7 // claim id, owner, expires_at, now: a strict dedupe claim completed
)

// walSuffix names the log's directory beside the store file.
const walSuffix = "-wal"

// walKeepSegments is how many sealed segments pinned only by their
// messages are kept before the oldest one's messages are copied forward
// so that it can be deleted.
const walKeepSegments = 4

// appliesToFile reports whether ops of kind are applied to the bbolt file.
func appliesToFile(kind byte) bool { return kind == opTel || kind == opArch || kind == opClaim }

// frameMeta is what the store does once a frame is committed
// (logCommitted).
type frameMeta struct {
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
	frame    = wal.Frame[frameMeta]
	walGroup = wal.Group[frameMeta]
	segment  = wal.Segment
)

// insert is a message to put in q: its id and header, and its record's
// offset in the frame and length.
type insert struct {
	q   *memQueue
	id  uuid.UUID
	h   msgHeader
	n   int
	off int
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

// newFrame returns an empty frame with room for a few small ops.
func newFrame() *frame { return wal.NewFrame[frameMeta](512 - wal.HeaderLen) }

// msgOp appends to f a message record for queue and returns the record's
// offset in the frame.
func msgOp(f *frame, queue string, rec []byte) int {
	p := f.Op(opMsg)
	f.B = storecodec.AppendStr(f.B, queue)
	off := len(f.B)
	f.B = append(f.B, rec...)
	f.End(p)
	return off
}

// newMsgOp appends to f the record of a message sent to queue and returns
// its offset in the frame and its length.
func newMsgOp(f *frame, queue string, h *msgHeader, m *Message) (off, n int) {
	p := f.Op(opMsg)
	f.B = storecodec.AppendStr(f.B, queue)
	off = len(f.B)
	f.B = appendMsg(f.B, h, m)
	f.End(p)
	return off, len(f.B) - off
}

// stateOp appends to f m's new state.
func stateOp(f *frame, queue string, m *memMsg) {
	p := f.Op(opState)
	f.B = storecodec.AppendStr(f.B, queue)
	f.B = storecodec.AppendStr(f.B, m.id)
	f.B = append(f.B, make([]byte, msgHeaderLen)...)
	putHeader(f.B[len(f.B)-msgHeaderLen:], &m.h)
	f.End(p)
}

// delOp appends to f the deletion of message id.
func delOp(f *frame, queue, id string) {
	p := f.Op(opDel)
	f.B = storecodec.AppendStr(f.B, queue)
	f.B = storecodec.AppendStr(f.B, id)
	f.End(p)
}

// Deferred collects the log groups of the writes made with a context
// from DeferSync: those writes return once their frames are queued, and
// Wait returns once all of them are durable. A PutEvents request's
// archive, deliveries and hand-offs are queued together this way and
// meet in one or two group commits, instead of each waiting for its own
// in turn. Until Wait returns nothing may be acknowledged to anyone.
type Deferred struct {
	mu     sync.Mutex
	groups []*walGroup
}

type deferredKey struct{}

// DeferSync returns a context whose log writes do not wait, and the
// Deferred to wait on for them.
func DeferSync(ctx context.Context) (context.Context, *Deferred) {
	d := &Deferred{}
	return context.WithValue(ctx, deferredKey{}, d), d
}

// Wait returns once every write deferred so far is durable, with the
// first failure.
func (d *Deferred) Wait() error {
	d.mu.Lock()
	gs := d.groups
	d.groups = nil
	d.mu.Unlock()
	var first error
	for _, g := range gs {
		if err := g.Wait(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// settle waits for g unless ctx defers it.
func settle(ctx context.Context, g *walGroup) error {
	if d, ok := ctx.Value(deferredKey{}).(*Deferred); ok {
		d.mu.Lock()
		if n := len(d.groups); n == 0 || d.groups[n-1] != g {
			d.groups = append(d.groups, g)
		}
		d.mu.Unlock()
		return nil
	}
	return g.Wait()
}
