package embedded

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

func openTest(t *testing.T, opts Options) *Store {
	t.Helper()
	s, err := Open(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func TestFlowStoreDurable(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store {
		return openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")})
	})
}

// The claims a delivery completes go through the log: with a sync
// interval they are applied after the log's sync instead of with it.
func TestFlowStoreSyncInterval(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store {
		return openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db"), SyncEvery: time.Second})
	})
}

func TestFlowStoreEphemeral(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(t *testing.T) flow.Store {
		return openTest(t, Options{Ephemeral: true})
	})
}

func TestRegistryDurable(t *testing.T) {
	dispatchtest.TestRegistry(t, func(t *testing.T) registry.Store {
		return openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")}).Registry()
	})
}

func TestRegistryEphemeral(t *testing.T) {
	dispatchtest.TestRegistry(t, func(t *testing.T) registry.Store {
		return openTest(t, Options{Ephemeral: true}).Registry()
	})
}

func TestSnapshotStoreDurable(t *testing.T) {
	dispatchtest.TestSnapshotStore(t, func(t *testing.T) snapshot.Store {
		return openTest(t, Options{Path: filepath.Join(t.TempDir(), "snavio.db")}).Snapshots()
	})
}

func TestSnapshotStoreEphemeral(t *testing.T) {
	dispatchtest.TestSnapshotStore(t, func(t *testing.T) snapshot.Store {
		return openTest(t, Options{Ephemeral: true}).Snapshots()
	})
}
