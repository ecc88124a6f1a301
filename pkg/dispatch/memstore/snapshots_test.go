package memstore_test

import (
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

func TestSnapshots(t *testing.T) {
	dispatchtest.TestSnapshotStore(t, func(t *testing.T) snapshot.Store { return memstore.NewSnapshots() })
}
