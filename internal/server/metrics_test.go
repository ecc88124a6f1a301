package server

import (
	"fmt"
	"math"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

func TestPrometheusNameMappingTable(t *testing.T) {
	tests := []struct {
		spec string
		kind MetricKind
		want string
	}{
		{telemetry.MetricCacheUsageFresh, KindCounter, "snavio_cache_usage_fresh_total"},
		{telemetry.MetricCacheUsageStale, KindCounter, "snavio_cache_usage_stale_total"},
		{telemetry.MetricCacheUsageExpired, KindCounter, "snavio_cache_usage_expired_total"},
		{telemetry.MetricCacheACLUsageStale, KindCounter, "snavio_cache_acl_usage_stale_total"},
		{telemetry.MetricCacheRoutingUsageStale, KindCounter, "snavio_cache_routing_usage_stale_total"},
		{telemetry.MetricCacheHMACUsageStale, KindCounter, "snavio_cache_hmac_usage_stale_total"},
		{telemetry.MetricCacheACLRefreshDuration, KindHistogram, "snavio_cache_acl_refresh_duration_seconds"},
		{telemetry.MetricCacheRoutingRefreshDuration, KindHistogram, "snavio_cache_routing_refresh_duration_seconds"},
		{telemetry.MetricCacheHMACRefreshDuration, KindHistogram, "snavio_cache_hmac_refresh_duration_seconds"},
		{telemetry.MetricCacheACLStaleWindowSeconds, KindHistogram, "snavio_cache_acl_stale_window_seconds"},
		{telemetry.MetricCacheACLStaleWindowSeconds, KindCounter, "snavio_cache_acl_stale_window_seconds_total"},
		{telemetry.MetricCacheSnapshotLoadFailure, KindCounter, "snavio_cache_snapshot_load_failure_total"},
		{telemetry.MetricSnapshotGenerated, KindCounter, "snavio_snapshot_generated_total"},
		{telemetry.MetricSnapshotSizeBytes, KindHistogram, "snavio_snapshot_size_bytes"},
		{telemetry.MetricSnapshotWriteDuration, KindHistogram, "snavio_snapshot_write_duration_seconds"},
		{telemetry.MetricDedupStrictModeUsage, KindCounter, "snavio_dedup_strict_mode_usage_total"},
		{telemetry.MetricDedupDuplicatesPrevented, KindCounter, "snavio_dedup_duplicates_prevented_total"},
		{telemetry.MetricDedupEscalations, KindCounter, "snavio_dedup_escalations_total"},
		{telemetry.MetricDedupSlowPathLatency, KindHistogram, "snavio_dedup_slow_path_latency_seconds"},
		{flow.MetricTokensPrefetched, KindCounter, "snavio_rate_limit_tokens_prefetched_total"},
		{flow.MetricPrefetchLeaseDenied, KindCounter, "snavio_rate_limit_prefetch_lease_denied_total"},
		{flow.MetricRateLimited, KindCounter, "snavio_rate_limit_rejected_total"},
		{flow.MetricShadowWouldRefuse, KindCounter, "snavio_rate_limit_shadow_would_refuse_total"},
		{flow.MetricWarmPathBans, KindCounter, "snavio_fairness_warm_path_bans_total"},
		{flow.MetricGlobalBans, KindCounter, "snavio_fairness_global_bans_total"},
		{flow.MetricEscalations, KindCounter, "snavio_dispatch_escalations_total"},
		{telemetry.CacheHMAC.RefreshDurationMetric(), KindHistogram, "snavio_cache_hmac_refresh_duration_seconds"},
		{"Snavio.HMACKey.Age2Days", KindHistogram, "snavio_hmac_key_age2_days"},
		{"Snavio.Events.Total", KindCounter, "snavio_events_total"},
	}
	for _, tt := range tests {
		got, err := PrometheusName(tt.spec, tt.kind)
		if err != nil || got != tt.want {
			t.Errorf("PrometheusName(%q, %d) = %q, %v; want %q", tt.spec, tt.kind, got, err, tt.want)
		}
	}
}

func TestPrometheusNameRejects(t *testing.T) {
	for _, name := range []string{"", "Snavio..X", "Snavio.", ".Snavio", "Snavio.1st", "Snavio.Cache-Usage", "Snavio.Café"} {
		if got, err := PrometheusName(name, KindCounter); err == nil {
			t.Errorf("PrometheusName(%q) = %q, want an error", name, got)
		}
	}
	if _, err := PrometheusName("Snavio.X", MetricKind(9)); err == nil {
		t.Error("unknown kind accepted")
	}
}

// family returns the gathered metric family name, or nil.
func family(t *testing.T, m *Metrics, name string) *dto.MetricFamily {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() == name {
			return mf
		}
	}
	return nil
}

func TestMetricsCountAndObserve(t *testing.T) {
	m := NewMetrics()
	m.Count(telemetry.MetricCacheUsageFresh, 2)
	m.Count(telemetry.MetricCacheUsageFresh, 3)
	m.Observe(telemetry.MetricDedupSlowPathLatency, 0.004)
	m.Observe(telemetry.MetricDedupSlowPathLatency, 0.2)
	m.Observe(telemetry.MetricSnapshotSizeBytes, 4096)

	if got := gatheredValue(t, m, "snavio_cache_usage_fresh_total"); got != 5 {
		t.Fatalf("fresh = %v", got)
	}
	h := family(t, m, "snavio_dedup_slow_path_latency_seconds")
	if h == nil || h.GetType() != dto.MetricType_HISTOGRAM {
		t.Fatalf("latency family %v", h)
	}
	if hist := h.GetMetric()[0].GetHistogram(); hist.GetSampleCount() != 2 || math.Abs(hist.GetSampleSum()-0.204) > 1e-9 {
		t.Fatalf("latency histogram count=%d sum=%v", hist.GetSampleCount(), hist.GetSampleSum())
	}
	if b := family(t, m, "snavio_snapshot_size_bytes").GetMetric()[0].GetHistogram().GetBucket(); b[0].GetUpperBound() != 256 {
		t.Fatalf("bytes buckets start at %v", b[0].GetUpperBound())
	}

	// Bad input is dropped and counted, never a panic.
	m.Count("not a name", 1)
	m.Count(telemetry.MetricCacheUsageFresh, -1)
	m.Count("Snavio.A.Bc", 1)
	m.Count("Snavio.ABc", 1)           // also snavio_a_bc_total
	m.Count("Snavio.Http.Rejected", 1) // the HTTP golden metric's name
	drops := family(t, m, "snavio_metrics_dropped_total")
	got := map[string]float64{}
	for _, s := range drops.GetMetric() {
		got[s.GetLabel()[0].GetValue()] = s.GetCounter().GetValue()
	}
	if got["invalid_name"] != 1 || got["negative_count"] != 1 || got["conflict"] != 2 {
		t.Fatalf("dropped = %v", got)
	}

	var nilM *Metrics
	nilM.Count("Snavio.X", 1)
	nilM.Observe("Snavio.X", 1)
}

func TestMetricsBoundsDistinctNames(t *testing.T) {
	m := NewMetrics()
	for i := range maxMetricNames + 5 {
		m.Count(fmt.Sprintf("Snavio.Generated.N%d", i), 1)
	}
	if got := family(t, m, "snavio_metrics_dropped_total").GetMetric()[0].GetCounter().GetValue(); got != 5 {
		t.Fatalf("too_many_names drops = %v, want 5", got)
	}
}

func TestMetricsHandlerServesExpositionFormat(t *testing.T) {
	m := NewMetrics()
	m.Count(telemetry.MetricDedupEscalations, 1)
	w := getPath(m.Handler(), "/metrics")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "snavio_dedup_escalations_total 1") {
		t.Fatalf("metrics: %d %s", w.Code, w.Body)
	}
}
