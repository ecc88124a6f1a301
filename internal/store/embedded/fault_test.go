package embedded

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/smallfs"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/wal"
)

// faultyDisk is a log disk that fails on demand: while full, a write
// fails with ENOSPC, as a full disk's would.
type faultyDisk struct {
	full   atomic.Bool
	writes atomic.Int64
	// hold, when set, is taken by the next failing write before it fails
	// (entered tells the test it is there).
	hold, entered chan struct{}
}

func (d *faultyDisk) io() *wal.IO {
	return &wal.IO{
		WriteAt: func(f *os.File, b []byte, off int64) (int, error) {
			d.writes.Add(1)
			if d.full.Load() {
				if d.hold != nil {
					close(d.entered)
					<-d.hold
					d.hold = nil
				}
				return 0, &os.PathError{Op: "write", Path: f.Name(), Err: syscall.ENOSPC}
			}
			return f.WriteAt(b, off)
		},
		Datasync: wal.Fdatasync,
	}
}

// TestDiskFullFailsTheLogAndHealthSaysSo: a write that fails with ENOSPC
// is refused, every later one too, Health names the cause and LogFailed
// is closed. Freeing the space does not resume the log (the choice in
// docs/store/embedded.md): reopening does, with every acknowledged write
// and none of the refused ones.
func TestDiskFullFailsTheLogAndHealthSaysSo(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	disk := &faultyDisk{}
	s, err := Open(Options{Path: path, logIO: disk.io()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("a new store's health: %v", err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", []byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-s.LogFailed():
		t.Fatal("LogFailed closed before any failure")
	default:
	}
	disk.full.Store(true)
	if _, err := s.Send(ctx, "q", []byte("b"), nil); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("send on a full disk: %v, want ErrLogFailed with ENOSPC", err)
	}
	select {
	case <-s.LogFailed():
	default:
		t.Fatal("LogFailed not closed after the log failed")
	}
	if err := s.Health(); !errors.Is(err, ErrLogFailed) || !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("health after ENOSPC: %v, want ErrLogFailed with ENOSPC", err)
	}
	disk.full.Store(false) // the space is freed
	if _, err := s.Send(ctx, "q", []byte("c"), nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("send after the space was freed: %v, want ErrLogFailed until the store is reopened", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Health(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("health after Close: %v, want the log's failure still", err)
	}

	s = openTest(t, Options{Path: path})
	if err := s.Health(); err != nil {
		t.Fatalf("health after reopening: %v", err)
	}
	got := receiveAll(t, s, "q")
	if len(got) != 1 {
		t.Fatalf("after reopening: %d messages, want only the acknowledged one", len(got))
	}
	for _, m := range got {
		if string(m.Body) != "a" {
			t.Fatalf("after reopening: message %q, want a", m.Body)
		}
	}
	if _, err := s.Send(ctx, "q", []byte("d"), nil); err != nil {
		t.Fatalf("send after reopening: %v", err)
	}
}

// TestNothingWrittenAfterAFailedGroup: a group queued behind one whose
// write failed is refused, not written: written after the torn group it
// would be acknowledged (with a sync interval, once written) and then
// cut off by recovery, which stops at the torn frame.
func TestNothingWrittenAfterAFailedGroup(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	disk := &faultyDisk{hold: make(chan struct{}), entered: make(chan struct{})}
	s, err := Open(Options{Path: path, SyncEvery: time.Hour, syncTicks: make(chan time.Time), logIO: disk.io()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", []byte("a"), nil); err != nil {
		t.Fatal(err)
	}
	disk.full.Store(true)
	failed := make(chan error, 1)
	go func() {
		_, err := s.Send(ctx, "q", []byte("b"), nil)
		failed <- err
	}()
	<-disk.entered // b's group is being written, and will fail
	// c's frame is queued behind it (a deferred send returns once queued).
	dctx, d := DeferSync(ctx)
	if _, err := s.Send(dctx, "q", []byte("c"), nil); err != nil {
		t.Fatal(err)
	}
	disk.full.Store(false) // the disk works again for c's group
	writes := disk.writes.Load()
	close(disk.hold)
	if err := <-failed; !errors.Is(err, ErrLogFailed) {
		t.Fatalf("b: %v, want ErrLogFailed", err)
	}
	if err := d.Wait(); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("c, queued behind the failed group: %v, want ErrLogFailed (not acknowledged)", err)
	}
	if n := disk.writes.Load() - writes; n != 0 {
		t.Fatalf("%d writes after the failed one, want none", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: path})
	if got := receiveAll(t, s, "q"); len(got) != 1 {
		t.Fatalf("after reopening: %d messages, want a alone", len(got))
	}
}

// TestSmallDiskFillsAndRecovers fills a real file system of a few MB
// (tmpfs) until the log's write fails with ENOSPC, then frees space and
// reopens: every acknowledged send is there, the store takes writes, and
// nothing refused was acknowledged.
func TestSmallDiskFillsAndRecovers(t *testing.T) {
	dir := smallfs.Mount(t, 4<<20)
	ctx := context.Background()
	// Room to free later, as an operator deletes old files.
	filler := filepath.Join(dir, "filler")
	if err := os.WriteFile(filler, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data", "snavio.db")
	s, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	first := s
	t.Cleanup(func() { _ = first.Close() }) // before the unmount, if the test fails early
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q"}); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, 4<<10)
	acked := map[string]bool{}
	var failure error
	for i := range 10000 {
		copy(body, fmt.Sprintf("message %06d", i))
		id, err := s.Send(ctx, "q", body, nil)
		if err != nil {
			failure = err
			break
		}
		acked[id] = true
	}
	if !errors.Is(failure, ErrLogFailed) || !errors.Is(failure, syscall.ENOSPC) {
		t.Fatalf("filling a 4 MiB disk: %d sends acknowledged, then %v; want ErrLogFailed with ENOSPC", len(acked), failure)
	}
	if err := s.Health(); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("health on the full disk: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Send(ctx, "q", body, nil); !errors.Is(err, ErrLogFailed) {
		t.Fatalf("send after freeing space, before reopening: %v, want ErrLogFailed", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: path})
	if err := s.Health(); err != nil {
		t.Fatalf("health after reopening with space: %v", err)
	}
	got := receiveAll(t, s, "q")
	for id := range acked {
		if _, ok := got[id]; !ok {
			t.Fatalf("acknowledged message %s lost (%d acknowledged, %d recovered)", id, len(acked), len(got))
		}
	}
	if len(got) != len(acked) {
		t.Fatalf("recovered %d messages, %d acknowledged: a refused send came back", len(got), len(acked))
	}
	if _, err := s.Send(ctx, "q", body, nil); err != nil {
		t.Fatalf("send after reopening: %v", err)
	}
	t.Logf("%d sends of 4 KiB acknowledged before ENOSPC; all recovered", len(acked))
}

// TestQueueFull: QueueFull says whether a send would fail with
// ErrQueueFull (the slow stage's hand-off is checked so for /readyz).
func TestQueueFull(t *testing.T) {
	ctx := context.Background()
	s := openTest(t, Options{Ephemeral: true})
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q", MaxDepth: 2}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		full, err := s.QueueFull("q")
		if err != nil || full != (i == 2) {
			t.Fatalf("after %d sends: full %v, %v", i, full, err)
		}
		if _, err := s.Send(ctx, "q", []byte("m"), nil); (err != nil) != (i == 2) || i == 2 && !errors.Is(err, localqueue.ErrQueueFull) {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	if _, err := s.QueueFull("nope"); !errors.Is(err, localqueue.ErrQueueNotFound) {
		t.Fatalf("QueueFull of a missing queue: %v", err)
	}
}
