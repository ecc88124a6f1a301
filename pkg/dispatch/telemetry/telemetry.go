// Package telemetry is the catalog of Snavio telemetry events
// (docs/security/telemetry.md) and of the internal metric names.
//
// Each event is a struct with exactly the fields the spec lists for it; on
// the wire (Marshal) it is a JSON object whose first member, "event", names
// it (for example "snavio.command.invalid"). Keys are snake_case; the
// spec's command.name is the flat key command_name. Optional fields are
// omitted when empty, as the spec says ("unless the request did not include
// them", "only if replay: true", "if known"). docs/security/telemetry.md
// maps every spec field to its key.
package telemetry

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/pkg/dispatch/jcs"
	"github.com/snavio/snavio/pkg/dispatch/reason"
)

// Event names.
const (
	NameDelivered               = "snavio.command.delivered"
	NameInvalid                 = "snavio.command.invalid"
	NameFailed                  = "snavio.command.failed"
	NameDuplicate               = "snavio.command.duplicate"
	NameExecutedAfterACLRevoked = "snavio.command.executed_after_acl_revoked"
	NameWarmPathBan             = "snavio.fairness.warm-path-ban"
	NameAbuseDetected           = "snavio.fairness.abuse_detected"
	NameLegacyKeyUsed           = "snavio.secret.legacy_key_used"
	NameKeyExpiryImminent       = "snavio.secret.key_expiry_imminent"
	NameSkewNearLimit           = "snavio.telemetry.skew_near_limit"
	NameSkewSample              = "snavio.telemetry.skew_sample"
	NameDropped                 = "snavio.telemetry.dropped"
)

// Event is one telemetry event of the catalog. All implementations are the
// value types of this package.
type Event interface {
	// EventName returns the event's name, e.g. "snavio.command.invalid".
	EventName() string
	// Alert reports whether the spec marks the event as alert-triggering.
	Alert() bool
}

// Sink receives telemetry events. Implementations must be safe for
// concurrent use, must not block the caller for long (a durable outbox
// append at most) and own failures of their own delivery: Emit has no
// error because a dispatch decision never depends on telemetry.
type Sink interface {
	Emit(e Event)
}

// Discard is a Sink that drops every event.
type Discard struct{}

// Emit drops e.
func (Discard) Emit(Event) {}

// Memory is a Sink that keeps events in order, for tests and the local
// server. The zero value is ready; it is safe for concurrent use.
type Memory struct {
	mu     sync.Mutex
	events []Event
}

// Emit appends e.
func (m *Memory) Emit(e Event) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = append(m.events, e)
}

// Events returns a copy of the events emitted so far.
func (m *Memory) Events() []Event {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Event(nil), m.events...)
}

// Reset forgets all events.
func (m *Memory) Reset() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.events = nil
}

// Replay carries the replay fields of delivered and failed events. All are
// omitted unless Replay is true.
type Replay struct {
	// Replay is true if the command was sent by a replay operation.
	Replay bool `json:"replay,omitzero"`
	// ReplayReason is the reason given for the replay.
	ReplayReason string `json:"replay_reason,omitempty"`
	// ReplayID identifies the replay operation.
	ReplayID string `json:"replay_id,omitempty"`
}

// Path is the dispatcher path that delivered a command.
type Path string

// Paths.
const (
	PathFast Path = "fast"
	PathSlow Path = "slow"
)

// Delivered is snavio.command.delivered: a command passed every check and
// was sent to its target.
type Delivered struct {
	CommandID         string `json:"command_id"`
	Source            string `json:"source"`
	Target            string `json:"target"`
	CommandName       string `json:"command_name"`
	Timestamp         string `json:"timestamp"`
	Path              Path   `json:"path"`
	DispatchLatencyMS int64  `json:"dispatch_latency_ms"`
	Replay
}

// Invalid is snavio.command.invalid: the message failed schema or protocol
// validation. The identifying fields are omitted when the message did not
// carry them well-formed; Reason is always present. Alerting.
type Invalid struct {
	CommandID   string      `json:"command_id,omitempty"`
	Source      string      `json:"source,omitempty"`
	Target      string      `json:"target,omitempty"`
	CommandName string      `json:"command_name,omitempty"`
	Timestamp   string      `json:"timestamp,omitempty"`
	Reason      reason.Code `json:"reason"`
	// Suppressed, on the aggregate event of a source over its invalid
	// budget, is how many of its invalid entries in one interval got no
	// event of their own; the other fields are the first of them's.
	Suppressed int64 `json:"suppressed,omitzero"`
}

// FailReason is the reason of a Failed event.
type FailReason string

// QuotaSource marks a Failed event refused by a per-source quota.
const QuotaSource = "source-quota"

// Failure reasons.
const (
	FailRateLimitExceeded FailReason = "rate-limit-exceeded"
	FailACLDeny           FailReason = "acl-deny"
	FailRouteMissing      FailReason = "route-missing"
	FailDeliveryFailure   FailReason = "delivery-failure"
	FailFairnessViolation FailReason = "fairness-violation"
)

// Failed is snavio.command.failed: a valid message could not be dispatched.
// RetryAfterMS and ThrottleUntil accompany rate-limit-exceeded and
// fairness-violation; SourceShare, CompetingShare and DispatchVolume are the
// structured fairness diagnostics of section C and accompany
// fairness-violation only.
type Failed struct {
	CommandID   string     `json:"command_id,omitempty"`
	Source      string     `json:"source,omitempty"`
	Target      string     `json:"target,omitempty"`
	CommandName string     `json:"command_name,omitempty"`
	Timestamp   string     `json:"timestamp,omitempty"`
	Reason      FailReason `json:"reason"`
	// Quota names the limit that refused a rate-limit-exceeded command
	// when it is not the route's own: "source-quota" for a per-source
	// quota (the spec's "rate-limit-exceeded: source-quota").
	Quota          string    `json:"quota,omitempty"`
	RetryAfterMS   int64     `json:"retry_after_ms,omitzero"`
	ThrottleUntil  time.Time `json:"throttle_until,omitzero"`
	SourceShare    float64   `json:"source_share,omitzero"`
	CompetingShare float64   `json:"competing_share,omitzero"`
	DispatchVolume int64     `json:"dispatch_volume,omitzero"`
	Replay
}

// Duplicate is snavio.command.duplicate: strict deduplication dropped a
// command whose id was already seen.
type Duplicate struct {
	CommandID   string `json:"command_id"`
	Source      string `json:"source"`
	Target      string `json:"target"`
	CommandName string `json:"command_name"`
	Timestamp   string `json:"timestamp"`
	DedupeMode  string `json:"dedupe_mode"`
}

// ExecutedAfterACLRevoked is snavio.command.executed_after_acl_revoked: a
// command was dispatched on a stale ACL entry later found revoked. Alerting.
type ExecutedAfterACLRevoked struct {
	Source                 string    `json:"source"`
	Target                 string    `json:"target"`
	CommandName            string    `json:"command_name"`
	StaleDurationSeconds   float64   `json:"stale_duration_seconds"`
	ACLRevocationTimestamp time.Time `json:"acl_revocation_timestamp"`
}

// WarmPathBan is snavio.fairness.warm-path-ban: a source was locally banned
// from warm-path tokens on a (target, command) pair.
type WarmPathBan struct {
	Source         string    `json:"source"`
	Target         string    `json:"target"`
	CommandName    string    `json:"command_name"`
	SourceShare    float64   `json:"source_share"`
	CompetingShare float64   `json:"competing_share"`
	RetryAfterMS   int64     `json:"retry_after_ms"`
	ThrottleUntil  time.Time `json:"throttle_until"`
}

// AbuseDetected is snavio.fairness.abuse_detected: the fairness auditor
// found recurring warm-path abuse.
type AbuseDetected struct {
	Source          string    `json:"source"`
	AffectedTargets []string  `json:"affected_targets"`
	TotalViolations int64     `json:"total_violations"`
	BanAppliedUntil time.Time `json:"ban_applied_until"`
}

// LegacyKeyUsed is snavio.secret.legacy_key_used: a message was signed with
// the previous key version, accepted during the overlap window.
type LegacyKeyUsed struct {
	VersionID            string    `json:"version_id"`
	Source               string    `json:"source"`
	TimeOfLastConfigPoll time.Time `json:"time_of_last_config_poll,omitzero"`
}

// KeyExpiryImminent is snavio.secret.key_expiry_imminent: a producer keeps
// signing with a soon-to-expire version and has not polled its tenant
// config as expected. Alerting.
type KeyExpiryImminent struct {
	VersionID            string    `json:"version_id"`
	Source               string    `json:"source"`
	TimeOfLastConfigPoll time.Time `json:"time_of_last_config_poll,omitzero"`
}

// SkewNearLimit is snavio.telemetry.skew_near_limit: a message's clock skew
// is at least 0.8 of the replay window. SkewSeconds is received_at minus
// sent_at (negative for a timestamp in the future).
type SkewNearLimit struct {
	CommandID   string    `json:"command_id"`
	Source      string    `json:"source"`
	SentAt      time.Time `json:"sent_at"`
	ReceivedAt  time.Time `json:"received_at"`
	SkewSeconds float64   `json:"skew_seconds"`
}

// SkewSample is snavio.telemetry.skew_sample: a sampled message's skew,
// for trend analysis.
type SkewSample struct {
	Source      string    `json:"source"`
	SkewSeconds float64   `json:"skew_seconds"`
	SentAt      time.Time `json:"sent_at"`
	ReceivedAt  time.Time `json:"received_at"`
}

// Dropped is snavio.telemetry.dropped: telemetry for a tenant aged out of
// its queue unconsumed. Alerting.
type Dropped struct {
	Tenant          string    `json:"tenant"`
	DroppedEvents   int64     `json:"dropped_events"`
	Reason          string    `json:"reason"`
	QueueAgeSeconds int64     `json:"queue_age_seconds"`
	LastReceivedAt  time.Time `json:"last_received_at"`
}

// Dropped reasons: the spec's queue_unconsumed (aged out of the tenant's
// queue), and publish_failed (the outbox drain could not publish the
// events to the tenant's topic and gave them up).
const (
	DroppedQueueUnconsumed = "queue_unconsumed"
	DroppedPublishFailed   = "publish_failed"
)

// EventName returns the event name.
func (Delivered) EventName() string { return NameDelivered }

// EventName returns the event name.
func (Invalid) EventName() string { return NameInvalid }

// EventName returns the event name.
func (Failed) EventName() string { return NameFailed }

// EventName returns the event name.
func (Duplicate) EventName() string { return NameDuplicate }

// EventName returns the event name.
func (ExecutedAfterACLRevoked) EventName() string { return NameExecutedAfterACLRevoked }

// EventName returns the event name.
func (WarmPathBan) EventName() string { return NameWarmPathBan }

// EventName returns the event name.
func (AbuseDetected) EventName() string { return NameAbuseDetected }

// EventName returns the event name.
func (LegacyKeyUsed) EventName() string { return NameLegacyKeyUsed }

// EventName returns the event name.
func (KeyExpiryImminent) EventName() string { return NameKeyExpiryImminent }

// EventName returns the event name.
func (SkewNearLimit) EventName() string { return NameSkewNearLimit }

// EventName returns the event name.
func (SkewSample) EventName() string { return NameSkewSample }

// EventName returns the event name.
func (Dropped) EventName() string { return NameDropped }

// Alert returns whether the event triggers an alert.
func (Delivered) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (Invalid) Alert() bool { return true }

// Alert returns whether the event triggers an alert.
func (Failed) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (Duplicate) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (ExecutedAfterACLRevoked) Alert() bool { return true }

// Alert returns whether the event triggers an alert.
func (WarmPathBan) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (AbuseDetected) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (LegacyKeyUsed) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (KeyExpiryImminent) Alert() bool { return true }

// Alert returns whether the event triggers an alert.
func (SkewNearLimit) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (SkewSample) Alert() bool { return false }

// Alert returns whether the event triggers an alert.
func (Dropped) Alert() bool { return true }

// Marshal encodes e as a JSON object that starts with its "event" member.
// The replay fields of Delivered and Failed are written only if Replay is
// true, whatever the other two hold.
// Times are RFC 3339 with their location's offset; the dispatcher always
// emits UTC times.
func Marshal(e Event) ([]byte, error) {
	if e == nil {
		return nil, errors.New("telemetry: nil event")
	}
	switch v := e.(type) {
	case Delivered:
		// One per delivered command: written by hand, the same bytes as
		// the generic path (TestMarshalDeliveredMatchesGeneric).
		out, err := appendDelivered(make([]byte, 0, 256), &v)
		if err != nil {
			return nil, fmt.Errorf("telemetry: %s: %w", NameDelivered, err)
		}
		return out, nil
	case Failed:
		if !v.Replay.Replay {
			v.Replay = Replay{}
		}
		e = v
	}
	body, err := json.Marshal(e, json.Deterministic(true))
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", e.EventName(), err)
	}
	out := make([]byte, 0, len(body)+len(e.EventName())+12)
	out = append(out, `{"event":`...)
	out, _ = jsontext.AppendQuote(out, e.EventName())
	if len(body) > 2 {
		out = append(out, ',')
	}
	return append(out, body[1:]...), nil
}

// appendDelivered appends v as Marshal encodes it: the event name, then
// the fields in declaration order, the replay fields only when Replay. A
// string that is not valid UTF-8 is an error, as in the generic encoder.
func appendDelivered(b []byte, v *Delivered) ([]byte, error) {
	var err error
	str := func(b []byte, name, val string) []byte {
		b = append(b, ',', '"')
		b = append(b, name...)
		b = append(b, '"', ':')
		b, qerr := jcs.AppendQuote(b, val)
		if qerr != nil && err == nil {
			err = fmt.Errorf("%s: %w", name, qerr)
		}
		return b
	}
	b = append(b, `{"event":"`+NameDelivered+`"`...)
	b = str(b, "command_id", v.CommandID)
	b = str(b, "source", v.Source)
	b = str(b, "target", v.Target)
	b = str(b, "command_name", v.CommandName)
	b = str(b, "timestamp", v.Timestamp)
	b = str(b, "path", string(v.Path))
	b = append(b, `,"dispatch_latency_ms":`...)
	b = strconv.AppendInt(b, v.DispatchLatencyMS, 10)
	if v.Replay.Replay {
		b = append(b, `,"replay":true`...)
		if v.ReplayReason != "" {
			b = str(b, "replay_reason", v.ReplayReason)
		}
		if v.ReplayID != "" {
			b = str(b, "replay_id", v.ReplayID)
		}
	}
	if err != nil {
		return nil, err
	}
	return append(b, '}'), nil
}

// AlertsByName says whether events named name alert (Alert depends on an
// event's type, never on its fields) and whether name is in the catalog,
// so a reader of stored events can skip decoding those that never alert.
func AlertsByName(name string) (alert, known bool) {
	zero, _ := kindOf(name)
	if zero == nil {
		return false, false
	}
	return zero.Alert(), true
}

// kindOf returns the zero value of the catalog event named name and its
// decoder, or nil for a name outside the catalog: the one place that maps
// names to types.
func kindOf(name string) (zero Event, decoder func([]byte) (Event, error)) {
	switch name {
	case NameDelivered:
		return Delivered{}, decode[Delivered]
	case NameInvalid:
		return Invalid{}, decode[Invalid]
	case NameFailed:
		return Failed{}, decode[Failed]
	case NameDuplicate:
		return Duplicate{}, decode[Duplicate]
	case NameExecutedAfterACLRevoked:
		return ExecutedAfterACLRevoked{}, decode[ExecutedAfterACLRevoked]
	case NameWarmPathBan:
		return WarmPathBan{}, decode[WarmPathBan]
	case NameAbuseDetected:
		return AbuseDetected{}, decode[AbuseDetected]
	case NameLegacyKeyUsed:
		return LegacyKeyUsed{}, decode[LegacyKeyUsed]
	case NameKeyExpiryImminent:
		return KeyExpiryImminent{}, decode[KeyExpiryImminent]
	case NameSkewNearLimit:
		return SkewNearLimit{}, decode[SkewNearLimit]
	case NameSkewSample:
		return SkewSample{}, decode[SkewSample]
	case NameDropped:
		return Dropped{}, decode[Dropped]
	}
	return nil, nil
}

// Unmarshal decodes an event produced by Marshal, choosing the type by its
// "event" member. Unknown members are ignored (newer producers may add
// fields); an unknown event name is an error.
func Unmarshal(b []byte) (Event, error) {
	var head struct {
		Event string `json:"event"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		return nil, fmt.Errorf("telemetry: %w", err)
	}
	zero, dec := kindOf(head.Event)
	if zero == nil {
		return nil, fmt.Errorf("telemetry: unknown event %q", head.Event)
	}
	e, err := dec(b)
	if err != nil {
		return nil, fmt.Errorf("telemetry: %s: %w", head.Event, err)
	}
	return e, nil
}

func decode[T Event](b []byte) (Event, error) {
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}
