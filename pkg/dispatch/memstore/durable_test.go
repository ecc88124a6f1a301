package memstore_test

import (
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

func TestDurabilityContract(t *testing.T) {
	dispatchtest.TestDurability(t, func(*testing.T) dispatchtest.Durability {
		a := &memstore.Archive{}
		return dispatchtest.Durability{Archive: a, Handoff: memstore.NewHandoff(clock.NewFake(time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC))), Archived: a.Get}
	})
}
