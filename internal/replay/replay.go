// Package replay is the engine of `snavio replay`: it re-emits archived or
// dead-lettered commands re-timestamped and re-signed with the platform's
// copy of the source's key, with replay metadata (replay, replay_reason,
// replay_id) that delivered and failed telemetry carry. Every run is
// audited; a run can be interrupted at any point and resumed without
// re-sending what was sent, and a DLQ message is deleted only after its
// replay was accepted by the bus.
//
// Strict-mode dedupe: by default a replay keeps each command's id, so a
// strict route drops a replay of a command still inside its dedupe TTL as a
// duplicate (and accepts it after the TTL, as the spec says). The plan warns
// about such ids. DedupeNewID instead gives every replayed command a new id
// (derived from the replay id and the original id, so a resumed run reuses
// it): the command runs again even inside the TTL. The operator chooses.
package replay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Record is one command to replay, from an archive or a DLQ.
type Record struct {
	// Ref identifies the record in its source (archive event id, DLQ
	// receipt handle) for Ack.
	Ref string
	// Source is the bus source that sent the command.
	Source string
	// Detail is the command envelope as archived or dead-lettered (with or
	// without command.source).
	Detail []byte
	// At is when the command was received (archive) or dead-lettered.
	At time.Time
	// Reason is the failure reason a DLQ message carries, if any.
	Reason string
}

// Source is where records come from.
type Source interface {
	// Name describes the source for the audit, e.g. "dlq:mailer-dlq".
	Name() string
	// Next returns up to limit records after cursor ("" = from the start)
	// in a stable order, and the cursor after them; no records means done.
	Next(ctx context.Context, cursor string, limit int) ([]Record, string, error)
	// Ack is called once a record's replay was accepted by the bus: a DLQ
	// deletes the message, an archive does nothing.
	Ack(ctx context.Context, r Record) error
}

// Event is one entry put on the bus.
type Event struct {
	Source, DetailType string
	Detail             []byte
}

// Result is the bus's answer for one entry: an event id, or an error code.
type Result struct {
	EventID, ErrorCode, ErrorMessage string
}

// Bus puts events on the command bus.
type Bus interface {
	PutEvents(ctx context.Context, events []Event) ([]Result, error)
}

// Keys gives the platform's signing key of a source.
type Keys interface {
	SigningKey(source string, now time.Time) (*signing.Key, error)
}

// Routes tells which routes are strict, for the dedupe warning.
type Routes interface {
	Strict(target, command string) bool
}

// Filter selects records. Empty fields match everything.
type Filter struct {
	Source  string    `json:"source,omitempty"`
	Target  string    `json:"target,omitempty"`
	Command string    `json:"command,omitempty"`
	Reason  string    `json:"reason,omitempty"`
	Start   time.Time `json:"start,omitzero"`
	End     time.Time `json:"end,omitzero"`
}

// Validate checks the filter.
func (f Filter) Validate() error {
	if !f.Start.IsZero() && !f.End.IsZero() && !f.Start.Before(f.End) {
		return fmt.Errorf("bad time range: --start %s is not before --end %s", f.Start.Format(time.RFC3339), f.End.Format(time.RFC3339))
	}
	return nil
}

func (f Filter) match(r *Record, env *envelope.Envelope) bool {
	switch {
	case f.Source != "" && r.Source != f.Source,
		f.Target != "" && env.Command.Target != f.Target,
		f.Command != "" && env.Command.Name != f.Command,
		f.Reason != "" && r.Reason != f.Reason,
		!f.Start.IsZero() && r.At.Before(f.Start),
		!f.End.IsZero() && !r.At.Before(f.End):
		return false
	}
	return true
}

// DedupeMode is the operator's choice for strict-mode routes.
type DedupeMode string

// Dedupe modes.
const (
	DedupeKeepID DedupeMode = "keep-id" // default: keep ids; inside the TTL a strict route drops the replay
	DedupeNewID  DedupeMode = "new-id"  // new ids: the command runs again even inside the TTL
)

// Options configure a run.
type Options struct {
	Filter   Filter
	Reason   string // required: why (audited, carried in telemetry)
	Operator string // who (audited)
	Dedupe   DedupeMode
	// DedupeTTL is the dispatcher's strict dedupe TTL (default 300 s), for
	// the plan's warning.
	DedupeTTL time.Duration
	// Rate limits replay to this many commands per second (0: no limit).
	Rate float64
	// Batch is how many records are read and sent at once (default 10,
	// the PutEvents maximum).
	Batch int
}

func (o *Options) defaults() error {
	if o.Reason == "" {
		return errors.New("a replay needs a reason: give --reason")
	}
	if !envelope.ValidReplayReason(o.Reason) {
		return fmt.Errorf("invalid --reason %q: use up to the allowed length of printable text", o.Reason)
	}
	if o.Dedupe == "" {
		o.Dedupe = DedupeKeepID
	}
	if o.Dedupe != DedupeKeepID && o.Dedupe != DedupeNewID {
		return fmt.Errorf("invalid dedupe mode %q: use keep-id or new-id", o.Dedupe)
	}
	if o.DedupeTTL == 0 {
		o.DedupeTTL = 300 * time.Second
	}
	if o.Batch <= 0 || o.Batch > 10 {
		o.Batch = 10
	}
	if o.Rate < 0 {
		return fmt.Errorf("invalid --rate %v: use a positive number per second", o.Rate)
	}
	return o.Filter.Validate()
}

// Plan is what a run would do (--dry-run): it changes nothing.
type Plan struct {
	Origin   string         `json:"origin"`
	Total    int            `json:"total"`
	ByRoute  map[string]int `json:"by_route"`
	FirstID  string         `json:"first_id,omitempty"`
	LastID   string         `json:"last_id,omitempty"`
	Skipped  int            `json:"skipped_unreadable"`
	Warnings []string       `json:"warnings"`
}

// Engine runs replays.
type Engine struct {
	Bus    Bus
	Keys   Keys
	Routes Routes // optional
	Audits AuditStore
	Clock  clock.Clock
	// Sleep waits for d or until ctx ends (rate pacing); tests inject a
	// fake that advances the fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// decode reads a record's envelope: archived details have no
// command.source; dead-lettered bodies have the dispatcher's.
func decode(r *Record) (envelope.Envelope, error) {
	env, _, err := envelope.NewParser(envelope.Limits{}).Parse(r.Detail, nil)
	if err == nil {
		return env, nil
	}
	var delivered envelope.Envelope
	if derr := unmarshalDelivered(r.Detail, &delivered); derr != nil {
		return envelope.Envelope{}, err
	}
	if delivered.Command.Source != "" && delivered.Command.Source != r.Source && r.Source != "" {
		return envelope.Envelope{}, fmt.Errorf("record's command.source %q differs from its source %q", delivered.Command.Source, r.Source)
	}
	delivered.Command.Source = ""
	return delivered, nil
}

// Plan reads the whole source through the filter and reports what a run
// would replay.
func (e *Engine) Plan(ctx context.Context, src Source, opts Options) (Plan, error) {
	if err := opts.defaults(); err != nil {
		return Plan{}, err
	}
	p := Plan{Origin: src.Name(), ByRoute: map[string]int{}, Warnings: []string{}}
	now := e.Clock.Now()
	insideTTL := 0
	var ids []string
	cursor := ""
	for {
		recs, next, err := src.Next(ctx, cursor, opts.Batch)
		if err != nil {
			return Plan{}, err
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			env, err := decode(&recs[i])
			if err != nil {
				p.Skipped++
				continue
			}
			if !opts.Filter.match(&recs[i], &env) {
				continue
			}
			p.Total++
			p.ByRoute[env.Command.Target+"/"+env.Command.Name]++
			ids = append(ids, env.Metadata.ID)
			if e.Routes != nil && e.Routes.Strict(env.Command.Target, env.Command.Name) && now.Sub(recs[i].At) < opts.DedupeTTL && opts.Dedupe == DedupeKeepID {
				insideTTL++
			}
		}
		cursor = next
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		p.FirstID, p.LastID = ids[0], ids[len(ids)-1]
	}
	if insideTTL > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d strict-mode command(s) are still inside their %s dedupe TTL: a replay now is dropped as a duplicate; wait, or pass --dedupe new-id to run them again", insideTTL, opts.DedupeTTL))
	}
	if p.Skipped > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d record(s) are not readable commands and will be left in place", p.Skipped))
	}
	return p, nil
}

// Start begins a new audited run. progress, if not nil, is called after
// every batch.
func (e *Engine) Start(ctx context.Context, src Source, opts Options, progress func(Audit)) (Audit, error) {
	if err := opts.defaults(); err != nil {
		return Audit{}, err
	}
	plan, err := e.Plan(ctx, src, opts)
	if err != nil {
		return Audit{}, err
	}
	a := Audit{
		ID: uuid.NewString(), Origin: src.Name(), Reason: opts.Reason, Operator: opts.Operator,
		Filter: opts.Filter, Dedupe: opts.Dedupe, Rate: opts.Rate, Planned: plan.Total,
		Status: StatusRunning, StartedAt: e.Clock.Now(),
	}
	if err := e.Audits.Create(ctx, a); err != nil {
		return Audit{}, fmt.Errorf("replay: record the audit: %w", err)
	}
	return e.run(ctx, src, opts, a, progress)
}

// Resume continues an interrupted run from its audit: same filter, reason,
// dedupe mode and rate; records already sent are not sent again.
func (e *Engine) Resume(ctx context.Context, src Source, id string, progress func(Audit)) (Audit, error) {
	a, err := e.Audits.Get(ctx, id)
	if err != nil {
		return Audit{}, err
	}
	if a.Status == StatusDone {
		return a, fmt.Errorf("replay %s already finished at %s: nothing to resume", id, a.EndedAt.Format(time.RFC3339))
	}
	if a.Origin != src.Name() {
		return Audit{}, fmt.Errorf("replay %s read from %s, not %s: resume it with --from %s", id, a.Origin, src.Name(), a.Origin)
	}
	opts := Options{Filter: a.Filter, Reason: a.Reason, Operator: a.Operator, Dedupe: a.Dedupe, Rate: a.Rate}
	if err := opts.defaults(); err != nil {
		return Audit{}, err
	}
	a.Status, a.Resumes = StatusRunning, a.Resumes+1
	return e.run(ctx, src, opts, a, progress)
}

func (e *Engine) run(ctx context.Context, src Source, opts Options, a Audit, progress func(Audit)) (Audit, error) {
	finish := func(status Status, cause error) (Audit, error) {
		a.Status, a.EndedAt = status, e.Clock.Now()
		if cause != nil {
			a.Error = cause.Error()
		}
		// The audit must survive the interruption that ended the run.
		if err := e.Audits.Update(context.WithoutCancel(ctx), a); err != nil {
			return a, errors.Join(cause, fmt.Errorf("replay: record the audit: %w", err))
		}
		return a, cause
	}
	var last time.Time
	sent := make(map[string]bool, len(a.Sent))
	for _, id := range a.Sent {
		sent[id] = true
	}
	for {
		if err := ctx.Err(); err != nil {
			return finish(StatusInterrupted, fmt.Errorf("replay %s interrupted: resume it with --resume %s", a.ID, a.ID))
		}
		recs, next, err := src.Next(ctx, a.Cursor, opts.Batch)
		if err != nil {
			return finish(StatusFailed, fmt.Errorf("replay: read %s: %w", src.Name(), err))
		}
		if len(recs) == 0 {
			return finish(StatusDone, nil)
		}
		var batch []Record
		var events []Event
		for i := range recs {
			r := &recs[i]
			env, err := decode(r)
			if err != nil || !opts.Filter.match(r, &env) {
				if err != nil {
					a.Skipped++
				}
				continue
			}
			if sent[env.Metadata.ID] {
				// Sent before an interruption; its Ack may not have
				// happened.
				if err := src.Ack(ctx, *r); err != nil {
					return finish(StatusFailed, fmt.Errorf("replay: acknowledge %s: %w", r.Ref, err))
				}
				continue
			}
			if opts.Rate > 0 && !last.IsZero() {
				wait := time.Duration(float64(time.Second)/opts.Rate) - e.Clock.Now().Sub(last)
				if wait > 0 {
					if err := e.Sleep(ctx, wait); err != nil {
						return finish(StatusInterrupted, fmt.Errorf("replay %s interrupted: resume it with --resume %s", a.ID, a.ID))
					}
				}
			}
			ev, err := e.resign(&env, r.Source, a, opts)
			if err != nil {
				return finish(StatusFailed, err)
			}
			last = e.Clock.Now()
			// One entry per PutEvents when pacing, so the rate holds.
			batch, events = append(batch, *r), append(events, ev)
			if opts.Rate > 0 {
				if err := e.put(ctx, src, &a, sent, batch, events); err != nil {
					return finish(StatusFailed, err)
				}
				batch, events = nil, nil
			}
		}
		if len(events) > 0 {
			if err := e.put(ctx, src, &a, sent, batch, events); err != nil {
				return finish(StatusFailed, err)
			}
		}
		a.Cursor = next
		if err := e.Audits.Update(context.WithoutCancel(ctx), a); err != nil {
			return finish(StatusFailed, fmt.Errorf("replay: record progress: %w", err))
		}
		if progress != nil {
			progress(a)
		}
	}
}

// put sends a batch, then records each accepted command as sent (before
// acknowledging it to its source, so a crash in between re-acks rather than
// re-sends) and acks it. A refused entry is counted and left in its source.
func (e *Engine) put(ctx context.Context, src Source, a *Audit, sent map[string]bool, recs []Record, events []Event) error {
	res, err := e.Bus.PutEvents(ctx, events)
	if err != nil {
		return fmt.Errorf("replay: put %d command(s): %w", len(events), err)
	}
	for i, r := range res {
		orig := originalID(recs[i])
		if r.ErrorCode != "" {
			a.Failed++
			a.LastError = fmt.Sprintf("%s: %s: %s", orig, r.ErrorCode, r.ErrorMessage)
			continue
		}
		a.Sent = append(a.Sent, orig)
		sent[orig] = true
		a.SentCount++
		if err := e.Audits.Update(context.WithoutCancel(ctx), *a); err != nil {
			return fmt.Errorf("replay: record progress: %w", err)
		}
		if err := src.Ack(ctx, recs[i]); err != nil {
			return fmt.Errorf("replay: acknowledge %s: %w", recs[i].Ref, err)
		}
	}
	return nil
}

func originalID(r Record) string {
	env, err := decode(&r)
	if err != nil {
		return r.Ref
	}
	return env.Metadata.ID
}

// resign re-timestamps env, sets the replay metadata, picks the id per the
// dedupe mode, and signs it with the platform's copy of the source's key.
func (e *Engine) resign(env *envelope.Envelope, source string, a Audit, opts Options) (Event, error) {
	now := e.Clock.Now()
	key, err := e.Keys.SigningKey(source, now)
	if err != nil {
		return Event{}, fmt.Errorf("replay: key of %s: %w", source, err)
	}
	out := *env
	out.Command.Source = ""
	out.Metadata.Timestamp = envelope.FormatTimestamp(now)
	out.Metadata.Replay, out.Metadata.ReplayReason, out.Metadata.ReplayID = true, opts.Reason, a.ID
	out.Metadata.VersionID = key.VersionID()
	if opts.Dedupe == DedupeNewID {
		out.Metadata.ID = derivedID(a.ID, env.Metadata.ID)
	}
	if err := key.SignEnvelope(&out, source); err != nil {
		return Event{}, fmt.Errorf("replay: sign %s: %w", env.Metadata.ID, err)
	}
	detail, err := out.AppendJSON(nil)
	if err != nil {
		return Event{}, err
	}
	return Event{Source: source, DetailType: envelope.EventType, Detail: detail}, nil
}

// derivedID is a UUID (v5-style, SHA-256 based) of the replay and the
// original id: stable across resumes, distinct from the original.
func derivedID(replayID, original string) string {
	sum := sha256.Sum256([]byte("snavio-replay\x00" + replayID + "\x00" + original))
	u, _ := uuid.FromBytes(sum[:16])
	u[6] = (u[6] & 0x0f) | 0x50 // version 5 layout
	u[8] = (u[8] & 0x3f) | 0x80 // RFC 4122 variant
	return u.String()
}
