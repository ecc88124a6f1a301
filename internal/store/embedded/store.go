// Package embedded is the durable, embedded implementation of the
// pkg/dispatch ports that `snavio dispatch serve` runs on: flow control
// (counters, leases, dedupe claims, bans, rollups), the registry and keys,
// the telemetry outbox with per-tenant streams, the archive of accepted
// events and replay snapshots, composed with the local queues of package
// localqueue.
//
// The store is a bbolt file under the data directory and, beside it, a
// write-ahead log (package wal; the file's name with "-wal": a directory
// of segment files). See docs/store/embedded.md for the design and the
// measured choices.
//
//   - The hot path writes only to the log: a delivered message with its
//     telemetry event and claim completion (deliver.go), an archived
//     request, a telemetry append, a receive or delete is one frame, and
//     concurrent frames share one write and one fdatasync (group commit).
//     A write returns once its frame is durable, so an acknowledged write
//     survives kill -9.
//   - Queue messages live in the log only (package localqueue indexes
//     them in memory and rebuilds the index at Open). Telemetry records,
//     archived events and claim completions are also applied to the bbolt
//     file, by one goroutine in large transactions (apply.go), where they
//     are read (a read first waits for the writes made before it to be
//     applied). Everything else (registry, flow control, queue
//     configuration, telemetry cursors) is written to the bbolt file
//     directly, one transaction per call, concurrent calls group committed.
//
// With Options.Ephemeral the same code runs in memory: bbolt on an
// anonymous memory file (memfd on Linux) with fsync off, and a log that
// is written nowhere.
//
// The store never reads the wall clock on its own: the flow ports take the
// caller's now, and the queue, outbox and archive methods read
// Options.Clock.
package embedded

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Options configure Open.
type Options struct {
	// Path is the store's file, created with mode 0600 (and its directory
	// with 0700) if missing. Required unless Ephemeral.
	Path string
	// Ephemeral keeps everything in memory: no file is created and nothing
	// survives Close. Path is ignored.
	Ephemeral bool
	// Clock is the time source of the queue, outbox and archive methods.
	// Default: clock.System().
	Clock clock.Clock
	// OpenTimeout bounds the wait for the file lock held by another
	// process. Default: 2 s.
	OpenTimeout time.Duration
	// SyncEvery chooses what a power loss can take. 0 (the default)
	// syncs the log (fdatasync) before acknowledging any write but a
	// queue consumer's: nothing acknowledged is lost, except that a
	// Receive, DeleteMessage(Batch) or ChangeMessageVisibility is
	// acknowledged once written and synced within 10 ms, so a power
	// loss in between can deliver its message again (at least once, as
	// SQS may); a killed process loses none of them. A positive
	// interval acknowledges a write once it is written to the log file,
	// in the OS's page cache, which a killed or crashed process does not
	// lose, and syncs within the interval (and before anything is
	// applied to the file, and at Close): a power loss or kernel crash
	// can take the writes of the last interval, and nothing else.
	// Ignored when Ephemeral.
	SyncEvery time.Duration

	// MemoryBudget bounds the bytes an ephemeral store's queued messages
	// hold (their records, and localqueue.MsgOverhead each for the index): a send
	// beyond it fails with ErrMemoryBudget. 0 means DefaultMemoryBudget;
	// ignored on file, where records stay on disk.
	MemoryBudget int64

	// OnApplied, when set, is called after telemetry or archived events
	// written to the log were applied to the file, where readers find
	// them: a server wakes its telemetry readers there. It runs on the
	// store's applier goroutine and must not block.
	OnApplied func()

	// OnLogSync, when set, is given the duration of each sync of the
	// write-ahead log (by Clock), for a latency histogram: the disk's
	// fdatasync latency is what --fsync always waits for. It runs on the
	// log's flusher or sync goroutine and must not block.
	OnLogSync func(time.Duration)

	// applyEvery overrides the pace of the applies (tests: a log whose
	// writes stay unapplied, as a crash leaves them).
	applyEvery time.Duration

	// pageSize overrides the page size of a new file (tests: a file made
	// before pages were 16 KiB).
	pageSize int

	// syncTicks replaces the sync loop's ticker (tests: a sync exactly
	// when the test says; without SyncEvery, a sync of the writes that
	// did not wait for one).
	syncTicks <-chan time.Time

	// segmentBytes overrides wal.DefaultSegmentBytes (tests: rotation and
	// compaction without writing 32 MiB).
	segmentBytes int64

	// logIO, when set, replaces the log's file writes and syncs (tests:
	// a disk that fails, then recovers).
	logIO *wal.IO
}

// DefaultMemoryBudget is an ephemeral store's MemoryBudget unless set:
// 256 MiB, about 200 000 queued messages of 1 KiB.
const DefaultMemoryBudget = 256 << 20

// ErrClosed is returned by every method called after Close.
var ErrClosed = wal.ErrClosed

// ErrLogFailed wraps every write after the write-ahead log failed to
// write or sync: the store stops accepting writes until it is reopened.
var ErrLogFailed = wal.ErrLogFailed

// maxGroup bounds how many queued writes one group commit takes.
const maxGroup = 256

// groupYields is how many times the committer, finding no more writes
// queued, lets the other runnable goroutines run before it commits: the
// writers woken by the previous commit (the commands of the same requests)
// queue their next writes meanwhile, and join this group instead of paying
// for a commit each. When nothing else is runnable a yield returns at
// once, so a lone writer is not delayed (docs/store/embedded.md, "The
// write path").
const groupYields = 2

// appendFill is the page fill of the buckets whose keys grow with time
// (archive, telemetry, queue indexes and time-ordered message ids): they
// are appended to, so their pages are filled before splitting instead of
// being left half empty (bbolt's default of 0.5 suits random inserts).
const appendFill = 1.0

// pageSize is the page size of a new store file (see Open).
const pageSize = 16 << 10

// appendOnly sets b's fill for appends and returns it.
func appendOnly(b *bolt.Bucket) *bolt.Bucket {
	b.FillPercent = appendFill
	return b
}

// Store is the embedded store. Build it with Open; it is safe for
// concurrent use. Close it to release the file.
type Store struct {
	db    *bolt.DB
	clock clock.Clock
	path  string

	writes chan *writeReq
	done   chan struct{}
	wg     sync.WaitGroup

	closeOnce sync.Once
	closeErr  error
	// closing is set when Close starts (and the queues are closed): the
	// methods that may not write refuse from then on as the writing
	// ones do.
	closing atomic.Bool

	// commits and writes count group commits and the writes they took.
	commits, committed atomic.Uint64

	// The write-ahead log and what lives there (logops.go, apply.go).
	wal *localqueue.Log
	ap  *applier
	// applyEvery paces the applies (applyEvery unless a test sets it).
	applyEvery time.Duration
	onApplied  func()
	// logErr is the last error of the log's upkeep (deleting or compacting
	// segments); the writes go on.
	logErr atomic.Pointer[error]
	// maintainMu runs maintain one call at a time.
	maintainMu sync.Mutex

	// queues are the local queues (package localqueue): their
	// configurations in the file, their messages in the log. The store's
	// queue methods are theirs (queues.go).
	queues *localqueue.Queues

	// cmu guards completing: the claims whose completion is written to the
	// log and not yet applied to the file, with the frame's lsn. A claim
	// there is no longer its owner's to deliver under, and the flow
	// methods wait for its completion before reading it.
	cmu        sync.Mutex
	completing map[string]uint64

	// arch counts each tenant's share of the archive (archive_bounds.go).
	arch archiveLedger

	// tmu guards the telemetry positions: each stream's last sequence
	// number and the last global number handed out.
	tmu       sync.Mutex
	telLast   map[string]uint64
	telGlobal uint64
}

// CommitStats says how well writes are grouped: Writes (calls of the
// write methods) committed in Commits transactions since Open.
type CommitStats struct {
	Commits, Writes uint64
}

// CommitStats returns the counts so far.
func (s *Store) CommitStats() CommitStats {
	return CommitStats{Commits: s.commits.Load(), Writes: s.committed.Load()}
}

type writeReq struct {
	fn  func(tx *bolt.Tx) error
	err chan error
}

// Top-level buckets.
var (
	bCounters = []byte("counters")
	bLeases   = []byte("leases")
	bDedupe   = []byte("dedupe")
	bBanLog   = []byte("banledger")
	bBans     = []byte("bans")
	bRollups  = []byte("rollups")
	bOutbox   = []byte("outbox")
	bArchive  = []byte("archive")
)

// bFormat holds kFormat: the file's store format.
var (
	bFormat = []byte("format")
	kFormat = []byte("version")
)

// StoreFormat is the layout of the records this package writes. Format 1
// (JSON records) was replaced by format 2 (binary queue, archive and
// telemetry records), and format 2 by format 3 (queue messages in the
// write-ahead log beside the file, not in it) before any release; a file
// of another format is refused with a message saying what to do, never
// misread.
const StoreFormat = 3

// ErrFormat wraps Open's refusal of a file of another store format.
var ErrFormat = errors.New("unsupported store format")

var allBuckets = [][]byte{bCounters, bLeases, bDedupe, bBanLog, bBans, bRollups, localqueue.Bucket, bOutbox, bArchive, bRegistry, bSnapshots, bWAL}

// Open opens (creating if needed) the store described by opts.
func Open(opts Options) (*Store, error) {
	if opts.SyncEvery < 0 {
		return nil, fmt.Errorf("embedded store: sync interval %v: give 0 (sync every write) or a positive interval", opts.SyncEvery)
	}
	if opts.MemoryBudget < 0 {
		return nil, fmt.Errorf("embedded store: memory budget %d bytes: give a positive size, or 0 for the default %d", opts.MemoryBudget, DefaultMemoryBudget)
	}
	if opts.MemoryBudget == 0 {
		opts.MemoryBudget = DefaultMemoryBudget
	}
	if opts.Clock == nil {
		opts.Clock = clock.System()
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 2 * time.Second
	}
	// NoFreelistSync: the free-page list is not written at every commit
	// (it grew with the file and was rewritten whole each time); Open
	// rebuilds it by scanning the file instead. Crash safety does not
	// depend on it: the list is derived from the pages in use.
	//
	// PageSize: bbolt keeps, in memory, a record of every allocation still
	// in use and of every free span, so its bookkeeping grows with the
	// number of pages the retention window fills (archive and telemetry
	// records are 0.5-4 KB, about one 4 KiB page each). Pages four times
	// larger keep a quarter of the entries: at 40 k commands/s with a
	// 10 s retention the live heap ended a 30 s run at 12-16 MiB instead
	// of 18-34 MiB. A file keeps the page size it was created with.
	bo := &bolt.Options{Timeout: opts.OpenTimeout, FreelistType: bolt.FreelistMapType, NoFreelistSync: true, PageSize: pageSize}
	if opts.pageSize > 0 {
		bo.PageSize = opts.pageSize
	}
	path := opts.Path
	if opts.Ephemeral {
		path = "snavio-ephemeral"
		bo.NoSync = true
		bo.NoGrowSync = true
		bo.OpenFile = openEphemeral
	} else {
		if path == "" {
			return nil, errors.New("embedded store: no path: set Options.Path to a file under the data directory, or Options.Ephemeral")
		}
		if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
			return nil, fmt.Errorf("embedded store: create the directory of %s: %w", path, err)
		}
	}
	db, err := bolt.Open(path, 0o600, bo)
	if err != nil {
		if errors.Is(err, bolterrors.ErrTimeout) {
			return nil, fmt.Errorf("embedded store: %s is locked by another process (is another `snavio dispatch serve` running on this data directory?): %w", path, err)
		}
		return nil, fmt.Errorf("embedded store: open %s: %w", path, err)
	}
	if err := db.Update(func(tx *bolt.Tx) error {
		if err := checkFormat(tx, path); err != nil {
			return err
		}
		for _, b := range allBuckets {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	}); err != nil {
		db.Close()
		if errors.Is(err, ErrFormat) {
			return nil, err
		}
		return nil, fmt.Errorf("embedded store: initialise %s: %w", path, err)
	}
	s := &Store{db: db, clock: opts.Clock, writes: make(chan *writeReq, maxGroup), done: make(chan struct{}),
		telLast: make(map[string]uint64), completing: make(map[string]uint64)}
	s.queues = localqueue.New(localqueue.Config{Clock: opts.Clock, Update: s.update, MemoryBudget: opts.MemoryBudget})
	s.applyEvery, s.onApplied = applyEvery, opts.OnApplied
	if !opts.Ephemeral {
		s.path = path
	}
	if opts.applyEvery > 0 {
		s.applyEvery = opts.applyEvery
	}
	if err := s.openLog(opts, path+walSuffix); err != nil {
		db.Close()
		return nil, err
	}
	if err := s.loadArchiveLedger(); err != nil {
		_ = s.wal.CloseFiles()
		db.Close()
		return nil, err
	}
	s.wg.Add(1)
	go s.committer()
	s.wal.Start(opts.syncTicks)
	go s.applyLoop()
	signal(s.ap.kick) // delete the segments recovery left that nothing needs
	return s, nil
}

// openLog loads the queues, recovers the write-ahead log in dir (none for
// an ephemeral store), rebuilding the queues from it, and opens its
// active segment.
func (s *Store) openLog(opts Options, dir string) error {
	if err := s.db.View(s.queues.Load); err != nil {
		return fmt.Errorf("embedded store: load queues: %w", err)
	}
	applied, err := s.appliedLSN()
	if err != nil {
		return err
	}
	r := &recovery{s: s, applied: applied}
	cfg := wal.Config[localqueue.Changes]{SyncEvery: opts.SyncEvery, SegmentBytes: opts.segmentBytes, After: applied,
		Replay: r.replay, OnCommitted: s.logCommitted, OnRotate: func() { signal(s.ap.kick) },
		Now: s.clock.Now, OnSync: opts.OnLogSync, IO: opts.logIO}
	if !opts.Ephemeral {
		cfg.Dir = dir
	}
	w, err := wal.Open(cfg)
	if err != nil {
		return err
	}
	upTo, err := r.finish()
	if err != nil {
		_ = w.CloseFiles()
		return err
	}
	s.queues.Start(w)
	s.ap = newApplier(upTo)
	s.wal = w
	if err := s.loadTelemetryPositions(); err != nil {
		_ = w.CloseFiles()
		return fmt.Errorf("embedded store: load telemetry positions: %w", err)
	}
	return nil
}

// LogStats returns the write-ahead log's counts so far.
func (s *Store) LogStats() LogStats {
	ws := s.wal.Stats()
	st := LogStats{Frames: ws.Frames, Writes: ws.Writes, Syncs: ws.Syncs, SyncTime: ws.SyncTime, Segments: ws.Segments}
	if e := s.logErr.Load(); e != nil {
		st.UpkeepError = (*e).Error()
	}
	return st
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

// checkFormat stamps a new file with StoreFormat and refuses a file of
// another format.
func checkFormat(tx *bolt.Tx, path string) error {
	fb := tx.Bucket(bFormat)
	if fb == nil {
		empty := true
		_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
		if !empty {
			return formatError(path, 1)
		}
		fb, err := tx.CreateBucket(bFormat)
		if err != nil {
			return err
		}
		return fb.Put(kFormat, u64(StoreFormat))
	}
	v := fb.Get(kFormat)
	if len(v) != 8 {
		return fmt.Errorf("embedded store: %s: %w: the format stamp is unreadable (%d bytes); restore the file from a backup, or move it away to start with an empty store", path, ErrFormat, len(v))
	}
	if f := binary.BigEndian.Uint64(v); f != StoreFormat {
		return formatError(path, f)
	}
	return nil
}

func formatError(path string, f uint64) error {
	return fmt.Errorf("embedded store: %s: %w %d (this snavio reads format %d only; the file was written by another snavio version): run the snavio version that wrote it, or move the file away to start with an empty store", path, ErrFormat, f, StoreFormat)
}

// ErrApplyFailing wraps Health's report that applying the log to the
// store file fails (the file cannot be written, say its disk is full): the
// applier retries, and reads of telemetry and the archive wait meanwhile.
var ErrApplyFailing = errors.New("embedded store: applying the write-ahead log to the store file fails")

// Health says whether the store takes writes: nil, or an error wrapping
// ErrLogFailed once the write-ahead log failed (until the store is
// reopened; it is reported after Close too), ErrApplyFailing while the
// log cannot be applied to the file (until an apply succeeds), or
// ErrClosed after Close.
func (s *Store) Health() error {
	if lerr := s.wal.Err(); lerr != nil {
		return fmt.Errorf("%w: %w", ErrLogFailed, lerr)
	}
	if s.closing.Load() {
		return ErrClosed
	}
	s.ap.mu.Lock()
	aerr := s.ap.err
	s.ap.mu.Unlock()
	if aerr != nil {
		return fmt.Errorf("%w: %w", ErrApplyFailing, aerr)
	}
	return nil
}

// LogFailed is closed when the write-ahead log fails: from then on every
// write is refused until the store is reopened (Health has the cause).
func (s *Store) LogFailed() <-chan struct{} { return s.wal.Failed() }

// Path returns the store's file, or "" for an ephemeral store.
func (s *Store) Path() string { return s.path }

// LogDir returns the directory of the store's write-ahead log, beside its
// file, or "" for an ephemeral store.
func (s *Store) LogDir() string { return s.wal.Dir() }

// Close stops accepting writes, waits for the queued ones to commit and
// closes the file. It is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		s.closing.Store(true)
		s.queues.Close()
		// The log first: its queued frames are written, then applied.
		s.wal.Close()
		close(s.ap.stop)
		<-s.ap.done
		close(s.done)
		s.wg.Wait()
		err := s.wal.CloseFiles()
		if s.closeErr = s.db.Close(); s.closeErr == nil {
			s.closeErr = err
		}
	})
	return s.closeErr
}

// update runs fn in a committed write transaction, possibly together with
// other callers' functions (group commit). fn may run more than once (if a
// group it was part of failed, it runs again alone), so it must assign its
// results rather than accumulate them, and it should report logical
// outcomes through captured variables and return an error only for a real
// failure, which rolls back its whole group before the retry.
func (s *Store) update(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	req := &writeReq{fn: fn, err: make(chan error, 1)}
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	select {
	case s.writes <- req:
	case <-s.done:
		return ErrClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	// Once queued the write is committed or failed; its outcome is waited
	// for even if ctx ends, so a caller never mistakes a committed write for
	// a lost one.
	return <-req.err
}

func (s *Store) view(ctx context.Context, fn func(tx *bolt.Tx) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	select {
	case <-s.done:
		return ErrClosed
	default:
	}
	return s.db.View(fn)
}

func (s *Store) committer() {
	defer s.wg.Done()
	group := make([]*writeReq, 0, maxGroup)
	for {
		group = group[:0]
		select {
		case r := <-s.writes:
			group = append(group, r)
		case <-s.done:
			s.drainOnClose()
			return
		}
		yields := groupYields
	fill:
		for len(group) < maxGroup {
			select {
			case r := <-s.writes:
				group = append(group, r)
			default:
				if yields == 0 {
					break fill
				}
				yields--
				runtime.Gosched()
			}
		}
		s.commit(group)
	}
}

// drainOnClose commits what was queued before Close.
func (s *Store) drainOnClose() {
	for {
		select {
		case r := <-s.writes:
			s.commit([]*writeReq{r})
		default:
			return
		}
	}
}

func (s *Store) commit(group []*writeReq) {
	s.commits.Add(1)
	s.committed.Add(uint64(len(group)))
	err := s.db.Update(func(tx *bolt.Tx) error {
		for _, r := range group {
			if err := r.fn(tx); err != nil {
				return err
			}
		}
		return nil
	})
	if err == nil || len(group) == 1 {
		for _, r := range group {
			r.err <- err
		}
		return
	}
	// One function failed and rolled back the group: run each alone so
	// that only the failing one reports its error.
	for _, r := range group {
		r.err <- s.db.Update(r.fn)
	}
}
