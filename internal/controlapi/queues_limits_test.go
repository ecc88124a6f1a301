package controlapi

import (
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/store/embedded"
)

// The queue limits the API documents (and the CLI checks before it calls)
// are the store's.
func TestWireLimitsAreTheStores(t *testing.T) {
	for _, c := range []struct {
		name       string
		wire, real int64
	}{
		{"QueueMaxNameLen", wire.QueueMaxNameLen, embedded.MaxQueueNameLen},
		{"QueueMaxReceiveBatch", wire.QueueMaxReceiveBatch, embedded.MaxReceiveBatch},
		{"QueueMaxVisibilityTimeout", int64(wire.QueueMaxVisibilityTimeout), int64(embedded.MaxVisibilityTimeout)},
		{"QueueMaxMaxReceives", wire.QueueMaxMaxReceives, embedded.MaxMaxReceives},
		{"QueueDefaultMaxDepth", wire.QueueDefaultMaxDepth, embedded.DefaultMaxDepth},
		{"QueueMaxMaxDepth", wire.QueueMaxMaxDepth, embedded.MaxMaxDepth},
		{"QueueMaxCount", wire.QueueMaxCount, embedded.MaxQueues},
		{"TelemetryMaxLimit", wire.TelemetryMaxLimit, embedded.MaxReadPage},
	} {
		if c.wire != c.real {
			t.Errorf("wire.%s = %d, the store's is %d: change the wire constant (it is the documented API limit)", c.name, c.wire, c.real)
		}
	}
}
