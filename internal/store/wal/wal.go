// Package wal is the write-ahead log of the embedded store: a directory
// of segment files holding frames, each an atomic group of ops that the
// log neither reads nor interprets (the store gives them their meaning).
// A write is one frame appended to the active segment; one flusher
// goroutine writes every frame queued meanwhile with one write (group
// commit). A written group is in the OS's page cache, which a killed
// process does not take with it; what a power loss can take depends on
// when it is synced:
//
//   - By default (sync on demand) a group is committed (Config.OnCommitted
//     runs for its frames) and acknowledged once synced, and the flusher
//     syncs whatever is written as soon as a writer waits for durability
//     (Group.Wait). A writer that waits only for its write
//     (Group.WaitWritten, a queue consumer's change) is synced with the
//     next such wait or within lazySyncEvery: a power loss just after it
//     can undo it. Syncing every group instead, the consumers' writes
//     alone kept the log syncing 80-90% of the time.
//   - With a sync interval (Config.SyncEvery) a group is committed and
//     acknowledged once written, and a sync loop makes it durable within
//     the interval (SyncThrough lets the store sync before it applies
//     anything elsewhere, so nothing is ever ahead of the log).
//   - Without a directory (ephemeral) nothing is written: frames are
//     committed as they are flushed, and stay in memory as long as their
//     owner keeps them.
//
// A segment is deleted (DetachOldest, Remove) once its owner says nothing
// in it is needed: every op applied elsewhere and no record pinned (the
// Live counts). docs/store/embedded.md has the design and the figures
// that chose it.
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
package wal

import (
	"bufio"
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

	"github.com/snavio/snavio/internal/atomicfile"
)

const (
	// HeaderLen is the length of a frame's header: a new frame's B starts
	// with it (NewFrame), and Add fills it.
	HeaderLen = 16
	// OpHeaderLen is the length of an op's header: its kind and length.
	OpHeaderLen = 5
	// DefaultSegmentBytes is the size past which the active segment is
	// sealed and a new one started (a larger frame still goes whole into
	// one segment).
	DefaultSegmentBytes = 32 << 20
	// maxFrameBytes bounds a frame recovery accepts: the largest write (an
	// archive batch of 1000 events of 256 KiB) with room to spare.
	maxFrameBytes = 512 << 20
	// spareBufs buffers of at most spareBufBytes are kept for the next
	// groups' writes.
	spareBufs     = 4
	spareBufBytes = 1 << 20
	// SpareSegments is how many deleted segment files are kept, as
	// spares (SpareSuffix), to become new segments: overwriting a file's
	// written blocks needs no block allocation and no change of size, so
	// its fdatasync commits no metadata (PostgreSQL recycles its WAL
	// segments, and RocksDB its logs, for the same reason; the figures
	// are in docs/store/embedded.md). Recovery tells a spare's old frames
	// by their lsn, below the segment's first (ScanSegment): within one
	// run of the log every lsn in a spare is below the next one. Spares
	// found at Open are deleted, not reused: after a power loss one may
	// hold frames of writes the log lost, whose lsns the log reuses. A
	// file grown past twice the segment size by a large frame is deleted,
	// not kept.
	SpareSegments = 2
	// SpareSuffix ends the name of a spare file.
	SpareSuffix = ".spare"
	// flushYields is how many times the flusher, before it takes a group,
	// lets the writers the last group woke queue their next frames: they
	// join this group instead of paying for a write each.
	flushYields = 2
)

// castagnoli is made on first use, not at package init (start-up cost:
// internal/app's TestStartupCost).
var castagnoli = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

// ErrLogFailed wraps every write after the log failed to write or sync:
// after a failed fsync the file's state is unknown, so the log stops
// accepting writes until it is reopened (recovery then reads what is
// really there).
var ErrLogFailed = errors.New("embedded store: write-ahead log failed; reopen the store")

// ErrClosed is returned by Add once Close started.
var ErrClosed = errors.New("embedded store: closed")

// Frame is one atomic write being built: its ops in B, and Meta, what
// its owner does once it is committed (Config.OnCommitted).
type Frame[M any] struct {
	// B is the frame as written: HeaderLen bytes that Add fills, then
	// the ops (Op and End).
	B []byte
	// Meta is the owner's: the log only hands it back.
	Meta M
	// Applies: some of its ops are applied elsewhere; a segment's
	// MaxApply is the lsn of its last such frame.
	Applies bool
	// Lazy: its writer waits only for its write (Group.WaitWritten), so
	// it alone does not start a sync's writeback.
	Lazy bool

	// Set by Add: the frame's lsn, segment and offset in it.
	lsn  uint64
	seg  *Segment
	base int64
}

// NewFrame returns an empty frame with room for size bytes of ops.
func NewFrame[M any](size int) *Frame[M] {
	return &Frame[M]{B: make([]byte, HeaderLen, HeaderLen+size)}
}

// Op appends an op header of kind and returns the offset of its payload;
// End closes it.
func (f *Frame[M]) Op(kind byte) int {
	f.B = append(f.B, kind, 0, 0, 0, 0)
	return len(f.B)
}

// End closes the op whose payload starts at start (Op's result).
func (f *Frame[M]) End(start int) {
	binary.BigEndian.PutUint32(f.B[start-4:], uint32(len(f.B)-start))
}

// Empty says whether f holds no op.
func (f *Frame[M]) Empty() bool { return len(f.B) == HeaderLen }

// LSN is f's log sequence number, set by Add.
func (f *Frame[M]) LSN() uint64 { return f.lsn }

// Segment is the segment f went to, set by Add.
func (f *Frame[M]) Segment() *Segment { return f.seg }

// Offset is the offset of f's byte at i in its segment.
func (f *Frame[M]) Offset(i int) int64 { return f.base + int64(i) }

// Segment is one log file.
type Segment struct {
	first uint64   // lsn of its first frame; its name
	f     *os.File // nil in an ephemeral log
	name  string
	// size is the offset the next frame goes to (frames queued for the
	// flusher included). Guarded by Log.mu.
	size int64
	// maxApply is the highest lsn of a frame here with ops to apply.
	// Guarded by Log.mu.
	maxApply uint64
	// Live counts the records here that the owner still needs (queued
	// messages), LiveBytes their bytes: a segment is not detached while
	// Live > 0. The owner guards them, and holds its lock around
	// DetachOldest.
	Live      int
	LiveBytes int64
	// refs counts reads in progress; a segment is deleted only without.
	refs atomic.Int32
	// synced: the directory entry of a new file was synced.
	// (Atomic: with a sync interval, syncs run beside the flusher.)
	synced atomic.Bool
}

// SegmentName is the file name of the segment whose first lsn is first.
func SegmentName(first uint64) string { return fmt.Sprintf("%020d.log", first) }

// First is the lsn of s's first frame.
func (s *Segment) First() uint64 { return s.first }

// Name is s's file name.
func (s *Segment) Name() string { return s.name }

// Size is the offset of s's next frame. The caller holds the owner's lock
// or reads a sealed segment, whose size no longer changes.
func (s *Segment) Size() int64 { return s.size }

// Hold counts a live record of n bytes in s; Drop uncounts it.
func (s *Segment) Hold(n int) { s.Live++; s.LiveBytes += int64(n) }

// Drop uncounts a live record of n bytes (Hold).
func (s *Segment) Drop(n int) { s.Live--; s.LiveBytes -= int64(n) }

// Acquire takes a reference on s for a read: s is not deleted until
// Release.
func (s *Segment) Acquire() { s.refs.Add(1) }

// Release returns Acquire's reference.
func (s *Segment) Release() { s.refs.Add(-1) }

// ReadAt reads the n bytes at off in s's file. The caller holds a
// reference (Acquire).
func (s *Segment) ReadAt(off int64, n int) ([]byte, error) {
	b := make([]byte, n)
	if _, err := s.f.ReadAt(b, off); err != nil {
		return nil, fmt.Errorf("read from log segment %s: %w", s.name, err)
	}
	return b, nil
}

// Group is the frames one flush writes, and that are synced and
// committed together.
type Group[M any] struct {
	log    *Log[M]
	frames []*Frame[M]
	chunks []chunk
	// written is closed once the group is written (werr: its failure);
	// done once it is committed and durable (err: its failure).
	written, done chan struct{}
	werr, err     error
	// durable: a frame of it is waited for synced (not lazy).
	durable bool
}

type chunk struct {
	seg *Segment
	off int64
	b   []byte
}

// Config configures Open.
type Config[M any] struct {
	// Dir is the log's directory, created with mode 0700 if missing. ""
	// makes an ephemeral log: nothing is written, and nothing survives.
	Dir string
	// SyncEvery is 0 to sync on demand (the package comment), or the
	// longest a written group waits for its sync.
	SyncEvery time.Duration
	// SegmentBytes is the size past which a segment is sealed. Default:
	// DefaultSegmentBytes (tests set less, to rotate without writing
	// 32 MiB).
	SegmentBytes int64
	// After is an lsn the log continues after even if it holds none that
	// high: the last lsn whose ops its owner applied elsewhere, whose
	// segments may all be deleted.
	After uint64
	// Replay is called at Open for every frame found, in lsn order, with
	// the segment holding it; it returns whether the frame has ops
	// applied elsewhere (Frame.Applies). Ops alias a buffer reused for
	// the next frame.
	Replay func(seg *Segment, lsn uint64, ops []Op) (applies bool, err error)
	// OnCommitted runs in the flusher, in lsn order, after a group is
	// durable (or written, with SyncEvery; or flushed, ephemeral) and
	// before its writers are woken. Required.
	OnCommitted func(frames []*Frame[M])
	// OnRotate, when set, is called (on a goroutine of its own) when a
	// segment is sealed.
	OnRotate func()
	// Now times the syncs. Default: time.Now.
	Now func() time.Time
	// OnSync, when set, is given each sync's duration; it runs on the
	// flusher or the sync loop and must not block.
	OnSync func(time.Duration)
	// IO, when set, replaces the segment files' writes and syncs (tests:
	// a disk that fails, then recovers).
	IO *IO
}

// IO is how the log writes and syncs its segment files.
type IO struct {
	WriteAt  func(f *os.File, b []byte, off int64) (int, error)
	Datasync func(f *os.File) error
}

// Fdatasync is the datasync the log uses unless Config.IO replaces it.
func Fdatasync(f *os.File) error { return fdatasync(f) }

// Log is the log writer. Build it with Open and start it with Start.
type Log[M any] struct {
	dir       string // "" for an ephemeral log (memory files)
	ephemeral bool
	// segmentBytes is DefaultSegmentBytes but in tests.
	segmentBytes int64

	mu      sync.Mutex
	cond    *sync.Cond
	next    uint64 // the next frame's lsn
	segs    []*Segment
	cur     *Group[M]
	spare   []chunk // a flushed group's chunks, reused
	closing bool
	// err is the failure that stopped the log (nil while it works);
	// failed is closed when it is set (fail).
	err    error
	failed chan struct{}
	// spares are the paths of deleted segments' files kept for reuse
	// (SpareSegments at most).
	spares []string

	synced atomic.Uint64 // every frame up to it is durable

	// syncEvery is Config.SyncEvery.
	syncEvery time.Duration
	// On demand (onDemand: a file log without syncEvery), written groups
	// wait in pending until a sync, which the flusher makes once demand
	// (the highest lsn a writer waits to be durable) is past committed.
	// Both are guarded by mu.
	pending []*Group[M]
	demand  uint64
	// committed is the lsn of the last frame onCommitted has run for.
	committed atomic.Uint64
	// The segments written since the last sync and the lsn of the last
	// frame written (guarded by mu); syncMu orders syncs.
	dirty   []*Segment
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
	onCommitted func(frames []*Frame[M])
	// onRotate is called (without locks) when a segment is sealed.
	onRotate func()

	// now times the syncs; onSync, when not nil, is given each sync's
	// duration.
	now    func() time.Time
	onSync func(time.Duration)
	// writeAt and datasync write and sync a segment's file: f.WriteAt
	// and fdatasync, or a test's failing disk (Config.IO).
	writeAt  func(f *os.File, b []byte, off int64) (int, error)
	datasync func(f *os.File) error

	frames, writes, syncs atomic.Uint64
	syncNanos             atomic.Int64 // the syncs' total duration
	flusherDone           chan struct{}
	closeOnce             sync.Once
}

// onDemand says whether the log syncs on demand: a file log without
// syncEvery (the package comment).
func (w *Log[M]) onDemand() bool { return !w.ephemeral && w.syncEvery == 0 }

// lastLSN is the lsn of g's last frame. g must have one (a group is
// flushed only with frames); while g is w.cur, call it under w.mu.
func (g *Group[M]) lastLSN() uint64 { return g.frames[len(g.frames)-1].lsn }

func (w *Log[M]) newGroup() *Group[M] {
	return &Group[M]{log: w, written: make(chan struct{}), done: make(chan struct{})}
}

// Add queues f (finishing its header) and returns the group to wait on.
// The caller holds the locks that order f against the in-memory state.
func (w *Log[M]) Add(f *Frame[M]) (*Group[M], error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.err != nil {
		return nil, fmt.Errorf("%w: %w", ErrLogFailed, w.err)
	}
	if w.closing {
		return nil, ErrClosed
	}
	seg := w.segs[len(w.segs)-1]
	if seg.size > 0 && seg.size+int64(len(f.B)) > w.segmentBytes {
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
	binary.BigEndian.PutUint32(f.B[0:], uint32(len(f.B)-HeaderLen))
	binary.BigEndian.PutUint64(f.B[8:], f.lsn)
	binary.BigEndian.PutUint32(f.B[4:], crc32.Checksum(f.B[8:], castagnoli()))
	seg.size += int64(len(f.B))
	if f.Applies {
		seg.maxApply = f.lsn
	}
	g := w.cur
	g.durable = g.durable || !f.Lazy
	if w.ephemeral {
		// Nothing is written: no copy to make.
	} else if n := len(g.chunks); n > 0 && g.chunks[n-1].seg == seg {
		g.chunks[n-1].b = append(g.chunks[n-1].b, f.B...)
	} else {
		var buf []byte
		if k := len(w.spare); k > 0 {
			buf = w.spare[k-1].b[:0]
			w.spare = w.spare[:k-1]
		}
		g.chunks = append(g.chunks, chunk{seg: seg, off: f.base, b: append(buf, f.B...)})
	}
	g.frames = append(g.frames, f)
	w.frames.Add(1)
	if len(g.frames) == 1 {
		w.cond.Signal()
	}
	return g, nil
}

// Wait returns once g is committed and durable (or failed). On a log
// that syncs on demand it asks for the sync.
func (g *Group[M]) Wait() error {
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

// WaitWritten returns once g is written (or failed): safe from a crash of
// the process, and on a log that syncs on demand not yet from a power
// loss (the package comment says which writes wait only for this).
func (g *Group[M]) WaitWritten() error {
	<-g.written
	return g.werr
}

// lazySyncEvery bounds how long a write that waited only for its write
// (WaitWritten) stays unsynced on a log that syncs on demand.
const lazySyncEvery = 10 * time.Millisecond

// flusher writes groups until the log closes, and on a log that syncs on
// demand syncs and commits them when they are waited for.
func (w *Log[M]) flusher() {
	defer close(w.flusherDone)
	for {
		w.mu.Lock()
		for len(w.cur.frames) == 0 && !w.closing && !w.syncDue() {
			w.cond.Wait()
		}
		if len(w.cur.frames) > 0 {
			// Let the writers the last group woke queue their next
			// frames first, as the committer does (flushYields): nothing waits for a write but the write.
			w.mu.Unlock()
			for range flushYields {
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
func (w *Log[M]) syncDue() bool {
	return w.onDemand() && len(w.pending) > 0 && w.demand > w.committed.Load()
}

// fail stops the log with err, the first failure; the caller holds w.mu.
func (w *Log[M]) fail(err error) {
	if w.err == nil {
		w.err = err
		close(w.failed)
	}
}

// flush writes g. In memory or with a sync interval it commits g at once;
// on a log that syncs on demand g waits in pending for its sync. After a
// failure nothing more is written: a group written past a torn one would
// be acknowledged and then lost, as recovery stops at the torn frame.
func (w *Log[M]) flush(g *Group[M]) {
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
		if cap(c.b) <= spareBufBytes && len(w.spare) < spareBufs {
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
	if w.onDemand() {
		w.mu.Lock()
		w.pending = append(w.pending, g)
		w.mu.Unlock()
		// After pending: the sync loop's round syncs the newest group
		// pending once it has taken this signal. Its writers return only
		// after it, so a write they saw return is one the loop knows of.
		w.signalUnsynced()
		close(g.written)
		return
	}
	close(g.written)
	w.signalUnsynced() // after write, which added g's segments to dirty
	w.onCommitted(g.frames)
	// After the callback, which counts the group's messages in their
	// segments: a segment is deleted only once the frames up to the next
	// one's are durable and committed, and none of its messages is
	// queued (DetachOldest).
	w.committed.Store(last)
	if w.ephemeral {
		w.synced.Store(last)
	}
	close(g.done)
}

// signalUnsynced wakes the sync loop, if any, after a write.
func (w *Log[M]) signalUnsynced() {
	if w.unsynced != nil {
		signal(w.unsynced)
	}
}

// commitSynced syncs the pending groups, then commits them in order and
// wakes their waiters.
func (w *Log[M]) commitSynced() {
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

func (w *Log[M]) write(g *Group[M]) error {
	if w.ephemeral {
		// Nothing to write: the owner of an ephemeral log keeps what
		// it needs of the frames in memory.
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
func (w *Log[M]) syncSegments(segs []*Segment) error {
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
func (w *Log[M]) sync() error {
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

// SyncThrough returns once every frame up to lsn is durable.
func (w *Log[M]) SyncThrough(lsn uint64) error {
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
func (w *Log[M]) syncLoop(ticks <-chan time.Time) {
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
			var g *Group[M]
			if n := len(w.pending); n > 0 {
				g = w.pending[n-1]
			}
			w.mu.Unlock()
			if g != nil {
				// A failure fails the log, as in the flusher.
				_ = g.Wait()
			}
			continue
		}
		// A failure is kept in w.err: every later write is refused.
		_ = w.sync()
	}
}

// createSegment creates the segment whose first frame is lsn first, from
// a spare file when there is one. The caller holds w.mu (or is Open).
func (w *Log[M]) createSegment(first uint64) (*Segment, error) {
	name := SegmentName(first)
	if w.ephemeral {
		return &Segment{first: first, name: name}, nil
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
		return &Segment{first: first, f: f, name: name}, nil
	}
	f, err := os.OpenFile(filepath.Join(w.dir, name), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return nil, fmt.Errorf("create log segment %s: %w", name, err)
	}
	return &Segment{first: first, f: f, name: name}, nil
}

// Close stops accepting frames and waits for the flusher to write what was
// queued. It is idempotent; CloseFiles then closes the files.
func (w *Log[M]) Close() {
	w.closeOnce.Do(w.close)
}

func (w *Log[M]) close() {
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

// CloseFiles closes every segment file.
func (w *Log[M]) CloseFiles() error {
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

// DetachOldest takes the oldest segment out of the log if it is sealed
// and nothing needs it: all its ops applied (applied), no message in it
// (Live is 0; the caller holds the lock that guards it) and no read in
// progress. The caller deletes it with remove, without holding locks.
func (w *Log[M]) DetachOldest(applied uint64) *Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.segs) < 2 || w.closing {
		return nil
	}
	s := w.segs[0]
	// Its frames are all durable and counted once the frame before the
	// next segment's first is synced and committed.
	if before := w.segs[1].first - 1; s.maxApply > applied || s.Live > 0 || s.refs.Load() > 0 || before > w.synced.Load() || before > w.committed.Load() {
		return nil
	}
	w.segs = w.segs[1:]
	return s
}

// Remove closes and deletes a detached segment's file. (The directory's
// sync is slow; it must not hold the locks every write takes.)
func (w *Log[M]) Remove(s *Segment) error {
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
	room := len(w.spares) < SpareSegments && s.size <= 2*w.segmentBytes
	w.mu.Unlock()
	if room {
		sp := filepath.Join(w.dir, s.name+SpareSuffix)
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

// Segments returns the segments, oldest first: the sealed ones, then the
// active one.
func (w *Log[M]) Segments() []*Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.segs)
}

// Sealed returns the sealed segments, oldest first.
func (w *Log[M]) Sealed() []*Segment {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.segs[:len(w.segs)-1])
}

// Stats says how the write-ahead log is doing since Open.
type Stats struct {
	// Frames written in Writes group commits (0 in memory), made durable
	// by Syncs fdatasyncs, each of everything written since the last.
	Frames, Writes, Syncs uint64
	// SyncTime is how long the Syncs took in all (the disk's latency
	// under the log: SyncTime/Syncs is the mean).
	SyncTime time.Duration
	// Segments is the number of log files now, Spares the deleted ones
	// kept for reuse.
	Segments, Spares int
	// Last is the lsn of the last frame added, Synced the lsn every
	// frame up to which is durable.
	Last, Synced uint64
	// SyncArms counts the times the sync loop woke from idle to sync a
	// write (it sleeps while nothing written waits for it).
	SyncArms uint64
}

// --- reading (recovery) ---

// Op is one op of a frame read back.
type Op struct {
	Kind byte
	// Payload aliases the frame; Off is its offset in the segment.
	Payload []byte
	Off     int64
}

// SplitOps appends to ops the ops of a frame's body p, which starts at
// offset base in its segment.
func SplitOps(ops []Op, p []byte, base int64) ([]Op, error) {
	for len(p) > 0 {
		if len(p) < OpHeaderLen {
			return ops, errors.New("truncated op")
		}
		k, l := p[0], binary.BigEndian.Uint32(p[1:])
		if int64(l) > int64(len(p)-OpHeaderLen) {
			return ops, fmt.Errorf("op of %d bytes past the frame's end", l)
		}
		ops = append(ops, Op{Kind: k, Payload: p[OpHeaderLen : OpHeaderLen+l], Off: base + OpHeaderLen})
		base += int64(OpHeaderLen + l)
		p = p[OpHeaderLen+l:]
	}
	return ops, nil
}

// ListSegments returns the lsns of the segment files of dir (their
// names), oldest first, and the paths of its spare files.
func ListSegments(dir string) (firsts []uint64, spares []string, err error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("read log directory %s: %w", dir, err)
	}
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), SpareSuffix) && e.Type().IsRegular() {
			spares = append(spares, filepath.Join(dir, e.Name()))
			continue
		}
		name, ok := strings.CutSuffix(e.Name(), ".log")
		if !ok || e.IsDir() {
			continue
		}
		n, err := strconv.ParseUint(name, 10, 64)
		if err != nil || SegmentName(n) != e.Name() {
			return nil, nil, fmt.Errorf("log directory %s: unexpected file %s: move it away", dir, e.Name())
		}
		firsts = append(firsts, n)
	}
	slices.Sort(firsts)
	return firsts, spares, nil
}

// ScanSegment reads the frames of f, the segment whose first lsn is
// first, in order, calling fn with each frame's lsn and ops. It returns
// the offset after the last whole frame and whether the file goes on past
// it: a torn or corrupt tail, or a frame below first, which a spare file
// kept from its earlier life (SpareSegments).
func ScanSegment(f *os.File, first uint64, fn func(lsn uint64, ops []Op) error) (end int64, torn bool, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, 1<<62), 1<<20)
	var hdr [HeaderLen]byte
	var buf []byte
	var ops []Op
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
			// segment (SpareSegments): what follows is older still.
			return end, true, nil
		}
		if ops, err = SplitOps(ops[:0], buf[8:], end+HeaderLen); err != nil {
			return end, false, fmt.Errorf("frame %d: %w", lsn, err)
		}
		if err := fn(lsn, ops); err != nil {
			return end, false, err
		}
		end += HeaderLen + int64(n)
	}
}
