package platform

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// MessageAttribute is one message attribute: its data type and value.
type MessageAttribute struct{ Type, Value string }

// TelemetryMessage is one SQS message of a temporary queue, as received.
type TelemetryMessage struct {
	Body       string
	Attributes map[string]MessageAttribute
	// SentTimestamp is SQS's, in epoch milliseconds.
	SentTimestamp string
}

// snsEnvelope is the JSON SNS wraps a message in without raw delivery.
// Its keys are matched exactly (encoding/json would also take an event's
// "type" or "message" for them).
type snsEnvelope struct {
	Type, TopicArn, Message, Timestamp string
	MessageAttributes                  map[string]struct{ Type, Value string }
}

// parseEnvelope reads body as an SNS envelope: ok is false when it is not
// one (no exact "Type" and "Message" keys of strings).
func parseEnvelope(body string) (env snsEnvelope, ok bool) {
	var m map[string]json.RawMessage
	if json.Unmarshal([]byte(body), &m) != nil {
		return env, false
	}
	str := func(k string, dst *string) bool {
		v, has := m[k]
		return has && json.Unmarshal(v, dst) == nil
	}
	if !str("Type", &env.Type) || !str("Message", &env.Message) {
		return env, false
	}
	str("TopicArn", &env.TopicArn)
	str("Timestamp", &env.Timestamp)
	if v, has := m["MessageAttributes"]; has {
		_ = json.Unmarshal(v, &env.MessageAttributes)
	}
	return env, true
}

// DecodeTelemetryMessage validates one message of a temporary queue and
// returns its record: the body is the event (raw delivery, attributes on
// the SQS message) or an SNS notification of topicARN wrapping it; the
// event is a JSON object named by "event"; snavio.seq is a positive
// Number, snavio.tenant is tenant, snavio.event is the event's name.
func DecodeTelemetryMessage(m TelemetryMessage, topicARN, tenant string) (wire.TelemetryRecord, error) {
	if len(m.Body) > maxTelemetryMessage+64<<10 {
		return wire.TelemetryRecord{}, fmt.Errorf("%d bytes, over SNS's largest message", len(m.Body))
	}
	body, attrs := m.Body, m.Attributes
	var at time.Time
	if ms, err := strconv.ParseInt(m.SentTimestamp, 10, 64); err == nil && ms > 0 {
		at = time.UnixMilli(ms).UTC()
	}
	if env, ok := parseEnvelope(body); ok {
		if env.Type != "Notification" {
			return wire.TelemetryRecord{}, fmt.Errorf("an SNS %.40q message, not a Notification", env.Type)
		}
		if env.TopicArn != topicARN {
			return wire.TelemetryRecord{}, fmt.Errorf("a notification of topic %.200q, not %s", env.TopicArn, topicARN)
		}
		body = env.Message
		attrs = make(map[string]MessageAttribute, len(env.MessageAttributes))
		for k, v := range env.MessageAttributes {
			attrs[k] = MessageAttribute(v)
		}
		if ts, err := time.Parse(time.RFC3339Nano, env.Timestamp); err == nil {
			at = ts.UTC()
		}
	}
	if len(body) == 0 || len(body) > maxTelemetryMessage {
		return wire.TelemetryRecord{}, fmt.Errorf("an event of %d bytes: give 1 to %d", len(body), maxTelemetryMessage)
	}
	var head struct {
		Event *string `json:"event"`
	}
	if body[0] != '{' || !json.Valid([]byte(body)) || json.Unmarshal([]byte(body), &head) != nil {
		return wire.TelemetryRecord{}, errors.New("the body is not a JSON object")
	}
	if head.Event == nil || *head.Event == "" || len(*head.Event) > 256 {
		return wire.TelemetryRecord{}, errors.New(`the event has no "event" name`)
	}
	seqA, ok := attrs[attrSeq]
	if !ok || !strings.HasPrefix(seqA.Type, "Number") {
		return wire.TelemetryRecord{}, fmt.Errorf("no %s Number attribute", attrSeq)
	}
	seq, err := strconv.ParseUint(seqA.Value, 10, 64)
	if err != nil || seq == 0 {
		return wire.TelemetryRecord{}, fmt.Errorf("%s %.40q is not a sequence number from 1", attrSeq, seqA.Value)
	}
	if tn := attrs[attrTenant]; tn.Value != tenant {
		return wire.TelemetryRecord{}, fmt.Errorf("%s %.80q, not %s", attrTenant, tn.Value, tenant)
	}
	if ev := attrs[attrEvent]; ev.Value != *head.Event {
		return wire.TelemetryRecord{}, fmt.Errorf("%s %.80q does not name the event %.80q", attrEvent, ev.Value, *head.Event)
	}
	return wire.TelemetryRecord{Seq: seq, Tenant: tenant, At: at, Event: json.RawMessage(body)}, nil
}

// reorder hands records over in sequence order. SNS Standard topics do
// not keep order, so a record waits for its predecessors up to window
// after it arrived; then the missing ones count as a gap (the Follower
// reports it). The first record waits a window too: an earlier one may
// still come.
type reorder struct {
	window time.Duration
	// next is the sequence number to hand over next (0: none yet).
	next uint64
	held map[uint64]held
	// skipped are the ranges given up as gaps (the latest 64), to tell a
	// late record from a redelivery.
	skipped [][2]uint64
	// seen, when not nil, makes the order arrival order: held keys are
	// arrival numbers and seen the sequence numbers handed over.
	seen    map[uint64]bool
	arrival uint64
}

type held struct {
	rec     wire.TelemetryRecord
	arrived time.Time
}

type addResult int

const (
	addHeld addResult = iota
	addRedelivered
	addLate
)

func (r *reorder) add(rec wire.TelemetryRecord, now time.Time) addResult {
	if r.seen != nil {
		if r.seen[rec.Seq] {
			return addRedelivered
		}
		r.seen[rec.Seq] = true
		r.arrival++
		r.held[r.arrival] = held{rec: rec, arrived: now}
		return addHeld
	}
	if r.next != 0 && rec.Seq < r.next {
		for _, s := range r.skipped {
			if rec.Seq >= s[0] && rec.Seq <= s[1] {
				return addLate
			}
		}
		return addRedelivered
	}
	if _, dup := r.held[rec.Seq]; dup {
		return addRedelivered
	}
	r.held[rec.Seq] = held{rec: rec, arrived: now}
	return addHeld
}

// lowest is the smallest held sequence number.
func (r *reorder) lowest() (uint64, held) {
	var m uint64
	for s := range r.held {
		if m == 0 || s < m {
			m = s
		}
	}
	return m, r.held[m]
}

// ready reports whether a record can be handed over now.
func (r *reorder) ready(now time.Time) bool {
	if len(r.held) == 0 || r.seen != nil {
		return len(r.held) > 0
	}
	if _, ok := r.held[r.next]; ok && r.next != 0 {
		return true
	}
	_, h := r.lowest()
	return now.Sub(h.arrived) >= r.window
}

// due is how long until the lowest held record stops waiting.
func (r *reorder) due(now time.Time) (time.Duration, bool) {
	if len(r.held) == 0 || r.seen != nil {
		return 0, false
	}
	_, h := r.lowest()
	return max(h.arrived.Add(r.window).Sub(now), 0), true
}

func (r *reorder) release(now time.Time, limit int) []wire.TelemetryRecord {
	var out []wire.TelemetryRecord
	if r.seen != nil {
		for len(out) < limit && len(r.held) > 0 {
			m, h := r.lowest()
			out = append(out, h.rec)
			delete(r.held, m)
		}
		return out
	}
	for len(out) < limit && len(r.held) > 0 {
		if h, ok := r.held[r.next]; ok && r.next != 0 {
			out = append(out, h.rec)
			delete(r.held, r.next)
			r.next++
			continue
		}
		m, h := r.lowest()
		if now.Sub(h.arrived) < r.window {
			break
		}
		if r.next != 0 {
			r.skipped = append(r.skipped, [2]uint64{r.next, m - 1})
			if len(r.skipped) > 64 {
				r.skipped = r.skipped[1:]
			}
		}
		r.next = m
	}
	return out
}
