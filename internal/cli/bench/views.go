package bench

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/cli/send"
)

// Summary is what `snavio bench` prints.
type Summary struct {
	Source  string `json:"source"`
	Target  string `json:"target"`
	Command string `json:"command"`
	// Planned is --count (0 when only --duration bounds the run).
	Planned     int     `json:"planned"`
	Rate        float64 `json:"rate_per_second"`
	Concurrency int     `json:"concurrency"`
	Batch       int     `json:"batch"`
	// Sent counts entries put on the bus; Accepted those it took.
	Sent     int `json:"sent"`
	Accepted int `json:"accepted"`
	// Refused counts the entries the bus refused, by error code.
	Refused map[string]int `json:"refused"`
	// RequestErrors counts entries whose PutEvents call failed as a whole
	// (unreachable, credentials refused, throttled past retries).
	RequestErrors  int     `json:"request_errors"`
	LastError      string  `json:"last_error,omitempty"`
	Requests       int     `json:"requests"`
	Interrupted    bool    `json:"interrupted"`
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Throughput is accepted commands per second of sending.
	Throughput float64 `json:"throughput_per_second"`
	// PutLatency is per PutEvents call.
	PutLatency Latency `json:"put_latency"`
	// Outcomes and OutcomeLatency (from put to the outcome read from
	// telemetry, per command) are present with --wait.
	Outcomes       *Outcomes `json:"outcomes,omitempty"`
	OutcomeLatency *Latency  `json:"outcome_latency,omitempty"`
}

// Outcomes counts the dispatcher's decisions on accepted commands.
type Outcomes struct {
	Delivered int            `json:"delivered"`
	Failed    map[string]int `json:"failed"`
	Invalid   map[string]int `json:"invalid"`
	Duplicate int            `json:"duplicate"`
	// Timeout counts accepted commands with no outcome within --wait.
	Timeout int `json:"timeout"`
}

func (o *Outcomes) add(x send.Outcome) {
	switch x.Outcome {
	case send.OutcomeDelivered:
		o.Delivered++
	case send.OutcomeFailed:
		o.Failed[x.Reason]++
	case send.OutcomeInvalid:
		o.Invalid[x.Reason]++
	case send.OutcomeDuplicate:
		o.Duplicate++
	}
}

func total(m map[string]int) int {
	n := 0
	for _, v := range m {
		n += v
	}
	return n
}

func (r *Runner) summary(p Plan, sentAt time.Time, interrupted bool) Summary {
	el := sentAt.Sub(r.began)
	s := Summary{
		Source: p.Source, Target: p.Target, Command: p.Command, Planned: p.Count, Concurrency: p.Concurrency, Batch: p.Batch,
		Rate: rateOf(r.Limiter), Sent: int(r.sent.Load()), Accepted: int(r.accepted.Load()), RequestErrors: int(r.failedRq.Load()),
		Requests: int(r.requests.Load()), Interrupted: interrupted, ElapsedSeconds: round3(el.Seconds()), PutLatency: r.putLat.Summary(),
	}
	if el > 0 {
		s.Throughput = round3(float64(s.Accepted) / el.Seconds())
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	s.Refused, s.LastError = maps.Clone(r.refusedBy), r.lastErr
	if p.Wait > 0 {
		o := r.outcomes
		o.Failed, o.Invalid = maps.Clone(o.Failed), maps.Clone(o.Invalid)
		o.Timeout = len(r.pending)
		l := r.outLat.Summary()
		s.Outcomes, s.OutcomeLatency = &o, &l
	}
	return s
}

func rateOf(l *Limiter) float64 {
	if l.every == 0 {
		return 0
	}
	return round3(float64(time.Second) / float64(l.every))
}

func round3(x float64) float64 { return math.Round(x*1000) / 1000 }

// TableHeader implements output.Tabular.
func (Summary) TableHeader() []string { return []string{"measure", "value"} }

// TableRows implements output.Tabular.
func (s Summary) TableRows() [][]string {
	rate := "no limit"
	if s.Rate > 0 {
		rate = fmt.Sprintf("%g/s", s.Rate)
	}
	rows := [][]string{
		{"commands", fmt.Sprintf("%s -> %s %s", s.Source, s.Target, s.Command)},
		{"load", fmt.Sprintf("rate %s, concurrency %d, batch %d", rate, s.Concurrency, s.Batch)},
		{"sent", fmt.Sprintf("%d in %d request(s), %gs", s.Sent, s.Requests, s.ElapsedSeconds)},
		{"accepted", strconv.Itoa(s.Accepted)},
	}
	for _, code := range slices.Sorted(maps.Keys(s.Refused)) {
		rows = append(rows, []string{"refused " + code, strconv.Itoa(s.Refused[code])})
	}
	if s.RequestErrors > 0 {
		rows = append(rows, []string{"request errors", fmt.Sprintf("%d (last: %s)", s.RequestErrors, s.LastError)})
	}
	rows = append(rows, []string{"throughput", fmt.Sprintf("%g accepted/s", s.Throughput)}, []string{"put latency", latencyText(s.PutLatency)})
	if o := s.Outcomes; o != nil {
		rows = append(rows, []string{"delivered", strconv.Itoa(o.Delivered)})
		for _, r := range slices.Sorted(maps.Keys(o.Failed)) {
			rows = append(rows, []string{"failed " + r, strconv.Itoa(o.Failed[r])})
		}
		for _, r := range slices.Sorted(maps.Keys(o.Invalid)) {
			rows = append(rows, []string{"invalid " + r, strconv.Itoa(o.Invalid[r])})
		}
		rows = append(rows, []string{"duplicate", strconv.Itoa(o.Duplicate)}, []string{"no outcome", strconv.Itoa(o.Timeout)})
		if s.OutcomeLatency != nil {
			rows = append(rows, []string{"outcome latency", latencyText(*s.OutcomeLatency)})
		}
	}
	if s.Interrupted {
		rows = append(rows, []string{"interrupted", "yes"})
	}
	return rows
}

func latencyText(l Latency) string {
	if l.Count == 0 {
		return "none"
	}
	return fmt.Sprintf("p50 %gms  p90 %gms  p99 %gms  max %gms  (n=%d)", l.P50MS, l.P90MS, l.P99MS, l.MaxMS, l.Count)
}
