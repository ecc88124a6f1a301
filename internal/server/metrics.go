package server

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

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
		return prometheus.ExponentialBuckets(256, 4, 10) // 256 B .. 64 MiB
	default:
		return prometheus.DefBuckets
	}
}

// Metrics is the server's Prometheus registry. It implements
// telemetry.Metrics for the dispatcher (spec names mapped by
// PrometheusName, registered on first use) and records the HTTP golden
// metrics: request latency, in-flight requests, rejections by reason,
// ingress saturation and entry outcomes. All methods are safe for
// concurrent use, never block on I/O, and are no-ops on a nil *Metrics.
type Metrics struct {
	reg *prometheus.Registry

	mu         sync.RWMutex
	counters   map[string]prometheus.Counter
	histograms map[string]prometheus.Histogram

	dropped    *prometheus.CounterVec
	duration   *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	rejected   *prometheus.CounterVec
	entriesVec *prometheus.CounterVec
	saturation atomic.Pointer[func() float64]
}

var _ telemetry.Metrics = (*Metrics)(nil)

// NewMetrics returns a Metrics with its own registry, holding the Go
// runtime and process collectors and the HTTP golden metrics.
func NewMetrics() *Metrics {
	m := &Metrics{
		reg:        prometheus.NewRegistry(),
		counters:   make(map[string]prometheus.Counter),
		histograms: make(map[string]prometheus.Histogram),
		dropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snavio_metrics_dropped_total",
			Help: "Dispatcher metric updates dropped, by reason (invalid_name, negative_count, too_many_names, conflict).",
		}, []string{"reason"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "snavio_http_request_duration_seconds",
			Help:    "HTTP request latency by handler and status code.",
			Buckets: bucketsFor("_seconds"),
		}, []string{"handler", "code"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "snavio_http_requests_in_flight",
			Help: "HTTP requests being served, by handler.",
		}, []string{"handler"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snavio_http_rejected_total",
			Help: "HTTP requests refused as a whole, by handler and reason.",
		}, []string{"handler", "reason"}),
		entriesVec: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "snavio_ingress_entries_total",
			Help: "PutEvents entries answered, by result (accepted or failed).",
		}, []string{"result"}),
	}
	saturation := prometheus.NewGaugeFunc(prometheus.GaugeOpts{
		Name: "snavio_ingress_saturation",
		Help: "Fraction of the ingress in-flight request limit in use, 0 to 1.",
	}, func() float64 {
		if f := m.saturation.Load(); f != nil {
			return (*f)()
		}
		return 0
	})
	m.reg.MustRegister(
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		m.dropped, m.duration, m.inFlight, m.rejected, m.entriesVec, saturation,
	)
	return m
}

// Registry returns the registry, for callers that add collectors of their own.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Count adds n to the counter mapped from the spec name. A negative n is
// dropped (counters only go up) and counted in snavio_metrics_dropped_total.
func (m *Metrics) Count(name string, n int64) {
	if m == nil {
		return
	}
	if n < 0 {
		m.dropped.WithLabelValues("negative_count").Inc()
		return
	}
	if c := m.counter(name); c != nil {
		c.Add(float64(n))
	}
}

// Observe records v in the histogram mapped from the spec name.
func (m *Metrics) Observe(name string, v float64) {
	if m == nil {
		return
	}
	if h := m.histogram(name); h != nil {
		h.Observe(v)
	}
}

func (m *Metrics) counter(name string) prometheus.Counter {
	m.mu.RLock()
	c, ok := m.counters[name]
	m.mu.RUnlock()
	if ok {
		return c
	}
	c, _ = m.register(name, KindCounter).(prometheus.Counter)
	return c
}

func (m *Metrics) histogram(name string) prometheus.Histogram {
	m.mu.RLock()
	h, ok := m.histograms[name]
	m.mu.RUnlock()
	if ok {
		return h
	}
	h, _ = m.register(name, KindHistogram).(prometheus.Histogram)
	return h
}

// register creates and registers the collector for a spec name, or returns
// nil (and counts the drop) when it cannot.
func (m *Metrics) register(name string, kind MetricKind) prometheus.Collector {
	m.mu.Lock()
	defer m.mu.Unlock()
	if kind == KindCounter {
		if c, ok := m.counters[name]; ok {
			return c
		}
	} else if h, ok := m.histograms[name]; ok {
		return h
	}
	if len(m.counters)+len(m.histograms) >= maxMetricNames {
		m.dropped.WithLabelValues("too_many_names").Inc()
		return nil
	}
	prom, err := PrometheusName(name, kind)
	if err != nil {
		m.dropped.WithLabelValues("invalid_name").Inc()
		return nil
	}
	help := "Spec metric " + name + "."
	var col prometheus.Collector
	if kind == KindCounter {
		col = prometheus.NewCounter(prometheus.CounterOpts{Name: prom, Help: help})
	} else {
		col = prometheus.NewHistogram(prometheus.HistogramOpts{Name: prom, Help: help, Buckets: bucketsFor(prom)})
	}
	if err := m.reg.Register(col); err != nil {
		// Another spec name mapped to the same Prometheus name (say
		// Snavio.A.B and Snavio.AB) or it collides with a built-in.
		m.dropped.WithLabelValues("conflict").Inc()
		return nil
	}
	if kind == KindCounter {
		m.counters[name] = col.(prometheus.Counter)
	} else {
		m.histograms[name] = col.(prometheus.Histogram)
	}
	return col
}

// reject counts a whole-request refusal.
func (m *Metrics) reject(handler, reason string) {
	if m == nil {
		return
	}
	m.rejected.WithLabelValues(handler, reason).Inc()
}

// entries counts PutEvents entry outcomes.
func (m *Metrics) entries(accepted, failed int) {
	if m == nil {
		return
	}
	m.entriesVec.WithLabelValues("accepted").Add(float64(accepted))
	m.entriesVec.WithLabelValues("failed").Add(float64(failed))
}

// setSaturation installs the function the saturation gauge reads.
func (m *Metrics) setSaturation(f func() float64) {
	if m == nil {
		return
	}
	m.saturation.Store(&f)
}

// instrument wraps h with the latency histogram and in-flight gauge,
// timing with now (the injected clock).
func (m *Metrics) instrument(handler string, now func() time.Time, h http.Handler) http.Handler {
	if m == nil {
		return h
	}
	gauge := m.inFlight.WithLabelValues(handler)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := now()
		gauge.Inc()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		defer func() {
			gauge.Dec()
			m.duration.WithLabelValues(handler, strconv.Itoa(sw.status)).Observe(now().Sub(start).Seconds())
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
