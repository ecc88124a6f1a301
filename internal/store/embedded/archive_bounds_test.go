package embedded

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// archEvent is an archived event of source with a detail of n bytes.
func archEvent(id, source string, v Verdict, n int, at time.Time) ArchivedEvent {
	return ArchivedEvent{EventID: id, Source: source, DetailType: "snavio.command-sent", Detail: bytes.Repeat([]byte("x"), n), ReceivedAt: at, Target: "t", Command: "c", Verdict: v}
}

func archivedIDs(t *testing.T, s *Store, source string) []string {
	t.Helper()
	evs, _, err := s.ArchiveQuery(context.Background(), ArchiveQuery{Source: source, Limit: MaxArchivePage})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, e := range evs {
		ids = append(ids, e.EventID)
	}
	return ids
}

// One tenant's rejected junk is counted, not stored, beyond its small
// bound; its accepted commands and other tenants' are untouched.
func TestArchiveBoundsUnacceptedAreCountedNotStored(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	size := archivedSize(&ArchivedEvent{EventID: "j00", Source: "junk/x", DetailType: "snavio.command-sent", Detail: make([]byte, 1000), Target: "t", Command: "c"})
	if err := s.SetArchiveBounds(ArchiveBounds{TenantBytes: 100 * size, TenantUnacceptedBytes: 3 * size}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		v := VerdictRejected
		if i%5 == 4 {
			v = VerdictNotCommand
		}
		if err := s.ArchiveAppendBatch(ctx, []ArchivedEvent{archEvent(fmt.Sprintf("j%02d", i), "junk/x", v, 1000, clk.Now())}); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	// One request: an accepted command between two rejected ones.
	batch := []ArchivedEvent{archEvent("r1", "junk/x", VerdictRejected, 1000, clk.Now()), archEvent("a1", "junk/x", VerdictAccepted, 1000, clk.Now()), archEvent("r2", "junk/x", VerdictRejected, 1000, clk.Now())}
	if err := s.ArchiveAppendBatch(ctx, batch); err != nil {
		t.Fatal(err)
	}
	if err := s.ArchiveAppendBatch(ctx, []ArchivedEvent{archEvent("o1", "other/x", VerdictRejected, 1000, clk.Now())}); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(archivedIDs(t, s, "junk/x"), ","); got != "j00,j01,j02,a1" {
		t.Fatalf("junk/x archived %s, want the first three rejected and the accepted command", got)
	}
	if got := archivedIDs(t, s, "other/x"); len(got) != 1 {
		t.Fatalf("other/x archived %v: another tenant's junk must not use its bound", got)
	}
	u, err := s.ArchiveUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if j, all := u["junk"], 3*size+archivedSize(&batch[1]); j.Dropped != 9 || j.Unaccepted != 3*size || j.Bytes != all {
		t.Fatalf("junk usage %+v, want 9 dropped, %d unaccepted of %d bytes", j, 3*size, all)
	}
	// Age frees the bound: once the old junk is purged, new junk is stored.
	clk.Advance(time.Hour)
	if n, err := s.ArchivePurge(ctx, clk.Now().Add(-30*time.Minute), 100); err != nil || n != 5 {
		t.Fatalf("age purge: %d %v", n, err)
	}
	if err := s.ArchiveAppend(ctx, archEvent("j99", "junk/x", VerdictRejected, 1000, clk.Now())); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(archivedIDs(t, s, "junk/x"), ","); got != "j99" {
		t.Fatalf("after the age purge junk/x archived %s", got)
	}
	if u, _ := s.ArchiveUsage(ctx); u["junk"].Bytes != size || u["junk"].Unaccepted != size || u["junk"].Dropped != 9 {
		t.Fatalf("usage after the purge %+v", u["junk"])
	}
}

// A tenant over its byte bound loses its oldest records first; others
// keep theirs.
func TestArchiveBoundsPurgeOldestOfTheTenantOverBudget(t *testing.T) {
	ctx := context.Background()
	s, clk := fakeStore(t)
	size := archivedSize(&ArchivedEvent{EventID: "b00", Source: "big/x", DetailType: "snavio.command-sent", Detail: make([]byte, 500), Target: "t", Command: "c"})
	if err := s.SetArchiveBounds(ArchiveBounds{TenantBytes: 4 * size, TenantUnacceptedBytes: size}); err != nil {
		t.Fatal(err)
	}
	for i := range 10 {
		evs := []ArchivedEvent{archEvent(fmt.Sprintf("b%02d", i), "big/x", VerdictAccepted, 500, clk.Now())}
		if i < 2 {
			evs = append(evs, archEvent(fmt.Sprintf("s%02d", i), "small/x", VerdictAccepted, 500, clk.Now()))
		}
		if err := s.ArchiveAppendBatch(ctx, evs); err != nil {
			t.Fatal(err)
		}
		clk.Advance(time.Second)
	}
	// Accepted commands are always stored: the bound is enforced by the purge.
	if got := len(archivedIDs(t, s, "big/x")); got != 10 {
		t.Fatalf("big/x archived %d before the purge, want 10", got)
	}
	if n, err := s.ArchivePurgeOverBudget(ctx, 4); err != nil || n != 4 {
		t.Fatalf("first purge: %d %v, want 4 (the limit)", n, err)
	}
	if n, err := s.ArchivePurgeOverBudget(ctx, 100); err != nil || n != 2 {
		t.Fatalf("second purge: %d %v, want 2", n, err)
	}
	if n, err := s.ArchivePurgeOverBudget(ctx, 100); err != nil || n != 0 {
		t.Fatalf("within bounds: %d %v", n, err)
	}
	if got := strings.Join(archivedIDs(t, s, "big/x"), ","); got != "b06,b07,b08,b09" {
		t.Fatalf("big/x kept %s, want its newest four", got)
	}
	if got := strings.Join(archivedIDs(t, s, "small/x"), ","); got != "s00,s01" {
		t.Fatalf("small/x kept %s, want both", got)
	}
}

// The usage survives a restart: it is counted from the archive on first
// use.
func TestArchiveUsageIsCountedFromTheArchive(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	clk := clock.NewFake(t0)
	s, err := Open(Options{Path: dir + "/s.db", Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.ArchiveAppendBatch(ctx, []ArchivedEvent{archEvent("a", "acme/x", VerdictAccepted, 10, t0), archEvent("r", "acme/x", VerdictRejected, 20, t0)}); err != nil {
		t.Fatal(err)
	}
	want, err := s.ArchiveUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, Options{Path: dir + "/s.db", Clock: clk})
	got, err := s.ArchiveUsage(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got["acme"] != want["acme"] || got["acme"].Bytes == 0 || got["acme"].Unaccepted == 0 {
		t.Fatalf("usage after a restart %+v, before %+v", got, want)
	}
}

func TestArchiveBoundsBadInput(t *testing.T) {
	s, _ := fakeStore(t)
	for _, b := range []ArchiveBounds{{TenantBytes: -1}, {TenantUnacceptedBytes: -1}, {TenantBytes: 10, TenantUnacceptedBytes: 20}} {
		if err := s.SetArchiveBounds(b); err == nil {
			t.Errorf("SetArchiveBounds(%+v) accepted", b)
		}
	}
	if _, err := s.ArchivePurgeOverBudget(context.Background(), 0); err == nil {
		t.Error("a purge limit of 0 accepted")
	}
}

// Archived events the log holds and the file does not yet (a crash before
// the apply) are counted when the store opens.
func TestArchiveUsageCountsTheLogNotYetApplied(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	path := filepath.Join(dir, "live", "snavio.db")
	clk := clock.NewFake(t0)
	s := openTest(t, Options{Path: path, Clock: clk, applyEvery: time.Hour})
	// The first apply runs at once; after it, nothing more is applied for
	// an hour.
	if err := s.ArchiveAppend(ctx, archEvent("a", "acme/x", VerdictAccepted, 10, t0)); err != nil {
		t.Fatal(err)
	}
	if err := s.awaitApplied(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.ArchiveAppend(ctx, archEvent("r", "acme/x", VerdictRejected, 20, t0)); err != nil {
		t.Fatal(err)
	}
	want, _ := s.ArchiveUsage(ctx)
	copyDir(t, filepath.Dir(path), filepath.Join(dir, "copy")) // as kill -9 leaves them
	r := openTest(t, Options{Path: filepath.Join(dir, "copy", "snavio.db"), Clock: clk})
	got, err := r.ArchiveUsage(ctx)
	if err != nil || got["acme"] != want["acme"] || got["acme"].Unaccepted == 0 {
		t.Fatalf("usage after recovery %+v %v, before %+v", got, err, want)
	}
}
