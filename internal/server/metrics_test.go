package server

import (
	"bytes"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/common/expfmt"

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

// expoSample is one parsed sample line.
type expoSample struct {
	name   string
	labels map[string]string
	value  float64
}

// expoFamily is one parsed metric family.
type expoFamily struct {
	name, help, typ string
	samples         []expoSample
}

// scrapeMetrics serves m's /metrics and parses the body strictly; it also
// checks that Prometheus's own text parser (expfmt, test-only: it does not
// link into snavio) reads the same families with the same types.
func scrapeMetrics(t testing.TB, m *Metrics) map[string]*expoFamily {
	t.Helper()
	w := httptest.NewRecorder()
	m.Handler().ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if w.Code != 200 || w.Header().Get("Content-Type") != expoContentType {
		t.Fatalf("/metrics: %d %q", w.Code, w.Header().Get("Content-Type"))
	}
	return parseChecked(t, w.Body.Bytes())
}

func parseChecked(t testing.TB, body []byte) map[string]*expoFamily {
	t.Helper()
	fams, err := parseExposition(body)
	if err != nil {
		t.Fatalf("exposition: %v\n%s", err, body)
	}
	var p expfmt.TextParser
	ref, err := p.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("expfmt rejects the exposition: %v\n%s", err, body)
	}
	if len(ref) != len(fams) {
		t.Fatalf("expfmt reads %d families, the strict parser %d", len(ref), len(fams))
	}
	for name, f := range fams {
		r, ok := ref[name]
		if !ok || !strings.EqualFold(r.GetType().String(), f.typ) || r.GetHelp() != f.help {
			t.Fatalf("family %s: expfmt has %v", name, r)
		}
	}
	return fams
}

// parseExposition parses the text exposition format strictly, as the
// server writes it: every family has # HELP then # TYPE, once, in name
// order, before its samples; sample names belong to their family; label
// names are valid, values quoted with only \\, \" and \n escapes; counters
// are not negative; histogram series have increasing le bounds ending in
// +Inf, cumulative counts, a _sum, and a _count equal to the +Inf bucket.
func parseExposition(body []byte) (map[string]*expoFamily, error) {
	if len(body) > 0 && body[len(body)-1] != '\n' {
		return nil, fmt.Errorf("body does not end in a newline")
	}
	if !utf8.Valid(body) {
		return nil, fmt.Errorf("body is not valid UTF-8")
	}
	fams := map[string]*expoFamily{}
	var cur *expoFamily
	var last string
	lines := strings.Split(strings.TrimSuffix(string(body), "\n"), "\n")
	if len(body) == 0 {
		lines = nil
	}
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if rest, ok := strings.CutPrefix(line, "# HELP "); ok {
			name, help, _ := strings.Cut(rest, " ")
			if !validName(name) {
				return nil, fmt.Errorf("line %d: bad family name %q", i+1, name)
			}
			if _, dup := fams[name]; dup || name <= last {
				return nil, fmt.Errorf("line %d: family %s repeated or out of order (after %s)", i+1, name, last)
			}
			h, err := unescape(strings.TrimLeft(help, " \t"), false) // blanks before the text separate it, as in expfmt
			if err != nil {
				return nil, fmt.Errorf("line %d: help: %v", i+1, err)
			}
			i++
			if i >= len(lines) {
				return nil, fmt.Errorf("line %d: # HELP without # TYPE", i)
			}
			typ, ok := strings.CutPrefix(lines[i], "# TYPE "+name+" ")
			if !ok || (typ != "counter" && typ != "gauge" && typ != "histogram") {
				return nil, fmt.Errorf("line %d: want # TYPE %s counter|gauge|histogram, got %q", i+1, name, lines[i])
			}
			cur = &expoFamily{name: name, help: h, typ: typ}
			fams[name], last = cur, name
			continue
		}
		if strings.HasPrefix(line, "#") || cur == nil {
			return nil, fmt.Errorf("line %d: %q is not a sample of a declared family", i+1, line)
		}
		s, err := parseSample(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %v", i+1, err)
		}
		okName := s.name == cur.name
		if cur.typ == "histogram" {
			okName = s.name == cur.name+"_bucket" || s.name == cur.name+"_sum" || s.name == cur.name+"_count"
		}
		if !okName {
			return nil, fmt.Errorf("line %d: sample %s in family %s", i+1, s.name, cur.name)
		}
		if cur.typ == "counter" && (s.value < 0 || math.IsNaN(s.value)) {
			return nil, fmt.Errorf("line %d: counter value %v", i+1, s.value)
		}
		cur.samples = append(cur.samples, s)
	}
	for _, f := range fams {
		if len(f.samples) == 0 {
			return nil, fmt.Errorf("family %s has no samples", f.name)
		}
		if f.typ == "histogram" {
			if err := checkHistogram(f); err != nil {
				return nil, err
			}
		}
	}
	return fams, nil
}

func checkHistogram(f *expoFamily) error {
	type hs struct {
		les    []float64
		counts []float64
		sum    bool
		count  float64
		hasCnt bool
	}
	series := map[string]*hs{}
	key := func(l map[string]string) string {
		var ks []string
		for k, v := range l {
			if k != "le" {
				ks = append(ks, k+"="+v)
			}
		}
		sort.Strings(ks)
		return strings.Join(ks, ",")
	}
	for _, s := range f.samples {
		k := key(s.labels)
		h := series[k]
		if h == nil {
			h = &hs{}
			series[k] = h
		}
		switch s.name {
		case f.name + "_bucket":
			le, ok := s.labels["le"]
			if !ok {
				return fmt.Errorf("%s{%s}: bucket without le", f.name, k)
			}
			v, err := parseFloat(le)
			if err != nil {
				return fmt.Errorf("%s{%s}: le %q", f.name, k, le)
			}
			if n := len(h.les); n > 0 && (v <= h.les[n-1] || s.value < h.counts[n-1]) {
				return fmt.Errorf("%s{%s}: bucket le=%v count %v after le=%v count %v", f.name, k, v, s.value, h.les[n-1], h.counts[n-1])
			}
			h.les, h.counts = append(h.les, v), append(h.counts, s.value)
		case f.name + "_sum":
			h.sum = true
		case f.name + "_count":
			h.count, h.hasCnt = s.value, true
		}
	}
	for k, h := range series {
		n := len(h.les)
		if n == 0 || !math.IsInf(h.les[n-1], 1) || !h.sum || !h.hasCnt || h.count != h.counts[n-1] {
			return fmt.Errorf("%s{%s}: histogram incomplete or inconsistent: %+v", f.name, k, h)
		}
	}
	return nil
}

func validName(s string) bool {
	if s == "" {
		return false
	}
	for i, c := range s {
		if !(c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

func parseSample(line string) (expoSample, error) {
	s := expoSample{labels: map[string]string{}}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return s, fmt.Errorf("sample %q has no value", line)
	}
	s.name, line = line[:i], line[i:]
	if !validName(s.name) || strings.Contains(s.name, ":") {
		return s, fmt.Errorf("bad sample name %q", s.name)
	}
	if strings.HasPrefix(line, "{") {
		line = line[1:]
		for {
			eq := strings.Index(line, `="`)
			if eq < 0 {
				return s, fmt.Errorf("label without =\"")
			}
			name := line[:eq]
			if !validName(name) || strings.Contains(name, ":") || strings.HasPrefix(name, "__") {
				return s, fmt.Errorf("bad label name %q", name)
			}
			if _, dup := s.labels[name]; dup {
				return s, fmt.Errorf("label %s repeated", name)
			}
			line = line[eq+2:]
			end := -1
			for j := 0; j < len(line); j++ {
				if line[j] == '\\' {
					j++
					continue
				}
				if line[j] == '"' {
					end = j
					break
				}
			}
			if end < 0 {
				return s, fmt.Errorf("label %s value is not closed", name)
			}
			v, err := unescape(line[:end], true)
			if err != nil {
				return s, fmt.Errorf("label %s: %v", name, err)
			}
			s.labels[name] = v
			line = line[end+1:]
			if strings.HasPrefix(line, ",") {
				line = line[1:]
				continue
			}
			if !strings.HasPrefix(line, "}") {
				return s, fmt.Errorf("labels not closed by }")
			}
			line = line[1:]
			break
		}
	}
	val, ok := strings.CutPrefix(line, " ")
	if !ok || strings.ContainsAny(val, " \t") {
		return s, fmt.Errorf("want one space then the value (no timestamp), got %q", line)
	}
	v, err := parseFloat(val)
	if err != nil {
		return s, err
	}
	s.value = v
	return s, nil
}

func parseFloat(s string) (float64, error) {
	switch s {
	case "+Inf":
		return math.Inf(1), nil
	case "-Inf":
		return math.Inf(-1), nil
	case "NaN":
		return math.NaN(), nil
	}
	if s == "" || strings.ContainsAny(s, "xXpP_") || strings.EqualFold(s, "inf") || strings.EqualFold(s, "infinity") {
		return 0, fmt.Errorf("value %q is not a float as the format spells it", s)
	}
	return strconv.ParseFloat(s, 64)
}

func unescape(s string, quoted bool) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c == '\n' || (quoted && c == '"') {
			return "", fmt.Errorf("raw %q in %q", c, s)
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i == len(s) {
			return "", fmt.Errorf("dangling backslash in %q", s)
		}
		switch s[i] {
		case '\\':
			b.WriteByte('\\')
		case 'n':
			b.WriteByte('\n')
		case '"':
			if !quoted {
				return "", fmt.Errorf("escaped quote in help %q", s)
			}
			b.WriteByte('"')
		default:
			return "", fmt.Errorf("unknown escape \\%c in %q", s[i], s)
		}
	}
	return b.String(), nil
}

// gatheredValue returns the value of the single series of a gauge or
// counter family in m's exposition.
func gatheredValue(t testing.TB, m *Metrics, family string) float64 {
	t.Helper()
	f := scrapeMetrics(t, m)[family]
	if f == nil {
		t.Fatalf("no family %s", family)
	}
	if len(f.samples) != 1 {
		t.Fatalf("%s has %d series", family, len(f.samples))
	}
	return f.samples[0].value
}

// sampleValue returns the value of the sample name{labels} in fams.
func sampleValue(t testing.TB, fams map[string]*expoFamily, family, name string, labels map[string]string) float64 {
	t.Helper()
	f := fams[family]
	if f == nil {
		t.Fatalf("no family %s", family)
	}
next:
	for _, s := range f.samples {
		if s.name != name || len(s.labels) != len(labels) {
			continue
		}
		for k, v := range labels {
			if s.labels[k] != v {
				continue next
			}
		}
		return s.value
	}
	t.Fatalf("no sample %s%v in %s", name, labels, family)
	return 0
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
	fams := scrapeMetrics(t, m)
	const lat = "snavio_dedup_slow_path_latency_seconds"
	if h := fams[lat]; h == nil || h.typ != "histogram" || h.help != "Spec metric Snavio.Dedup.SlowPathLatency." {
		t.Fatalf("latency family %+v", h)
	}
	if n, sum := sampleValue(t, fams, lat, lat+"_count", nil), sampleValue(t, fams, lat, lat+"_sum", nil); n != 2 || math.Abs(sum-0.204) > 1e-9 {
		t.Fatalf("latency histogram count=%v sum=%v", n, sum)
	}
	for le, want := range map[string]float64{"0.0025": 0, "0.005": 1, "0.1": 1, "0.25": 2, "+Inf": 2} {
		if got := sampleValue(t, fams, lat, lat+"_bucket", map[string]string{"le": le}); got != want {
			t.Errorf("latency bucket le=%s = %v, want %v", le, got, want)
		}
	}
	const size = "snavio_snapshot_size_bytes"
	if b := fams[size].samples[0]; b.labels["le"] != "256" || b.value != 0 {
		t.Fatalf("bytes buckets start at %+v", b)
	}
	if got := sampleValue(t, fams, size, size+"_bucket", map[string]string{"le": "6.7108864e+07"}); got != 1 {
		t.Fatalf("bytes buckets end: le=64MiB count %v", got)
	}

	// Bad input is dropped and counted, never a panic.
	m.Count("not a name", 1)
	m.Count(telemetry.MetricCacheUsageFresh, -1)
	m.Count("Snavio.A.Bc", 1)
	m.Count("Snavio.ABc", 1)                 // also snavio_a_bc_total
	m.Count("Snavio.Http.Rejected", 1)       // the HTTP golden metric's name
	m.Observe("Snavio.Ingress.Entries", 1)   // snavio_ingress_entries: its _total is a built-in, but not its samples
	m.Count("Snavio.Go.Goroutines", 1)       // go_goroutines is taken, snavio_go_goroutines_total is not
	m.Observe("Snavio.Cache.Usage.Fresh", 1) // a histogram snavio_cache_usage_fresh next to the counter ..._fresh_total: allowed
	m.Count("Snavio.Http.RequestDuration.Seconds.Count", 1)
	m.Observe("Snavio.Http.RequestDuration.Seconds", 1) // snavio_http_request_duration_seconds: the golden histogram
	fams = scrapeMetrics(t, m)
	got := map[string]float64{}
	for _, s := range fams["snavio_metrics_dropped_total"].samples {
		got[s.labels["reason"]] = s.value
	}
	if got["invalid_name"] != 1 || got["negative_count"] != 1 || got["conflict"] != 3 || len(got) != 3 {
		t.Fatalf("dropped = %v", got)
	}
	// snavio_http_request_duration_seconds_count_total is a counter of its
	// own; the histogram's samples are ..._count without _total.
	if v := sampleValue(t, fams, "snavio_http_request_duration_seconds_count_total", "snavio_http_request_duration_seconds_count_total", nil); v != 1 {
		t.Fatalf("count_total = %v", v)
	}

	var nilM *Metrics
	nilM.Count("Snavio.X", 1)
	nilM.Observe("Snavio.X", 1)
}

func TestMetricsRegistryRefusesSampleNameCollisions(t *testing.T) {
	r := newRegistry()
	r.mustRegister(newFamily("a", "h", typeHistogram, []float64{1}))
	for _, f := range []*family{
		newFamily("a", "h", typeCounter, nil),
		newFamily("a_count", "h", typeCounter, nil),
		newFamily("a_bucket", "h", typeGauge, nil),
		newFamily("a_sum", "h", typeHistogram, []float64{1}),
	} {
		if err := r.register(f); err == nil {
			t.Errorf("%s registered beside histogram a", f.name)
		}
	}
	r.mustRegister(newFamily("b_sum", "h", typeCounter, nil))
	if err := r.register(newFamily("b", "h", typeHistogram, []float64{1})); err == nil {
		t.Error("histogram b registered beside counter b_sum")
	}
}

func TestMetricsBoundsDistinctNames(t *testing.T) {
	m := NewMetrics()
	for i := range maxMetricNames + 5 {
		m.Count(fmt.Sprintf("Snavio.Generated.N%d", i), 1)
	}
	fams := scrapeMetrics(t, m)
	if got := sampleValue(t, fams, "snavio_metrics_dropped_total", "snavio_metrics_dropped_total", map[string]string{"reason": "too_many_names"}); got != 5 {
		t.Fatalf("too_many_names drops = %v, want 5", got)
	}
}

func TestMetricsHandlerServesExpositionFormat(t *testing.T) {
	m := NewMetrics()
	m.Count(telemetry.MetricDedupEscalations, 1)
	w := getPath(m.Handler(), "/metrics")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "\nsnavio_dedup_escalations_total 1\n") {
		t.Fatalf("metrics: %d %s", w.Code, w.Body)
	}
	fams := parseChecked(t, w.Body.Bytes())
	// A vector no one used has no samples, so no family; a function gauge always has one.
	for name, want := range map[string]bool{"snavio_http_rejected_total": false, "snavio_ingress_saturation": true, "go_goroutines": true, "go_memstats_alloc_bytes": true} {
		if _, ok := fams[name]; ok != want {
			t.Errorf("family %s present = %v, want %v", name, ok, want)
		}
	}
	if v := sampleValue(t, fams, "go_info", "go_info", map[string]string{"version": runtime.Version()}); v != 1 {
		t.Errorf("go_info = %v", v)
	}
	if runtime.GOOS == "linux" {
		if f := fams["process_cpu_seconds_total"]; f == nil || f.samples[0].value < 0 {
			t.Errorf("process_cpu_seconds_total = %+v", f)
		}
		for _, name := range []string{"process_resident_memory_bytes", "process_virtual_memory_bytes", "process_start_time_seconds", "process_open_fds", "process_max_fds"} {
			f := fams[name]
			if f == nil || f.samples[0].value <= 0 {
				t.Errorf("%s = %+v, want a positive value", name, f)
			}
		}
	}
	h := httptest.NewRecorder()
	m.Handler().ServeHTTP(h, httptest.NewRequest(http.MethodHead, "/metrics", nil))
	if h.Code != 200 || h.Body.Len() != 0 || h.Header().Get("Content-Type") != expoContentType {
		t.Errorf("HEAD: %d %q body %d bytes", h.Code, h.Header().Get("Content-Type"), h.Body.Len())
	}
}

func TestExpositionEscapesAndSpecialValues(t *testing.T) {
	r := newRegistry()
	g := newFamily("x_gauge", "help with \\ backslash, \"quotes\" and a\nnewline", typeGauge, nil, "v")
	h := newFamily("x_hist", "h", typeHistogram, []float64{-1, 0, 1}, "v")
	r.mustRegister(g, h)
	values := []string{`back\slash`, `quo"te`, "new\nline", "bad\xffutf8", "", "ünïcode"}
	for i, v := range values {
		g.with(v).add(float64(i) - 2.5)
	}
	g.with("inf").add(math.Inf(1))
	g.with("nan").add(math.NaN())
	hs := h.with("a")
	for _, v := range []float64{-1, -0.5, 0, 1, 1.0000001, math.Inf(1), math.NaN()} {
		hs.observe(h, v)
	}
	var buf bytes.Buffer
	if err := r.write(&buf); err != nil {
		t.Fatal(err)
	}
	fams := parseChecked(t, buf.Bytes())
	if fams["x_gauge"].help != g.help {
		t.Errorf("help round trip: %q", fams["x_gauge"].help)
	}
	for i, v := range values {
		want := strings.ToValidUTF8(v, "\uFFFD")
		if got := sampleValue(t, fams, "x_gauge", "x_gauge", map[string]string{"v": want}); got != float64(i)-2.5 {
			t.Errorf("label %q: %v", v, got)
		}
	}
	if v := sampleValue(t, fams, "x_gauge", "x_gauge", map[string]string{"v": "inf"}); !math.IsInf(v, 1) {
		t.Errorf("inf gauge %v", v)
	}
	if v := sampleValue(t, fams, "x_gauge", "x_gauge", map[string]string{"v": "nan"}); !math.IsNaN(v) {
		t.Errorf("nan gauge %v", v)
	}
	// le is inclusive: -1 falls in le=-1, 0 in le=0, 1 in le=1; 1.0000001,
	// +Inf and NaN only in +Inf.
	for le, want := range map[string]float64{"-1": 1, "0": 3, "1": 4, "+Inf": 7} {
		if got := sampleValue(t, fams, "x_hist", "x_hist_bucket", map[string]string{"v": "a", "le": le}); got != want {
			t.Errorf("bucket le=%s = %v, want %v", le, got, want)
		}
	}
}

func TestMetricsConcurrentUpdatesAndScrapes(t *testing.T) {
	m := NewMetrics()
	const workers, per = 8, 500
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range per {
				m.Count(telemetry.MetricDedupEscalations, 1)
				m.Observe(telemetry.MetricDedupSlowPathLatency, float64(i%7)/100)
				m.reject("putevents", fmt.Sprintf("r%d", w%3))
			}
		}()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for range 20 {
			scrapeMetrics(t, m) // every scrape is valid, _count equal to +Inf, mid-update
		}
	}()
	wg.Wait()
	<-done
	fams := scrapeMetrics(t, m)
	if got := gatheredValue(t, m, "snavio_dedup_escalations_total"); got != workers*per {
		t.Fatalf("escalations = %v", got)
	}
	const lat = "snavio_dedup_slow_path_latency_seconds"
	if got := sampleValue(t, fams, lat, lat+"_count", nil); got != workers*per {
		t.Fatalf("latency count = %v", got)
	}
}

func TestParseProcStat(t *testing.T) {
	line := "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 1 0 0 0 150 50 0 0 20 0 9 0 123400 1000000 2500 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
	st, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if st != (procStat{cpuTicks: 200, startTicks: 123400, vsize: 1000000, rssPages: 2500}) {
		t.Fatalf("parsed %+v", st)
	}
	ps := processFromStat(st, 1700000000, 4096)
	if ps.cpuSeconds != 2 || ps.residentBytes != 2500*4096 || ps.virtualBytes != 1e6 || ps.startTime != 1700001234 {
		t.Fatalf("stats %+v", ps)
	}
	for _, bad := range []string{"", "4242 cmd S 1", "1 (c) S 1 2 3", strings.Replace(line, " 150 ", " x ", 1), strings.Replace(line, " 2500 ", " -x ", 1)} {
		if _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("parseProcStat(%q) accepted", bad)
		}
	}
	if b, err := parseBootTime([]byte("cpu 1 2 3\nbtime 1700000000\nprocesses 5\n")); err != nil || b != 1700000000 {
		t.Fatalf("btime %d %v", b, err)
	}
	for _, bad := range []string{"", "cpu 1\n", "btime x\n", "btime -5\n", "btime 0\n"} {
		if _, err := parseBootTime([]byte(bad)); err == nil {
			t.Errorf("parseBootTime(%q) accepted", bad)
		}
	}
	if runtime.GOOS == "linux" {
		if ps := readProcess(); !ps.ok || ps.startTime <= 0 || ps.openFDs <= 0 || ps.residentBytes <= 0 {
			t.Fatalf("readProcess on Linux: %+v", ps)
		}
	}
}

func FuzzParseProcStat(f *testing.F) {
	f.Add([]byte("4242 (cmd) S 1 4242 4242 0 -1 4194560 1 0 0 0 150 50 0 0 20 0 9 0 123400 1000000 2500 0\n"))
	f.Add([]byte("1 ((x)) R"))
	f.Add([]byte("btime 1700000000\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if st, err := parseProcStat(data); err == nil {
			if ps := processFromStat(st, 1, 4096); ps.cpuSeconds < 0 || ps.virtualBytes < 0 {
				t.Fatalf("negative figures from %q: %+v", data, ps)
			}
		}
		if b, err := parseBootTime(data); err == nil && b <= 0 {
			t.Fatalf("btime %d accepted from %q", b, data)
		}
	})
}

// FuzzExposition writes a gauge and a histogram with arbitrary help, label
// values and values, and requires both parsers to read back exactly what
// was written.
func FuzzExposition(f *testing.F) {
	f.Add("help", "value", 1.5, 0.3)
	f.Add("a\\b\nc\"d", "q\"\\\n\xff", math.Inf(-1), math.NaN())
	f.Add("", "", 0.0, -7.0)
	f.Fuzz(func(t *testing.T, help, label string, v, obs float64) {
		r := newRegistry()
		g := newFamily("fz_gauge", help, typeGauge, nil, "l")
		h := newFamily("fz_hist", help, typeHistogram, []float64{-1, 0, 0.5, 10}, "l")
		r.mustRegister(g, h)
		g.with(label).add(v)
		h.with(label).observe(h, obs)
		var buf bytes.Buffer
		if err := r.write(&buf); err != nil {
			t.Fatal(err)
		}
		fams := parseChecked(t, buf.Bytes())
		wantHelp, wantLabel := strings.TrimLeft(strings.ToValidUTF8(help, "\uFFFD"), " \t"), strings.ToValidUTF8(label, "\uFFFD")
		if fams["fz_gauge"].help != wantHelp {
			t.Fatalf("help %q read back as %q", help, fams["fz_gauge"].help)
		}
		got := sampleValue(t, fams, "fz_gauge", "fz_gauge", map[string]string{"l": wantLabel})
		if got != v && !(math.IsNaN(got) && math.IsNaN(v)) {
			t.Fatalf("gauge %v read back as %v", v, got)
		}
		if n := sampleValue(t, fams, "fz_hist", "fz_hist_count", map[string]string{"l": wantLabel}); n != 1 {
			t.Fatalf("histogram count %v", n)
		}
	})
}

// TestReadAtScrape: a metric read from elsewhere at each scrape is a
// counter when its name ends in _total and a gauge otherwise, carries the
// value of that scrape, and bad or taken names are refused.
func TestReadAtScrape(t *testing.T) {
	m := NewMetrics()
	var frames float64
	if err := m.ReadAtScrape("snavio_test_frames_total", "Frames.", func() float64 { return frames }); err != nil {
		t.Fatal(err)
	}
	if err := m.ReadAtScrape("snavio_test_segments", "Segments.", func() float64 { return 3 }); err != nil {
		t.Fatal(err)
	}
	frames = 7
	fams := scrapeMetrics(t, m)
	if f := fams["snavio_test_frames_total"]; f == nil || f.typ != "counter" || f.help != "Frames." {
		t.Fatalf("counter family: %+v", f)
	}
	if f := fams["snavio_test_segments"]; f == nil || f.typ != "gauge" {
		t.Fatalf("gauge family: %+v", f)
	}
	if got := sampleValue(t, fams, "snavio_test_frames_total", "snavio_test_frames_total", nil); got != 7 {
		t.Fatalf("frames = %v, want 7 (the value at the scrape)", got)
	}
	for _, c := range []struct {
		name, help string
		fn         func() float64
	}{
		{"test_frames_total", "h", func() float64 { return 0 }},        // no snavio_ prefix
		{"snavio_Frames", "h", func() float64 { return 0 }},            // upper case
		{"snavio_frames-total", "h", func() float64 { return 0 }},      // a dash
		{"snavio_test_frames_total", "h", func() float64 { return 0 }}, // taken
		{"snavio_x", "", func() float64 { return 0 }},                  // no help
		{"snavio_y", "h", nil},                                         // no function
	} {
		if err := m.ReadAtScrape(c.name, c.help, c.fn); err == nil {
			t.Errorf("ReadAtScrape(%q, %q) registered", c.name, c.help)
		}
	}
}

func TestHistogram(t *testing.T) {
	m := NewMetrics()
	observe, err := m.Histogram("snavio_test_sync_duration_seconds", "Syncs.", []float64{.0001, .001, .01})
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []float64{.00005, .0005, .0005, .5} {
		observe(v)
	}
	fams := scrapeMetrics(t, m)
	const fam = "snavio_test_sync_duration_seconds"
	if f := fams[fam]; f == nil || f.typ != "histogram" || f.help != "Syncs." {
		t.Fatalf("histogram family: %+v", f)
	}
	for le, want := range map[string]float64{"0.0001": 1, "0.001": 3, "0.01": 3, "+Inf": 4} {
		if got := sampleValue(t, fams, fam, fam+"_bucket", map[string]string{"le": le}); got != want {
			t.Errorf("bucket le=%s: %v, want %v", le, got, want)
		}
	}
	if got := sampleValue(t, fams, fam, fam+"_count", nil); got != 4 {
		t.Errorf("count %v, want 4", got)
	}
	if got := sampleValue(t, fams, fam, fam+"_sum", nil); math.Abs(got-.50105) > 1e-9 {
		t.Errorf("sum %v, want 0.50105", got)
	}
	for _, c := range []struct {
		name, help string
		buckets    []float64
	}{
		{"test_sync_seconds", "h", []float64{1}},                 // no snavio_ prefix
		{"snavio_syncs_total", "h", []float64{1}},                // a counter's name
		{"snavio_Sync_seconds", "h", []float64{1}},               // upper case
		{"snavio_test_sync_duration_seconds", "h", []float64{1}}, // taken
		{"snavio_x_seconds", "", []float64{1}},                   // no help
		{"snavio_y_seconds", "h", nil},                           // no buckets
		{"snavio_z_seconds", "h", []float64{.1, .1}},             // not increasing
		{"snavio_w_seconds", "h", []float64{1, .5}},              // decreasing
	} {
		if _, err := m.Histogram(c.name, c.help, c.buckets); err == nil {
			t.Errorf("Histogram(%q, %q, %v) registered", c.name, c.help, c.buckets)
		}
	}
}
