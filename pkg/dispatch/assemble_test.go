package dispatch_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

// TestAssembleRefuses: a missing port, a bad stage setting or a failed
// load is an error naming it, and no Dispatcher.
func TestAssembleRefuses(t *testing.T) {
	ctx := context.Background()
	valid := func() dispatch.Config {
		return dispatch.Config{Registry: memstore.NewRegistry(), FlowStore: memstore.NewFlow(), Sender: &sink{},
			Clock: clock.NewFake(t0), Flow: flow.Config{Instance: "test"}}
	}
	loadErr := errors.New("snapshot unreadable")
	for name, tc := range map[string]struct {
		edit func(*dispatch.Config)
		want string
	}{
		"no registry":   {func(c *dispatch.Config) { c.Registry = nil }, "Config.Registry"},
		"no flow store": {func(c *dispatch.Config) { c.FlowStore = nil }, "Config.FlowStore"},
		"no sender":     {func(c *dispatch.Config) { c.Sender = nil }, "Config.Sender"},
		"no instance":   {func(c *dispatch.Config) { c.Flow.Instance = "" }, "instance id is empty"},
		"bad jitter":    {func(c *dispatch.Config) { c.Cache.Jitter = 2 }, "dispatch: caches"},
		"load fails": {func(c *dispatch.Config) {
			c.Load = func(context.Context, *cache.Caches) error { return loadErr }
		}, "loading the caches: snapshot unreadable"},
	} {
		t.Run(name, func(t *testing.T) {
			cfg := valid()
			tc.edit(&cfg)
			a, err := dispatch.Assemble(ctx, cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) || a != nil {
				t.Fatalf("Assemble = %v, %v; want an error containing %q", a, err, tc.want)
			}
		})
	}
	if a, err := dispatch.Assemble(ctx, valid()); err != nil || a.Dispatcher == nil || a.Caches == nil || a.Deps.Flow == nil {
		t.Fatalf("Assemble(valid) = %+v, %v", a, err)
	}
}

// TestAssembleLoad: Config.Load replaces the default load, and the
// Dispatcher sees what it installed.
func TestAssembleLoad(t *testing.T) {
	f := newFixture(t, false) // a registry holding source's key, route and ACL
	var loaded bool
	a, err := dispatch.Assemble(context.Background(), dispatch.Config{Registry: f.reg, FlowStore: memstore.NewFlow(), Sender: f.out,
		Clock: f.clk, Flow: flow.Config{Instance: "test"}, Executor: func(g func()) { g() },
		Load: func(ctx context.Context, c *cache.Caches) error { loaded = true; return c.LoadAll(ctx) }})
	if err != nil {
		t.Fatal(err)
	}
	if !loaded {
		t.Fatal("Config.Load was not called")
	}
	if res, _ := a.Dispatcher.Fast(context.Background(), source, f.message(t, uuidN(1), "mailer", "send", `{}`)); res.Outcome != dispatch.Delivered {
		t.Fatalf("Fast = %+v, want delivered from the loaded caches", res)
	}
}
