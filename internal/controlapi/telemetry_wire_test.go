package controlapi

import (
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
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

// FuzzTelemetryQueryRoundTrip: every valid query a client can build
// survives its encoding.
func FuzzTelemetryQueryRoundTrip(f *testing.F) {
	f.Add("acme", uint64(7), true, int64(0), 50, int64(25000))
	f.Add("", uint64(0), false, int64(1795000000123456789), 1000, int64(1))
	f.Fuzz(func(t *testing.T, tenant string, after uint64, hasAfter bool, since int64, limit int, waitMS int64) {
		q := wire.TelemetryQuery{Tenant: tenant, After: after, HasAfter: hasAfter, Limit: limit, Wait: time.Duration(waitMS) * time.Millisecond}
		if since > 0 && !hasAfter {
			q.Since = time.Unix(0, since).UTC()
		}
		if !hasAfter {
			q.After = 0
		}
		valid := (tenant == "" || telemetry.ValidStream(tenant)) && after != ^uint64(0) &&
			limit >= 1 && limit <= wire.TelemetryMaxLimit && waitMS >= 0 && q.Wait <= time.Minute
		if !valid {
			return
		}
		got, err := ParseTelemetryQuery(q.Values(), time.Minute)
		if err != nil {
			t.Fatalf("%+v encoded as %q: %v", q, q.Values().Encode(), err)
		}
		if got != q {
			t.Fatalf("%+v encoded as %q parses as %+v", q, q.Values().Encode(), got)
		}
	})
}
