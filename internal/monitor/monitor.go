// Package monitor is the queue monitor (docs/design.md): it watches
// every registered route's queue (ApproximateAgeOfOldestMessage, depth,
// messages in flight) and marks the route
//
//   - unhealthy when the oldest message is older than 2x the route's
//     expected_drain_seconds;
//   - stalled when the depth grew in every one of the last samples
//     (consumers fall behind without pause);
//   - unpolled when messages have waited through a whole drain period and
//     none was ever in flight (nobody receives).
//
// A change of state emits snavio.route.health (alerting when the route
// turns bad), so tenants learn without cooperating.
package monitor

import (
	"fmt"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// Health is a route queue's state.
type Health string

// States, best first.
const (
	Healthy   Health = "healthy"
	Unhealthy Health = "unhealthy"
	Stalled   Health = "stalled"
	Unpolled  Health = "unpolled"
)

// Sample is one reading of a queue.
type Sample struct {
	At        time.Time
	Depth     int64         // messages available
	InFlight  int64         // messages received, not yet deleted
	OldestAge time.Duration // age of the oldest message (0 if empty)
}

// Queue is a route's queue and its drain expectation.
type Queue struct {
	Target, Command, QueueARN string
	ExpectedDrain             time.Duration
}

// Event is snavio.route.health: a route queue changed state.
type Event struct {
	Target           string    `json:"target"`
	CommandName      string    `json:"command_name"`
	QueueARN         string    `json:"queue_arn"`
	Health           Health    `json:"health"`
	Previous         Health    `json:"previous"`
	Reason           string    `json:"reason"`
	OldestAgeSeconds float64   `json:"oldest_age_seconds"`
	Depth            int64     `json:"depth"`
	At               time.Time `json:"at"`
}

// EventName implements telemetry.Event.
func (Event) EventName() string { return "snavio.route.health" }

// Alert implements telemetry.Event: turning bad alerts; recovering does not.
func (e Event) Alert() bool { return e.Health != Healthy }

// Config tunes the monitor.
type Config struct {
	// StallSamples is how many consecutive growing samples mean stalled
	// (default 5).
	StallSamples int
	// History bounds the samples kept per queue (default 20).
	History int
}

// Monitor keeps recent samples per queue. Safe for concurrent use.
type Monitor struct {
	cfg    Config
	mu     sync.Mutex
	queues map[string]*state
}

type state struct {
	samples []Sample
	health  Health
	reason  string
	since   time.Time
	// pending is the first sample of an uninterrupted run with messages
	// waiting and none in flight.
	idleSince time.Time
}

// New returns a monitor.
func New(cfg Config) *Monitor {
	if cfg.StallSamples <= 1 {
		cfg.StallSamples = 5
	}
	if cfg.History < cfg.StallSamples+1 {
		cfg.History = max(20, cfg.StallSamples+1)
	}
	return &Monitor{cfg: cfg, queues: map[string]*state{}}
}

// Status is a queue's assessed state.
type Status struct {
	Health Health
	Reason string
	Since  time.Time
}

// Observe records a sample of q and returns its state, plus an event when
// the state changed.
func (m *Monitor) Observe(q Queue, s Sample) (Status, *Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.queues[q.QueueARN]
	if st == nil {
		st = &state{health: Healthy, since: s.At}
		m.queues[q.QueueARN] = st
	}
	st.samples = append(st.samples, s)
	if len(st.samples) > m.cfg.History {
		st.samples = st.samples[len(st.samples)-m.cfg.History:]
	}
	if s.Depth > 0 && s.InFlight == 0 {
		if st.idleSince.IsZero() {
			st.idleSince = s.At
		}
	} else {
		st.idleSince = time.Time{}
	}
	drain := q.ExpectedDrain
	if drain <= 0 {
		drain = 300 * time.Second
	}
	health, reason := Healthy, ""
	switch {
	case s.OldestAge > 2*drain:
		health = Unhealthy
		reason = fmt.Sprintf("oldest message is %s old, over 2x the expected drain of %s", s.OldestAge.Round(time.Second), drain)
	case !st.idleSince.IsZero() && s.At.Sub(st.idleSince) >= drain:
		health = Unpolled
		reason = fmt.Sprintf("%d messages have waited %s with none in flight: is a consumer receiving?", s.Depth, s.At.Sub(st.idleSince).Round(time.Second))
	case m.growing(st):
		health = Stalled
		reason = fmt.Sprintf("depth grew in each of the last %d samples, to %d", m.cfg.StallSamples, s.Depth)
	}
	var ev *Event
	if health != st.health {
		ev = &Event{Target: q.Target, CommandName: q.Command, QueueARN: q.QueueARN, Health: health, Previous: st.health,
			Reason: reason, OldestAgeSeconds: wire.SecondsMS(s.OldestAge), Depth: s.Depth, At: s.At}
		st.health, st.since = health, s.At
	}
	st.reason = reason
	return Status{Health: st.health, Reason: reason, Since: st.since}, ev
}

// growing reports strictly increasing depth over the last StallSamples
// samples.
func (m *Monitor) growing(st *state) bool {
	n := m.cfg.StallSamples
	if len(st.samples) < n+1 {
		return false
	}
	tail := st.samples[len(st.samples)-n-1:]
	for i := 1; i < len(tail); i++ {
		if tail[i].Depth <= tail[i-1].Depth {
			return false
		}
	}
	return true
}

// Last returns the state the last Observe of queueARN assessed, and
// false if the queue was never observed (the dashboard shows it).
func (m *Monitor) Last(queueARN string) (Status, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	st := m.queues[queueARN]
	if st == nil {
		return Status{}, false
	}
	return Status{Health: st.health, Reason: st.reason, Since: st.since}, true
}

// Forget drops a queue (its route was deleted).
func (m *Monitor) Forget(queueARN string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.queues, queueARN)
}
