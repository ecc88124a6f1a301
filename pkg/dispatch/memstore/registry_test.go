package memstore_test

import (
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func TestRegistry(t *testing.T) {
	dispatchtest.TestRegistry(t, func(t *testing.T) registry.Store { return memstore.NewRegistry() })
}
