package telemetry

import (
	"bytes"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/reason"
)

var (
	sent = time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC)
	recv = time.Date(2025, 4, 7, 12, 59, 31, 400_000_000, time.UTC)
)

// full holds every event with every field set, and the spec's field list
// (section E) for it, spelled as JSON keys.
var full = []struct {
	e    Event
	keys []string
	want string
}{
	{Delivered{CommandID: "c1", Source: "t/a", Target: "bot", CommandName: "ping", Timestamp: "2025-04-07T12:58:00Z", Path: PathFast, DispatchLatencyMS: 12,
		Replay: Replay{Replay: true, ReplayReason: "dlq drain", ReplayID: "r1"}},
		[]string{"command_id", "source", "target", "command_name", "timestamp", "path", "dispatch_latency_ms", "replay", "replay_reason", "replay_id"},
		`{"event":"snavio.command.delivered","command_id":"c1","source":"t/a","target":"bot","command_name":"ping","timestamp":"2025-04-07T12:58:00Z","path":"fast","dispatch_latency_ms":12,"replay":true,"replay_reason":"dlq drain","replay_id":"r1"}`},
	{Invalid{CommandID: "c1", Source: "t/a", Target: "bot", CommandName: "ping", Timestamp: "2025-04-07T12:58:00Z", Reason: reason.TimestampTooOld},
		[]string{"command_id", "source", "target", "command_name", "timestamp", "reason"},
		`{"event":"snavio.command.invalid","command_id":"c1","source":"t/a","target":"bot","command_name":"ping","timestamp":"2025-04-07T12:58:00Z","reason":"timestamp_too_old"}`},
	{Failed{CommandID: "c1", Source: "t/a", Target: "bot", CommandName: "ping", Timestamp: "2025-04-07T12:58:00Z", Reason: FailFairnessViolation,
		RetryAfterMS: 30000, ThrottleUntil: time.Date(2025, 4, 7, 15, 12, 0, 0, time.UTC), SourceShare: 0.91, CompetingShare: 0.12, DispatchVolume: 60,
		Replay: Replay{Replay: true, ReplayReason: "x", ReplayID: "r1"}},
		[]string{"command_id", "source", "target", "command_name", "timestamp", "reason", "retry_after_ms", "throttle_until",
			"source_share", "competing_share", "dispatch_volume", "replay", "replay_reason", "replay_id"},
		`{"event":"snavio.command.failed","command_id":"c1","source":"t/a","target":"bot","command_name":"ping","timestamp":"2025-04-07T12:58:00Z","reason":"fairness-violation","retry_after_ms":30000,"throttle_until":"2025-04-07T15:12:00Z","source_share":0.91,"competing_share":0.12,"dispatch_volume":60,"replay":true,"replay_reason":"x","replay_id":"r1"}`},
	{Duplicate{CommandID: "c1", Source: "t/a", Target: "bot", CommandName: "ping", Timestamp: "2025-04-07T12:58:00Z", DedupeMode: "strict"},
		[]string{"command_id", "source", "target", "command_name", "timestamp", "dedupe_mode"},
		`{"event":"snavio.command.duplicate","command_id":"c1","source":"t/a","target":"bot","command_name":"ping","timestamp":"2025-04-07T12:58:00Z","dedupe_mode":"strict"}`},
	{ExecutedAfterACLRevoked{Source: "t/a", Target: "bot", CommandName: "ping", StaleDurationSeconds: 3.5, ACLRevocationTimestamp: sent},
		[]string{"source", "target", "command_name", "stale_duration_seconds", "acl_revocation_timestamp"},
		`{"event":"snavio.command.executed_after_acl_revoked","source":"t/a","target":"bot","command_name":"ping","stale_duration_seconds":3.5,"acl_revocation_timestamp":"2025-04-07T12:58:00Z"}`},
	{WarmPathBan{Source: "t/a", Target: "bot", CommandName: "ping", SourceShare: 0.91, CompetingShare: 0.12, RetryAfterMS: 30000, ThrottleUntil: sent},
		[]string{"source", "target", "command_name", "source_share", "competing_share", "retry_after_ms", "throttle_until"},
		`{"event":"snavio.fairness.warm-path-ban","source":"t/a","target":"bot","command_name":"ping","source_share":0.91,"competing_share":0.12,"retry_after_ms":30000,"throttle_until":"2025-04-07T12:58:00Z"}`},
	{AbuseDetected{Source: "t/a", AffectedTargets: []string{"bot", "mail"}, TotalViolations: 7, BanAppliedUntil: sent},
		[]string{"source", "affected_targets", "total_violations", "ban_applied_until"},
		`{"event":"snavio.fairness.abuse_detected","source":"t/a","affected_targets":["bot","mail"],"total_violations":7,"ban_applied_until":"2025-04-07T12:58:00Z"}`},
	{LegacyKeyUsed{VersionID: "hmac-v1", Source: "t/a", TimeOfLastConfigPoll: sent},
		[]string{"version_id", "source", "time_of_last_config_poll"},
		`{"event":"snavio.secret.legacy_key_used","version_id":"hmac-v1","source":"t/a","time_of_last_config_poll":"2025-04-07T12:58:00Z"}`},
	{KeyExpiryImminent{VersionID: "hmac-v1", Source: "t/a", TimeOfLastConfigPoll: sent},
		[]string{"version_id", "source", "time_of_last_config_poll"},
		`{"event":"snavio.secret.key_expiry_imminent","version_id":"hmac-v1","source":"t/a","time_of_last_config_poll":"2025-04-07T12:58:00Z"}`},
	{SkewNearLimit{CommandID: "c1", Source: "t/a", SentAt: sent, ReceivedAt: recv, SkewSeconds: 91.4},
		[]string{"command_id", "source", "sent_at", "received_at", "skew_seconds"},
		`{"event":"snavio.telemetry.skew_near_limit","command_id":"c1","source":"t/a","sent_at":"2025-04-07T12:58:00Z","received_at":"2025-04-07T12:59:31.4Z","skew_seconds":91.4}`},
	{SkewSample{Source: "t/a", SkewSeconds: 91.4, SentAt: sent, ReceivedAt: recv},
		[]string{"source", "skew_seconds", "sent_at", "received_at"},
		`{"event":"snavio.telemetry.skew_sample","source":"t/a","skew_seconds":91.4,"sent_at":"2025-04-07T12:58:00Z","received_at":"2025-04-07T12:59:31.4Z"}`},
	{Dropped{Tenant: "tenant-xyz", DroppedEvents: 1452, Reason: DroppedQueueUnconsumed, QueueAgeSeconds: 1209600, LastReceivedAt: time.Date(2025, 4, 8, 10, 32, 0, 0, time.UTC)},
		[]string{"tenant", "dropped_events", "reason", "queue_age_seconds", "last_received_at"},
		`{"event":"snavio.telemetry.dropped","tenant":"tenant-xyz","dropped_events":1452,"reason":"queue_unconsumed","queue_age_seconds":1209600,"last_received_at":"2025-04-08T10:32:00Z"}`},
}

func TestCatalogGolden(t *testing.T) {
	names := map[string]bool{}
	for _, tc := range full {
		b, err := Marshal(tc.e)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != tc.want {
			t.Errorf("%s\n got %s\nwant %s", tc.e.EventName(), b, tc.want)
		}
		var m map[string]any
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		var keys []string
		for k := range m {
			if k != "event" {
				keys = append(keys, k)
			}
		}
		slices.Sort(keys)
		want := slices.Sorted(slices.Values(tc.keys))
		if !slices.Equal(keys, want) {
			t.Errorf("%s: keys %v, spec lists %v", tc.e.EventName(), keys, want)
		}
		back, err := Unmarshal(b)
		if err != nil || !reflect.DeepEqual(back, tc.e) {
			t.Errorf("%s: round trip %#v, %v", tc.e.EventName(), back, err)
		}
		names[tc.e.EventName()] = true
	}
	if len(names) != 12 {
		t.Fatalf("catalog has %d events, the spec has 12", len(names))
	}
}

func TestOptionalFieldsOmitted(t *testing.T) {
	for _, tc := range []struct {
		e    Event
		want string
	}{
		{Invalid{Reason: reason.MalformedJSON}, `{"event":"snavio.command.invalid","reason":"malformed_json"}`},
		{Delivered{CommandID: "c", Source: "s", Target: "t", CommandName: "n", Timestamp: "ts", Path: PathSlow},
			`{"event":"snavio.command.delivered","command_id":"c","source":"s","target":"t","command_name":"n","timestamp":"ts","path":"slow","dispatch_latency_ms":0}`},
		{Failed{Reason: FailACLDeny, Source: "s"}, `{"event":"snavio.command.failed","source":"s","reason":"acl-deny"}`},
		{LegacyKeyUsed{VersionID: "hmac-v1", Source: "s"}, `{"event":"snavio.secret.legacy_key_used","version_id":"hmac-v1","source":"s"}`},
		{Failed{Reason: FailRouteMissing, Replay: Replay{ReplayReason: "stray", ReplayID: "r"}}, `{"event":"snavio.command.failed","reason":"route-missing"}`},
	} {
		b, err := Marshal(tc.e)
		if err != nil || string(b) != tc.want {
			t.Errorf("got %s, %v\nwant %s", b, err, tc.want)
		}
	}
}

// TestInvalidAggregate: the aggregate of a source over its invalid budget
// carries suppressed, and round-trips.
func TestInvalidAggregate(t *testing.T) {
	e := Invalid{Source: "t/a", Reason: reason.BadSignature, Suppressed: 7}
	b, err := Marshal(e)
	if want := `{"event":"snavio.command.invalid","source":"t/a","reason":"bad_signature","suppressed":7}`; err != nil || string(b) != want {
		t.Fatalf("got %s, %v\nwant %s", b, err, want)
	}
	if back, err := Unmarshal(b); err != nil || !reflect.DeepEqual(back, e) {
		t.Fatalf("round trip %#v, %v", back, err)
	}
}

func TestAlerts(t *testing.T) {
	var alerting []string
	for _, tc := range full {
		if tc.e.Alert() {
			alerting = append(alerting, tc.e.EventName())
		}
	}
	want := []string{NameInvalid, NameExecutedAfterACLRevoked, NameKeyExpiryImminent, NameDropped}
	if !slices.Equal(alerting, want) {
		t.Fatalf("alerting events %v, want %v", alerting, want)
	}
	// AlertsByName agrees with every catalog event's Alert, field values
	// and all.
	for _, tc := range full {
		if alert, known := AlertsByName(tc.e.EventName()); !known || alert != tc.e.Alert() {
			t.Errorf("AlertsByName(%s) = %v, %v; its Alert says %v", tc.e.EventName(), alert, known, tc.e.Alert())
		}
	}
	if _, known := AlertsByName("snavio.dispatch.escalated"); known {
		t.Error("an event outside the catalog is known")
	}
}

func TestUnmarshalErrors(t *testing.T) {
	for _, in := range []string{`{"event":"snavio.nope"}`, `{}`, `[`, `{"event":"snavio.command.invalid","reason":1}`} {
		if _, err := Unmarshal([]byte(in)); err == nil {
			t.Errorf("Unmarshal(%s) succeeded", in)
		}
	}
	if _, err := Marshal(nil); err == nil {
		t.Error("Marshal(nil) succeeded")
	}
}

func TestMemory(t *testing.T) {
	var m Memory
	m.Emit(Invalid{Reason: reason.BadSignature})
	m.Emit(SkewSample{Source: "s"})
	if ev := m.Events(); len(ev) != 2 || ev[0].EventName() != NameInvalid {
		t.Fatalf("%v", ev)
	}
	m.Reset()
	if len(m.Events()) != 0 {
		t.Fatal("Reset kept events")
	}
	Discard{}.Emit(Invalid{})
}

// TestMetricNamesAreTheSpecs: every internal metric name of spec section
// C, copied literally from the spec's lists ("ACL Refresh Policy", "Cache
// Usage Telemetry", "Cold Start Behavior", "Snapshot Generation",
// "Deduplication Metrics and Monitoring"), is one of the constants, and no
// constant is outside that list.
func TestMetricNamesAreTheSpecs(t *testing.T) {
	spec := []string{
		"Snavio.Cache.Usage.Fresh", "Snavio.Cache.Usage.Stale", "Snavio.Cache.Usage.Expired",
		"Snavio.Cache.ACL.Usage.Stale", "Snavio.Cache.Routing.Usage.Stale", "Snavio.Cache.HMAC.Usage.Stale",
		"Snavio.Cache.ACL.RefreshDuration", "Snavio.Cache.Routing.RefreshDuration", "Snavio.Cache.HMAC.RefreshDuration",
		"Snavio.Cache.ACL.StaleWindowSeconds", "Snavio.Cache.Routing.StaleWindowSeconds", "Snavio.Cache.HMAC.StaleWindowSeconds",
		"Snavio.Cache.SnapshotLoadFailure",
		"Snavio.Snapshot.Generated", "Snavio.Snapshot.SizeBytes", "Snavio.Snapshot.WriteDuration",
		"Snavio.Dedup.StrictModeUsage", "Snavio.Dedup.DuplicatesPrevented", "Snavio.Dedup.Escalations", "Snavio.Dedup.SlowPathLatency",
	}
	ours := []string{
		MetricCacheUsageFresh, MetricCacheUsageStale, MetricCacheUsageExpired,
		MetricCacheACLUsageStale, MetricCacheRoutingUsageStale, MetricCacheHMACUsageStale,
		MetricCacheACLRefreshDuration, MetricCacheRoutingRefreshDuration, MetricCacheHMACRefreshDuration,
		MetricCacheACLStaleWindowSeconds, MetricCacheRoutingStaleWindowSeconds, MetricCacheHMACStaleWindowSeconds,
		MetricCacheSnapshotLoadFailure,
		MetricSnapshotGenerated, MetricSnapshotSizeBytes, MetricSnapshotWriteDuration,
		MetricDedupStrictModeUsage, MetricDedupDuplicatesPrevented, MetricDedupEscalations, MetricDedupSlowPathLatency,
	}
	if !slices.Equal(spec, ours) {
		for i := range min(len(spec), len(ours)) {
			if spec[i] != ours[i] {
				t.Errorf("metric %d is %q; the spec says %q", i, ours[i], spec[i])
			}
		}
		t.Fatalf("%d metric constants, the spec lists %d", len(ours), len(spec))
	}
	for _, ct := range []CacheType{CacheACL, CacheRouting, CacheHMAC} {
		for _, m := range []string{ct.UsageStaleMetric(), ct.RefreshDurationMetric(), ct.StaleWindowSecondsMetric()} {
			if !slices.Contains(spec, m) {
				t.Errorf("derived metric %q is not in the spec", m)
			}
		}
	}
}

func TestMetricNames(t *testing.T) {
	if CacheACL.UsageStaleMetric() != MetricCacheACLUsageStale ||
		CacheRouting.RefreshDurationMetric() != MetricCacheRoutingRefreshDuration ||
		CacheHMAC.StaleWindowSecondsMetric() != MetricCacheHMACStaleWindowSeconds {
		t.Fatal("derived metric names differ from the constants")
	}
}

// marshalGeneric is Marshal without the hand-written Delivered encoder.
func marshalGeneric(v Delivered) ([]byte, error) {
	if !v.Replay.Replay {
		v.Replay = Replay{}
	}
	body, err := json.Marshal(v, json.Deterministic(true))
	if err != nil {
		return nil, err
	}
	return append([]byte(`{"event":"`+NameDelivered+`",`), body[1:]...), nil
}

func TestMarshalDeliveredMatchesGeneric(t *testing.T) {
	for _, v := range []Delivered{
		{},
		{CommandID: "c", Source: "acme/app", Target: "t", CommandName: "n", Timestamp: "2026-11-24T21:00:00.000Z", Path: PathFast, DispatchLatencyMS: -3},
		{CommandID: "\"quoted\"\\ <tag> & \u2028 \x01 é", Path: PathSlow, DispatchLatencyMS: 1 << 62},
		{CommandID: "c", Replay: Replay{Replay: true, ReplayReason: "INC-1", ReplayID: "r"}},
		{CommandID: "c", Replay: Replay{Replay: true}},
		{CommandID: "c", Replay: Replay{ReplayReason: "ignored without replay", ReplayID: "x"}},
	} {
		got, err := Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if want, _ := marshalGeneric(v); !bytes.Equal(got, want) {
			t.Errorf("Marshal(%+v)\n got %s\nwant %s", v, got, want)
		}
	}
	// Invalid UTF-8 is refused by both.
	if _, err := Marshal(Delivered{Source: "\xff"}); err == nil || !strings.Contains(err.Error(), "source") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}

func FuzzMarshalDelivered(f *testing.F) {
	f.Add("c", "acme/app", "t", "n", "2026-11-24T21:00:00Z", "fast", int64(5), false, "", "")
	f.Add("\"\\\x00", "\xff", "", "\u2028", "", "slow", int64(-1), true, "why", "id")
	f.Fuzz(func(t *testing.T, id, src, tgt, name, ts, path string, lat int64, replay bool, reason, rid string) {
		v := Delivered{CommandID: id, Source: src, Target: tgt, CommandName: name, Timestamp: ts, Path: Path(path), DispatchLatencyMS: lat,
			Replay: Replay{Replay: replay, ReplayReason: reason, ReplayID: rid}}
		got, err := Marshal(v)
		want, werr := marshalGeneric(v)
		if (err != nil) != (werr != nil) {
			t.Fatalf("Marshal(%+v): error %v; the generic encoder's %v", v, err, werr)
		}
		if err != nil {
			return
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("Marshal(%+v)\n got %s\nwant %s", v, got, want)
		}
		back, err := Unmarshal(got)
		if err != nil {
			t.Fatalf("Unmarshal(%s): %v", got, err)
		}
		if _, ok := back.(Delivered); !ok {
			t.Fatalf("Unmarshal gave %T", back)
		}
	})
}

// benchDelivered is a typical delivered event.
var benchDelivered = Delivered{CommandID: "0f8fad5b-d9cb-469f-a165-70867728950e", Source: "acme/app", Target: "orders", CommandName: "create",
	Timestamp: "2026-11-24T21:00:00.000Z", Path: PathFast, DispatchLatencyMS: 2}

func BenchmarkMarshalDelivered(b *testing.B) {
	var e Event = benchDelivered // boxed once: the caller's cost, not Marshal's
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Marshal(e); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalDeliveredGeneric(b *testing.B) {
	v := benchDelivered
	b.ReportAllocs()
	for b.Loop() {
		if _, err := marshalGeneric(v); err != nil {
			b.Fatal(err)
		}
	}
}

func TestValidStream(t *testing.T) {
	for s, want := range map[string]bool{"acme": true, "Acme.eu-1_x": true, PlatformTenant: true,
		"": false, "_platformx": false, "-acme": false, "acme!": false, "a b": false, "a/b": false, strings.Repeat("a", 65): false} {
		if got := ValidStream(s); got != want {
			t.Errorf("ValidStream(%q) = %v", s, got)
		}
	}
}

// platformEvent stands for the platform's own events (escalations, cache
// refreshes), which live outside this package.
type platformEvent struct{}

func (platformEvent) EventName() string { return "snavio.cache.refreshed" }
func (platformEvent) Alert() bool       { return false }

func TestStreamOf(t *testing.T) {
	for _, c := range full {
		want := "t"
		if d, ok := c.e.(Dropped); ok {
			want = d.Tenant
		}
		if got, catalog := StreamOf(c.e); got != want || !catalog {
			t.Errorf("StreamOf(%s) = %q, %v; want %q, true", c.e.EventName(), got, catalog, want)
		}
	}
	for _, src := range []string{"", "noslash-but-!", "_platform/x", "a b/c"} {
		if got, catalog := StreamOf(Invalid{Source: src}); got != PlatformTenant || !catalog {
			t.Errorf("StreamOf(Invalid{Source: %q}) = %q, %v; want the platform stream of the catalog", src, got, catalog)
		}
	}
	if got, catalog := StreamOf(Delivered{Source: "acme"}); got != "acme" || !catalog {
		t.Errorf("a source without '/' is all tenant: got %q, %v", got, catalog)
	}
	if got, catalog := StreamOf(platformEvent{}); got != PlatformTenant || catalog {
		t.Errorf("StreamOf(a platform event) = %q, %v; want %q, false", got, catalog, PlatformTenant)
	}
}
