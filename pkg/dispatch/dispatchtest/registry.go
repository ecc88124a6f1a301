package dispatchtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// RegistryRoute returns a valid route for (target, command) with version
// 0, for suites and tests.
func RegistryRoute(target, command string) registry.Route {
	return registry.Route{
		Target: target, Command: command,
		QueueARN: "arn:aws:sqs:eu-west-1:123456789012:" + target + "-commands",
		DLQARN:   "arn:aws:sqs:eu-west-1:123456789012:" + target + "-dlq",
		Profile:  registry.ProfileModerate,
		Metadata: map[string]string{"owner": "team-" + target},
	}
}

// RegistryACL returns a valid grant for (source, target, command).
func RegistryACL(source, target, command string) registry.ACL {
	return registry.ACL{Source: source, Target: target, Command: command, Allow: true, Profile: registry.ProfileCritical}
}

// TestRegistry is the contract of registry.Store: create, read, update
// and delete of every kind; conditional writes on the version; the
// changelog; expiry honoured before deletion; isolation of returned
// values; and concurrent writers.
func TestRegistry(t *testing.T, newStore func(t *testing.T) registry.Store) {
	ctx := context.Background()
	by := registry.Actor{Who: "arn:aws:iam::123456789012:role/ci", At: epoch}
	at := func(d time.Duration) registry.Actor { return registry.Actor{Who: by.Who, At: epoch.Add(d)} }

	t.Run("CRUD", func(t *testing.T) {
		s := newStore(t)
		r := RegistryRoute("billing", "charge-card")
		ch, err := s.Put(ctx, by, registry.Item{Route: &r})
		if err != nil {
			t.Fatalf("Put new route: %v", err)
		}
		if ch.Version != 1 || ch.After == nil || ch.After.Route.Version != 1 || ch.Before != nil || ch.Op != registry.OpPut {
			t.Fatalf("create change = %+v; want version 1, after set, no before", ch)
		}
		id := registry.RouteID("billing", "charge-card")
		got, err := s.Get(ctx, id, epoch)
		if err != nil || got.Route == nil || got.Route.QueueARN != r.QueueARN || got.Route.Version != 1 || got.Route.Metadata["owner"] != "team-billing" {
			t.Fatalf("Get = %+v, %v; want the stored route at version 1", got.Route, err)
		}
		upd := *got.Route
		upd.DedupeMode = registry.DedupeStrict
		if _, err := s.Put(ctx, at(time.Second), registry.Item{Route: &upd}); err != nil {
			t.Fatalf("update at version 1: %v", err)
		}
		got, _ = s.Get(ctx, id, epoch)
		if got.Route.Version != 2 || !got.Route.Strict() {
			t.Fatalf("after update: %+v; want version 2, strict", got.Route)
		}
		for _, it := range []registry.Item{
			{ACL: regPtr(RegistryACL("shop/web", "billing", "charge-card"))},
			{Key: &registry.ServiceKey{Source: "shop/web", Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: make([]byte, 32), ActivatedAt: epoch}}}},
			{Ban: &registry.Ban{Source: "shop/web", Kind: registry.BanColdOnly, Reason: "abuse"}},
			{Quota: &registry.Quota{Source: "shop/web", Target: "billing", Command: "charge-card", Limit: registry.RateLimit{Max: 5, IntervalSeconds: 1}}},
		} {
			if _, err := s.Put(ctx, by, it); err != nil {
				t.Fatalf("Put %s: %v", it.ID(), err)
			}
		}
		d, err := s.Load(ctx, epoch)
		if err != nil {
			t.Fatal(err)
		}
		if len(d.Routes) != 1 || len(d.ACLs) != 1 || len(d.Keys) != 1 || len(d.Bans) != 1 || len(d.Quotas) != 1 {
			t.Fatalf("Load all = %d routes %d acls %d keys %d bans %d quotas; want one of each", len(d.Routes), len(d.ACLs), len(d.Keys), len(d.Bans), len(d.Quotas))
		}
		d, err = s.Load(ctx, epoch, registry.KindACL)
		if err != nil || len(d.ACLs) != 1 || d.Len() != 1 {
			t.Fatalf("Load(acl) = %+v, %v; want only the ACL", d, err)
		}
		if _, err := s.Delete(ctx, at(2*time.Second), id, 2); err != nil {
			t.Fatalf("Delete at version 2: %v", err)
		}
		if _, err := s.Get(ctx, id, epoch); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Get after delete: %v; want ErrNotFound", err)
		}
		if _, err := s.Delete(ctx, by, id, 2); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("second Delete: %v; want ErrNotFound", err)
		}
		// Re-creation starts from version 0 but versions never go back.
		ch, err = s.Put(ctx, at(3*time.Second), registry.Item{Route: &r})
		if err != nil || ch.Version <= 2 {
			t.Fatalf("re-create = version %d, %v; want a version above 2", ch.Version, err)
		}
	})

	t.Run("LoadSorted", func(t *testing.T) {
		s := newStore(t)
		for _, c := range []string{"c", "a", "b"} {
			r := RegistryRoute("svc", c)
			if _, err := s.Put(ctx, by, registry.Item{Route: &r}); err != nil {
				t.Fatal(err)
			}
		}
		d, err := s.Load(ctx, epoch, registry.KindRoute)
		if err != nil || len(d.Routes) != 3 || d.Routes[0].Command != "a" || d.Routes[2].Command != "c" {
			t.Fatalf("Load = %+v, %v; want routes a, b, c", d.Routes, err)
		}
	})

	t.Run("Conflicts", func(t *testing.T) {
		s := newStore(t)
		r := RegistryRoute("billing", "refund")
		if _, err := s.Put(ctx, by, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Put(ctx, by, registry.Item{Route: &r}); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("create over an existing route: %v; want ErrConflict", err)
		}
		stale := r
		stale.Version = 7
		if _, err := s.Put(ctx, by, registry.Item{Route: &stale}); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("put at a wrong version: %v; want ErrConflict", err)
		}
		if _, err := s.Delete(ctx, by, registry.RouteID("billing", "refund"), 3); !errors.Is(err, registry.ErrConflict) {
			t.Fatalf("delete at a wrong version: %v; want ErrConflict", err)
		}
		got, err := s.Get(ctx, registry.RouteID("billing", "refund"), epoch)
		if err != nil || got.Route.Version != 1 {
			t.Fatalf("after refused writes: %+v, %v; want version 1 unchanged", got.Route, err)
		}
		h, _ := s.History(ctx, registry.RouteID("billing", "refund"), 0)
		if len(h) != 1 {
			t.Fatalf("refused writes left %d changelog entries; want 1", len(h))
		}
	})

	t.Run("RefusesInvalid", func(t *testing.T) {
		s := newStore(t)
		fifo := RegistryRoute("billing", "charge")
		fifo.QueueARN += ".fifo"
		noDLQ := RegistryRoute("billing", "charge")
		noDLQ.DLQARN = ""
		badProfile := RegistryACL("shop/web", "billing", "charge")
		badProfile.Profile = "paranoid"
		for name, it := range map[string]registry.Item{
			"fifo": {Route: &fifo}, "no-dlq": {Route: &noDLQ}, "profile": {ACL: &badProfile}, "empty": {},
		} {
			if _, err := s.Put(ctx, by, it); !errors.Is(err, registry.ErrInvalid) {
				t.Errorf("%s: Put = %v; want ErrInvalid", name, err)
			}
		}
		r := RegistryRoute("billing", "charge")
		if _, err := s.Put(ctx, registry.Actor{At: epoch}, registry.Item{Route: &r}); err == nil {
			t.Error("Put without an actor succeeded; the changelog needs who")
		}
		if d, _ := s.Load(ctx, epoch); d.Len() != 0 {
			t.Errorf("refused writes stored %d records", d.Len())
		}
	})

	t.Run("Changelog", func(t *testing.T) {
		s := newStore(t)
		a := RegistryACL("shop/web", "billing", "charge")
		id := registry.ACLID("shop/web", "billing", "charge")
		if _, err := s.Put(ctx, by, registry.Item{ACL: &a}); err != nil {
			t.Fatal(err)
		}
		cur, _ := s.Get(ctx, id, epoch)
		rev := registry.Revoke(*cur.ACL, epoch.Add(time.Minute), time.Hour)
		if _, err := s.Put(ctx, registry.Actor{Who: "alice", At: epoch.Add(time.Minute)}, registry.Item{ACL: &rev}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Delete(ctx, registry.Actor{Who: "bob", At: epoch.Add(2 * time.Minute)}, id, 2); err != nil {
			t.Fatal(err)
		}
		h, err := s.History(ctx, id, 0)
		if err != nil || len(h) != 3 {
			t.Fatalf("History = %d entries, %v; want 3", len(h), err)
		}
		if h[0].Op != registry.OpDelete || h[0].Who != "bob" || h[0].After != nil || h[0].Before == nil || h[0].Before.ACL.Allow {
			t.Errorf("newest entry = %+v; want bob's delete of the revoked entry", h[0])
		}
		if h[1].Who != "alice" || !h[1].At.Equal(epoch.Add(time.Minute)) || h[1].Before == nil || !h[1].Before.ACL.Allow || h[1].After.ACL.Allow || h[1].After.ACL.RevokedAt.IsZero() {
			t.Errorf("revocation entry = %+v; want alice, before allowed, after revoked", h[1])
		}
		if h[2].Before != nil || h[2].Version != 1 || h[2].Kind() != registry.KindACL {
			t.Errorf("oldest entry = %+v; want the creation at version 1", h[2])
		}
		if h1, _ := s.History(ctx, id, 1); len(h1) != 1 || h1[0].Version != h[0].Version {
			t.Errorf("History limit 1 = %+v; want the newest entry only", h1)
		}
		if h, _ := s.History(ctx, registry.RouteID("none", "x"), 0); len(h) != 0 {
			t.Errorf("History of an unknown id = %v; want none", h)
		}
	})

	t.Run("ExpiryHonouredBeforeDeletion", func(t *testing.T) {
		s := newStore(t)
		r := RegistryRoute("promo", "flash-sale")
		r.ExpiresAt = epoch.Add(10 * time.Second).Unix()
		if _, err := s.Put(ctx, by, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
		id := registry.RouteID("promo", "flash-sale")
		if _, err := s.Get(ctx, id, epoch.Add(9*time.Second)); err != nil {
			t.Fatalf("Get before expiry: %v", err)
		}
		if _, err := s.Get(ctx, id, epoch.Add(10*time.Second)); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Get at expires_at: %v; want ErrNotFound", err)
		}
		if d, _ := s.Load(ctx, epoch.Add(11*time.Second)); len(d.Routes) != 0 {
			t.Fatalf("Load after expiry returned %d routes", len(d.Routes))
		}
		if _, err := s.Delete(ctx, at(11*time.Second), id, 1); !errors.Is(err, registry.ErrNotFound) {
			t.Fatalf("Delete of an expired route: %v; want ErrNotFound", err)
		}
		r.ExpiresAt = 0
		ch, err := s.Put(ctx, at(11*time.Second), registry.Item{Route: &r})
		if err != nil {
			t.Fatalf("create over an expired route at version 0: %v", err)
		}
		if ch.Before != nil || ch.Version != 2 {
			t.Fatalf("create over expired = %+v; want no before and version 2", ch)
		}
	})

	t.Run("ReturnsCopies", func(t *testing.T) {
		s := newStore(t)
		r := RegistryRoute("billing", "charge")
		if _, err := s.Put(ctx, by, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
		r.Metadata["owner"] = "mallory"
		got, _ := s.Get(ctx, registry.RouteID("billing", "charge"), epoch)
		got.Route.Metadata["owner"] = "eve"
		d, _ := s.Load(ctx, epoch)
		d.Routes[0].QueueARN = "changed"
		again, _ := s.Get(ctx, registry.RouteID("billing", "charge"), epoch)
		if again.Route.Metadata["owner"] != "team-billing" || again.Route.QueueARN == "changed" {
			t.Fatalf("stored route changed through a caller's value: %+v", again.Route)
		}
	})

	t.Run("ConcurrentWriters", func(t *testing.T) {
		s := newStore(t)
		r := RegistryRoute("billing", "charge")
		if _, err := s.Put(ctx, by, registry.Item{Route: &r}); err != nil {
			t.Fatal(err)
		}
		const n = 16
		var wg sync.WaitGroup
		errs := make([]error, n)
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				u := RegistryRoute("billing", "charge")
				u.Version = 1
				u.Metadata = map[string]string{"writer": fmt.Sprint(i)}
				_, errs[i] = s.Put(ctx, registry.Actor{Who: fmt.Sprint("writer-", i), At: epoch}, registry.Item{Route: &u})
			}()
		}
		wg.Wait()
		ok := 0
		for _, err := range errs {
			switch {
			case err == nil:
				ok++
			case !errors.Is(err, registry.ErrConflict):
				t.Errorf("concurrent Put: %v; want nil or ErrConflict", err)
			}
		}
		if ok != 1 {
			t.Fatalf("%d of %d writers at version 1 succeeded; want exactly 1", ok, n)
		}
		h, _ := s.History(ctx, registry.RouteID("billing", "charge"), 0)
		if len(h) != 2 || h[0].Version != 2 {
			t.Fatalf("changelog after the race = %d entries; want 2 ending at version 2", len(h))
		}
	})

	t.Run("HonoursContext", func(t *testing.T) {
		s := newStore(t)
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		r := RegistryRoute("billing", "charge")
		if _, err := s.Put(cctx, by, registry.Item{Route: &r}); err == nil {
			t.Error("Put with a cancelled context succeeded")
		}
		if _, err := s.Load(cctx, epoch); err == nil {
			t.Error("Load with a cancelled context succeeded")
		}
	})
}

func regPtr[T any](v T) *T { return &v }
