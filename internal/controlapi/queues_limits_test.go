package controlapi

import (
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// The queue limits the API documents (and the CLI checks before it calls)
// are the store's.
func TestWireLimitsAreTheStores(t *testing.T) {
	for _, c := range []struct {
		name       string
		wire, real int64
	}{
		{"QueueMaxNameLen", wire.QueueMaxNameLen, localqueue.MaxQueueNameLen},
		{"QueueMaxReceiveBatch", wire.QueueMaxReceiveBatch, localqueue.MaxReceiveBatch},
		{"QueueMaxVisibilityTimeout", int64(wire.QueueMaxVisibilityTimeout), int64(localqueue.MaxVisibilityTimeout)},
		{"QueueMaxMaxReceives", wire.QueueMaxMaxReceives, localqueue.MaxMaxReceives},
		{"QueueDefaultMaxDepth", wire.QueueDefaultMaxDepth, localqueue.DefaultMaxDepth},
		{"QueueMaxMaxDepth", wire.QueueMaxMaxDepth, localqueue.MaxMaxDepth},
		{"QueueMaxCount", wire.QueueMaxCount, localqueue.MaxQueues},
		{"TelemetryMaxLimit", wire.TelemetryMaxLimit, embedded.MaxReadPage},
	} {
		if c.wire != c.real {
			t.Errorf("wire.%s = %d, the store's is %d: change the wire constant (it is the documented API limit)", c.name, c.wire, c.real)
		}
	}
}
