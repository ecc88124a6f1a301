package embedded

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/atomicfile"
)

// The write-ahead log: the durable home of the hot path's writes (queue
// messages and their state changes, telemetry records, archived events,
// claim completions). A write is one frame appended to the active segment;
// one flusher goroutine writes every frame queued meanwhile with one
// write (group commit). A written group is in the OS's page cache, which
// a killed process does not take with it; what a power loss can take
// depends on when it is synced:
//
//   - By default (sync on demand) a group is committed (its messages made
//     receivable, its ops queued to apply) and acknowledged once synced,
//     and the flusher syncs whatever is written as soon as a writer waits
//     for durability (walGroup.wait): the PutEvents requests' deferred
//     waits, sends, telemetry. A consumer's receive, delete or visibility
//     change waits only for its write (walGroup.waitWritten) and is
//     synced with the next such wait or within lazySyncEvery: a power
//     loss just after it can undo it, and the message is delivered again
//     (at least once, as SQS may). Syncing every group instead, the
//     consumers' writes alone kept the log syncing 80-90% of the time.
//   - With a sync interval (Options.SyncEvery) a group is committed and
//     acknowledged once written, and a sync loop makes it durable within
//     the interval (the applier also syncs before it applies anything to
//     the file, so the file is never ahead of the log).
//
// The queues live in the log only, indexed in memory; the
// telemetry records, archived events and claim completions are also
// applied to the bbolt file in large background transactions (apply.go),
// which is where they are read. A segment is deleted once everything in
// it is applied and none of its messages is still in a queue (compact
// copies the last few forward). docs/store/embedded.md has the design and
// the figures that chose it.
//
// A frame on disk:
//
//	0  length   4  (of the ops)
//	4  crc32c   4  (Castagnoli, of lsn and ops)
//	8  lsn      8  (log sequence number: 1, 2, 3, ... across segments)
//	16 ops      each: kind 1, length 4, payload
//
// A frame's ops are atomic: recovery reads a frame whole or, at a torn
// tail, not at all.

const (
	frameHeaderLen = 16
	opHeaderLen    = 5
	// walSegmentBytes is the size past which the active segment is sealed
	// and a new one started (a larger frame still goes whole into one
	// segment).
	walSegmentBytes = 32 << 20
	// maxFrameBytes bounds a frame recovery accepts: the largest write (an
	// archive batch of 1000 events of 256 KiB) with room to spare.
	maxFrameBytes = 512 << 20
	// walSpareBufs buffers of at most walSpareBufBytes are kept for the
	// next groups' writes.
	walSpareBufs     = 4
	walSpareBufBytes = 1 << 20
	// walKeepSegments is how many sealed segments pinned only by their
	// messages are kept before the oldest one's messages are copied
	// forward so that it can be deleted.
	walKeepSegments = 4
	// walSuffix names the log's directory beside the store file.
	walSuffix = "-wal"
	// walSpareSegments is how many deleted segment files are kept, as
	// spares (spareSuffix), to become new segments: overwriting a file's
	// written blocks needs no block allocation and no change of size, so
	// its fdatasync commits no metadata. Under make bench-serve's load
	// (--fsync always) a sync took 144-246 µs instead of 340-422 µs
	// (PostgreSQL recycles its WAL segments, and RocksDB its logs, for
	// the same reason). Recovery tells a spare's old frames by their lsn,
	// below the segment's first (scanSegment): within one run of the
	// store every lsn in a spare is below the next one. Spares found at
	// Open are deleted, not reused: after a power loss one may hold
	// frames of writes the log lost, whose lsns the log reuses. A file
	// grown past twice the segment size by a large frame is deleted, not
	// kept.
	walSpareSegments = 2
	spareSuffix      = ".spare"
)

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

// castagnoli is made on first use, not at package init (start-up cost:
// internal/app's TestStartupCost).
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// ErrLogFailed wraps every write after the log failed to write or sync:
// after a failed fsync the file's state is unknown, so the store stops
// accepting writes until it is reopened (recovery then reads what is
// really there).
var ErrLogFailed = errors.New("embedded store: write-ahead log failed; reopen the store")

// frame is one atomic write being built: its ops, and what the store does
// once it is durable.
type frame struct {
	b []byte
	// inserts are messages to add to their queues once durable; moves
	// messages whose record compaction copied.
	inserts []insert
	moves   []move
	// purge, when set, empties the queue of every message sent before
	// this frame; purged is how many it removed.
	purge  string
	purged int
	// applies: some of its ops are applied to the bbolt file (applied).
	applies bool
	// lazy: its writer waits only for its write (waitWritten).
	lazy bool

	// Set by add: the frame's lsn, segment and offset in it.
	lsn  uint64
	seg  *segment
	base int64
}

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

func newFrame() *frame { return &frame{b: make([]byte, frameHeaderLen, 512)} }

// op appends an op header of kind and returns the offset of its payload;
// end closes it.
func (f *frame) op(kind byte) int {
	f.b = append(f.b, kind, 0, 0, 0, 0)
	return len(f.b)
}

func (f *frame) end(start int) {
	binary.BigEndian.PutUint32(f.b[start-4:], uint32(len(f.b)-start))
}

func (f *frame) empty() bool { return len(f.b) == frameHeaderLen }

// msg appends a message record for queue and returns the record's offset
// in the frame.
func (f *frame) msg(queue string, rec []byte) int {
	p := f.op(opMsg)
	f.b = appendStr(f.b, queue)
	off := len(f.b)
	f.b = append(f.b, rec...)
	f.end(p)
	return off
}

// newMsg appends the record of a message sent to queue and returns its
// offset in the frame and its length.
func (f *frame) newMsg(queue string, h *msgHeader, m *Message) (off, n int) {
	p := f.op(opMsg)
	f.b = appendStr(f.b, queue)
	off = len(f.b)
	f.b = appendMsg(f.b, h, m)
	f.end(p)
	return off, len(f.b) - off
}

func (f *frame) state(queue string, m *memMsg) {
	p := f.op(opState)
	f.b = appendStr(f.b, queue)
	f.b = appendStr(f.b, m.id)
	f.b = append(f.b, make([]byte, msgHeaderLen)...)
	putHeader(f.b[len(f.b)-msgHeaderLen:], &m.h)
	f.end(p)
}

func (f *frame) del(queue, id string) {
	p := f.op(opDel)
	f.b = appendStr(f.b, queue)
	f.b = appendStr(f.b, id)
	f.end(p)
}

// segment is one log file.
type segment struct {
	first uint64   // lsn of its first frame; its name
	f     *os.File // nil in an ephemeral log
	name  string
	// size is the offset the next frame goes to (frames queued for the
	// flusher included). Guarded by wal.mu.
	size int64
	// maxApply is the highest lsn of a frame here with ops to apply.
	// Guarded by wal.mu.
	maxApply uint64
	// live counts the queued messages whose record is here, liveBytes
	// their records' bytes. Guarded by Store.qmu.
	live      int
	liveBytes int64
	// refs counts reads in progress; a segment is deleted only without.
	refs atomic.Int32
	// synced: the directory entry of a new file was synced.
	// (Atomic: with a sync interval, syncs run beside the flusher.)
	synced atomic.Bool
}

func segmentName(first uint64) string { return fmt.Sprintf("%020d.log", first) }

// walGroup is the frames one flush writes, and that are synced and
// committed together.
type walGroup struct {
	log    *wal
	frames []*frame
	chunks []chunk
	// written is closed once the group is written (werr: its failure);
	// done once it is committed and durable (err: its failure).
	written, done chan struct{}
	werr, err     error
	// durable: a frame of it is waited for synced (not lazy).
	durable bool
}

type chunk struct {
	seg *segment
	off int64
	b   []byte
}

// wal is the log writer.
type wal struct {
	dir       string // "" for an ephemeral log (memory files)
	ephemeral bool
	// segmentBytes is walSegmentBytes but in tests.
	segmentBytes int64

	mu      sync.Mutex
	cond    *sync.Cond
	next    uint64 // the next frame's lsn
	segs    []*segment
	cur     *walGroup
	spare   []chunk // a flushed group's chunks, reused
	closing bool
	// err is the failure that stopped the log (nil while it works);
	// failed is closed when it is set (fail).
	err    error
	failed chan struct{}
	// spares are the paths of deleted segments' files kept for reuse
	// (walSpareSegments at most).
	spares []string

	synced atomic.Uint64 // every frame up to it is durable

	// syncEvery is 0 to sync on demand (the package comment), or the
	// longest a written group waits for its sync (Options.SyncEvery).
	syncEvery time.Duration
	// On demand (onDemand: a file log without syncEvery), written groups
	// wait in pending until a sync, which the flusher makes once demand
	// (the highest lsn a writer waits to be durable) is past committed.
	// Both are guarded by mu.
	pending []*walGroup
	demand  uint64
	// committed is the lsn of the last frame onCommitted has run for.
	committed atomic.Uint64
	// The segments written since the last sync and the lsn of the last
	// frame written (guarded by mu); syncMu orders syncs.
	dirty   []*segment
	written uint64
	syncMu  sync.Mutex
	// syncStop ends the sync loop; syncDone is closed when it has.
	syncStop, syncDone chan struct{}
	// unsynced wakes the sleeping sync loop after a write (capacity 1);
	// arms counts the times it then armed its timer.
	unsynced chan struct{}
	arms     atomic.Uint64

	// onCommitted runs in the flusher, in lsn order, after a group is
	// durable (or written, with syncEvery) and before its writers are
	// woken.
	onCommitted func(frames []*frame)
	// onRotate is called (without locks) when a segment is sealed.
	onRotate func()

	// now times the syncs (the store's clock); onSync, when not nil, is
	// given each sync's duration (Options.OnLogSync).
	now    func() time.Time
	onSync func(time.Duration)
	// writeAt and datasync write and sync a segment's file: f.WriteAt
	// and fdatasync, or a test's failing disk (Options.logIO).
	writeAt  func(f *os.File, b []byte, off int64) (int, error)
	datasync func(f *os.File) error

	frames, writes, syncs atomic.Uint64
	syncNanos             atomic.Int64 // the syncs' total duration
	flusherDone           chan struct{}
}

// onDemand says whether the log syncs on demand: a file log without
// syncEvery (the package comment).
func (w *wal) onDemand() bool { return !w.ephemeral && w.syncEvery == 0 }

// lastLSN is the lsn of g's last frame. g must have one (a group is
// flushed only with frames); while g is w.cur, call it under w.mu.
func (g *walGroup) lastLSN() uint64 { return g.frames[len(g.frames)-1].lsn }

func (w *wal) newGroup() *walGroup {
	return &walGroup{log: w, written: make(chan struct{}), done: make(chan struct{})}
}

// add queues f (finishing its header) and returns the group to wait on.
// The caller holds the locks that order f against the in-memory state.
func (w *wal) add(f *frame) (*walGroup, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLogFailed, w.err)
	}
	if w.closing {
		return nil, ErrClosed
	}
	seg := w.segs[len(w.segs)-1]
	if seg.size > 0 && seg.size+int64(len(f.b)) > w.segmentBytes {
		ns, err := w.createSegment(w.next)
		if err != nil {
			w.fail(err)
			return nil, fmt.Errorf("%w: %w", ErrLogFailed, err)
		}
		w.segs = append(w.segs, ns)
		seg = ns
		if w.onRotate != nil {
			go w.onRotate()
		}
	}
	f.lsn, f.seg, f.base = w.next, seg, seg.size
	w.next++
	binary.BigEndian.PutUint32(f.b[0:], uint32(len(f.b)-frameHeaderLen))
	binary.BigEndian.PutUint64(f.b[8:], f.lsn)
	binary.BigEndian.PutUint32(f.b[4:], crc32.Checksum(f.b[8:], castagnoli()))
	seg.size += int64(len(f.b))
	if f.applies {
		seg.maxApply = f.lsn
	}
	g := w.cur
	g.durable = g.durable || !f.lazy
	if w.ephemeral {
		// Nothing is written: no copy to make.
	} else if n := len(g.chunks); n > 0 && g.chunks[n-1].seg == seg {
		g.chunks[n-1].b = append(g.chunks[n-1].b, f.b...)
	} else {
		var buf []byte
		if k := len(w.spare); k > 0 {
			buf = w.spare[k-1].b[:0]
			w.spare = w.spare[:k-1]
		}
		g.chunks = append(g.chunks, chunk{seg: seg, off: f.base, b: append(buf, f.b...)})
	}
	g.frames = append(g.frames, f)
	w.frames.Add(1)
	if len(g.frames) == 1 {
		w.cond.Signal()
	}
	return g, nil
}

// wait returns once g is committed and durable (or failed). On a log
// that syncs on demand it asks for the sync.
func (g *walGroup) wait() error {
	if w := g.log; w.onDemand() {
		select {
		case <-g.done:
		default:
			w.mu.Lock()
			// The caller's frames are in g already; g's frames change
			// only under w.mu, while g is the group being filled.
			if len(g.frames) > 0 && g.lastLSN() > w.demand {
				w.demand = g.lastLSN()
				w.cond.Signal()
			}
			w.mu.Unlock()
		}
	}
	<-g.done
	return g.err
}

// waitWritten returns once g is written (or failed): safe from a crash of
// the process, and on a log that syncs on demand not yet from a power
// loss (the package comment says which writes wait only for this).
func (g *walGroup) waitWritten() error {
	<-g.written
	return g.werr
}

// lazySyncEvery bounds how long a write that waited only for its write
// (waitWritten) stays unsynced on a log that syncs on demand.
const lazySyncEvery = 10 * time.Millisecond

// flusher writes groups until the log closes, and on a log that syncs on
// demand syncs and commits them when they are waited for.
func (w *wal) flusher() {
	defer close(w.flusherDone)
	for {
		w.mu.Lock()
		for len(w.cur.frames) == 0 && !w.closing && !w.syncDue() {
			w.cond.Wait()
		}
		if len(w.cur.frames) > 0 {
			// Let the writers the last group woke queue their next
			// frames first, as the committer does (store.go's
			// groupYields): nothing waits for a write but the write.
			w.mu.Unlock()
			for range groupYields {
				runtime.Gosched()
			}
			w.mu.Lock()
		}
		g := w.cur
		if len(g.frames) > 0 {
			w.cur = w.newGroup()
		} else {
			g = nil
		}
		// Closing and nothing queued: the last round.
		last := g == nil && w.closing
		w.mu.Unlock()
		if g != nil {
			w.flush(g)
		}
		if w.onDemand() {
			w.mu.Lock()
			due := w.syncDue() || last
			w.mu.Unlock()
			if due {
				w.commitSynced()
			}
		}
		if last {
			return
		}
	}
}

// syncDue says whether a writer waits for a written group's sync. The
// caller holds w.mu.
func (w *wal) syncDue() bool {
	return w.onDemand() && len(w.pending) > 0 && w.demand > w.committed.Load()
}

// fail stops the log with err, the first failure; the caller holds w.mu.
func (w *wal) fail(err error) {
	if w.err == nil {
		w.err = err
		close(w.failed)
	}
}

// flush writes g. In memory or with a sync interval it commits g at once;
// on a log that syncs on demand g waits in pending for its sync. After a
// failure nothing more is written: a group written past a torn one would
// be acknowledged and then lost, as recovery stops at the torn frame.
func (w *wal) flush(g *walGroup) {
	w.mu.Lock()
	err := w.err
	w.mu.Unlock()
	if err == nil {
		err = w.write(g)
	}
	last := g.lastLSN()
	w.mu.Lock()
	if err != nil {
		w.fail(err)
	}
	for _, c := range g.chunks {
		// A few buffers of a usual group's size are kept: a burst's
		// large ones would stay in the heap after it.
		if cap(c.b) <= walSpareBufBytes && len(w.spare) < walSpareBufs {
			w.spare = append(w.spare, chunk{b: c.b[:0]})
		}
	}
	if err == nil {
		w.written = last
	}
	w.mu.Unlock()
	if err != nil {
		// The groups written before it are whole: they are still synced
		// and committed.
		g.err = fmt.Errorf("%w: %w", ErrLogFailed, err)
		g.werr = g.err
		close(g.written)
		close(g.done)
		return
	}
	close(g.written)
	if w.onDemand() {
		w.mu.Lock()
		w.pending = append(w.pending, g)
		w.mu.Unlock()
		// After pending: the sync loop's round syncs the newest group
		// pending once it has taken this signal.
		w.signalUnsynced()
		return
	}
	w.signalUnsynced() // after write, which added g's segments to dirty
	w.onCommitted(g.frames)
	// After the callback, which counts the group's messages in their
	// segments: a segment is deleted only once the frames up to the next
	// one's are durable and committed, and none of its messages is
	// queued (detachOldest).
	w.committed.Store(last)
	if w.ephemeral {
		w.synced.Store(last)
	}
	close(g.done)
}

// signalUnsynced wakes the sync loop, if any, after a write.
func (w *wal) signalUnsynced() {
	if w.unsynced != nil {
		signal(w.unsynced)
	}
}

// commitSynced syncs the pending groups, then commits them in order and
// wakes their waiters.
func (w *wal) commitSynced() {
	w.mu.Lock()
	gs := w.pending
	w.pending = nil
	w.mu.Unlock()
	if len(gs) == 0 {
		return
	}
	last := gs[len(gs)-1].lastLSN()
	var err error
	if w.synced.Load() < last {
		// sync syncs everything written, pending included.
		if err = w.sync(); err != nil {
			err = fmt.Errorf("%w: %w", ErrLogFailed, err)
		}
	}
	for _, g := range gs {
		if err != nil {
			g.err = err
		} else {
			w.onCommitted(g.frames)
		}
		close(g.done)
	}
	w.committed.Store(last)
}

func (w *wal) write(g *walGroup) error {
	if w.ephemeral {
		// Nothing to write: an ephemeral store keeps its messages'
		// records in memory (memMsg.rec) and its ops to apply in the
		// frames.
		return nil
	}
	w.writes.Add(1)
	for _, c := range g.chunks {
		if !c.seg.synced.Load() {
			// The first write to a new segment: the ones before it are
			// made durable first, and its directory entry, so that a
			// power loss can tear only the last segment, which recovery
			// cuts at its last whole frame.
			if err := w.sync(); err != nil {
				return err
			}
			if err := atomicfile.SyncDir(w.dir); err != nil {
				return err
			}
			c.seg.synced.Store(true)
		}
		if _, err := w.writeAt(c.seg.f, c.b, c.off); err != nil {
			return fmt.Errorf("write %s: %w", c.seg.name, err)
		}
		if w.onDemand() && g.durable {
			// Start the writeback now: the sync a writer will wait
			// for then has less left to write (166 µs instead of
			// 266-305 under make bench-serve's load, and 8-10% more
			// commands a second). With an interval nothing waits for
			// the sync and the calls only cost CPU (4-8 µs a
			// command). Nor for a group of queue consumers' changes
			// alone (lazy frames, a few dozen bytes each): their bytes
			// go with the next sync, and skipping their calls took
			// --fsync always from 29.7 to 31.2 k commands/s (six
			// interleaved pairs). A failure here shows in that sync.
			_ = startWriteback(c.seg.f, c.off, int64(len(c.b)))
		}
		w.mu.Lock()
		if !slices.Contains(w.dirty, c.seg) {
			w.dirty = append(w.dirty, c.seg)
		}
		w.mu.Unlock()
	}
	return nil
}

// syncSegments makes what was written to segs durable, with their
// directory entries.
func (w *wal) syncSegments(segs []*segment) error {
	start := w.now()
	for _, s := range segs {
		if err := w.datasync(s.f); err != nil {
			return fmt.Errorf("sync %s: %w", s.name, err)
		}
		if !s.synced.Load() {
			if err := atomicfile.SyncDir(w.dir); err != nil {
				return err
			}
			s.synced.Store(true)
		}
	}
	d := w.now().Sub(start)
	w.syncs.Add(1)
	w.syncNanos.Add(int64(d))
	if w.onSync != nil {
		w.onSync(d)
	}
	return nil
}

// sync makes every frame written so far durable. A failure fails the
// log, as a failed group sync does, and is returned as it came (the
// callers wrap it in ErrLogFailed).
func (w *wal) sync() error {
	w.syncMu.Lock()
	defer w.syncMu.Unlock()
	w.mu.Lock()
	if err := w.err; err != nil {
		// After a failed sync a later one can succeed with the failed
		// pages dropped (Linux marks them clean): nothing written before
		// the failure is made out to be durable.
		w.mu.Unlock()
		return err
	}
	segs, upTo := w.dirty, w.written
	w.dirty = nil
	w.mu.Unlock()
	// A write is added to dirty once made, and a sync takes dirty only
	// after the one before it finished: once these are synced (or with
	// none left), every frame up to written is durable.
	if len(segs) > 0 {
		if err := w.syncSegments(segs); err != nil {
			w.mu.Lock()
			w.fail(err)
			w.mu.Unlock()
			return err
		}
	}
	if upTo > w.synced.Load() {
		w.synced.Store(upTo)
	}
	return nil
}

// syncThrough returns once every frame up to lsn is durable.
func (w *wal) syncThrough(lsn uint64) error {
	if w.ephemeral || w.synced.Load() >= lsn {
		return nil
	}
	if err := w.sync(); err != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, err)
	}
	return nil
}

// syncLoop syncs what is written within syncEvery of its write until the
// log closes, or on a log that syncs on demand has the flusher sync it
// within lazySyncEvery. It sleeps while nothing written waits for it: an
// idle server is not woken every interval (a 10 ms ticker woke an idle
// `dispatch serve` about 370 times a second). Each write signals unsynced;
// the first one after a sync arms a timer. ticks, when not nil, replaces
// the timer (tests): a tick while idle does nothing.
func (w *wal) syncLoop(ticks <-chan time.Time) {
	defer close(w.syncDone)
	every := w.syncEvery
	if w.onDemand() {
		every = lazySyncEvery
	}
	var timer *time.Timer
	if ticks == nil {
		timer = time.NewTimer(every)
		timer.Stop()
		defer timer.Stop()
	}
	for {
		select {
		case <-w.unsynced:
		default:
			// Idle (a write already waiting is taken first, so that a
			// test's tick cannot pass it by).
			select {
			case <-w.unsynced:
			case <-ticks:
				continue
			case <-w.syncStop:
				return
			}
		}
		w.arms.Add(1)
		deadline := ticks
		if timer != nil {
			timer.Reset(every)
			deadline = timer.C
		}
		select {
		case <-deadline:
		case <-w.syncStop:
			return
		}
		// What this round syncs covers every write signalled so far.
		select {
		case <-w.unsynced:
		default:
		}
		if w.onDemand() {
			// Wait for the newest written group as a writer would:
			// the flusher syncs and commits everything written.
			w.mu.Lock()
			var g *walGroup
			if n := len(w.pending); n > 0 {
				g = w.pending[n-1]
			}
			w.mu.Unlock()
			if g != nil {
				// A failure fails the log, as in the flusher.
				_ = g.wait()
			}
			continue
		}
		// A failure is kept in w.err: every later write is refused.
		_ = w.sync()
	}
}

// createSegment creates the segment whose first frame is lsn first, from
// a spare file when there is one. The caller holds w.mu (or is Open).
func (w *wal) createSegment(first uint64) (*segment, error) {
	name := segmentName(first)
	if w.ephemeral {
		return &segment{first: first, name: name}, nil
	}
	for len(w.spares) > 0 {
		sp := w.spares[0]
		w.spares = w.spares[1:]
		// The rename reaches the disk with the directory's sync before
		// the segment's first write is acknowledged (write).
		if err := os.Rename(sp, filepath.Join(w.dir, name)); err != nil {
			_ = os.Remove(sp)
			continue
		}
		f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_RDWR, 0)
		if err != nil {
			return nil, fmt.Errorf("open recycled log segment %s: %w", name, err)
		}
		return &segment{first: first, f: f, name: name}, nil
	}
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log segment %s: %w", name, err)
	}
	return &segment{first: first, f: f, name: name}, nil
}

// close stops accepting frames and waits for the flusher to write what was
// queued.
func (w *wal) close() {
	w.mu.Lock()
	w.closing = true
	w.cond.Broadcast()
	w.mu.Unlock()
	<-w.flusherDone
	if w.syncStop != nil {
		close(w.syncStop)
		<-w.syncDone
		// Everything written is durable once Close returns (on a log
		// that syncs on demand the flusher's last round synced it). A
		// failure is kept in w.err, as in the loop.
		_ = w.sync()
	}
}

// closeFiles closes every segment file.
func (w *wal) closeFiles() error {
	var first error
	for _, s := range w.segs {
		if s.f == nil {
			continue
		}
		if err := s.f.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// detachOldest takes the oldest segment out of the log if it is sealed
// and nothing needs it: all its ops applied (applied), no message in it
// (the caller holds Store.qmu, which guards the count) and no read in
// progress. The caller deletes it with remove, without holding locks.
func (w *wal) detachOldest(applied uint64) *segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segs) < 2 || w.closing {
		return nil
	}
	s := w.segs[0]
	// Its frames are all durable and counted once the frame before the
	// next segment's first is synced and committed.
	if before := w.segs[1].first - 1; s.maxApply > applied || s.live > 0 || s.refs.Load() > 0 || before > w.synced.Load() || before > w.committed.Load() {
		return nil
	}
	w.segs = w.segs[1:]
	return s
}

// remove closes and deletes a detached segment's file. (The directory's
// sync is slow; it must not hold the locks every write takes.)
func (w *wal) remove(s *segment) error {
	if w.ephemeral {
		return nil
	}
	if err := s.f.Close(); err != nil {
		return fmt.Errorf("close log segment %s: %w", s.name, err)
	}
	// Kept as a spare if there is room. Only maintain removes segments,
	// one call at a time, and createSegment only takes spares: the room
	// cannot be taken meanwhile. The rename is made durable, as an unlink
	// is, before the spare can be reused: after a power loss the
	// segment's name can then not come back holding a later segment's
	// frames.
	w.mu.Lock()
	room := len(w.spares) < walSpareSegments && s.size <= 2*w.segmentBytes
	w.mu.Unlock()
	if room {
		sp := filepath.Join(w.dir, s.name+spareSuffix)
		if err := os.Rename(filepath.Join(w.dir, s.name), sp); err == nil {
			if err := atomicfile.SyncDir(w.dir); err != nil {
				return err // not reused; the next Open deletes it
			}
			w.mu.Lock()
			w.spares = append(w.spares, sp)
			w.mu.Unlock()
			return nil
		}
	}
	if err := os.Remove(filepath.Join(w.dir, s.name)); err != nil {
		return fmt.Errorf("delete log segment %s: %w", s.name, err)
	}
	return atomicfile.SyncDir(w.dir)
}

// sealed returns the sealed segments, oldest first.
func (w *wal) sealed() []*segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.segs[:len(w.segs)-1])
}

// LogStats says how the write-ahead log is doing since Open.
type LogStats struct {
	// Frames written in Writes group commits (0 in memory), made durable
	// by Syncs fdatasyncs, each of everything written since the last.
	Frames, Writes, Syncs uint64
	// SyncTime is how long the Syncs took in all (the disk's latency
	// under the log: SyncTime/Syncs is the mean).
	SyncTime time.Duration
	// Segments is the number of log files now.
	Segments int
	// UpkeepError is the last failure to delete or compact a segment
	// ("" if none): the log grows until the cause is fixed.
	UpkeepError string
}

// --- reading (recovery) ---

// walOp is one op of a frame read back.
type walOp struct {
	kind byte
	// payload aliases the frame; off is its offset in the segment.
	payload []byte
	off     int64
}

// splitOps appends to ops the ops of a frame's body p, which starts at
// offset base in its segment.
func splitOps(ops []walOp, p []byte, base int64) ([]walOp, error) {
	for len(p) > 0 {
		if len(p) < opHeaderLen {
			return ops, errors.New("truncated op")
		}
		k, l := p[0], binary.BigEndian.Uint32(p[1:])
		if int64(l) > int64(len(p)-opHeaderLen) {
			return ops, fmt.Errorf("op of %d bytes past the frame's end", l)
		}
		ops = append(ops, walOp{kind: k, payload: p[opHeaderLen : opHeaderLen+l], off: base + opHeaderLen})
		base += int64(opHeaderLen + l)
		p = p[opHeaderLen+l:]
	}
	return ops, nil
}

// appliesToFile reports whether ops of kind are applied to the bbolt file.
func appliesToFile(kind byte) bool { return kind == opTel || kind == opArch || kind == opClaim }

// listSegments returns the segment files of dir, oldest first.
func listSegments(dir string) (firsts []uint64, spares []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read log directory %s: %w", dir, err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), spareSuffix) && e.Type().IsRegular() {
			spares = append(spares, filepath.Join(dir, e.Name()))
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil || segmentName(n) != e.Name() {
			return nil, nil, fmt.Errorf("log directory %s: unexpected file %s: move it away", dir, e.Name())
		}
		firsts = append(firsts, n)
	}
	slices.Sort(firsts)
	return firsts, spares, nil
}

// scanSegment reads the frames of f, the segment whose first lsn is
// first, in order, calling fn with each frame's lsn and ops. It returns
// the offset after the last whole frame and whether the file goes on past
// it: a torn or corrupt tail, or a frame below first, which a spare file
// kept from its earlier life (walSpareSegments).
func scanSegment(f *os.File, first uint64, fn func(lsn uint64, ops []walOp) error) (end int64, torn bool, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), 1<<20)
	var hdr [frameHeaderLen]byte
	var buf []byte
	var ops []walOp
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF {
				return end, false, nil
			}
			if err == io.ErrUnexpectedEOF {
				return end, true, nil
			}
			return end, false, err
		}
		n := binary.BigEndian.Uint32(hdr[0:])
		if n > maxFrameBytes {
			return end, true, nil
		}
		buf = slices.Grow(buf[:0], 8+int(n))[:8+int(n)]
		copy(buf, hdr[8:])
		if _, err := io.ReadFull(r, buf[8:]); err != nil {
			if err == io.EOF || err == io.ErrUnexpectedEOF {
				return end, true, nil
			}
			return end, false, err
		}
		if crc32.Checksum(buf, castagnoli()) != binary.BigEndian.Uint32(hdr[4:]) {
			return end, true, nil
		}
		lsn := binary.BigEndian.Uint64(hdr[8:])
		if lsn < first {
			// A whole frame of the file's earlier life as another
			// segment (walSpareSegments): what follows is older still.
			return end, true, nil
		}
		if ops, err = splitOps(ops[:0], buf[8:], end+frameHeaderLen); err != nil {
			return end, false, fmt.Errorf("frame %d: %w", lsn, err)
		}
		if err := fn(lsn, ops); err != nil {
			return end, false, err
		}
		end += frameHeaderLen + int64(n)
	}
}

// --- deferred durability ---

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
		if err := g.wait(); err != nil && first == nil {
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
	return g.wait()
}
