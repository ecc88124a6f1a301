package server

import (
	"errors"
	"sort"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// EventNameIngressRefused names IngressRefused.
const EventNameIngressRefused = "snavio.ingress.refused"

// IngressRefused is snavio.ingress.refused, on the platform's own stream
// (never a tenant's: the refused entries claim a tenant they may not speak
// for): how many requests or entries the ingress refused for one reason
// and one access key since the previous report.
type IngressRefused struct {
	// Reason is access_denied (an entry's source is another tenant's) or
	// the whole-request reason: unauthenticated, incomplete_signature,
	// unknown_access_key, signature_expired, bad_scope, bad_signature.
	Reason string `json:"reason"`
	// AccessKeyID and Tenant are the signer's, when known.
	AccessKeyID string `json:"access_key_id,omitempty"`
	Tenant      string `json:"tenant,omitempty"`
	// ExampleSource is one refused entry's Source (access_denied only).
	ExampleSource string `json:"example_source,omitempty"`
	// Count is the refusals since Since.
	Count int64     `json:"count"`
	Since time.Time `json:"since"`
	At    time.Time `json:"at"`
}

// EventName implements telemetry.Event.
func (IngressRefused) EventName() string { return EventNameIngressRefused }

// Alert implements telemetry.Event: the counts are for review; an attack
// shows in the metrics' rate.
func (IngressRefused) Alert() bool { return false }

// DefaultRefusalInterval is how often a RefusalReporter reports at most.
const DefaultRefusalInterval = 10 * time.Second

// maxRefusalKeys bounds the distinct (reason, key) pairs held between
// reports; the rest are counted under one overflow entry.
const maxRefusalKeys = 64

type refusalKey struct{ reason, accessKeyID string }

// RefusalReporter counts the ingress's refusals and emits them as
// IngressRefused events at most once per interval, whatever the refused
// traffic's rate. A nil *RefusalReporter reports nothing.
type RefusalReporter struct {
	sink     telemetry.Sink
	clock    clock.Clock
	interval time.Duration

	mu      sync.Mutex
	since   time.Time
	next    time.Time
	pending map[refusalKey]*IngressRefused
}

// NewRefusalReporter returns a reporter emitting to sink at most once per
// interval (0: DefaultRefusalInterval).
func NewRefusalReporter(sink telemetry.Sink, clk clock.Clock, interval time.Duration) (*RefusalReporter, error) {
	if sink == nil || clk == nil {
		return nil, errors.New("server: NewRefusalReporter needs a telemetry sink and a clock")
	}
	if interval <= 0 {
		interval = DefaultRefusalInterval
	}
	now := clk.Now()
	return &RefusalReporter{sink: sink, clock: clk, interval: interval, since: now, pending: map[refusalKey]*IngressRefused{}}, nil
}

// Refused counts one refusal and, if the interval has passed since the
// last report, reports everything counted.
func (r *RefusalReporter) Refused(reason, accessKeyID, tenant, source string) {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	k := refusalKey{reason, accessKeyID}
	e, ok := r.pending[k]
	if !ok {
		if len(r.pending) >= maxRefusalKeys {
			k = refusalKey{reason: "other"}
			e = r.pending[k]
		}
		if e == nil {
			e = &IngressRefused{Reason: k.reason, AccessKeyID: k.accessKeyID, Tenant: tenant, ExampleSource: source}
			if k.reason == "other" {
				e.Tenant, e.ExampleSource = "", ""
			}
			r.pending[k] = e
		}
	}
	e.Count++
	var out []IngressRefused
	if !now.Before(r.next) {
		out = make([]IngressRefused, 0, len(r.pending))
		for _, e := range r.pending {
			e.Since, e.At = r.since.UTC(), now.UTC()
			out = append(out, *e)
		}
		clear(r.pending)
		r.since, r.next = now, now.Add(r.interval)
	}
	r.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].Reason != out[j].Reason {
			return out[i].Reason < out[j].Reason
		}
		return out[i].AccessKeyID < out[j].AccessKeyID
	})
	for _, e := range out {
		r.sink.Emit(e)
	}
}
