package controlapi

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Query limits and defaults.
const (
	// DefaultMaxWait caps wait: a longer wait is shortened to it.
	DefaultMaxWait = 30 * time.Second
)

// TelemetryQueryError is a bad query parameter.
type TelemetryQueryError struct {
	Param, Msg, Fix string
}

func (e *TelemetryQueryError) Error() string { return "query parameter " + e.Param + ": " + e.Msg }

var queryParams = []string{"tenant", "after", "since", "limit", "wait"}

// ParseTelemetryQuery validates the query of GET /v1/telemetry. Every parameter is
// optional and may appear once; unknown ones are refused, so a typo is
// not silently ignored. wait is a Go duration ("5s", "250ms") or whole
// seconds ("5"); a wait over maxWait is shortened to maxWait.
func ParseTelemetryQuery(v url.Values, maxWait time.Duration) (wire.TelemetryQuery, error) {
	q := wire.TelemetryQuery{Limit: wire.TelemetryDefaultLimit}
	for k, vals := range v {
		known := false
		for _, p := range queryParams {
			known = known || k == p
		}
		if !known {
			return q, &TelemetryQueryError{Param: fmt.Sprintf("%.40q", k), Msg: "unknown", Fix: "use " + strings.Join(queryParams, ", ")}
		}
		if len(vals) != 1 {
			return q, &TelemetryQueryError{Param: k, Msg: fmt.Sprintf("given %d times", len(vals)), Fix: "give it once"}
		}
	}
	if t, ok := one(v, "tenant"); ok {
		if !telemetry.ValidStream(t) {
			return q, &TelemetryQueryError{Param: "tenant", Msg: fmt.Sprintf("%.60q is not a tenant id", t),
				Fix: "give the part of a source before '/': " + telemetry.StreamRule}
		}
		q.Tenant = t
	}
	if s, ok := one(v, "after"); ok {
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || n == ^uint64(0) {
			return q, &TelemetryQueryError{Param: "after", Msg: fmt.Sprintf("%.40q is not a sequence number", s),
				Fix: "give the next_after of the previous answer (a whole number), or 0 to read from the start"}
		}
		q.After, q.HasAfter = n, true
	}
	if s, ok := one(v, "since"); ok {
		if q.HasAfter {
			return q, &TelemetryQueryError{Param: "since", Msg: "given with after", Fix: "give after to continue a read, or since to start one at a time, not both"}
		}
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil || t.IsZero() {
			return q, &TelemetryQueryError{Param: "since", Msg: fmt.Sprintf("%.60q is not an RFC 3339 time", s), Fix: "give a time such as 2026-11-21T12:00:00Z"}
		}
		q.Since = t
	}
	if s, ok := one(v, "limit"); ok {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > wire.TelemetryMaxLimit {
			return q, &TelemetryQueryError{Param: "limit", Msg: fmt.Sprintf("%.40q is not a page size", s), Fix: fmt.Sprintf("give a whole number from 1 to %d", wire.TelemetryMaxLimit)}
		}
		q.Limit = n
	}
	if s, ok := one(v, "wait"); ok {
		d, err := parseWait(s)
		if err != nil {
			return q, &TelemetryQueryError{Param: "wait", Msg: fmt.Sprintf("%.40q: %v", s, err), Fix: fmt.Sprintf("give a duration such as 5s, up to %s (0: answer at once)", maxWait)}
		}
		q.Wait = min(d, maxWait)
	}
	return q, nil
}

func one(v url.Values, k string) (string, bool) {
	vals, ok := v[k]
	if !ok {
		return "", false
	}
	return vals[0], true
}

func parseWait(s string) (time.Duration, error) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Errorf("not a duration")
	}
	if d < 0 {
		return 0, fmt.Errorf("negative")
	}
	return d, nil
}
