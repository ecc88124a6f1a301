package dispatchtest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// epoch is the suites' fixed "now"; stores must take time only from the
// arguments they are given.
var epoch = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// TestFlowStore runs every flow-control suite against stores made by
// newStore, which must return an empty store each time.
func TestFlowStore(t *testing.T, newStore func(t *testing.T) flow.Store) {
	t.Run("Counters", func(t *testing.T) { TestCounters(t, func(t *testing.T) flow.Counters { return newStore(t) }) })
	t.Run("Leases", func(t *testing.T) { TestLeases(t, func(t *testing.T) flow.Leases { return newStore(t) }) })
	t.Run("Dedupe", func(t *testing.T) { TestDedupe(t, func(t *testing.T) flow.DedupeClaims { return newStore(t) }) })
	t.Run("BanLedger", func(t *testing.T) { TestBanLedger(t, func(t *testing.T) flow.BanLedger { return newStore(t) }) })
	t.Run("GlobalBans", func(t *testing.T) { TestGlobalBans(t, func(t *testing.T) flow.GlobalBans { return newStore(t) }) })
	t.Run("Rollups", func(t *testing.T) { TestRollups(t, func(t *testing.T) flow.Rollups { return newStore(t) }) })
}

// TestCounters is the contract of flow.Counters.
func TestCounters(t *testing.T, newStore func(t *testing.T) flow.Counters) {
	ctx := context.Background()
	exp := epoch.Add(time.Minute)

	t.Run("GrantsUpToLimit", func(t *testing.T) {
		s := newStore(t)
		steps := []struct{ n, want int64 }{{3, 3}, {5, 5}, {4, 2}, {1, 0}, {0, 0}}
		for i, st := range steps {
			got, err := s.Take(ctx, "k", st.n, 10, exp, epoch)
			if err != nil {
				t.Fatal(err)
			}
			if got != st.want {
				t.Fatalf("step %d: Take(%d) granted %d, want %d", i, st.n, got, st.want)
			}
		}
	})
	t.Run("KeysAreIndependent", func(t *testing.T) {
		s := newStore(t)
		if g, _ := s.Take(ctx, "a", 2, 2, exp, epoch); g != 2 {
			t.Fatalf("a granted %d", g)
		}
		if g, _ := s.Take(ctx, "b", 2, 2, exp, epoch); g != 2 {
			t.Fatalf("b granted %d, want 2: keys share a budget", g)
		}
	})
	t.Run("ExpiredCounterCountsAsZeroBeforeDeletion", func(t *testing.T) {
		s := newStore(t)
		if g, _ := s.Take(ctx, "k", 5, 5, epoch.Add(time.Second), epoch); g != 5 {
			t.Fatalf("granted %d", g)
		}
		if g, _ := s.Take(ctx, "k", 1, 5, epoch.Add(time.Minute), epoch.Add(500*time.Millisecond)); g != 0 {
			t.Fatalf("live full counter granted %d", g)
		}
		// At its expiry the counter is dead, deleted or not.
		if g, _ := s.Take(ctx, "k", 5, 5, epoch.Add(time.Minute), epoch.Add(time.Second)); g != 5 {
			t.Fatalf("expired counter granted %d, want 5", g)
		}
	})
	t.Run("ConcurrentTakesNeverExceedLimit", func(t *testing.T) {
		s := newStore(t)
		var total atomic.Int64
		var wg sync.WaitGroup
		for range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range 50 {
					g, err := s.Take(ctx, "hot", 3, 500, exp, epoch)
					if err != nil {
						t.Error(err)
						return
					}
					total.Add(g)
				}
			}()
		}
		wg.Wait()
		if total.Load() != 500 {
			t.Fatalf("granted %d in all, want exactly the limit 500", total.Load())
		}
	})
	t.Run("CancelledContext", func(t *testing.T) {
		s := newStore(t)
		c, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := s.Take(c, "k", 1, 1, exp, epoch); err == nil {
			t.Fatal("Take with a cancelled context succeeded")
		}
	})
}

// TestLeases is the contract of flow.Leases.
func TestLeases(t *testing.T, newStore func(t *testing.T) flow.Leases) {
	ctx := context.Background()
	exp := epoch.Add(2 * time.Second)

	t.Run("AtMostMaxHolders", func(t *testing.T) {
		s := newStore(t)
		for i := range 3 {
			ok, err := s.Acquire(ctx, "slot", fmt.Sprintf("h%d", i), 3, exp, epoch)
			if err != nil || !ok {
				t.Fatalf("holder %d: %v %v", i, ok, err)
			}
		}
		if ok, _ := s.Acquire(ctx, "slot", "h3", 3, exp, epoch); ok {
			t.Fatal("a fourth holder acquired a lease of max 3")
		}
		if ok, _ := s.Acquire(ctx, "slot", "h1", 3, exp, epoch); !ok {
			t.Fatal("re-acquiring as an existing holder failed: must be idempotent")
		}
	})
	t.Run("ExpiredLeaseHasNoHolders", func(t *testing.T) {
		s := newStore(t)
		if ok, _ := s.Acquire(ctx, "slot", "a", 1, epoch.Add(time.Second), epoch); !ok {
			t.Fatal("first acquire failed")
		}
		if ok, _ := s.Acquire(ctx, "slot", "b", 1, epoch.Add(3*time.Second), epoch.Add(time.Second)); !ok {
			t.Fatal("lease not free at its expiry")
		}
	})
	t.Run("ConcurrentAcquire", func(t *testing.T) {
		s := newStore(t)
		var won atomic.Int64
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, err := s.Acquire(ctx, "slot", fmt.Sprintf("h%d", i), 5, exp, epoch)
				if err != nil {
					t.Error(err)
				}
				if ok {
					won.Add(1)
				}
			}()
		}
		wg.Wait()
		if won.Load() != 5 {
			t.Fatalf("%d holders acquired a lease of max 5", won.Load())
		}
	})
}

// claimTenant is the tenant of the contract's claims but where a case says
// otherwise.
const claimTenant = "acme"

func inProgress(id, hash, owner string, exp time.Time) flow.DedupeRecord {
	return flow.DedupeRecord{Tenant: claimTenant, ID: id, PayloadHash: hash, State: flow.ClaimInProgress, Owner: owner, ExpiresAt: exp}
}

// key is the store key of id's claim in claimTenant.
func key(id string) string { return flow.ClaimKey(claimTenant, id) }

// TestDedupe is the contract of flow.DedupeClaims.
func TestDedupe(t *testing.T, newStore func(t *testing.T) flow.DedupeClaims) {
	ctx := context.Background()
	ip := epoch.Add(30 * time.Second)
	done := epoch.Add(300 * time.Second)

	t.Run("ClaimCompleteDuplicate", func(t *testing.T) {
		s := newStore(t)
		ok, _, err := s.Claim(ctx, inProgress("id1", "h", "o1", ip), epoch)
		if err != nil || !ok {
			t.Fatalf("first claim: %v %v", ok, err)
		}
		ok, ex, err := s.Claim(ctx, inProgress("id1", "h", "o2", ip), epoch)
		if err != nil || ok {
			t.Fatalf("second claim while in progress: %v %v", ok, err)
		}
		if ex.State != flow.ClaimInProgress || ex.Owner != "o1" || ex.PayloadHash != "h" {
			t.Fatalf("existing = %+v", ex)
		}
		if err := s.Complete(ctx, key("id1"), "o1", done, epoch); err != nil {
			t.Fatal(err)
		}
		ok, ex, _ = s.Claim(ctx, inProgress("id1", "h", "o3", ip), epoch.Add(time.Minute))
		if ok || ex.State != flow.ClaimDelivered || !ex.ExpiresAt.Equal(done) {
			t.Fatalf("claim after delivery: %v %+v", ok, ex)
		}
	})
	t.Run("ReleaseLetsARetryThrough", func(t *testing.T) {
		s := newStore(t)
		if ok, _, _ := s.Claim(ctx, inProgress("id", "h", "o1", ip), epoch); !ok {
			t.Fatal("claim failed")
		}
		if err := s.Release(ctx, key("id"), "o2", epoch); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("release by a stranger: %v, want ErrNotOwner", err)
		}
		if err := s.Release(ctx, key("id"), "o1", epoch); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := s.Claim(ctx, inProgress("id", "h", "o2", ip), epoch); !ok {
			t.Fatal("retry after release could not claim")
		}
	})
	t.Run("InProgressExpiresSoACrashLosesNothing", func(t *testing.T) {
		s := newStore(t)
		if ok, _, _ := s.Claim(ctx, inProgress("id", "h", "crashed", ip), epoch); !ok {
			t.Fatal("claim failed")
		}
		// Not deleted, but expired: the condition must treat it as absent.
		ok, _, err := s.Claim(ctx, inProgress("id", "h", "retry", ip.Add(time.Minute)), ip)
		if err != nil || !ok {
			t.Fatalf("claim over an expired in-progress record: %v %v", ok, err)
		}
		if err := s.Complete(ctx, key("id"), "crashed", done, ip); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("the crashed owner completed a record it lost: %v", err)
		}
	})
	t.Run("DeliveredExpiresAfterTTL", func(t *testing.T) {
		s := newStore(t)
		s.Claim(ctx, inProgress("id", "h", "o", ip), epoch)
		if err := s.Complete(ctx, key("id"), "o", done, epoch); err != nil {
			t.Fatal(err)
		}
		if ok, _, _ := s.Claim(ctx, inProgress("id", "h", "o2", done.Add(time.Minute)), done); !ok {
			t.Fatal("a replay after the dedupe TTL must be accepted")
		}
	})
	t.Run("CompleteAndReleaseNeedALiveInProgressRecord", func(t *testing.T) {
		s := newStore(t)
		if err := s.Complete(ctx, key("none"), "o", done, epoch); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("complete of a missing record: %v", err)
		}
		s.Claim(ctx, inProgress("id", "h", "o", ip), epoch)
		if err := s.Complete(ctx, key("id"), "o", done, epoch); err != nil {
			t.Fatal(err)
		}
		if err := s.Release(ctx, key("id"), "o", epoch); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("release of a delivered record: %v", err)
		}
		if err := s.Complete(ctx, key("id"), "o", done, epoch); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("second complete: %v", err)
		}
	})
	t.Run("ManyGoroutinesOneWinner", func(t *testing.T) {
		s := newStore(t)
		var winners atomic.Int64
		var wg sync.WaitGroup
		for i := range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				ok, _, err := s.Claim(ctx, inProgress("contended", "h", fmt.Sprintf("o%d", i), ip), epoch)
				if err != nil {
					t.Error(err)
				}
				if ok {
					winners.Add(1)
				}
			}()
		}
		wg.Wait()
		if winners.Load() != 1 {
			t.Fatalf("%d goroutines won the claim, want exactly 1", winners.Load())
		}
	})
	t.Run("TenantsDoNotShareIDs", func(t *testing.T) {
		// One delivery per id holds within a tenant: another tenant's
		// claim of the same id, even with the same payload, is its own.
		s := newStore(t)
		mine := inProgress("shared", "h", "o1", ip)
		theirs := mine
		theirs.Tenant, theirs.Owner = "globex", "o2"
		if ok, _, err := s.Claim(ctx, mine, epoch); err != nil || !ok {
			t.Fatalf("acme's claim: %v %v", ok, err)
		}
		if ok, ex, err := s.Claim(ctx, theirs, epoch); err != nil || !ok {
			t.Fatalf("globex's claim of the same id: %v %+v %v; a tenant must not suppress another's command", ok, ex, err)
		}
		if err := s.Complete(ctx, mine.Key(), "o1", done, epoch); err != nil {
			t.Fatal(err)
		}
		if err := s.Complete(ctx, theirs.Key(), "o2", done, epoch); err != nil {
			t.Fatalf("globex's completion: %v", err)
		}
		for _, rec := range []flow.DedupeRecord{mine, theirs} {
			rec.Owner = "o3"
			if ok, ex, _ := s.Claim(ctx, rec, epoch.Add(time.Minute)); ok || ex.State != flow.ClaimDelivered {
				t.Fatalf("%s's copy after delivery: %v %+v, want its own delivered record", rec.Tenant, ok, ex)
			}
		}
		// Release and Complete act on their own tenant's record only.
		other := inProgress("other", "h", "o1", ip)
		if ok, _, _ := s.Claim(ctx, other, epoch); !ok {
			t.Fatal("claim failed")
		}
		if err := s.Release(ctx, flow.ClaimKey("globex", "other"), "o1", epoch); !errors.Is(err, flow.ErrNotOwner) {
			t.Fatalf("release under another tenant's key: %v, want ErrNotOwner", err)
		}
		if ok, _, _ := s.Claim(ctx, inProgress("other", "h", "o2", ip), epoch); ok {
			t.Fatal("the claim was released through another tenant's key")
		}
	})
	t.Run("RejectsMalformedClaims", func(t *testing.T) {
		s := newStore(t)
		bad := inProgress("id", "h", "o", ip)
		bad.State = flow.ClaimDelivered
		if _, _, err := s.Claim(ctx, bad, epoch); err == nil {
			t.Fatal("a claim in the delivered state was accepted")
		}
		noTenant := inProgress("id", "h", "o", ip)
		noTenant.Tenant = ""
		if _, _, err := s.Claim(ctx, noTenant, epoch); err == nil {
			t.Fatal("a claim without a tenant was accepted")
		}
		if _, _, err := s.Claim(ctx, inProgress("", "h", "o", ip), epoch); err == nil {
			t.Fatal("a claim without an id was accepted")
		}
	})
}

// TestBanLedger is the contract of flow.BanLedger.
func TestBanLedger(t *testing.T, newStore func(t *testing.T) flow.BanLedger) {
	ctx := context.Background()
	s := newStore(t)
	k := flow.BanKey{Source: "t/s", Target: "tg", Command: "c"}
	other := flow.BanKey{Source: "t/s", Target: "tg", Command: "other"}
	window := 10 * time.Minute
	for i, want := range []int{1, 2, 3} {
		n, err := s.RecordBan(ctx, k, epoch.Add(time.Duration(i)*time.Minute), window)
		if err != nil || n != want {
			t.Fatalf("ban %d: count %d err %v, want %d", i, n, err, want)
		}
	}
	if n, _ := s.RecordBan(ctx, other, epoch, window); n != 1 {
		t.Fatalf("other key counted %d, want 1", n)
	}
	// At 11m30s the window is (1m30s, 11m30s]: the bans at 0m and 1m fall
	// out, the one at 2m stays.
	if n, _ := s.RecordBan(ctx, k, epoch.Add(11*time.Minute+30*time.Second), window); n != 2 {
		t.Fatalf("count after the window moved = %d, want 2", n)
	}
}

// TestGlobalBans is the contract of flow.GlobalBans.
func TestGlobalBans(t *testing.T, newStore func(t *testing.T) flow.GlobalBans) {
	ctx := context.Background()
	s := newStore(t)
	if err := s.PutBan(ctx, flow.Ban{Source: "a/x", Until: epoch.Add(10 * time.Minute), Reason: "r"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBan(ctx, flow.Ban{Source: "a/x", Until: epoch.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutBan(ctx, flow.Ban{Source: "b/y", Until: epoch.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	bans, err := s.Bans(ctx, epoch)
	if err != nil {
		t.Fatal(err)
	}
	if len(bans) != 2 || bans[0].Source != "a/x" || !bans[0].Until.Equal(epoch.Add(10*time.Minute)) {
		t.Fatalf("bans = %+v: a shorter ban must not shorten a longer one", bans)
	}
	bans, _ = s.Bans(ctx, epoch.Add(time.Minute))
	if len(bans) != 1 || bans[0].Source != "a/x" {
		t.Fatalf("bans at +1m = %+v: expired bans must not be returned", bans)
	}
	if err := s.PutBan(ctx, flow.Ban{Until: epoch.Add(time.Minute)}); err == nil {
		t.Fatal("a ban without a source was accepted")
	}
}

// TestRollups is the contract of flow.Rollups.
func TestRollups(t *testing.T, newStore func(t *testing.T) flow.Rollups) {
	ctx := context.Background()
	s := newStore(t)
	w0, w1 := epoch, epoch.Add(time.Minute)
	r := func(inst string, w time.Time, src string, n int64) flow.Rollup {
		return flow.Rollup{Instance: inst, WindowStart: w, Source: src, Target: "tg", Command: "c", Dispatches: n}
	}
	if err := s.PutRollups(ctx, []flow.Rollup{r("i1", w0, "a/x", 5), r("i2", w0, "a/x", 7)}, epoch.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	// Idempotent per (instance, window, source, target, command): a retry replaces.
	if err := s.PutRollups(ctx, []flow.Rollup{r("i1", w0, "a/x", 6), r("i1", w1, "b/y", 1)}, epoch.Add(10*time.Minute)); err != nil {
		t.Fatal(err)
	}
	got, err := s.ReadRollups(ctx, w0, epoch)
	if err != nil {
		t.Fatal(err)
	}
	var sum int64
	for _, g := range got {
		sum += g.Dispatches
	}
	if len(got) != 3 || sum != 14 {
		t.Fatalf("rollups = %+v (sum %d), want 3 records summing 14", got, sum)
	}
	if got, _ := s.ReadRollups(ctx, w1, epoch); len(got) != 1 || got[0].Source != "b/y" {
		t.Fatalf("since w1 = %+v", got)
	}
	if got, _ := s.ReadRollups(ctx, w0, epoch.Add(10*time.Minute)); len(got) != 0 {
		t.Fatalf("expired rollups returned: %+v", got)
	}
}
