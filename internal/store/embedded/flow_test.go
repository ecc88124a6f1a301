package embedded

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
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

// TestClaimsWrittenBeforeTenantScopingStillDedupe: a file written before
// claims were scoped by tenant holds records under the bare command id. After
// the upgrade such a live record still makes the id a duplicate (for every
// tenant: it does not say whose it was) until it expires; new claims go
// under the tenant's key.
func TestClaimsWrittenBeforeTenantScopingStillDedupe(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "snavio.db")
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	exp := now.Add(300 * time.Second)
	old, err := Open(Options{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if err := old.update(ctx, func(tx *bolt.Tx) error {
		return putJSON(tx.Bucket(bDedupe), []byte("cmd-1"), dedupeRec{PayloadHash: "h", State: string(flow.ClaimDelivered), Owner: "old", ExpiresAt: storecodec.Nanos(exp)})
	}); err != nil {
		t.Fatal(err)
	}
	if err := old.Close(); err != nil {
		t.Fatal(err)
	}

	s := openTest(t, Options{Path: path})
	for _, tenant := range []string{"acme", "globex"} {
		rec := flow.DedupeRecord{Tenant: tenant, ID: "cmd-1", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "new", ExpiresAt: now.Add(30 * time.Second)}
		ok, ex, err := s.Claim(ctx, rec, now.Add(time.Minute))
		if err != nil || ok || ex.State != flow.ClaimDelivered || !ex.ExpiresAt.Equal(exp) {
			t.Fatalf("%s: claim over a live pre-upgrade record: %v %+v %v, want its delivered record", tenant, ok, ex, err)
		}
	}
	rec := flow.DedupeRecord{Tenant: "acme", ID: "cmd-1", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "new", ExpiresAt: exp.Add(30 * time.Second)}
	if ok, _, err := s.Claim(ctx, rec, exp); err != nil || !ok {
		t.Fatalf("claim once the pre-upgrade record expired: %v %v", ok, err)
	}
	if err := s.Complete(ctx, rec.Key(), "new", exp.Add(300*time.Second), exp); err != nil {
		t.Fatalf("complete under the tenant's key: %v", err)
	}
}
