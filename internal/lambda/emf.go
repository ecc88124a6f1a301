package lambda

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"sort"
	"strings"
	"sync"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// EMF limits (CloudWatch Embedded Metric Format): a directive names at
// most 100 metrics, and a metric holds at most 100 values.
const (
	emfMaxMetrics = 100
	emfMaxValues  = 100
)

// EMFNamespace is the CloudWatch namespace of every metric the functions
// emit; each carries the dimension Function (SNAVIO_FUNCTION).
const EMFNamespace = "Snavio"

// EMF is telemetry.Metrics as CloudWatch Embedded Metric Format: it adds
// up counters and keeps observations, and Flush writes them as JSON lines
// that Lambda's log pipeline turns into CloudWatch metrics, with no
// PutMetricData call. Safe for concurrent use.
type EMF struct {
	function string
	clock    clock.Clock
	mu       sync.Mutex
	counts   map[string]int64
	values   map[string][]float64
}

var _ telemetry.Metrics = (*EMF)(nil)

// NewEMF returns metrics for function, timestamped by clk.
func NewEMF(function string, clk clock.Clock) *EMF {
	return &EMF{function: function, clock: clk, counts: map[string]int64{}, values: map[string][]float64{}}
}

// Count implements telemetry.Metrics.
func (m *EMF) Count(name string, n int64) {
	m.mu.Lock()
	m.counts[name] += n
	m.mu.Unlock()
}

// Observe implements telemetry.Metrics.
func (m *EMF) Observe(name string, v float64) {
	m.mu.Lock()
	m.values[name] = append(m.values[name], v)
	m.mu.Unlock()
}

// emfUnit is the CloudWatch unit of a metric, from its name.
func emfUnit(name string, counter bool) string {
	switch {
	case counter:
		return "Count"
	case strings.HasSuffix(name, "Bytes"):
		return "Bytes"
	case strings.HasSuffix(name, "Duration"), strings.HasSuffix(name, "Latency"), strings.HasSuffix(name, "Seconds"):
		return "Seconds"
	}
	return "None"
}

type emfMetric struct {
	Name string `json:"Name"`
	Unit string `json:"Unit"`
}

type emfDirective struct {
	Namespace  string      `json:"Namespace"`
	Dimensions [][]string  `json:"Dimensions"`
	Metrics    []emfMetric `json:"Metrics"`
}

type emfMeta struct {
	Timestamp         int64          `json:"Timestamp"`
	CloudWatchMetrics []emfDirective `json:"CloudWatchMetrics"`
}

// Flush writes what was counted and observed since the last Flush as EMF
// lines on w (Lambda: standard output) and forgets it. A line holds up to
// 100 metrics; a metric observed more than 100 times spreads over lines.
func (m *EMF) Flush(w io.Writer) error {
	m.mu.Lock()
	counts, values := m.counts, m.values
	m.counts, m.values = map[string]int64{}, map[string][]float64{}
	m.mu.Unlock()
	if len(counts) == 0 && len(values) == 0 {
		return nil
	}
	type point struct {
		name    string
		counter bool
		value   any
	}
	// Each round takes one value list (of up to 100) per metric.
	var rounds [][]point
	var first []point
	for name, n := range counts {
		first = append(first, point{name, true, n})
	}
	rounds = append(rounds, first)
	for name, vs := range values {
		for r := 0; len(vs) > 0; r++ {
			n := min(len(vs), emfMaxValues)
			if r == len(rounds) {
				rounds = append(rounds, nil)
			}
			rounds[r] = append(rounds[r], point{name, false, vs[:n]})
			vs = vs[n:]
		}
	}
	bw := bufio.NewWriter(w)
	ts := m.clock.Now().UnixMilli()
	for _, pts := range rounds {
		sort.Slice(pts, func(i, j int) bool { return pts[i].name < pts[j].name })
		for len(pts) > 0 {
			n := min(len(pts), emfMaxMetrics)
			line := map[string]any{"Function": m.function}
			d := emfDirective{Namespace: EMFNamespace, Dimensions: [][]string{{"Function"}}}
			for _, p := range pts[:n] {
				d.Metrics = append(d.Metrics, emfMetric{Name: p.name, Unit: emfUnit(p.name, p.counter)})
				line[p.name] = p.value
			}
			line["_aws"] = emfMeta{Timestamp: ts, CloudWatchMetrics: []emfDirective{d}}
			b, err := json.Marshal(line)
			if err != nil {
				return fmt.Errorf("emf: %w", err)
			}
			bw.Write(b)
			bw.WriteByte('\n')
			pts = pts[n:]
		}
	}
	return bw.Flush()
}

// stageWithMetrics is h's handler for function (ingest or slow) that
// writes the invocation's metrics to out as EMF lines before it answers.
func stageWithMetrics(h *Host, function string, m *EMF, out io.Writer, log *slog.Logger) any {
	flush := func() { flushMetrics(m, out, log) }
	if function == FunctionSlow {
		return func(ctx context.Context, ev events.SQSEvent) (events.SQSEventResponse, error) {
			defer flush()
			return h.Slow(ctx, ev)
		}
	}
	return func(ctx context.Context, ev events.CloudWatchEvent) error {
		defer flush()
		return h.Ingest(ctx, ev)
	}
}
