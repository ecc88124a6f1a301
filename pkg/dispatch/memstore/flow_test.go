package memstore_test

import (
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/dispatchtest"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

func TestFlowContract(t *testing.T) {
	dispatchtest.TestFlowStore(t, func(*testing.T) flow.Store { return memstore.NewFlow() })
}
