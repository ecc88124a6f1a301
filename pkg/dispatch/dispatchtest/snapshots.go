package dispatchtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// TestSnapshotStore is the contract of snapshot.Store: immutable versions,
// two-phase publication, size limits, isolation of returned bytes, and
// readers that never see a partial version while writers publish.
func TestSnapshotStore(t *testing.T, newStore func(t *testing.T) snapshot.Store) {
	ctx := context.Background()
	const path = "/snavio/registry/snapshot/latest.json"
	const max = 1 << 20

	t.Run("TwoPhase", func(t *testing.T) {
		s := newStore(t)
		if _, _, err := s.Latest(ctx, path, max); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Latest of an empty store: %v; want ErrNotFound", err)
		}
		if err := s.Put(ctx, path, "v1", []byte("one")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Latest(ctx, path, max); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Latest after Put, before Promote: %v; want ErrNotFound", err)
		}
		if err := s.Promote(ctx, path, "v1"); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, path, "v2", []byte("two")); err != nil {
			t.Fatal(err)
		}
		if v, b, err := s.Latest(ctx, path, max); err != nil || v != "v1" || string(b) != "one" {
			t.Fatalf("Latest before promoting v2 = %q %q %v; want v1", v, b, err)
		}
		if err := s.Promote(ctx, path, "v2"); err != nil {
			t.Fatal(err)
		}
		if v, b, err := s.Latest(ctx, path, max); err != nil || v != "v2" || string(b) != "two" {
			t.Fatalf("Latest = %q %q %v; want v2", v, b, err)
		}
		if b, err := s.Get(ctx, path, "v1", max); err != nil || string(b) != "one" {
			t.Fatalf("Get v1 = %q %v", b, err)
		}
		if vs, err := s.Versions(ctx, path); err != nil || !slices.Equal(vs, []string{"v1", "v2"}) {
			t.Fatalf("Versions = %v %v", vs, err)
		}
		if err := s.Promote(ctx, path, "v9"); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Promote of a version never put: %v; want ErrNotFound", err)
		}
		if _, err := s.Get(ctx, path, "v9", max); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("Get of a missing version: %v; want ErrNotFound", err)
		}
		if _, _, err := s.Latest(ctx, "/other/latest.json", max); !errors.Is(err, snapshot.ErrNotFound) {
			t.Fatalf("paths are independent: %v", err)
		}
	})

	t.Run("ImmutableVersions", func(t *testing.T) {
		s := newStore(t)
		if err := s.Put(ctx, path, "v1", []byte("one")); err != nil {
			t.Fatal(err)
		}
		if err := s.Put(ctx, path, "v1", []byte("one")); err != nil {
			t.Fatalf("idempotent Put: %v", err)
		}
		if err := s.Put(ctx, path, "v1", []byte("other")); !errors.Is(err, snapshot.ErrExists) {
			t.Fatalf("Put of other content: %v; want ErrExists", err)
		}
		if b, _ := s.Get(ctx, path, "v1", max); string(b) != "one" {
			t.Fatalf("version changed to %q", b)
		}
	})

	t.Run("SizeLimit", func(t *testing.T) {
		s := newStore(t)
		if err := s.Put(ctx, path, "v1", bytes.Repeat([]byte("x"), 100)); err != nil {
			t.Fatal(err)
		}
		if err := s.Promote(ctx, path, "v1"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Latest(ctx, path, 99); !errors.Is(err, snapshot.ErrTooLarge) {
			t.Fatalf("Latest over the limit: %v; want ErrTooLarge", err)
		}
		if _, err := s.Get(ctx, path, "v1", 99); !errors.Is(err, snapshot.ErrTooLarge) {
			t.Fatalf("Get over the limit: %v; want ErrTooLarge", err)
		}
		if _, b, err := s.Latest(ctx, path, 100); err != nil || len(b) != 100 {
			t.Fatalf("Latest at the limit: %d bytes, %v", len(b), err)
		}
	})

	t.Run("ReturnsCopies", func(t *testing.T) {
		s := newStore(t)
		body := []byte("abc")
		if err := s.Put(ctx, path, "v1", body); err != nil {
			t.Fatal(err)
		}
		body[0] = 'X'
		if err := s.Promote(ctx, path, "v1"); err != nil {
			t.Fatal(err)
		}
		_, b, _ := s.Latest(ctx, path, max)
		b[1] = 'Y'
		if _, again, _ := s.Latest(ctx, path, max); string(again) != "abc" {
			t.Fatalf("stored bytes changed through a caller: %q", again)
		}
	})

	t.Run("ReadersNeverSeePartial", func(t *testing.T) {
		s := newStore(t)
		body := func(i int) []byte { return bytes.Repeat([]byte{byte('a' + i%26)}, 4096) }
		if err := s.Put(ctx, path, "v0", body(0)); err != nil {
			t.Fatal(err)
		}
		if err := s.Promote(ctx, path, "v0"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		stop := make(chan struct{})
		errs := make(chan error, 4)
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					v, b, err := s.Latest(ctx, path, max)
					if err != nil {
						errs <- err
						return
					}
					var i int
					fmt.Sscanf(v, "v%d", &i)
					if !bytes.Equal(b, body(i)) {
						errs <- fmt.Errorf("version %s has a body of another version or a partial one", v)
						return
					}
				}
			}()
		}
		for i := 1; i <= 50; i++ {
			v := fmt.Sprint("v", i)
			if err := s.Put(ctx, path, v, body(i)); err != nil {
				t.Fatal(err)
			}
			if err := s.Promote(ctx, path, v); err != nil {
				t.Fatal(err)
			}
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	})

	t.Run("HonoursContext", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Put(cctx, path, "v1", []byte("x")); err == nil {
			t.Error("Put with a cancelled context succeeded")
		}
		if _, _, err := s.Latest(cctx, path, max); err == nil {
			t.Error("Latest with a cancelled context succeeded")
		}
	})
}
