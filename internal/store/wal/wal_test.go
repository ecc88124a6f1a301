package wal

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// The log's own properties, over frames of opaque ops. The embedded store's
// tests (internal/store/embedded) cover what it replays from them: queue
// state, telemetry and archive across reopen, crash and disk failure.

// opTest is the one op kind these tests write.
const opTest byte = 9

// testFrame returns a frame holding one op with payload p, marked as
// applying elsewhere if applies.
func testFrame(p string, applies bool) *Frame[string] {
	f := NewFrame[string](len(p) + OpHeaderLen)
	o := f.Op(opTest)
	f.B = append(f.B, p...)
	f.End(o)
	f.Meta = p
	f.Applies = applies
	return f
}

// replayed is what a reopened log replayed: each frame's lsn and payloads.
type replayed struct {
	lsns     []uint64
	payloads []string
}

func (r *replayed) replay(seg *Segment, lsn uint64, ops []Op) (bool, error) {
	r.lsns = append(r.lsns, lsn)
	applies := false
	for _, op := range ops {
		if op.Kind != opTest {
			return false, errors.New("unknown op")
		}
		r.payloads = append(r.payloads, string(op.Payload))
		applies = applies || bytes.HasPrefix(op.Payload, []byte("apply"))
	}
	return applies, nil
}

// openTest opens a log in dir whose committed frames' Meta go to the
// returned channel.
func openTest(t *testing.T, cfg Config[string]) (*Log[string], *[]string) {
	t.Helper()
	var committed []string
	cfg.OnCommitted = func(frames []*Frame[string]) {
		for _, f := range frames {
			committed = append(committed, f.Meta)
		}
	}
	w, err := Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.Start(nil)
	t.Cleanup(func() {
		w.Close()
		_ = w.CloseFiles()
	})
	return w, &committed
}

func addWait(t *testing.T, w *Log[string], f *Frame[string]) {
	t.Helper()
	g, err := w.Add(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// TestReopenReplaysEveryFrameInOrder: frames acknowledged by Wait come
// back at Open, in lsn order, across segments, and the log continues
// after them.
func TestReopenReplaysEveryFrameInOrder(t *testing.T) {
	dir := t.TempDir()
	w, committed := openTest(t, Config[string]{Dir: dir, SegmentBytes: 256})
	var want []string
	for i := range 20 {
		p := string(rune('a'+i)) + string(bytes.Repeat([]byte("x"), 40))
		addWait(t, w, testFrame(p, false))
		want = append(want, p)
	}
	if !slices.Equal(*committed, want) {
		t.Fatalf("committed %q, want %q", *committed, want)
	}
	st := w.Stats()
	if st.Segments < 3 || st.Last != 20 || st.Synced != 20 {
		t.Fatalf("stats %+v: want several segments, 20 frames synced", st)
	}
	w.Close()
	if err := w.CloseFiles(); err != nil {
		t.Fatal(err)
	}
	r := &replayed{}
	w2, _ := openTest(t, Config[string]{Dir: dir, SegmentBytes: 256, Replay: r.replay})
	if !slices.Equal(r.payloads, want) || r.lsns[0] != 1 || r.lsns[len(r.lsns)-1] != 20 {
		t.Fatalf("replayed lsns %v payloads %q", r.lsns, r.payloads)
	}
	f := testFrame("after", false)
	addWait(t, w2, f)
	if f.LSN() != 21 {
		t.Fatalf("the reopened log's next frame has lsn %d, want 21", f.LSN())
	}
}

// TestAfterSkipsLSNsAppliedElsewhere: a log whose segments are all gone
// continues after the owner's applied lsn, never reusing one.
func TestAfterSkipsLSNsAppliedElsewhere(t *testing.T) {
	w, _ := openTest(t, Config[string]{Dir: t.TempDir(), After: 41})
	f := testFrame("x", false)
	addWait(t, w, f)
	if f.LSN() != 42 {
		t.Fatalf("lsn %d, want 42", f.LSN())
	}
}

// TestTornTailIsCut: a frame cut short by a crash is not replayed, and
// the file is cut at the last whole frame; a damaged frame followed by
// another segment is refused.
func TestTornTailIsCut(t *testing.T) {
	dir := t.TempDir()
	w, _ := openTest(t, Config[string]{Dir: dir})
	addWait(t, w, testFrame("whole", false))
	w.Close()
	if err := w.CloseFiles(); err != nil {
		t.Fatal(err)
	}
	seg := filepath.Join(dir, SegmentName(1))
	whole, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	torn := append(slices.Clone(whole), testFrame("torn", false).B[:HeaderLen+2]...)
	if err := os.WriteFile(seg, torn, 0o600); err != nil {
		t.Fatal(err)
	}
	r := &replayed{}
	w2, err := Open(Config[string]{Dir: dir, Replay: r.replay, OnCommitted: func([]*Frame[string]) {}})
	if err != nil {
		t.Fatal(err)
	}
	if err := w2.CloseFiles(); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(r.payloads, []string{"whole"}) {
		t.Fatalf("replayed %q", r.payloads)
	}
	if fi, err := os.Stat(seg); err != nil || fi.Size() != int64(len(whole)) {
		t.Fatalf("torn tail not cut: %v %v", fi.Size(), err)
	}
	// A corrupt first frame with a later segment behind it.
	broken := slices.Clone(whole)
	broken[HeaderLen+2] ^= 0xff
	if err := os.WriteFile(seg, broken, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, SegmentName(2)), segmentOf(t, 2, "later"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(Config[string]{Dir: dir, OnCommitted: func([]*Frame[string]) {}}); err == nil {
		t.Fatal("a log damaged before its last segment was opened")
	}
	if b, _ := os.ReadFile(seg); !bytes.Equal(b, broken) {
		t.Fatal("a damaged log was changed, not left as found")
	}
}

// segmentOf returns a segment file holding one frame with lsn and payload
// p, as a log writes it.
func segmentOf(t *testing.T, lsn uint64, p string) []byte {
	t.Helper()
	dir := t.TempDir()
	w, _ := openTest(t, Config[string]{Dir: dir, After: lsn - 1})
	addWait(t, w, testFrame(p, false))
	w.Close()
	b, err := os.ReadFile(filepath.Join(dir, SegmentName(lsn)))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSegmentsAreDetachedOnlyWhenUnneeded: DetachOldest takes a sealed
// segment only once its ops are applied, it holds no live record and no
// read; Remove keeps its file as a spare.
func TestSegmentsAreDetachedOnlyWhenUnneeded(t *testing.T) {
	dir := t.TempDir()
	w, _ := openTest(t, Config[string]{Dir: dir, SegmentBytes: 64})
	addWait(t, w, testFrame("apply "+string(bytes.Repeat([]byte("x"), 64)), true))
	addWait(t, w, testFrame("next", false))
	first := w.Segments()[0]
	if len(w.Sealed()) != 1 || w.MaxApply(first) != 1 {
		t.Fatalf("%d sealed, max apply %d", len(w.Sealed()), w.MaxApply(first))
	}
	if s := w.DetachOldest(0); s != nil {
		t.Fatal("a segment with an unapplied op was detached")
	}
	first.Hold(10)
	if s := w.DetachOldest(1); s != nil {
		t.Fatal("a segment with a live record was detached")
	}
	first.Drop(10)
	first.Acquire()
	if s := w.DetachOldest(1); s != nil {
		t.Fatal("a segment being read was detached")
	}
	first.Release()
	s := w.DetachOldest(1)
	if s != first {
		t.Fatalf("detached %v, want the first segment", s)
	}
	if err := w.Remove(s); err != nil {
		t.Fatal(err)
	}
	if st := w.Stats(); st.Segments != 1 || st.Spares != 1 {
		t.Fatalf("stats %+v: want the active segment and one spare", st)
	}
	if _, err := os.Stat(filepath.Join(dir, SegmentName(1)+SpareSuffix)); err != nil {
		t.Fatal(err)
	}
}

// TestEphemeralWritesNothing: an ephemeral log commits its frames and
// creates no file.
func TestEphemeralWritesNothing(t *testing.T) {
	w, committed := openTest(t, Config[string]{})
	addWait(t, w, testFrame("m", false))
	if !slices.Equal(*committed, []string{"m"}) || w.Dir() != "" || !w.Ephemeral() {
		t.Fatalf("committed %q", *committed)
	}
	if st := w.Stats(); st.Writes != 0 || st.Syncs != 0 || st.Synced != 1 {
		t.Fatalf("stats %+v: want nothing written, the frame counted durable", st)
	}
}

// TestAddAfterCloseIsRefused: Close stops the log; a later Add is
// ErrClosed.
func TestAddAfterCloseIsRefused(t *testing.T) {
	w, _ := openTest(t, Config[string]{Dir: t.TempDir()})
	w.Close()
	if _, err := w.Add(testFrame("late", false)); !errors.Is(err, ErrClosed) {
		t.Fatalf("add after close: %v", err)
	}
}

// TestNoSyncAfterAFailedSync: once a sync failed, a later one is not
// trusted (Linux may have dropped the pages that failed and report the
// next fdatasync clean): a group written before the failure and still
// waiting for its sync fails instead of being acknowledged.
func TestNoSyncAfterAFailedSync(t *testing.T) {
	var failSync atomic.Bool
	disk := &IO{
		WriteAt: (*os.File).WriteAt,
		Datasync: func(f *os.File) error {
			if failSync.Load() {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: syscall.EIO}
			}
			return fdatasync(f)
		},
	}
	w, err := Open(Config[string]{Dir: t.TempDir(), IO: disk, OnCommitted: func([]*Frame[string]) {}})
	if err != nil {
		t.Fatal(err)
	}
	w.Start(make(chan time.Time))
	t.Cleanup(func() { w.Close(); _ = w.CloseFiles() })
	addWait(t, w, testFrame("a", false))
	// A consumer's change is written and waits for the next sync.
	f := testFrame("lazy", false)
	f.Lazy = true
	lazy, err := w.Add(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := lazy.WaitWritten(); err != nil {
		t.Fatal(err)
	}
	w.mu.Lock()
	if len(w.pending) != 1 {
		w.mu.Unlock()
		t.Fatalf("%d groups wait for a sync, want the lazy one's", len(w.pending))
	}
	w.mu.Unlock()
	// Another syncer (the owner's SyncThrough) fails.
	failSync.Store(true)
	if err := w.SyncThrough(2); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("sync on a failing disk: %v", err)
	}
	failSync.Store(false)
	if err := lazy.Wait(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.EIO) {
		t.Fatalf("the lazy group after a failed sync: %v, want ErrLogFailed with EIO", err)
	}
	if err := w.Err(); !errors.Is(err, syscall.EIO) {
		t.Fatalf("Err: %v", err)
	}
	select {
	case <-w.Failed():
	default:
		t.Fatal("Failed not closed")
	}
	if _, err := w.Add(testFrame("b", false)); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("add after the failure: %v", err)
	}
}

// FuzzScanSegment: any bytes read as a segment give whole frames in
// order, never one below the segment's first lsn, and an end within the
// file.
func FuzzScanSegment(f *testing.F) {
	dir := f.TempDir()
	w, err := Open(Config[string]{Dir: dir, OnCommitted: func([]*Frame[string]) {}})
	if err != nil {
		f.Fatal(err)
	}
	w.Start(nil)
	for _, p := range []string{"one", "two", "three"} {
		g, err := w.Add(testFrame(p, false))
		if err != nil {
			f.Fatal(err)
		}
		if err := g.Wait(); err != nil {
			f.Fatal(err)
		}
	}
	w.Close()
	if err := w.CloseFiles(); err != nil {
		f.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(dir, SegmentName(1)))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, uint64(1))
	f.Add(seg[:len(seg)-2], uint64(1))
	f.Add(seg, uint64(2)) // a spare file's old frames
	f.Add([]byte{}, uint64(1))
	f.Fuzz(func(t *testing.T, data []byte, first uint64) {
		p := filepath.Join(t.TempDir(), "seg")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		fl, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer fl.Close()
		end, torn, err := ScanSegment(fl, first, func(lsn uint64, ops []Op) error {
			if lsn < first {
				t.Fatalf("frame %d below the segment's first %d", lsn, first)
			}
			for _, op := range ops {
				if op.Off < 0 || op.Off+int64(len(op.Payload)) > int64(len(data)) {
					t.Fatalf("op at %d of %d bytes outside the file", op.Off, len(op.Payload))
				}
			}
			return nil
		})
		if err != nil {
			return // a malformed op inside a whole frame is reported
		}
		if end < 0 || end > int64(len(data)) {
			t.Fatalf("end %d outside the %d bytes", end, len(data))
		}
		if !torn && end != int64(len(data)) {
			t.Fatalf("end %d of %d bytes, and not torn", end, len(data))
		}
	})
}
