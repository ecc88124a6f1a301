package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Open recovers the log in cfg.Dir (none for an ephemeral log), replaying
// every whole frame through cfg.Replay, cuts a torn tail and opens the
// active segment. It deletes the spare files it finds (SpareSegments). A
// damaged log (frames after a tear, or out of order) is refused, left as
// it was found. Start the log's goroutines with Start.
func Open[M any](cfg Config[M]) (*Log[M], error) {
	if cfg.OnCommitted == nil {
		return nil, errors.New("write-ahead log: no Config.OnCommitted")
	}
	if cfg.SyncEvery < 0 {
		return nil, fmt.Errorf("write-ahead log: sync interval %v: give 0 (sync on demand) or a positive interval", cfg.SyncEvery)
	}
	w := &Log[M]{dir: cfg.Dir, ephemeral: cfg.Dir == "", segmentBytes: cfg.SegmentBytes, onCommitted: cfg.OnCommitted,
		onRotate: cfg.OnRotate, now: cfg.Now, onSync: cfg.OnSync, flusherDone: make(chan struct{}),
		failed: make(chan struct{}), writeAt: (*os.File).WriteAt, datasync: fdatasync}
	if w.now == nil {
		w.now = time.Now
	}
	if cfg.IO != nil {
		w.writeAt, w.datasync = cfg.IO.WriteAt, cfg.IO.Datasync
	}
	w.cur = w.newGroup()
	if !w.ephemeral {
		w.syncEvery = cfg.SyncEvery
		w.syncStop, w.syncDone = make(chan struct{}), make(chan struct{})
		w.unsynced = make(chan struct{}, 1)
	}
	if w.segmentBytes <= 0 {
		w.segmentBytes = DefaultSegmentBytes
	}
	w.cond = sync.NewCond(&w.mu)
	next := cfg.After + 1
	if !w.ephemeral {
		if err := os.MkdirAll(w.dir, 0o700); err != nil {
			return nil, fmt.Errorf("embedded store: create the log directory %s: %w", w.dir, err)
		}
		var err error
		if next, w.segs, err = w.recover(cfg.After, cfg.Replay); err != nil {
			return nil, err
		}
	}
	if n := len(w.segs); n == 0 || w.segs[n-1].size != 0 {
		seg, err := w.createSegment(next)
		if err != nil {
			_ = w.CloseFiles()
			return nil, fmt.Errorf("embedded store: %w", err)
		}
		w.segs = append(w.segs, seg)
	}
	w.next = next
	return w, nil
}

// Start starts the flusher and, on a file log, the sync loop. ticks, when
// not nil, replaces the sync loop's timer (tests: a sync exactly when the
// test says).
func (w *Log[M]) Start(ticks <-chan time.Time) {
	go w.flusher()
	if w.syncStop != nil {
		go w.syncLoop(ticks)
	}
}

// recover reads the segments of w.dir, replaying their frames, and
// returns the lsn of the next frame and the segments found (the last
// one, if empty, becomes the active one).
func (w *Log[M]) recover(after uint64, replay func(*Segment, uint64, []Op) (bool, error)) (next uint64, segs []*Segment, err error) {
	dir := w.dir
	firsts, spares, err := ListSegments(dir)
	if err != nil {
		return 0, nil, err
	}
	for _, sp := range spares {
		// Maybe left by a power loss holding frames the log lost: a
		// later segment made from it could read them as its own. An
		// undone delete is deleted again at the next Open.
		_ = os.Remove(sp)
	}
	defer func() {
		if err != nil {
			for _, sg := range segs {
				sg.f.Close()
			}
			segs = nil
		}
	}()
	var last uint64
	// cuts are the torn tails to cut once the whole log is read; tornAt
	// names the first segment whose tail tore before its frames reached
	// the next segment's first.
	type cut struct {
		sg  *Segment
		end int64
	}
	var cuts []cut
	var tornAt *cut
	for i, first := range firsts {
		name := SegmentName(first)
		fl, err := os.OpenFile(filepath.Join(dir, name), os.O_RDWR, 0)
		if err != nil {
			return 0, segs, fmt.Errorf("open log segment %s: %w", name, err)
		}
		sg := &Segment{first: first, f: fl, name: name}
		sg.synced.Store(true)
		segs = append(segs, sg)
		end, torn, err := ScanSegment(fl, first, func(lsn uint64, ops []Op) error {
			if lsn <= last || lsn < first {
				return fmt.Errorf("frame %d out of order (after %d)", lsn, last)
			}
			last = lsn
			if replay == nil {
				return nil
			}
			applies, err := replay(sg, lsn, ops)
			if err != nil {
				return fmt.Errorf("frame %d: %w", lsn, err)
			}
			if applies {
				sg.maxApply = lsn
			}
			return nil
		})
		if err != nil {
			return 0, segs, fmt.Errorf("embedded store: log segment %s: %w: the log is damaged; restore the data directory from a backup", filepath.Join(dir, name), err)
		}
		if tornAt != nil && end > 0 {
			// Frames after a tear that lost some: the log is damaged.
			return 0, segs, fmt.Errorf("embedded store: log segment %s is damaged at offset %d, and later segments follow: restore the data directory from a backup", filepath.Join(dir, tornAt.sg.name), tornAt.end)
		}
		sg.size = end
		// A sealed segment made from a spare ends in its file's old
		// life; when its frames end where the next segment's begin,
		// nothing is missing and nothing is cut.
		sealed := i != len(firsts)-1
		if torn && !(sealed && firsts[i+1] == last+1) {
			// The log's end: a write the crash interrupted, never
			// acknowledged. It can tear a sealed segment too, when the
			// crash came after the next segment was made (from a spare,
			// which holds old frames only) and before this one's last
			// frames were written; then no later segment may hold a
			// frame, or the log is damaged.
			cuts = append(cuts, cut{sg, end})
			if sealed && tornAt == nil {
				tornAt = &cut{sg, end}
			}
		}
	}
	// Cut only now: a damaged log is left as it was found.
	for _, c := range cuts {
		if err := c.sg.f.Truncate(c.end); err != nil {
			return 0, segs, fmt.Errorf("truncate the torn end of log segment %s: %w", c.sg.name, err)
		}
		if err := c.sg.f.Sync(); err != nil {
			return 0, segs, fmt.Errorf("sync log segment %s: %w", c.sg.name, err)
		}
	}
	next = max(last, after) + 1
	if n := len(segs); n > 0 && segs[n-1].size == 0 {
		next = max(next, segs[n-1].first)
	}
	return next, segs, nil
}

// Stats returns the log's counts so far.
func (w *Log[M]) Stats() Stats {
	w.mu.Lock()
	segs, spares, last := len(w.segs), len(w.spares), w.next-1
	w.mu.Unlock()
	return Stats{Frames: w.frames.Load(), Writes: w.writes.Load(), Syncs: w.syncs.Load(), SyncTime: time.Duration(w.syncNanos.Load()),
		Segments: segs, Spares: spares, Last: last, Synced: w.synced.Load(), SyncArms: w.arms.Load()}
}

// Err returns the failure that stopped the log, or nil while it works.
func (w *Log[M]) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Failed is closed when the log fails (Err has the cause).
func (w *Log[M]) Failed() <-chan struct{} { return w.failed }

// Dir returns the log's directory, "" when ephemeral.
func (w *Log[M]) Dir() string { return w.dir }

// Ephemeral says whether the log writes nothing.
func (w *Log[M]) Ephemeral() bool { return w.ephemeral }

// MaxApply is the lsn of seg's last frame with ops applied elsewhere.
func (w *Log[M]) MaxApply(seg *Segment) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return seg.maxApply
}

// signal wakes the goroutine that waits on c (capacity 1), if it is not
// already woken.
func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}
