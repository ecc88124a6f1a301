// Package reason defines the stable, short reason codes with which the
// dispatcher rejects a message, and the error type that carries them.
//
// A Code is part of the public contract: it appears as the reason field of
// snavio.command.invalid telemetry, producers alert on it, and
// docs/security/reason-codes.md lists every one. Codes are never renamed or
// reused; new ones may be added.
package reason

import "errors"

// Code is a stable, short, snake_case reason code.
type Code string

// Envelope (schema) codes, decided by parsing alone.
const (
	// TooLarge: the event detail exceeds the size limit.
	TooLarge Code = "too_large"
	// MalformedJSON: the detail is not a single valid JSON value (syntax,
	// invalid UTF-8, trailing data, invalid escape).
	MalformedJSON Code = "malformed_json"
	// TooDeep: the payload nests objects and arrays deeper than the limit.
	TooDeep Code = "too_deep"
	// TooManyMembers: the payload has more object members in total than
	// the limit.
	TooManyMembers Code = "too_many_members"
	// DuplicateMember: an object names the same member twice (after
	// unescaping), in the envelope or in the payload.
	DuplicateMember Code = "duplicate_member"
	// UnknownMember: the envelope has a member it does not define; names
	// match exactly and case-sensitively.
	UnknownMember Code = "unknown_member"
	// MissingField: a required envelope field is absent.
	MissingField Code = "missing_field"
	// WrongType: an envelope field has the wrong JSON type.
	WrongType Code = "wrong_type"
	// CommandSourcePresent: the producer sent command.source (or a case or
	// Unicode-fold variant of it); only the dispatcher may set it.
	CommandSourcePresent Code = "command_source_present"
	// InvalidID: metadata.id is not a lowercase canonical UUID.
	InvalidID Code = "invalid_id"
	// InvalidTimestamp: metadata.timestamp is not an RFC 3339 date-time.
	InvalidTimestamp Code = "invalid_timestamp"
	// InvalidEventType: metadata.type is not snavio.command-sent.
	InvalidEventType Code = "invalid_event_type"
	// InvalidHMAC: metadata.hmac is not 64 lowercase hex digits.
	InvalidHMAC Code = "invalid_hmac"
	// InvalidVersionID: metadata.version_id is not of the form hmac-v<N>.
	InvalidVersionID Code = "invalid_version_id"
	// InvalidTarget: command.target is empty, too long or has a character
	// outside the allowed set.
	InvalidTarget Code = "invalid_target"
	// InvalidCommandName: command.name is empty, too long or has a character
	// outside the allowed set.
	InvalidCommandName Code = "invalid_command_name"
	// InvalidPayload: command.payload cannot be canonicalized (RFC 8785).
	InvalidPayload Code = "invalid_payload"
	// InvalidReplay: the replay fields are malformed or inconsistent
	// (replay_reason or replay_id without replay: true, or missing with it).
	InvalidReplay Code = "invalid_replay"
)

// Shield codes, decided against configuration and keys.
const (
	// InvalidBusSource: the bus event source is not <tenant-id>/<service>.
	InvalidBusSource Code = "invalid_bus_source"
	// TimestampTooOld: metadata.timestamp is further in the past than the
	// replay window allows.
	TimestampTooOld Code = "timestamp_too_old"
	// TimestampTooNew: metadata.timestamp is further in the future than the
	// replay window allows.
	TimestampTooNew Code = "timestamp_too_new"
	// UnknownSource: no HMAC key is registered for the bus source.
	UnknownSource Code = "unknown_source"
	// UnknownKeyVersion: the source has no key with metadata.version_id.
	UnknownKeyVersion Code = "unknown_key_version"
	// KeyNotYetValid: the key version exists but is not active yet.
	KeyNotYetValid Code = "key_not_yet_valid"
	// KeyExpired: the key version is neither current nor the previous one
	// inside its overlap window, or it passed its hard expiry.
	KeyExpired Code = "key_expired"
	// BadSignature: metadata.hmac does not match the signed content.
	BadSignature Code = "bad_signature"
	// SourceBanned: the bus source is on the ban list.
	SourceBanned Code = "source_banned"
	// DedupeConflict: a strict route's command id was reused with a
	// different payload (the slow stage's dedupe claim, package flow).
	DedupeConflict Code = "dedupe_conflict"
)

// All lists every code, in documentation order.
func All() []Code {
	return []Code{
		TooLarge, MalformedJSON, TooDeep, TooManyMembers, DuplicateMember, UnknownMember,
		MissingField, WrongType, CommandSourcePresent, InvalidID,
		InvalidTimestamp, InvalidEventType, InvalidHMAC, InvalidVersionID,
		InvalidTarget, InvalidCommandName, InvalidPayload, InvalidReplay,
		InvalidBusSource, TimestampTooOld, TimestampTooNew, UnknownSource,
		UnknownKeyVersion, KeyNotYetValid, KeyExpired, BadSignature,
		SourceBanned, DedupeConflict,
	}
}

// Known reports whether c is one of the codes in All.
func Known(c Code) bool {
	for _, k := range All() {
		if k == c {
			return true
		}
	}
	return false
}

// Error is a rejection: a stable Code, the input it concerns and a message
// that says what was wrong and how to fix it. Error values are immutable.
type Error struct {
	// Code is the stable reason code.
	Code Code
	// Field is the JSON path of the offending input (for example
	// "metadata.id" or "command.payload"), or the name of a non-JSON input
	// such as "bus source"; empty when the whole input is concerned.
	Field string
	// Msg says what was wrong and what to do, in one sentence.
	Msg string
}

// Error returns "<code>: <field>: <msg>".
func (e *Error) Error() string {
	s := string(e.Code)
	if e.Field != "" {
		s += ": " + e.Field
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

// New returns an *Error.
func New(c Code, field, msg string) *Error {
	return &Error{Code: c, Field: field, Msg: msg}
}

// Of returns the Code of the first *Error in err's chain, or "" if there is
// none (err is nil or not a rejection).
func Of(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}
