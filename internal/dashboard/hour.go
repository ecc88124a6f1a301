package dashboard

import (
	"cmp"
	"encoding/json"
	"fmt"
	"html/template"
	"math"
	"slices"
	"strings"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// hourEvent is the union of the telemetry fields the hour's panels read
// (docs/security/telemetry.md names them).
type hourEvent struct {
	Event           string    `json:"event"`
	Source          string    `json:"source"`
	Target          string    `json:"target"`
	CommandName     string    `json:"command_name"`
	Reason          string    `json:"reason"`
	Quota           string    `json:"quota"`
	RetryAfterMS    int64     `json:"retry_after_ms"`
	ThrottleUntil   time.Time `json:"throttle_until"`
	SourceShare     float64   `json:"source_share"`
	CompetingShare  float64   `json:"competing_share"`
	SkewSeconds     float64   `json:"skew_seconds"`
	AffectedTargets []string  `json:"affected_targets"`
	TotalViolations int64     `json:"total_violations"`
	BanAppliedUntil time.Time `json:"ban_applied_until"`
}

// Failure is one row of the failures panel: the hour's rejections
// (snavio.command.invalid) or dispatch failures (snavio.command.failed)
// with one reason, and what to do about them.
type Failure struct {
	Event, Reason string
	Count         int
	Last          time.Time
	// Hint says what the producer should do.
	Hint string
	// RetryAfter and ThrottleUntil are the structured retry hints of the
	// newest failure that carried them (rate limits and fairness).
	RetryAfter    time.Duration
	ThrottleUntil time.Time
	// Sources are the sources that hit it, at most maxSources.
	Sources []string
}

// maxSources bounds a failure row's list of sources.
const maxSources = 5

// failHints say what to do about each snavio.command.failed reason
// (the spec's section E list).
func failHint(r string) string {
	switch r {
	case "rate-limit-exceeded":
		return "slow down: retry after retry_after_ms, or once throttle_until has passed"
	case "fairness-violation":
		return "this source takes more than its share of the route: spread the load, and retry after retry_after_ms"
	case "acl-deny":
		return "the source has no grant for this route: ask the operator for an ACL (snavio acl grant)"
	case "route-missing":
		return "no route is registered for this target and command: check the names, or register the route"
	case "delivery-failure":
		return "the target queue refused the command: retry later; the operator sees the queue on route health"
	}
	return ""
}

// Skew is a producing source's clock skew over the hour, from its
// snavio.telemetry.skew_sample and skew_near_limit events (received minus
// sent, in seconds: negative when the producer's clock is ahead).
type Skew struct {
	Source  string
	Samples int
	// Last is the newest skew, Worst the largest in magnitude.
	Last, Worst float64
	// NearLimit counts messages whose skew reached 0.8 of the replay
	// window.
	NearLimit int
	At        time.Time
}

// FairnessEvent is a warm-path ban or an abuse detection of the hour.
type FairnessEvent struct {
	At                   time.Time
	Event, Source, Where string
	// Detail is the event's figures, in words.
	Detail string
	Until  time.Time
}

// RouteThroughput is one route's commands per minute by outcome.
type RouteThroughput struct {
	Target, Command string
	Throughput
	Chart template.HTML
}

// hour is what one pass over the hour's telemetry finds.
type hour struct {
	all      Throughput
	routes   map[[2]string]*Throughput
	failures map[[2]string]*Failure
	skews    map[string]*Skew
	fairness []FairnessEvent
}

func newThroughput(start time.Time) *Throughput {
	t := &Throughput{Start: start, Counts: make([][]int, len(Outcomes)), Totals: make([]int, len(Outcomes))}
	for i := range t.Counts {
		t.Counts[i] = make([]int, 60)
	}
	return t
}

func newHour(start time.Time) *hour {
	return &hour{all: *newThroughput(start), routes: map[[2]string]*Throughput{},
		failures: map[[2]string]*Failure{}, skews: map[string]*Skew{}}
}

// add counts one telemetry record appended at at.
func (h *hour) add(at time.Time, raw json.RawMessage) {
	var ev hourEvent
	if json.Unmarshal(raw, &ev) != nil {
		return
	}
	minute := int(at.Sub(h.all.Start) / time.Minute)
	if minute < 0 || minute >= 60 {
		return
	}
	for o, out := range Outcomes {
		if ev.Event != out.Event {
			continue
		}
		h.all.Counts[o][minute]++
		h.all.Totals[o]++
		if ev.Target != "" {
			k := [2]string{ev.Target, ev.CommandName}
			rt := h.routes[k]
			if rt == nil {
				rt = newThroughput(h.all.Start)
				h.routes[k] = rt
			}
			rt.Counts[o][minute]++
			rt.Totals[o]++
		}
	}
	switch ev.Event {
	case "snavio.command.invalid", "snavio.command.failed":
		h.failure(at, ev)
	case "snavio.telemetry.skew_sample", "snavio.telemetry.skew_near_limit":
		s := h.skews[ev.Source]
		if s == nil {
			s = &Skew{Source: ev.Source}
			h.skews[ev.Source] = s
		}
		s.Samples++
		if ev.Event == "snavio.telemetry.skew_near_limit" {
			s.NearLimit++
		}
		if !at.Before(s.At) {
			s.Last, s.At = ev.SkewSeconds, at
		}
		if math.Abs(ev.SkewSeconds) > math.Abs(s.Worst) {
			s.Worst = ev.SkewSeconds
		}
	case "snavio.fairness.warm-path-ban":
		h.fairness = append(h.fairness, FairnessEvent{At: at, Event: ev.Event, Source: ev.Source, Where: ev.Target + " " + ev.CommandName,
			Detail: fmt.Sprintf("share %.0f%% against %.0f%%; retry after %s", ev.SourceShare*100, ev.CompetingShare*100, time.Duration(ev.RetryAfterMS)*time.Millisecond),
			Until:  ev.ThrottleUntil})
	case "snavio.fairness.abuse_detected":
		h.fairness = append(h.fairness, FairnessEvent{At: at, Event: ev.Event, Source: ev.Source, Where: strings.Join(ev.AffectedTargets, ", "),
			Detail: fmt.Sprintf("%d violations", ev.TotalViolations), Until: ev.BanAppliedUntil})
	}
}

func (h *hour) failure(at time.Time, ev hourEvent) {
	r := ev.Reason
	if ev.Quota != "" {
		r += ": " + ev.Quota
	}
	k := [2]string{ev.Event, r}
	f := h.failures[k]
	if f == nil {
		f = &Failure{Event: ev.Event, Reason: r}
		if ev.Event == "snavio.command.invalid" {
			f.Hint = reason.Hint(reason.Code(ev.Reason))
		} else {
			f.Hint = failHint(ev.Reason)
		}
		h.failures[k] = f
	}
	f.Count++
	if !at.Before(f.Last) {
		f.Last = at
		if ev.RetryAfterMS > 0 || !ev.ThrottleUntil.IsZero() {
			f.RetryAfter, f.ThrottleUntil = time.Duration(ev.RetryAfterMS)*time.Millisecond, ev.ThrottleUntil
		}
	}
	if ev.Source != "" && len(f.Sources) < maxSources && !slices.Contains(f.Sources, ev.Source) {
		f.Sources = append(f.Sources, ev.Source)
	}
}

// failureRows returns the failures, most frequent first.
func (h *hour) failureRows() []Failure {
	out := make([]Failure, 0, len(h.failures))
	for _, f := range h.failures {
		out = append(out, *f)
	}
	slices.SortFunc(out, func(a, b Failure) int {
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Event, b.Event), cmp.Compare(a.Reason, b.Reason))
	})
	return out
}

// skewRows returns the sources' skews, worst first.
func (h *hour) skewRows() []Skew {
	out := make([]Skew, 0, len(h.skews))
	for _, s := range h.skews {
		out = append(out, *s)
	}
	slices.SortFunc(out, func(a, b Skew) int {
		return cmp.Or(cmp.Compare(math.Abs(b.Worst), math.Abs(a.Worst)), cmp.Compare(a.Source, b.Source))
	})
	return out
}

// routeRows returns each route's throughput with its small chart, in
// target and command order.
func (h *hour) routeRows() []RouteThroughput {
	out := make([]RouteThroughput, 0, len(h.routes))
	for k, t := range h.routes {
		out = append(out, RouteThroughput{Target: k[0], Command: k[1], Throughput: *t})
	}
	slices.SortFunc(out, func(a, b RouteThroughput) int {
		return cmp.Or(cmp.Compare(a.Target, b.Target), cmp.Compare(a.Command, b.Command))
	})
	for i := range out {
		out[i].Chart = chartSVG(out[i].Throughput, fmt.Sprintf("route-chart-%d", i), smallW, smallH)
	}
	return out
}

// fairnessRows returns the hour's fairness events, newest first.
func (h *hour) fairnessRows() []FairnessEvent {
	out := slices.Clone(h.fairness)
	slices.SortStableFunc(out, func(a, b FairnessEvent) int { return b.At.Compare(a.At) })
	return out
}
