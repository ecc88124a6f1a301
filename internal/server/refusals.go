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
	// ExampleSource is one refused entry's Source (access_denied), or
	// the queue's ARN (sqs_access_denied: an SQS call on a queue the
	// signer's tenant does not own).
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

// DefaultRefusalInterval is how often a RefusalReporter reports one
// reason and key at most.
const DefaultRefusalInterval = 10 * time.Second

// maxRefusalKeys bounds the distinct (reason, key) pairs tracked; the rest
// are counted under reason "other".
const maxRefusalKeys = 64

type refusalKey struct{ reason, accessKeyID string }

type refusalState struct {
	ev   IngressRefused // Count and Since: refusals not yet reported
	last time.Time      // when this key was last reported
}

// RefusalReporter counts the ingress's refusals and emits them as
// IngressRefused events: a (reason, access key) pair's first refusal at
// once, then at most one event per interval carrying the count since the
// last; what is left is reported by Flush (at shutdown). A nil
// *RefusalReporter reports nothing.
type RefusalReporter struct {
	sink     telemetry.Sink
	clock    clock.Clock
	interval time.Duration

	mu   sync.Mutex
	keys map[refusalKey]*refusalState
}

// NewRefusalReporter returns a reporter emitting to sink (interval 0:
// DefaultRefusalInterval).
func NewRefusalReporter(sink telemetry.Sink, clk clock.Clock, interval time.Duration) (*RefusalReporter, error) {
	if sink == nil || clk == nil {
		return nil, errors.New("server: NewRefusalReporter needs a telemetry sink and a clock")
	}
	if interval <= 0 {
		interval = DefaultRefusalInterval
	}
	return &RefusalReporter{sink: sink, clock: clk, interval: interval, keys: map[refusalKey]*refusalState{}}, nil
}

// Refused counts one refusal, reporting it if its key was not reported
// within the interval.
func (r *RefusalReporter) Refused(reason, accessKeyID, tenant, source string) {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	k := refusalKey{reason, accessKeyID}
	st, ok := r.keys[k]
	if !ok {
		r.evict(now)
		if len(r.keys) >= maxRefusalKeys {
			k, tenant, source = refusalKey{reason: "other"}, "", ""
			st = r.keys[k]
		}
		if st == nil {
			st = &refusalState{ev: IngressRefused{Reason: k.reason, AccessKeyID: k.accessKeyID, Tenant: tenant, ExampleSource: source}}
			r.keys[k] = st
		}
	}
	if st.ev.Count == 0 {
		st.ev.Since = now.UTC()
	}
	st.ev.Count++
	var out *IngressRefused
	if st.last.IsZero() || now.Sub(st.last) >= r.interval {
		ev := st.ev
		ev.At = now.UTC()
		out = &ev
		st.ev.Count, st.last = 0, now
	}
	r.mu.Unlock()
	if out != nil {
		r.sink.Emit(*out)
	}
}

// evict forgets keys with nothing pending whose interval has passed.
func (r *RefusalReporter) evict(now time.Time) {
	for k, st := range r.keys {
		if st.ev.Count == 0 && now.Sub(st.last) >= r.interval {
			delete(r.keys, k)
		}
	}
}

// Flush reports every count not yet reported.
func (r *RefusalReporter) Flush() {
	if r == nil {
		return
	}
	now := r.clock.Now()
	r.mu.Lock()
	var out []IngressRefused
	for _, st := range r.keys {
		if st.ev.Count > 0 {
			ev := st.ev
			ev.At = now.UTC()
			out = append(out, ev)
			st.ev.Count, st.last = 0, now
		}
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
