package server

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// MetricKind says how a spec metric is exported: a Count becomes a
// Prometheus counter, an Observe a histogram.
type MetricKind int

// Metric kinds.
const (
	KindCounter MetricKind = iota + 1
	KindHistogram
)

// maxMetricNames bounds the distinct spec metric names one Metrics will
// register; names past it are dropped and counted, so a bug that builds
// names from data cannot grow the registry without end.
const maxMetricNames = 512

// PrometheusName maps a spec metric name (dot-separated CamelCase segments,
// such as Snavio.Cache.ACL.RefreshDuration) to the Prometheus name it is
// exported under:
//
//   - segments become snake_case words joined by "_", acronyms kept whole
//     (ACL -> acl, HMACKey -> hmac_key);
//   - a counter ends in _total (Snavio.Cache.Usage.Fresh ->
//     snavio_cache_usage_fresh_total);
//   - a histogram whose name ends in Duration or Latency measures seconds
//     (the dispatcher observes those in seconds) and gets _seconds
//     (Snavio.Dedup.SlowPathLatency -> snavio_dedup_slow_path_latency_seconds);
//     one already ending in Seconds or Bytes keeps its unit.
func PrometheusName(name string, kind MetricKind) (string, error) {
	if kind != KindCounter && kind != KindHistogram {
		return "", fmt.Errorf("server: metric kind %d is not KindCounter or KindHistogram", kind)
	}
	if name == "" {
		return "", errors.New("server: metric name is empty; use a spec name such as Snavio.Cache.Usage.Fresh")
	}
	var words []string
	for seg := range strings.SplitSeq(name, ".") {
		w, err := snakeSegment(seg)
		if err != nil {
			return "", fmt.Errorf("server: metric name %q: %w", name, err)
		}
		words = append(words, w)
	}
	out := strings.Join(words, "_")
	switch kind {
	case KindCounter:
		if !strings.HasSuffix(out, "_total") {
			out += "_total"
		}
	case KindHistogram:
		if strings.HasSuffix(out, "_duration") || strings.HasSuffix(out, "_latency") {
			out += "_seconds"
		}
	}
	return out, nil
}

// snakeSegment turns one CamelCase segment into snake_case.
func snakeSegment(seg string) (string, error) {
	if seg == "" {
		return "", errors.New("it has an empty segment (two dots in a row, or a dot at an end)")
	}
	if !isASCIILetter(seg[0]) {
		return "", fmt.Errorf("segment %q must start with a letter", seg)
	}
	var b strings.Builder
	for i := 0; i < len(seg); i++ {
		c := seg[i]
		if !isASCIILetter(c) && !(c >= '0' && c <= '9') {
			return "", fmt.Errorf("segment %q has %q; use letters and digits only", seg, c)
		}
		if isUpper(c) && i > 0 {
			prev := seg[i-1]
			nextLower := i+1 < len(seg) && isLower(seg[i+1])
			if isLower(prev) || (prev >= '0' && prev <= '9') || (isUpper(prev) && nextLower) {
				b.WriteByte('_')
			}
		}
		if isUpper(c) {
			c += 'a' - 'A'
		}
		b.WriteByte(c)
	}
	return b.String(), nil
}

func isUpper(c byte) bool       { return c >= 'A' && c <= 'Z' }
func isLower(c byte) bool       { return c >= 'a' && c <= 'z' }
func isASCIILetter(c byte) bool { return isUpper(c) || isLower(c) }

// bucketsFor picks histogram buckets by the unit in the name.
func bucketsFor(promName string) []float64 {
	switch {
	case strings.HasSuffix(promName, "_seconds"):
		return []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	case strings.HasSuffix(promName, "_bytes"):
		b := make([]float64, 10) // 256 B .. 64 MiB, times 4
		for i, v := 0, 256.0; i < len(b); i, v = i+1, v*4 {
			b[i] = v
		}
		return b
	default:
		return []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}
	}
}

// Metrics is the server's metric registry, served by Handler in the
// Prometheus text exposition format. It implements telemetry.Metrics for
// the dispatcher (spec names mapped by PrometheusName, registered on first
// use), records the HTTP golden metrics (request latency, in-flight
// requests, rejections by reason, ingress saturation and entry outcomes)
// and reports the Go runtime and process metrics. All methods are safe for
// concurrent use, never block on I/O, and are no-ops on a nil *Metrics.
type Metrics struct {
	reg *registry

	mu         sync.RWMutex
	counters   map[string]*series
	histograms map[string]histogramSeries

	dropped    *family
	duration   *family
	inFlight   *family
	rejected   *family
	entriesVec *family
	logLines   *family
	denied     *family
	saturation atomic.Pointer[func() float64]
}

// histogramSeries is a spec histogram: its one series and its family.
type histogramSeries struct {
	f *family
	s *series
}

var _ telemetry.Metrics = (*Metrics)(nil)

// NewMetrics returns a Metrics with its own registry, holding the Go
// runtime and process metrics and the HTTP golden metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg:        newRegistry(),
		counters:   make(map[string]*series),
		histograms: make(map[string]histogramSeries),
		dropped: newFamily("snavio_metrics_dropped_total",
			"Dispatcher metric updates dropped, by reason (invalid_name, negative_count, too_many_names, conflict).",
			typeCounter, nil, "reason"),
		duration: newFamily("snavio_http_request_duration_seconds",
			"HTTP request latency by handler and status code.",
			typeHistogram, bucketsFor("_seconds"), "handler", "code"),
		inFlight: newFamily("snavio_http_requests_in_flight",
			"HTTP requests being served, by handler.",
			typeGauge, nil, "handler"),
		rejected: newFamily("snavio_http_rejected_total",
			"HTTP requests refused as a whole, by handler and reason.",
			typeCounter, nil, "handler", "reason"),
		entriesVec: newFamily("snavio_ingress_entries_total",
			"PutEvents entries answered, by result (accepted or failed).",
			typeCounter, nil, "result"),
		logLines: newFamily("snavio_log_lines_suppressed_total",
			"Log lines not written because they repeated a message already logged in the interval, by level (internal/logagg: the count is logged when the interval ends).",
			typeCounter, nil, "level"),
		denied: newFamily("snavio_ingress_access_denied_total",
			"PutEvents entries refused with AccessDeniedException: their Source's tenant is not the signer's.",
			typeCounter, nil),
	}
	saturation := newFamily("snavio_ingress_saturation",
		"Fraction of the ingress in-flight request limit in use, 0 to 1.", typeGauge, nil)
	saturation.fn = func(*scrape) (float64, bool) { return m.saturationNow(), true }
	m.reg.read = readScrape
	m.reg.mustRegister(runtimeFamilies()...)
	m.reg.mustRegister(m.dropped, m.duration, m.inFlight, m.rejected, m.entriesVec, m.logLines, m.denied, saturation)
	return m
}

// Handler serves the metrics in the Prometheus text exposition format.
func (m *Metrics) Handler() http.Handler { return m.reg.handler() }

// Count adds n to the counter mapped from the spec name. A negative n is
// dropped (counters only go up) and counted in snavio_metrics_dropped_total.
func (m *Metrics) Count(name string, n int64) {
	if m == nil {
		return
	}
	if n < 0 {
		m.dropped.with("negative_count").add(1)
		return
	}
	if c := m.counter(name); c != nil {
		c.add(float64(n))
	}
}

// Observe records v in the histogram mapped from the spec name.
func (m *Metrics) Observe(name string, v float64) {
	if m == nil {
		return
	}
	if h := m.histogram(name); h.s != nil {
		h.s.observe(h.f, v)
	}
}

func (m *Metrics) counter(name string) *series {
	m.mu.RLock()
	c, ok := m.counters[name]
	m.mu.RUnlock()
	if ok {
		return c
	}
	return m.register(name, KindCounter).s
}

func (m *Metrics) histogram(name string) histogramSeries {
	m.mu.RLock()
	h, ok := m.histograms[name]
	m.mu.RUnlock()
	if ok {
		return h
	}
	return m.register(name, KindHistogram)
}

// register creates and registers the family of a spec name, or returns
// nothing (and counts the drop) when it cannot.
func (m *Metrics) register(name string, kind MetricKind) histogramSeries {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kind == KindCounter {
		if c, ok := m.counters[name]; ok {
			return histogramSeries{s: c}
		}
	} else if h, ok := m.histograms[name]; ok {
		return h
	}
	if len(m.counters)+len(m.histograms) >= maxMetricNames {
		m.dropped.with("too_many_names").add(1)
		return histogramSeries{}
	}
	prom, err := PrometheusName(name, kind)
	if err != nil {
		m.dropped.with("invalid_name").add(1)
		return histogramSeries{}
	}
	help := "Spec metric " + name + "."
	var f *family
	if kind == KindCounter {
		f = newFamily(prom, help, typeCounter, nil)
	} else {
		f = newFamily(prom, help, typeHistogram, bucketsFor(prom))
	}
	if err := m.reg.register(f); err != nil {
		// Another spec name mapped to the same Prometheus name (say
		// Snavio.A.B and Snavio.AB) or it collides with a built-in.
		m.dropped.with("conflict").add(1)
		return histogramSeries{}
	}
	h := histogramSeries{f: f, s: f.with()}
	if kind == KindCounter {
		m.counters[name] = h.s
	} else {
		m.histograms[name] = h
	}
	return h
}

// ReadAtScrape registers a metric whose one value fn returns at each
// scrape: a counter when its name ends in _total, a gauge otherwise. It is
// for state kept elsewhere (the store's log counts); fn must be cheap and
// safe to call concurrently. The name must be a Prometheus name starting
// with snavio_ and not in use.
func (m *Metrics) ReadAtScrape(name, help string, fn func() float64) error {
	if !strings.HasPrefix(name, "snavio_") || !promName(name) {
		return fmt.Errorf("server: metric name %q: want snavio_ then lower-case letters, digits and underscores", name)
	}
	if help == "" || fn == nil {
		return fmt.Errorf("server: metric %s: give a help text and a function", name)
	}
	typ := typeGauge
	if strings.HasSuffix(name, "_total") {
		typ = typeCounter
	}
	f := newFamily(name, help, typ, nil)
	f.fn = func(*scrape) (float64, bool) { return fn(), true }
	return m.reg.register(f)
}

// Histogram registers a histogram with the given upper bounds (strictly
// increasing, at least one) and returns the function that records a value
// in it. It is for durations measured elsewhere (the store's log syncs);
// the function is safe to call concurrently and never blocks. The name
// must be a Prometheus name starting with snavio_, not ending in _total,
// and not in use.
func (m *Metrics) Histogram(name, help string, buckets []float64) (func(float64), error) {
	if !strings.HasPrefix(name, "snavio_") || !promName(name) || strings.HasSuffix(name, "_total") {
		return nil, fmt.Errorf("server: histogram name %q: want snavio_ then lower-case letters, digits and underscores, not ending in _total", name)
	}
	if help == "" {
		return nil, fmt.Errorf("server: histogram %s: give a help text", name)
	}
	increasing := len(buckets) > 0
	for i := 1; i < len(buckets); i++ {
		increasing = increasing && buckets[i] > buckets[i-1]
	}
	if !increasing {
		return nil, fmt.Errorf("server: histogram %s: buckets %v: give one or more strictly increasing upper bounds", name, buckets)
	}
	f := newFamily(name, help, typeHistogram, slices.Clone(buckets))
	if err := m.reg.register(f); err != nil {
		return nil, err
	}
	s := f.with()
	return func(v float64) { s.observe(f, v) }, nil
}

// promName reports whether s is lower-case letters, digits and
// underscores, starting with a letter.
func promName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isLower(c) || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// reject counts a whole-request refusal.
func (m *Metrics) reject(handler, reason string) {
	if m == nil {
		return
	}
	m.rejected.with(handler, reason).add(1)
}

// entries counts PutEvents entry outcomes.
func (m *Metrics) entries(accepted, failed int) {
	if m == nil {
		return
	}
	m.entriesVec.with("accepted").add(float64(accepted))
	m.entriesVec.with("failed").add(float64(failed))
}

// LogSuppressed counts a log line the log aggregation suppressed, by its
// level's name (logagg.LevelName).
func (m *Metrics) LogSuppressed(level string) {
	if m == nil {
		return
	}
	m.logLines.with(level).add(1)
}

// accessDenied counts an entry refused for its source.
func (m *Metrics) accessDenied() {
	if m == nil {
		return
	}
	m.denied.with().add(1)
}

// setSaturation installs the function the saturation gauge reads.
func (m *Metrics) setSaturation(f func() float64) {
	if m == nil {
		return
	}
	m.saturation.Store(&f)
}

// saturationNow reads the saturation gauge: the fraction of the ingress's
// in-flight request limit in use (0 before an ingress installed it).
func (m *Metrics) saturationNow() float64 {
	if f := m.saturation.Load(); f != nil {
		return (*f)()
	}
	return 0
}

// instrument wraps h with the latency histogram and in-flight gauge,
// timing with now (the injected clock).
func (m *Metrics) instrument(handler string, now func() time.Time, h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	gauge := m.inFlight.with(handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		gauge.add(1)
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			gauge.add(-1)
			m.duration.with(handler, strconv.Itoa(sw.status)).observe(m.duration, now().Sub(start).Seconds())
		}()
		h.ServeHTTP(sw, r)
	})
}

// statusWriter remembers the status code written.
type statusWriter struct {
	http.ResponseWriter
	status      int
	wroteHeader bool
}

func (w *statusWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.status, w.wroteHeader = code, true
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	w.wroteHeader = true
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
