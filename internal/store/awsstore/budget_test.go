package awsstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

// callCase is one operation and the DynamoDB calls it must make.
type callCase struct {
	name string
	op   func() error
	want awstest.Counts
}

// checkCalls runs each case in order and compares the calls it made.
func checkCalls(t *testing.T, c *awstest.Calls, cases []callCase) {
	t.Helper()
	for _, tc := range cases {
		if err := tc.op(); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		got := c.Take().Ops()
		t.Logf("%-40s %s", tc.name, got.String())
		if got.String() != tc.want.String() {
			t.Errorf("%s: calls %s, want %s", tc.name, got.String(), tc.want.String())
		}
	}
}

// TestCallsPerOperation counts the DynamoDB calls each port method makes
// in each case, with an SDK middleware, and holds each to its design
// (docs/store/aws.md, "Calls per operation").
func TestCallsPerOperation(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s := newFlowStore(t, &c)
	exp := t0.Add(time.Minute)
	claim := flow.DedupeRecord{Tenant: "t", ID: "id", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "o", ExpiresAt: t0.Add(30 * time.Second)}
	checkCalls(t, &c, []callCase{
		{"Take/new counter", func() error { _, err := s.Take(ctx, "k", 4, 10, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Take/live counter with room", func() error { _, err := s.Take(ctx, "k", 4, 10, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Take/partial grant", func() error {
			g, err := s.Take(ctx, "k", 4, 10, exp, t0)
			if g != 2 {
				t.Errorf("partial grant %d, want 2", g)
			}
			return err
		}, map[string]int{"UpdateItem": 2}},
		{"Take/full counter", func() error { _, err := s.Take(ctx, "k", 1, 10, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Take/expired counter not yet deleted", func() error { _, err := s.Take(ctx, "k", 1, 10, exp.Add(time.Minute), exp); return err }, map[string]int{"UpdateItem": 1, "PutItem": 1}},
		{"Acquire/new lease", func() error { _, err := s.Acquire(ctx, "l", "a", 1, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Acquire/again as holder", func() error { _, err := s.Acquire(ctx, "l", "a", 1, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Acquire/full lease", func() error { _, err := s.Acquire(ctx, "l", "b", 1, exp, t0); return err }, map[string]int{"UpdateItem": 1}},
		{"Acquire/expired lease", func() error { _, err := s.Acquire(ctx, "l", "b", 1, exp.Add(time.Minute), exp); return err }, map[string]int{"UpdateItem": 1, "PutItem": 1}},
		{"Claim/first", func() error { _, _, err := s.Claim(ctx, claim, t0); return err }, map[string]int{"PutItem": 1}},
		{"Claim/duplicate", func() error { _, _, err := s.Claim(ctx, claim, t0); return err }, map[string]int{"PutItem": 1}},
		{"Complete", func() error { return s.Complete(ctx, claim.Key(), "o", t0.Add(5*time.Minute), t0) }, map[string]int{"UpdateItem": 1}},
		{"Release/not owner", func() error { _ = s.Release(ctx, claim.Key(), "o", t0); return nil }, map[string]int{"DeleteItem": 1}},
		{"RecordBan", func() error { _, err := s.RecordBan(ctx, flow.BanKey{Source: "t/s"}, t0, time.Minute); return err }, map[string]int{"PutItem": 1, "Query": 1}},
		{"PutBan", func() error { return s.PutBan(ctx, flow.Ban{Source: "t/s", Until: exp}) }, map[string]int{"PutItem": 1}},
		{"Bans", func() error { _, err := s.Bans(ctx, t0); return err }, map[string]int{"Query": 1}},
		{"PutRollups/25", func() error {
			rs := make([]flow.Rollup, 25)
			for i := range rs {
				rs[i] = flow.Rollup{Instance: "i", WindowStart: t0, Source: "s" + string(rune('a'+i)), Target: "t", Command: "c", Dispatches: 1}
			}
			return s.PutRollups(ctx, rs, exp)
		}, map[string]int{"BatchWriteItem": 1}},
		{"ReadRollups", func() error { _, err := s.ReadRollups(ctx, t0, t0); return err }, map[string]int{"Query": rollupShards}},
	})
}

// TestStrictSlowPathBudget runs the real slow stage (flow.Flow.Slow then
// Finish) on a strict, rate-limited route over the AWS store and holds it
// to the budget: at most 3 DynamoDB calls per strict command.
func TestStrictSlowPathBudget(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s := newFlowStore(t, &c)
	clk := clock.NewFake(t0)
	f, err := flow.New(flow.Config{Instance: "i1", Clock: clk, Mode: flow.ModeColdOnly}, s, telemetry.Discard{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	route := &flow.Route{Strict: true, RateLimit: flow.RateLimit{Max: 100, Interval: time.Second}}
	for i, tc := range []struct {
		name   string
		id     string
		action flow.Action
	}{
		{"first command of a window", "c1", flow.Proceed},
		{"next command, same window", "c2", flow.Proceed},
		{"duplicate of a delivered command", "c1", flow.Drop},
	} {
		clk.Set(t0.Add(time.Duration(i) * 10 * time.Millisecond))
		cmd := &flow.Command{ID: tc.id, Source: "t/s", Target: "tg", Name: "cmd", PayloadHash: "h"}
		d, err := f.Slow(ctx, cmd, route)
		if err != nil {
			t.Fatal(err)
		}
		if d.Action != tc.action {
			t.Fatalf("%s: action %v, want %v", tc.name, d.Action, tc.action)
		}
		if d.Action == flow.Proceed {
			if err := f.Finish(ctx, cmd, route, d, true); err != nil {
				t.Fatal(err)
			}
		}
		got := c.Take().Ops()
		t.Logf("strict slow path, %-34s %d calls: %s", tc.name+":", got.Total(), got.String())
		if got.Total() > 3 {
			t.Errorf("%s: %d DynamoDB calls (%s), over the budget of 3", tc.name, got.Total(), got.String())
		}
	}
}

// TestRegistryCallsPerOperation holds the registry's writes to one
// conditional write plus one changelog put, and its reads to one call.
func TestRegistryCallsPerOperation(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s := newRegistryStore(t, &c)
	by := registry.Actor{Who: "ci", At: t0}
	r := dispatchtest.RegistryRoute("billing", "charge")
	id := registry.RouteID("billing", "charge")
	checkCalls(t, &c, []callCase{
		{"Put/create", func() error { _, err := s.Put(ctx, by, registry.Item{Route: &r}); return err }, map[string]int{"UpdateItem": 1, "PutItem": 1}},
		{"Put/conflict", func() error {
			if _, err := s.Put(ctx, by, registry.Item{Route: &r}); !errors.Is(err, registry.ErrConflict) {
				t.Errorf("create over an existing route: %v", err)
			}
			return nil
		}, map[string]int{"UpdateItem": 1}},
		{"Get", func() error { _, err := s.Get(ctx, id, t0); return err }, map[string]int{"GetItem": 1}},
		{"Load", func() error { _, err := s.Load(ctx, t0); return err }, map[string]int{"Scan": 1}},
		{"History", func() error { _, err := s.History(ctx, id, 0); return err }, map[string]int{"Query": 1}},
		{"Delete", func() error { _, err := s.Delete(ctx, by, id, 1); return err }, map[string]int{"UpdateItem": 1, "PutItem": 1}},
		{"Delete/not found", func() error {
			if _, err := s.Delete(ctx, by, id, 1); !errors.Is(err, registry.ErrNotFound) {
				t.Errorf("second delete: %v", err)
			}
			return nil
		}, map[string]int{"UpdateItem": 1}},
	})
}
