package server

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"
)

// This file is the Prometheus text exposition format (version 0.0.4)
// written by hand, for the few metric kinds the server has: counters and
// gauges (with labels, or read from a function at scrape time) and
// histograms with fixed buckets. It replaces prometheus/client_golang,
// whose package init (protobuf descriptors, procfs, runtime/metrics) cost
// every snavio command about 0.65 ms of start-up; see docs/startup.md.
// Nothing here runs before NewMetrics is called.

// expoContentType is the media type of the text exposition format.
const expoContentType = "text/plain; version=0.0.4; charset=utf-8"

// famType is the TYPE of a metric family.
type famType uint8

const (
	typeCounter famType = iota + 1
	typeGauge
	typeHistogram
)

func (t famType) String() string {
	switch t {
	case typeCounter:
		return "counter"
	case typeGauge:
		return "gauge"
	default:
		return "histogram"
	}
}

// scrape holds what the read-at-scrape families share, read once per
// exposition (one ReadMemStats, one read of /proc/self/stat).
type scrape struct {
	rt   runtimeStats
	proc processStats
}

// family is one metric family: its name, help, type, label names and its
// series. A family with fn has exactly one series, read at scrape time
// with the constant label values fnValues.
type family struct {
	name    string
	help    string
	typ     famType
	labels  []string
	order   []int     // label indexes in name order: samples list labels sorted, as client_golang did
	buckets []float64 // histograms: sorted upper bounds, +Inf implied

	fn       func(*scrape) (float64, bool) // false: omit the sample this scrape
	fnValues []string

	mu     sync.RWMutex
	series map[string]*series
}

// series is one labelled time series of a family. Values are float64 bits
// updated with compare-and-swap, so updates never take a lock.
type series struct {
	values []string
	bits   atomic.Uint64   // counter or gauge value
	counts []atomic.Uint64 // histogram: one per bucket, the last is +Inf (not cumulative)
	sum    atomic.Uint64   // histogram: sum of observations
}

func newFamily(name, help string, typ famType, buckets []float64, labels ...string) *family {
	order := make([]int, len(labels))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(i, j int) bool { return labels[order[i]] < labels[order[j]] })
	return &family{name: name, help: help, typ: typ, labels: labels, order: order, buckets: buckets, series: map[string]*series{}}
}

// with returns the series of the label values, creating it on first use.
// It panics when the number of values differs from the family's labels:
// every caller is in this package with a fixed list.
func (f *family) with(values ...string) *series {
	if len(values) != len(f.labels) {
		panic(fmt.Sprintf("server: metric %s takes %d label values, got %d", f.name, len(f.labels), len(values)))
	}
	key := strings.Join(values, "\xff")
	f.mu.RLock()
	s, ok := f.series[key]
	f.mu.RUnlock()
	if ok {
		return s
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if s, ok := f.series[key]; ok {
		return s
	}
	s = &series{values: append([]string(nil), values...)}
	if f.typ == typeHistogram {
		s.counts = make([]atomic.Uint64, len(f.buckets)+1)
	}
	f.series[key] = s
	return s
}

// addFloat adds d to the float64 stored as bits in u.
func addFloat(u *atomic.Uint64, d float64) {
	for {
		old := u.Load()
		if u.CompareAndSwap(old, math.Float64bits(math.Float64frombits(old)+d)) {
			return
		}
	}
}

// add adds d to a counter or gauge.
func (s *series) add(d float64) { addFloat(&s.bits, d) }

// value reads a counter or gauge.
func (s *series) value() float64 { return math.Float64frombits(s.bits.Load()) }

// observe records v in a histogram series of f. NaN counts in +Inf, as
// client_golang did; the sum then becomes NaN, which the format allows.
func (s *series) observe(f *family, v float64) {
	i := sort.SearchFloat64s(f.buckets, v) // first bound >= v: the "le" bucket
	s.counts[i].Add(1)
	addFloat(&s.sum, v)
}

// registry holds the families /metrics serves. Family names, and the
// sample names a histogram adds (_bucket, _sum, _count), are unique.
type registry struct {
	mu       sync.RWMutex
	families map[string]*family
	taken    map[string]bool // every sample name in use
	read     func(*scrape)   // fills the scrape state; nil: nothing to read
}

func newRegistry() *registry {
	return &registry{families: map[string]*family{}, taken: map[string]bool{}}
}

// sampleNames are the names a family's samples use.
func sampleNames(f *family) []string {
	if f.typ == typeHistogram {
		return []string{f.name, f.name + "_bucket", f.name + "_sum", f.name + "_count"}
	}
	return []string{f.name}
}

// register adds f, or reports that one of its sample names is in use.
func (r *registry) register(f *family) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	names := sampleNames(f)
	for _, n := range names {
		if r.taken[n] {
			return fmt.Errorf("server: metric %s collides with a registered metric on the sample name %s", f.name, n)
		}
	}
	for _, n := range names {
		r.taken[n] = true
	}
	r.families[f.name] = f
	return nil
}

// mustRegister registers the server's own families, whose names are fixed.
func (r *registry) mustRegister(fs ...*family) {
	for _, f := range fs {
		if err := r.register(f); err != nil {
			panic(err)
		}
	}
}

// handler serves the registry in the text exposition format.
func (r *registry) handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", expoContentType)
		if req.Method == http.MethodHead {
			return
		}
		_ = r.write(w) // an error here is the client going away
	})
}

// write writes every family, sorted by name, series sorted by label values.
func (r *registry) write(out io.Writer) error {
	var st scrape
	if r.read != nil {
		r.read(&st)
	}
	r.mu.RLock()
	fams := make([]*family, 0, len(r.families))
	for _, f := range r.families {
		fams = append(fams, f)
	}
	r.mu.RUnlock()
	sort.Slice(fams, func(i, j int) bool { return fams[i].name < fams[j].name })

	w := bufio.NewWriter(out)
	for _, f := range fams {
		if f.fn != nil {
			v, ok := f.fn(&st)
			if !ok {
				continue
			}
			writeHeader(w, f)
			writeSample(w, f, f.name, f.fnValues, "", 0, v)
			continue
		}
		f.mu.RLock()
		ss := make([]*series, 0, len(f.series))
		for _, s := range f.series {
			ss = append(ss, s)
		}
		f.mu.RUnlock()
		if len(ss) == 0 {
			continue // a vector no one has used yet has no samples
		}
		sort.Slice(ss, func(i, j int) bool { return lessValues(ss[i].values, ss[j].values) })
		writeHeader(w, f)
		for _, s := range ss {
			if f.typ != typeHistogram {
				writeSample(w, f, f.name, s.values, "", 0, s.value())
				continue
			}
			// One pass over the buckets gives cumulative counts and a
			// _count equal to the +Inf bucket, whatever runs concurrently.
			var cum uint64
			for i := range s.counts {
				cum += s.counts[i].Load()
				le := math.Inf(1)
				if i < len(f.buckets) {
					le = f.buckets[i]
				}
				writeSample(w, f, f.name+"_bucket", s.values, "le", le, float64(cum))
			}
			writeSample(w, f, f.name+"_sum", s.values, "", 0, math.Float64frombits(s.sum.Load()))
			writeSample(w, f, f.name+"_count", s.values, "", 0, float64(cum))
		}
	}
	return w.Flush()
}

func lessValues(a, b []string) bool {
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// writeHeader writes the # HELP and # TYPE lines of f.
func writeHeader(w *bufio.Writer, f *family) {
	w.WriteString("# HELP ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	writeEscaped(w, f.help, false)
	w.WriteString("\n# TYPE ")
	w.WriteString(f.name)
	w.WriteByte(' ')
	w.WriteString(f.typ.String())
	w.WriteByte('\n')
}

// writeSample writes one sample line of f with the label values (in f's
// label order); extra, when not empty, is one more label (le) whose value
// is the float extraV, written last as client_golang did.
func writeSample(w *bufio.Writer, f *family, name string, values []string, extra string, extraV, v float64) {
	w.WriteString(name)
	if len(f.labels) > 0 || extra != "" {
		w.WriteByte('{')
		for n, i := range f.order {
			if n > 0 {
				w.WriteByte(',')
			}
			w.WriteString(f.labels[i])
			w.WriteString(`="`)
			writeEscaped(w, values[i], true)
			w.WriteByte('"')
		}
		if extra != "" {
			if len(f.labels) > 0 {
				w.WriteByte(',')
			}
			w.WriteString(extra)
			w.WriteString(`="`)
			w.WriteString(formatFloat(extraV))
			w.WriteByte('"')
		}
		w.WriteByte('}')
	}
	w.WriteByte(' ')
	w.WriteString(formatFloat(v))
	w.WriteByte('\n')
}

// writeEscaped writes s as the format wants it: backslash and newline
// escaped everywhere, the double quote too inside a label value; invalid
// UTF-8 becomes U+FFFD so that the output is always valid UTF-8.
func writeEscaped(w *bufio.Writer, s string, quote bool) {
	if !utf8.ValidString(s) {
		s = strings.ToValidUTF8(s, "\uFFFD")
	}
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '\\':
			w.WriteString(`\\`)
		case c == '\n':
			w.WriteString(`\n`)
		case c == '"' && quote:
			w.WriteString(`\"`)
		default:
			w.WriteByte(c)
		}
	}
}

// formatFloat formats a sample value or bucket bound the way the format
// spells them: +Inf, -Inf, NaN, otherwise Go's shortest representation.
func formatFloat(v float64) string {
	switch {
	case math.IsInf(v, 1):
		return "+Inf"
	case math.IsInf(v, -1):
		return "-Inf"
	case math.IsNaN(v):
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}
