package telemetryapi

import (
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// What a client encodes is what the server parses back.
func TestTelemetryQueryRoundTrip(t *testing.T) {
	for _, q := range []wire.TelemetryQuery{
		{Limit: wire.TelemetryDefaultLimit},
		{Tenant: "acme", After: 7, HasAfter: true, Limit: 50, Wait: 25 * time.Second},
		{Tenant: "acme", After: 0, HasAfter: true, Limit: 1},
		{Since: time.Date(2026, 11, 21, 12, 0, 0, 123456789, time.UTC), Limit: 1000, Wait: 1500 * time.Millisecond},
	} {
		got, err := ParseTelemetryQuery(q.Values(), time.Minute)
		if err != nil {
			t.Fatalf("%+v: %v", q, err)
		}
		if got != q {
			t.Errorf("%+v encoded as %q parses as %+v", q, q.Values().Encode(), got)
		}
	}
}
