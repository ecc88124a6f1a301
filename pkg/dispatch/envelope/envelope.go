// Package envelope defines the Snavio command message and its strict
// parser (docs/security/envelope.md).
//
// A producer sends the envelope as the EventBridge event detail:
//
//	{"metadata":{"id":"<uuid>","timestamp":"<RFC 3339>","type":"snavio.command-sent",
//	             "hmac":"<64 hex>","version_id":"hmac-v<N>"},
//	 "command":{"target":"<service>","name":"<command>","payload":<any JSON>}}
//
// The authenticated sender is the event's source (<tenant-id>/<service>),
// which is not part of the detail. A producer-sent command.source makes the
// message invalid; the dispatcher sets Command.Source from the bus source on
// the message it delivers.
//
// Parsing is strict (docs/security/envelope.md): names match exactly and
// case-sensitively after unescaping, duplicate and unknown members are
// rejected, every field is type- and format-checked, the payload is limited
// in depth and returned in RFC 8785 canonical form, and nothing of a
// rejected message is returned except the identifying fields that were
// well-formed (Seen), for telemetry.
package envelope

import (
	"slices"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/snavio/snavio/pkg/dispatch/jcs"
)

// EventType is the only accepted metadata.type, and the EventBridge
// detail-type of a command event.
const EventType = "snavio.command-sent"

// Field limits. They are part of the wire contract
// (docs/security/envelope.md) and are not configurable.
const (
	// MaxTargetLen is the longest command.target, in bytes.
	MaxTargetLen = 64
	// MaxNameLen is the longest command.name, in bytes.
	MaxNameLen = 128
	// MaxTimestampLen is the longest metadata.timestamp, in bytes.
	MaxTimestampLen = 35
	// MaxVersionIDLen is the longest metadata.version_id, in bytes.
	MaxVersionIDLen = 15
	// MaxTenantLen is the longest tenant id, in bytes.
	MaxTenantLen = 64
	// MaxSourceLen is the longest bus source <tenant-id>/<service>, in bytes.
	MaxSourceLen = MaxTenantLen + 1 + MaxTargetLen
	// MaxReplayReasonLen is the longest metadata.replay_reason, in bytes.
	MaxReplayReasonLen = 256
)

// Defaults for Limits.
const (
	// DefaultMaxBytes is the largest detail accepted: 256 KiB, the most
	// EventBridge PutEvents and SQS SendMessage accept.
	DefaultMaxBytes = 256 << 10
	// DefaultMaxDepth is the deepest nesting of arrays and objects allowed
	// inside command.payload (a flat object has depth 1).
	DefaultMaxDepth = 32
	// DefaultMaxMembers is the most object members (name-value pairs)
	// allowed in command.payload, summed over all its objects. It bounds
	// the memory of canonicalizing an adversarial payload.
	DefaultMaxMembers = 4096
)

// Limits bound what the parser accepts. The zero value means the defaults.
type Limits struct {
	// MaxBytes is the largest detail, in bytes; <= 0 means DefaultMaxBytes.
	// Values above DefaultMaxBytes are lowered to it.
	MaxBytes int
	// MaxDepth is the deepest payload nesting; <= 0 means DefaultMaxDepth.
	MaxDepth int
	// MaxMembers is the most object members in the payload; <= 0 means
	// DefaultMaxMembers.
	MaxMembers int
}

func (l Limits) normalized() Limits {
	if l.MaxBytes <= 0 || l.MaxBytes > DefaultMaxBytes {
		l.MaxBytes = DefaultMaxBytes
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = DefaultMaxDepth
	}
	if l.MaxMembers <= 0 {
		l.MaxMembers = DefaultMaxMembers
	}
	return l
}

// Metadata is the metadata block.
type Metadata struct {
	// ID is the command id: a lowercase canonical UUID, the dedupe key.
	ID string `json:"id"`
	// Timestamp is metadata.timestamp exactly as sent; it is what is signed.
	Timestamp string `json:"timestamp"`
	// Type is always EventType.
	Type string `json:"type"`
	// HMAC is the signature, 64 lowercase hex digits (package signing).
	HMAC string `json:"hmac"`
	// VersionID names the key version that made HMAC, e.g. "hmac-v2".
	VersionID string `json:"version_id"`
	// Replay is true on a command re-emitted by the platform's replayer
	// (spec appendix C); it is signed, and telemetry carries it.
	Replay bool `json:"replay,omitzero"`
	// ReplayReason is the operator's reason for the replay; required with
	// Replay, forbidden without it.
	ReplayReason string `json:"replay_reason,omitempty"`
	// ReplayID identifies the replay operation; required with Replay,
	// forbidden without it.
	ReplayID string `json:"replay_id,omitempty"`
}

// Command is the command block.
type Command struct {
	// Source is the authenticated sender, <tenant-id>/<service>. It is empty
	// in what producers send and parse; the dispatcher sets it from the bus
	// event's source before delivery.
	Source string `json:"source,omitempty"`
	// Target is the target service name.
	Target string `json:"target"`
	// Name is the command name.
	Name string `json:"name"`
	// Payload is the command payload. After Parse it is in RFC 8785
	// canonical form, which is the form that is signed and delivered.
	Payload jsontext.Value `json:"payload"`
}

// Envelope is a whole command message.
type Envelope struct {
	Metadata Metadata `json:"metadata"`
	Command  Command  `json:"command"`
	// SentAt is Metadata.Timestamp parsed. Parse sets it; AppendJSON
	// ignores it.
	SentAt time.Time `json:"-"`
}

// New returns a producer's envelope for a command to target, sent at
// sentAt (formatted with FormatTimestamp), ready to sign with
// signing.Key.SignEnvelope. id must be a fresh lowercase UUID (reuse it
// only to retry the same command); payload must be valid JSON.
func New(id string, sentAt time.Time, target, name string, payload []byte) Envelope {
	return Envelope{
		Metadata: Metadata{ID: id, Timestamp: FormatTimestamp(sentAt), Type: EventType},
		Command:  Command{Target: target, Name: name, Payload: payload},
		SentAt:   sentAt,
	}
}

// Seen holds the identifying fields of a rejected message that were read
// and well-formed before the rejection, so that snavio.command.invalid can
// carry them. Fields not sent, not reached or malformed are empty. Seen is
// for telemetry only and must never be trusted.
type Seen struct {
	ID        string
	Timestamp string
	Target    string
	Name      string
}

// AppendJSON appends e in wire form to dst: metadata (with the replay
// fields only if Replay is true), then command with source (only if
// non-empty), target, name and payload. Payload must be
// valid JSON (it is copied verbatim). String fields are quoted per RFC 8259;
// an error is returned only if a string is not valid UTF-8 or Payload is
// empty.
func (e *Envelope) AppendJSON(dst []byte) ([]byte, error) {
	m, c := &e.Metadata, &e.Command
	if len(c.Payload) == 0 {
		return dst, errEmptyPayload
	}
	// One growth for the usual case (no string needs escapes).
	dst = slices.Grow(dst, wireOverhead+len(c.Payload)+len(m.ID)+len(m.Timestamp)+len(m.Type)+len(m.HMAC)+len(m.VersionID)+
		len(m.ReplayReason)+len(m.ReplayID)+len(c.Source)+len(c.Target)+len(c.Name))
	var err error
	dst = append(dst, `{"metadata":{"id":`...)
	dst, err = appendStrings(dst, err,
		m.ID, `,"timestamp":`,
		m.Timestamp, `,"type":`,
		m.Type, `,"hmac":`,
		m.HMAC, `,"version_id":`,
		m.VersionID, ``)
	if m.Replay {
		dst = append(dst, `,"replay":true,"replay_reason":`...)
		dst, err = appendStrings(dst, err, m.ReplayReason, `,"replay_id":`, m.ReplayID, ``)
	}
	dst = append(dst, `},"command":{`...)
	if c.Source != "" {
		dst = append(dst, `"source":`...)
		dst, err = appendStrings(dst, err, c.Source, `,`)
	}
	dst = append(dst, `"target":`...)
	dst, err = appendStrings(dst, err, c.Target, `,"name":`, c.Name, `,"payload":`)
	if err != nil {
		return dst, err
	}
	dst = append(dst, c.Payload...)
	return append(dst, "}}"...), nil
}

// wireOverhead is the most bytes AppendJSON adds around the field values
// when no string needs escapes: names, punctuation and quotes.
const wireOverhead = len(`{"metadata":{"id":,"timestamp":,"type":,"hmac":,"version_id":,"replay":true,"replay_reason":,"replay_id":},`+
	`"command":{"source":,"target":,"name":,"payload":}}`) + 2*10

// appendStrings appends pairs of (value to quote, literal to append).
func appendStrings(dst []byte, err error, pairs ...string) ([]byte, error) {
	for i := 0; i < len(pairs); i += 2 {
		var qerr error
		dst, qerr = jcs.AppendQuote(dst, pairs[i])
		if err == nil && qerr != nil {
			err = qerr
		}
		if i+1 < len(pairs) {
			dst = append(dst, pairs[i+1]...)
		}
	}
	return dst, err
}

type envError string

// Error returns the message.
func (e envError) Error() string { return string(e) }

const errEmptyPayload = envError("envelope: command.payload is empty; set it to a JSON value such as {}")

// ValidSource reports whether s is a well-formed bus source,
// <tenant-id>/<service>: a valid tenant id and a valid target name.
func ValidSource(s string) bool {
	if len(s) > MaxSourceLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			return ValidTenant(s[:i]) && ValidTarget(s[i+1:])
		}
	}
	return false
}

// TenantRule says what ValidTenant accepts, for error messages.
const TenantRule = "1-64 letters, digits, '.', '_' or '-', starting with a letter or digit"

// ValidTenant reports whether s is a tenant id: 1-64 bytes of
// [A-Za-z0-9._-] starting with a letter or digit. It is the one rule for
// tenant ids, in sources, credentials, tokens and telemetry streams.
func ValidTenant(s string) bool {
	if s == "" || len(s) > MaxTenantLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidTarget reports whether s is a well-formed target (service) name:
// 1-64 bytes of [a-z0-9._-] starting with a lowercase letter or digit.
func ValidTarget[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > MaxTargetLen || !isLowerAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isLowerAlnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidName reports whether s is a well-formed command name: 1-128 bytes
// of [A-Za-z0-9._:-] starting with a letter or digit.
func ValidName[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > MaxNameLen || !isAlnum(s[0]) {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !isAlnum(c) && c != '.' && c != '_' && c != '-' && c != ':' {
			return false
		}
	}
	return true
}

// ValidID reports whether s is a UUID in canonical lowercase form
// (8-4-4-4-12 hex digits) with the RFC 9562 variant, a version from 1 to 8,
// and not the nil UUID. Lowercase only, so one id has one spelling and
// cannot slip past deduplication by changing case.
func ValidID[S ~string | ~[]byte](s S) bool {
	if len(s) != 36 {
		return false
	}
	for i := 0; i < 36; i++ {
		c := s[i]
		switch i {
		case 8, 13, 18, 23:
			if c != '-' {
				return false
			}
		default:
			if !isLowerHex(c) {
				return false
			}
		}
	}
	if v := s[14]; v < '1' || v > '8' {
		return false
	}
	switch s[19] {
	case '8', '9', 'a', 'b':
	default:
		return false
	}
	return true
}

// ValidReplayReason reports whether s is 1-256 bytes of valid UTF-8 without
// control characters.
func ValidReplayReason[S ~string | ~[]byte](s S) bool {
	if len(s) == 0 || len(s) > MaxReplayReasonLen || !utf8.ValidString(string(s)) {
		return false
	}
	for _, r := range string(s) {
		if unicode.IsControl(r) {
			return false
		}
	}
	return true
}

// ValidHMAC reports whether s is 64 lowercase hex digits.
func ValidHMAC[S ~string | ~[]byte](s S) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isLowerHex(s[i]) {
			return false
		}
	}
	return true
}

// ValidVersionID reports whether s is "hmac-v" followed by a decimal number
// from 1 to 999999999 without leading zeros.
func ValidVersionID[S ~string | ~[]byte](s S) bool {
	const prefix = "hmac-v"
	if len(s) <= len(prefix) || len(s) > MaxVersionIDLen || string(s[:len(prefix)]) != prefix {
		return false
	}
	d := s[len(prefix):]
	if d[0] < '1' || d[0] > '9' {
		return false
	}
	for i := 1; i < len(d); i++ {
		if d[i] < '0' || d[i] > '9' {
			return false
		}
	}
	return true
}

// ParseTimestamp parses an RFC 3339 date-time as the wire allows it:
// "YYYY-MM-DDTHH:MM:SS", an optional fraction of 1 to 9 digits, then "Z" or
// a "+HH:MM"/"-HH:MM" offset; uppercase T and Z only, no leap seconds.
func ParseTimestamp[S ~string | ~[]byte](s S) (time.Time, bool) {
	n := len(s)
	if n < 20 || n > MaxTimestampLen {
		return time.Time{}, false
	}
	num := func(i, w int) (int, bool) {
		v := 0
		for j := i; j < i+w; j++ {
			c := s[j]
			if c < '0' || c > '9' {
				return 0, false
			}
			v = v*10 + int(c-'0')
		}
		return v, true
	}
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' {
		return time.Time{}, false
	}
	year, ok1 := num(0, 4)
	month, ok2 := num(5, 2)
	day, ok3 := num(8, 2)
	hour, ok4 := num(11, 2)
	minute, ok5 := num(14, 2)
	sec, ok6 := num(17, 2)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) ||
		month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	i := 19
	nsec := 0
	if s[i] == '.' {
		j := i + 1
		for j < n && j-i-1 < 10 && s[j] >= '0' && s[j] <= '9' {
			j++
		}
		digits := j - i - 1
		if digits < 1 || digits > 9 {
			return time.Time{}, false
		}
		nsec, _ = num(i+1, digits)
		for k := digits; k < 9; k++ {
			nsec *= 10
		}
		i = j
	}
	loc := time.UTC
	switch rest := n - i; {
	case rest == 1 && s[i] == 'Z':
	case rest == 6 && (s[i] == '+' || s[i] == '-') && s[i+3] == ':':
		oh, ok1 := num(i+1, 2)
		om, ok2 := num(i+4, 2)
		if !ok1 || !ok2 || oh > 23 || om > 59 {
			return time.Time{}, false
		}
		off := oh*3600 + om*60
		if s[i] == '-' {
			off = -off
		}
		if off != 0 {
			loc = time.FixedZone("", off)
		}
	default:
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, nsec, loc)
	if t.Day() != day { // 2025-02-30 normalizes to March
		return time.Time{}, false
	}
	return t, true
}

func isAlnum(c byte) bool      { return isLowerAlnum(c) || c >= 'A' && c <= 'Z' }
func isLowerAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
func isLowerHex(c byte) bool   { return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' }

// FormatTimestamp formats t the way Snavio producers send timestamps: UTC,
// RFC 3339 with millisecond precision, e.g. "2025-04-07T12:58:00.000Z".
func FormatTimestamp(t time.Time) string {
	return t.UTC().Format("2006-01-02T15:04:05.000Z")
}
