package send

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Waiting limits.
const (
	// DefaultWait is --wait's value when given without one.
	DefaultWait = 30 * time.Second
	// MaxWait bounds --wait.
	MaxWait = time.Hour
	// pollWait is the longest long-poll of one telemetry read; the server
	// answers an empty page (a heartbeat) after it.
	pollWait = 5 * time.Second
	// pageSize is the records asked for per read.
	pageSize = 500
)

// TelemetryAPI is what waiting needs of the platform (a platform.Platform).
type TelemetryAPI interface {
	ReadTelemetry(ctx context.Context, q wire.TelemetryQuery) (wire.TelemetryPage, error)
}

// Outcome is the dispatcher's decision on a command, from its telemetry.
type Outcome struct {
	// Outcome is delivered, invalid, failed, duplicate or timeout.
	Outcome string `json:"outcome"`
	// Event is the deciding telemetry event (absent on timeout).
	Event json.RawMessage `json:"event,omitempty"`
	// Reason is the invalid or failed reason code.
	Reason string `json:"reason,omitempty"`
	// Path is the stage that delivered (fast or slow).
	Path string `json:"path,omitempty"`
	// RetryAfterMS and ThrottleUntil are the retry hints of a rate-limit
	// or fairness refusal.
	RetryAfterMS  int64      `json:"retry_after_ms,omitempty"`
	ThrottleUntil *time.Time `json:"throttle_until,omitempty"`
	// Waited is how long the outcome took to arrive.
	Waited string `json:"waited"`
}

// Outcomes.
const (
	OutcomeDelivered = "delivered"
	OutcomeInvalid   = "invalid"
	OutcomeFailed    = "failed"
	OutcomeDuplicate = "duplicate"
	OutcomeTimeout   = "timeout"
)

// Cursor is where following a tenant's telemetry starts.
type Cursor struct {
	// Since is the server's clock before the command was put: every event
	// about the command is appended at or after it.
	Since time.Time
}

// StartCursor asks the server for its clock (a read with wait=0), before
// the command is put, so that no event about the command can be missed.
func StartCursor(ctx context.Context, api TelemetryAPI, tenant string) (Cursor, error) {
	p, err := api.ReadTelemetry(ctx, wire.TelemetryQuery{Tenant: tenant, Limit: 1})
	if err != nil {
		return Cursor{}, err
	}
	if p.ServerTime.IsZero() {
		return Cursor{}, errors.New("the telemetry API answered without server_time; check that snavio and the server are the same version (`snavio version`)")
	}
	return Cursor{Since: p.ServerTime}, nil
}

// Wait follows tenant's telemetry from c until an outcome for command id
// arrives or timeout passes (timed with now). Events about the command
// that decide nothing (escalations, skew notices) are passed to note.
func Wait(ctx context.Context, api TelemetryAPI, tenant, id string, c Cursor, timeout time.Duration, now func() time.Time, note func(name string, ev json.RawMessage)) (Outcome, error) {
	start := now()
	var out Outcome
	timedOut, err := Follow(ctx, api, tenant, c, start.Add(timeout), now, func(seq uint64, raw json.RawMessage) (bool, error) {
		o, decided, err := judge(raw, id, note)
		if err != nil {
			return false, fmt.Errorf("telemetry record %d of tenant %s: %w", seq, tenant, err)
		}
		if decided {
			o.Waited = now().Sub(start).Round(time.Millisecond).String()
			out = o
		}
		return decided, nil
	})
	if err != nil {
		return Outcome{}, err
	}
	if timedOut {
		return Outcome{Outcome: OutcomeTimeout, Waited: timeout.String()}, nil
	}
	return out, nil
}

// Follow reads tenant's telemetry from c in long polls and hands each
// record's event to fn, until fn returns stop (or an error), deadline
// passes (timedOut; a zero deadline never passes) or ctx ends.
func Follow(ctx context.Context, api TelemetryAPI, tenant string, c Cursor, deadline time.Time, now func() time.Time, fn func(seq uint64, ev json.RawMessage) (stop bool, err error)) (timedOut bool, err error) {
	var after uint64
	first := true
	for {
		poll := pollWait
		if !deadline.IsZero() {
			left := deadline.Sub(now())
			if left <= 0 {
				return true, nil
			}
			poll = min(left, pollWait)
		}
		q := wire.TelemetryQuery{Tenant: tenant, Limit: pageSize, Wait: poll.Truncate(time.Millisecond)}
		if first {
			q.Since = c.Since
		} else {
			q.After, q.HasAfter = after, true
		}
		p, err := api.ReadTelemetry(ctx, q)
		if err != nil {
			return false, err
		}
		for _, r := range p.Records {
			stop, err := fn(r.Seq, r.Event)
			if err != nil || stop {
				return false, err
			}
		}
		first, after = false, p.NextAfter
	}
}

// judge reads one telemetry event: decided is true when it is the outcome
// of command id.
func judge(raw json.RawMessage, id string, note func(string, json.RawMessage)) (Outcome, bool, error) {
	_, o, decided, err := Decide(raw, func(c string) bool { return c == id }, note)
	return o, decided, err
}

// Decide reads one telemetry event: decided is true when it is the outcome
// of a command want picks (want sees each event's command id; events of
// other commands are skipped without decoding them further).
func Decide(raw json.RawMessage, want func(commandID string) bool, note func(string, json.RawMessage)) (id string, o Outcome, decided bool, err error) {
	var head struct {
		Event     string `json:"event"`
		CommandID string `json:"command_id"`
	}
	if err := json.Unmarshal(raw, &head); err != nil {
		return "", Outcome{}, false, fmt.Errorf("not a telemetry event: %v", err)
	}
	if head.CommandID == "" || !want(head.CommandID) {
		return "", Outcome{}, false, nil
	}
	ev, err := telemetry.Unmarshal(raw)
	if err != nil {
		// A newer server's event this snavio does not know: not an outcome.
		if note != nil {
			note(head.Event, raw)
		}
		return head.CommandID, Outcome{}, false, nil
	}
	o = Outcome{Event: raw}
	switch e := ev.(type) {
	case telemetry.Delivered:
		o.Outcome, o.Path = OutcomeDelivered, string(e.Path)
	case telemetry.Invalid:
		o.Outcome, o.Reason = OutcomeInvalid, string(e.Reason)
	case telemetry.Failed:
		o.Outcome, o.Reason, o.RetryAfterMS = OutcomeFailed, string(e.Reason), e.RetryAfterMS
		if e.Quota != "" {
			o.Reason += ": " + e.Quota
		}
		if !e.ThrottleUntil.IsZero() {
			t := e.ThrottleUntil.UTC()
			o.ThrottleUntil = &t
		}
	case telemetry.Duplicate:
		o.Outcome = OutcomeDuplicate
	default:
		if note != nil {
			note(head.Event, raw)
		}
		return head.CommandID, Outcome{}, false, nil
	}
	return head.CommandID, o, true, nil
}

// OutcomeError is a non-delivered outcome as an error with its exit code
// (nil for delivered).
func OutcomeError(id string, o Outcome) error {
	switch o.Outcome {
	case OutcomeDelivered:
		return nil
	case OutcomeInvalid:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitInvalid, Err: fmt.Errorf("command %s is invalid: %s; %s", id, o.Reason, invalidHint(o.Reason))}
	case OutcomeFailed:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitFailed, Err: fmt.Errorf("command %s failed: %s; %s", id, o.Reason, failedHint(o))}
	case OutcomeDuplicate:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitDuplicate, Err: fmt.Errorf("command %s is a duplicate: strict dedupe already delivered this id; send a new command without --id (or a new --id) if it is meant to run again", id)}
	case OutcomeTimeout:
		return &cmdutil.ExitCodeError{Code: cmdutil.ExitTimeout, Err: fmt.Errorf("no outcome for command %s within %s: it was put on the bus; follow it with `snavio tail --command-id %s`, or wait longer with --wait=2m", id, o.Waited, id)}
	}
	return fmt.Errorf("command %s: unknown outcome %q", id, o.Outcome)
}

// invalidHint says what to do about an invalid reason code
// (docs/security/reason-codes.md).
func invalidHint(code string) string {
	switch reason.Code(code) {
	case reason.BadSignature, reason.InvalidHMAC:
		return "the signature does not match: sign with the current secret of this --source (snavio tenant-config) and do not alter the message after signing"
	case reason.TimestampTooOld, reason.TimestampTooNew:
		return "the timestamp is outside the dispatcher's replay window: sign with the current time and keep this machine's clock synchronized (NTP; `snavio doctor` shows the skew)"
	case reason.UnknownKeyVersion, reason.KeyNotYetValid, reason.KeyExpired:
		return "the key version is not accepted now: fetch the current key (snavio tenant-config) and sign with it"
	case reason.UnknownSource:
		return "the dispatcher has no key for this --source: create one (snavio key create) or check --source"
	case reason.SourceBanned:
		return "the source is banned from this target and command; see its fairness telemetry and wait for the ban to end"
	case reason.DedupeConflict:
		return "this id was already used with another payload: a retry must resend the same payload, a new command needs a new id"
	}
	return "the message was rejected as sent; fix it and send a new command (snavio tail shows the event)"
}

// failedHint says when and whether a retry can succeed.
func failedHint(o Outcome) string {
	var hints []string
	if o.RetryAfterMS > 0 {
		hints = append(hints, fmt.Sprintf("retry after %s (retry_after_ms %d)", (time.Duration(o.RetryAfterMS)*time.Millisecond).String(), o.RetryAfterMS))
	}
	if o.ThrottleUntil != nil {
		hints = append(hints, "throttle_until "+o.ThrottleUntil.Format(time.RFC3339Nano))
	}
	reason, _, _ := strings.Cut(o.Reason, ":")
	switch telemetry.FailReason(reason) {
	case telemetry.FailRouteMissing:
		hints = append(hints, "no route is registered for this target and command: register one (snavio route register) or check --target and --command")
	case telemetry.FailACLDeny:
		hints = append(hints, "no ACL lets this source send this command to this target: ask the operator for a grant (snavio acl grant)")
	case telemetry.FailRateLimitExceeded, telemetry.FailFairnessViolation:
		hints = append(hints, "resend with the same --id after the hint; strict routes keep it a single delivery")
	case telemetry.FailDeliveryFailure:
		hints = append(hints, "the target queue did not accept it after retries: resend with the same --id later")
	}
	if len(hints) == 0 {
		return "see the event with -o json"
	}
	return strings.Join(hints, "; ")
}
