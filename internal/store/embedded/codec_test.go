package embedded

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/localqueue"
)

func TestOtherRecordsRoundTrip(t *testing.T) {
	e := ArchivedEvent{EventID: "e1", Source: "acme/x", DetailType: "snavio.command", Detail: []byte(`{"a":1}`), ReceivedAt: t0, Target: "t", Command: "c"}
	if got, err := decodeArchived(encodeArchived(&e)); !reflect.DeepEqual(got, e) || err != nil {
		t.Fatalf("archived: %+v %v", got, err)
	}
	if id, err := archivedID(encodeArchived(&e)); id != "e1" || err != nil {
		t.Fatalf("archivedID: %q %v", id, err)
	}
	r := TelemetryRecord{Global: 3, AppendedAt: t0, Name: "snavio.command.delivered", Event: []byte(`{"x":1}`)}
	if got, err := decodeTelemetry(encodeTelemetry(&r)); !reflect.DeepEqual(got, r) || err != nil {
		t.Fatalf("telemetry: %+v %v", got, err)
	}
	m := streamMeta{Last: 5, Cursor: 3, AckAt: 42}
	if got, err := decodeMeta(encodeMeta(m)); got != m || err != nil {
		t.Fatalf("meta: %+v %v", got, err)
	}
}

func TestDecodersRefuseDamage(t *testing.T) {
	arch := encodeArchived(&ArchivedEvent{EventID: "e", ReceivedAt: t0})
	tel := encodeTelemetry(&TelemetryRecord{Name: "n"})
	decoders := map[string]struct {
		rec    []byte
		decode func([]byte) error
	}{
		"archive":   {arch, func(b []byte) error { _, err := decodeArchived(b); return err }},
		"telemetry": {tel, func(b []byte) error { _, err := decodeTelemetry(b); return err }},
		"meta":      {encodeMeta(streamMeta{}), func(b []byte) error { _, err := decodeMeta(b); return err }},
	}
	for name, d := range decoders {
		if err := d.decode(d.rec); err != nil {
			t.Fatalf("%s: intact record refused: %v", name, err)
		}
		next := bytes.Clone(d.rec)
		next[0] = 2
		if name == "archive" {
			next[0] = 3 // the archive is at version 2
		}
		if err := d.decode(next); err == nil || !strings.Contains(err.Error(), fmt.Sprintf("version %d", next[0])) {
			t.Errorf("%s: version %d record: %v", name, next[0], err)
		}
		// Every truncation before the last field's start is refused.
		if err := d.decode(d.rec[:len(d.rec)/2]); err == nil && name != "archive" && name != "telemetry" {
			t.Errorf("%s: half a record accepted", name)
		}
		if err := d.decode(nil); err == nil {
			t.Errorf("%s: empty record accepted", name)
		}
	}
}

// FuzzDecodeRecords: no decoder panics on any input, and a telemetry
// record's header agrees with the whole record. (The queues' records:
// localqueue's FuzzDecodeQueueRecords.)
func FuzzDecodeRecords(f *testing.F) {
	f.Add(encodeArchived(&ArchivedEvent{EventID: "e", Source: "s", Detail: []byte("{}")}))
	f.Add(encodeTelemetry(&TelemetryRecord{Name: "n", Event: []byte("{}")}))
	f.Add(encodeMeta(streamMeta{Last: 1}))
	f.Add([]byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = decodeArchived(b)
		_, _ = archivedID(b)
		if tr, err := decodeTelemetry(b); err == nil {
			// The header alone agrees with the whole record.
			g, at, err := decodeTelemetryHeader(b)
			if err != nil || g != tr.Global || at != tr.AppendedAt.UnixNano() {
				t.Fatalf("header %d %d %v; record %d %v", g, at, err, tr.Global, tr.AppendedAt)
			}
		}
		_, _ = decodeMeta(b)
	})
}

func TestOpenRefusesAnotherFormat(t *testing.T) {
	dir := t.TempDir()
	// A format 1 file: the buckets, no stamp.
	old := filepath.Join(dir, "old.db")
	db, err := bolt.Open(old, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket(localqueue.Bucket); return err }); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if _, err := Open(Options{Path: old}); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "format 1") || !strings.Contains(err.Error(), "move the file away") {
		t.Fatalf("format 1 file: %v", err)
	}
	// A newer format.
	s, err := Open(Options{Path: filepath.Join(dir, "new.db")})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.update(context.Background(), func(tx *bolt.Tx) error { return tx.Bucket(bFormat).Put(kFormat, u64(StoreFormat+1)) }); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(Options{Path: filepath.Join(dir, "new.db")}); !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "format 3") {
		t.Fatalf("format 3 file: %v", err)
	}
	// A file of this format reopens.
	path := filepath.Join(dir, "ok.db")
	for range 2 {
		s, err := Open(Options{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		s.Close()
	}
}

func TestArchiveAppendBatch(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	evs := []ArchivedEvent{
		{EventID: "e1", Source: "acme/a", ReceivedAt: t0, Detail: detail("mailer", "send")},
		{EventID: "e2", Source: "acme/a", ReceivedAt: t0},
		{EventID: "e1", Source: "acme/dup", ReceivedAt: t0},
	}
	if err := s.ArchiveAppendBatch(ctx, evs); err != nil {
		t.Fatal(err)
	}
	got, _, err := s.ArchiveQuery(ctx, ArchiveQuery{From: t0.Add(-time.Second)})
	if err != nil || len(got) != 2 || got[0].EventID != "e1" || got[0].Source != "acme/a" || got[0].Target != "mailer" || got[1].EventID != "e2" {
		t.Fatalf("archived %+v %v", got, err)
	}
	// One bad event refuses the whole batch.
	if err := s.ArchiveAppendBatch(ctx, []ArchivedEvent{{EventID: "e3", ReceivedAt: t0}, {EventID: "e4"}}); err == nil || !strings.Contains(err.Error(), "set ReceivedAt") {
		t.Fatalf("bad batch: %v", err)
	}
	if _, ok, _ := s.ArchiveGet(ctx, "e3"); ok {
		t.Fatal("a refused batch stored an event")
	}
	for _, n := range []int{0, MaxArchiveBatch + 1} {
		if err := s.ArchiveAppendBatch(ctx, make([]ArchivedEvent, n)); err == nil || !strings.Contains(err.Error(), "give 1 to 1000") {
			t.Errorf("%d events: %v", n, err)
		}
	}
}
