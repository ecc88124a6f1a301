package routing_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/routing"
)

const benchEntries = 10_000

// benchKeys are the (source, target, command) triples looked up, built
// as fresh strings as a parsed message would carry them.
func benchKeys() [][3]string {
	ks := make([][3]string, benchEntries)
	for i := range ks {
		ks[i] = [3]string{fmt.Sprintf("tenant-%d/svc", i%97), fmt.Sprintf("target-%d", i%500), fmt.Sprintf("command-%d", i)}
	}
	return ks
}

// warmRouter returns a router over warm caches of 10k routes and 10k ACLs
// for ks, fresh for the whole run.
func warmRouter(b *testing.B, ks [][3]string) *routing.Router {
	d := registry.Data{}
	for _, k := range ks {
		d.Routes = append(d.Routes, dispatchtest.RegistryRoute(k[1], k[2]))
		a := dispatchtest.RegistryACL(k[0], k[1], k[2])
		a.Profile = registry.ProfileLow
		d.ACLs = append(d.ACLs, a)
	}
	c, err := cache.New(cache.Config{Routing: cache.TTL{Fresh: time.Hour, Stale: 2 * time.Hour},
		Profiles: map[registry.Profile]cache.TTL{registry.ProfileLow: {Fresh: time.Hour, Stale: 2 * time.Hour}}},
		cache.Deps{Reader: memstore.NewRegistry()})
	if err != nil {
		b.Fatal(err)
	}
	sys := clock.System()
	if err := c.Seed(&d, sys.Now()); err != nil {
		b.Fatal(err)
	}
	r, err := routing.New(c, memstore.NewRegistry(), sys)
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkFastLookup resolves route and ACL for a message from warm
// caches of 10k routes and 10k ACLs, as the dispatcher's fast stage does:
// FastAt at the time the shield received the message (the shield has read
// the clock already). BenchmarkFastLookupClock is the same with a clock
// read of its own.
func BenchmarkFastLookup(b *testing.B) {
	ks := benchKeys()
	r := warmRouter(b, ks)
	received := time.Now()
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := &ks[i%len(ks)]
		if dec := r.FastAt(k[0], k[1], k[2], received); !dec.Deliver {
			b.Fatalf("%v: %+v", k, dec)
		}
		i++
	}
}

// BenchmarkFastLookupClock is BenchmarkFastLookup through Router.Fast,
// which reads the system clock itself: the difference is one clock read.
func BenchmarkFastLookupClock(b *testing.B) {
	ks := benchKeys()
	r := warmRouter(b, ks)
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := &ks[i%len(ks)]
		if dec := r.Fast(k[0], k[1], k[2]); !dec.Deliver {
			b.Fatalf("%v: %+v", k, dec)
		}
		i++
	}
}

// BenchmarkFloorLookup is the floor of BenchmarkFastLookup: one Go map
// lookup with an equivalent composite (source, target, command) key in a
// map of the same size.
func BenchmarkFloorLookup(b *testing.B) {
	ks := benchKeys()
	type key struct{ s, t, c string }
	m := make(map[key]*registry.Route, len(ks))
	for _, k := range ks {
		r := dispatchtest.RegistryRoute(k[1], k[2])
		m[key{k[0], k[1], k[2]}] = &r
	}
	b.ReportAllocs()
	b.ResetTimer()
	i := 0
	for b.Loop() {
		k := &ks[i%len(ks)]
		if m[key{k[0], k[1], k[2]}] == nil {
			b.Fatal(k)
		}
		i++
	}
}
