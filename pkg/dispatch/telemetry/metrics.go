package telemetry

// Internal metric names of the dispatcher. These are platform metrics
// (CloudWatch, /metrics), not tenant telemetry.
const (
	// Cache usage by freshness state, all cache types together.
	MetricCacheUsageFresh   = "Snavio.Cache.Usage.Fresh"
	MetricCacheUsageStale   = "Snavio.Cache.Usage.Stale"
	MetricCacheUsageExpired = "Snavio.Cache.Usage.Expired"

	// Stale usage per cache type.
	MetricCacheACLUsageStale     = "Snavio.Cache.ACL.Usage.Stale"
	MetricCacheRoutingUsageStale = "Snavio.Cache.Routing.Usage.Stale"
	MetricCacheHMACUsageStale    = "Snavio.Cache.HMAC.Usage.Stale"

	// Refresh duration per cache type.
	MetricCacheACLRefreshDuration     = "Snavio.Cache.ACL.RefreshDuration"
	MetricCacheRoutingRefreshDuration = "Snavio.Cache.Routing.RefreshDuration"
	MetricCacheHMACRefreshDuration    = "Snavio.Cache.HMAC.RefreshDuration"

	// Seconds spent in the stale window per cache type.
	MetricCacheACLStaleWindowSeconds     = "Snavio.Cache.ACL.StaleWindowSeconds"
	MetricCacheRoutingStaleWindowSeconds = "Snavio.Cache.Routing.StaleWindowSeconds"
	MetricCacheHMACStaleWindowSeconds    = "Snavio.Cache.HMAC.StaleWindowSeconds"

	// A cold start fell back from the S3 snapshot to DynamoDB.
	MetricCacheSnapshotLoadFailure = "Snavio.Cache.SnapshotLoadFailure"

	// Snapshot generation.
	MetricSnapshotGenerated     = "Snavio.Snapshot.Generated"
	MetricSnapshotSizeBytes     = "Snavio.Snapshot.SizeBytes"
	MetricSnapshotWriteDuration = "Snavio.Snapshot.WriteDuration"

	// Strict deduplication.
	MetricDedupStrictModeUsage     = "Snavio.Dedup.StrictModeUsage"
	MetricDedupDuplicatesPrevented = "Snavio.Dedup.DuplicatesPrevented"
	MetricDedupEscalations         = "Snavio.Dedup.Escalations"
	MetricDedupSlowPathLatency     = "Snavio.Dedup.SlowPathLatency"
)

// CacheType is a cache of the dispatcher, as named in metric names.
type CacheType string

// Cache types.
const (
	CacheACL     CacheType = "ACL"
	CacheRouting CacheType = "Routing"
	CacheHMAC    CacheType = "HMAC"
)

// UsageStaleMetric returns Snavio.Cache.<t>.Usage.Stale.
func (t CacheType) UsageStaleMetric() string { return "Snavio.Cache." + string(t) + ".Usage.Stale" }

// RefreshDurationMetric returns Snavio.Cache.<t>.RefreshDuration.
func (t CacheType) RefreshDurationMetric() string {
	return "Snavio.Cache." + string(t) + ".RefreshDuration"
}

// StaleWindowSecondsMetric returns Snavio.Cache.<t>.StaleWindowSeconds.
func (t CacheType) StaleWindowSecondsMetric() string {
	return "Snavio.Cache." + string(t) + ".StaleWindowSeconds"
}

// Metrics receives internal metrics. Implementations must be safe for
// concurrent use and must not block.
type Metrics interface {
	// Count adds n to the counter name.
	Count(name string, n int64)
	// Observe records one observation v (seconds, bytes, ...) of name.
	Observe(name string, v float64)
}
