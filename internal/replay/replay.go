// Package replay is the engine of `snavio replay`: it re-emits archived or
// dead-lettered commands re-timestamped and re-signed with the platform's
// copy of the source's key, with replay metadata (replay, replay_reason,
// replay_id) that delivered and failed telemetry carry. Every run is
// audited; a run can be interrupted at any point and resumed without
// re-sending what was sent, and a DLQ message is deleted only after its
// replay was accepted by the bus.
//
// Strict-mode dedupe (docs/replay.md): by default (DedupeKeepID) a replay
// keeps each command's id. A strict route would drop a replay of a command
// still inside its dedupe TTL as a duplicate, and a DLQ message would be
// deleted for a command that never ran again; so keep-id holds such
// commands back (not sent, left in their DLQ, counted as held with the
// time their TTL ends) and replays them once the TTL is over, as the spec
// says. DedupeNewID instead gives every replayed command a new id (derived
// from the replay id and the original id, so a resumed run reuses it): the
// command runs again even inside the TTL. The operator chooses.
package replay

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Record is one command to replay, from an archive or a DLQ.
type Record struct {
	// Ref identifies the record in its source (archive event id, DLQ
	// receipt handle) for Ack.
	Ref string
	// Source is the bus source that sent the command; empty when the
	// record does not say (the envelope's command.source is used then).
	Source string
	// Detail is the command envelope as archived or dead-lettered (with or
	// without command.source).
	Detail []byte
	// At is when the command was received (archive) or first sent to its
	// queue (DLQ).
	At time.Time
	// Reason is the failure reason a DLQ message carries, if any.
	Reason string
	// Attributes are a DLQ message's attributes (its delivery signature),
	// for a signer that verifies the message again.
	Attributes map[string]string
	// Refusal, when set, is why this record must never be replayed: the plan lists it as refused with this reason and a run never sends or acknowledges it.
	Refusal string
}

// Source is where records come from.
type Source interface {
	// Name describes the source for the audit, e.g. "dlq:mailer-dlq".
	Name() string
	// Next returns up to limit records after cursor ("" = from the start)
	// in a stable order, and the cursor after them. No records means the
	// source is exhausted: a source whose underlying page can be empty
	// (a filtered archive page) must keep reading until it has records or
	// reaches the end.
	Next(ctx context.Context, cursor string, limit int) ([]Record, string, error)
	// Ack is called once a record's replay was accepted by the bus: a DLQ
	// deletes the message, an archive does nothing.
	Ack(ctx context.Context, r Record) error
}

// Leaser is implemented by sources that hide the records they return for
// a while (a DLQ's visibility timeout): records returned but neither sent
// nor acknowledged come back after Lease. A resumed run waits for them.
type Leaser interface {
	Lease() time.Duration
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

// Signer re-signs the records a run sends, for the run's audit a: per
// record the entry to put, or why it is refused (never sent, never
// acknowledged). KeySigner signs in this process; on AWS the CLI asks the
// control function, which holds the keys.
type Signer interface {
	Sign(ctx context.Context, a *wire.ReplayAudit, recs []Record) ([]Signed, error)
}

// Signed is one record's re-signed entry, or its refusal.
type Signed struct {
	Event   Event
	Refusal string
}

// KeySigner is Signer with the platform's copies of the keys at hand.
type KeySigner struct {
	Keys  Keys
	Clock clock.Clock
}

// Sign implements Signer.
func (s KeySigner) Sign(_ context.Context, a *wire.ReplayAudit, recs []Record) ([]Signed, error) {
	out := make([]Signed, len(recs))
	now := s.Clock.Now()
	for i := range recs {
		r := recs[i]
		env, err := decode(&r)
		if err != nil {
			out[i].Refusal = RefuseNotCommand
			continue
		}
		if r.Source == "" {
			return nil, fmt.Errorf("replay: command %s names no source", env.Metadata.ID)
		}
		key, err := s.Keys.SigningKey(r.Source, now)
		if err != nil {
			return nil, fmt.Errorf("replay: key of %s: %w", r.Source, err)
		}
		if out[i].Event, err = Resign(&env, r.Source, a, key, now); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Routes tells which routes are strict.
type Routes interface {
	Strict(target, command string) bool
}

// matchRefused applies the filter to a refused record, which may not be a
// readable command: its target and command are matched only when it is.
func matchRefused(f wire.ReplayFilter, r *Record) bool {
	c := *r
	env, err := decode(&c)
	if err != nil {
		env = envelope.Envelope{}
		env.Command.Target, env.Command.Name = f.Target, f.Command
	}
	return match(f, &c, &env)
}

func match(f wire.ReplayFilter, r *Record, env *envelope.Envelope) bool {
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

// Options configure a run.
type Options struct {
	Filter   wire.ReplayFilter
	Reason   string // required: why (audited, carried in telemetry)
	Operator string // who (audited)
	Dedupe   wire.ReplayDedupeMode
	// DedupeTTL is the dispatcher's strict dedupe TTL (default 300 s).
	DedupeTTL time.Duration
	// Rate limits replay to this many commands per second (0: no limit).
	Rate float64
	// Batch is how many records are read and sent at once (default 10,
	// the PutEvents maximum; with a rate, about one second's worth).
	Batch int
	// Limit stops the run once it has sent this many commands (0: no
	// limit); it ends paused and Resume continues it.
	Limit int
}

// Validate checks the options and fills in defaults.
func (o *Options) Validate() error {
	if o.Reason == "" {
		return errors.New("a replay needs a reason: give --reason-text \"why\"")
	}
	if !envelope.ValidReplayReason(o.Reason) {
		return fmt.Errorf("invalid --reason-text %.40q: use 1-%d bytes of printable text", o.Reason, envelope.MaxReplayReasonLen)
	}
	m, err := wire.ParseReplayDedupeMode(string(o.Dedupe))
	if err != nil {
		return err
	}
	o.Dedupe = m
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = 300 * time.Second
	}
	if o.Batch <= 0 || o.Batch > 10 {
		o.Batch = 10
	}
	if o.Rate < 0 || o.Rate > wire.ReplayMaxRate || o.Rate != o.Rate {
		return fmt.Errorf("invalid --rate %v: use a number of commands per second from 0 (no limit) to %d", o.Rate, wire.ReplayMaxRate)
	}
	if o.Rate > 0 {
		o.Batch = min(o.Batch, max(1, int(o.Rate)))
	}
	if o.Limit < 0 {
		return fmt.Errorf("invalid --limit %d: use 0 (no limit) or a positive count", o.Limit)
	}
	return o.Filter.Validate()
}

// Engine runs replays.
type Engine struct {
	Bus    Bus
	Signer Signer
	Routes Routes // optional: without it no command is considered strict
	Audits AuditStore
	Clock  clock.Clock
	// Sleep waits for d or until ctx ends (rate pacing); tests inject a
	// fake that advances the fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// decode reads a record's envelope: archived details have no
// command.source; dead-lettered bodies have the dispatcher's, which fills
// r.Source when the record did not say.
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
	if r.Source == "" {
		r.Source = delivered.Command.Source
	}
	delivered.Command.Source = ""
	return delivered, nil
}

// strictHeld reports whether keep-id holds r back, and until when.
func (e *Engine) strictHeld(opts *Options, r *Record, env *envelope.Envelope, now time.Time) (time.Time, bool) {
	if opts.Dedupe != wire.DedupeKeepID || e.Routes == nil || !e.Routes.Strict(env.Command.Target, env.Command.Name) {
		return time.Time{}, false
	}
	until := r.At.Add(opts.DedupeTTL)
	return until, now.Before(until)
}

// Plan reads the whole source through the filter and reports what a run
// would replay. It sends and acknowledges nothing.
func (e *Engine) Plan(ctx context.Context, src Source, opts Options) (wire.ReplayPlan, error) {
	if err := opts.Validate(); err != nil {
		return wire.ReplayPlan{}, err
	}
	p := wire.ReplayPlan{Origin: src.Name(), ByRoute: map[string]int{}, RefusedBy: map[string]int{}, Warnings: []string{}}
	now := e.Clock.Now()
	var ids []string
	counted := map[string]bool{}
	cursor := ""
	for {
		recs, next, err := src.Next(ctx, cursor, opts.Batch)
		if err != nil {
			return wire.ReplayPlan{}, fmt.Errorf("replay: read %s: %w", src.Name(), err)
		}
		if len(recs) == 0 {
			break
		}
		for i := range recs {
			r := &recs[i]
			if r.Refusal != "" {
				if matchRefused(opts.Filter, r) {
					p.Refused++
					p.RefusedBy[r.Refusal]++
				}
				continue
			}
			env, err := decode(r)
			if err != nil {
				p.Skipped++
				continue
			}
			if !match(opts.Filter, r, &env) {
				continue
			}
			if counted[env.Metadata.ID] {
				p.Repeats++
				continue
			}
			counted[env.Metadata.ID] = true
			p.Total++
			p.ByRoute[env.Command.Target+"/"+env.Command.Name]++
			ids = append(ids, env.Metadata.ID)
			if p.First.IsZero() || r.At.Before(p.First) {
				p.First = r.At
			}
			if r.At.After(p.Last) {
				p.Last = r.At
			}
			if until, held := e.strictHeld(&opts, r, &env, now); held {
				p.Held++
				if until.After(p.HeldUntil) {
					p.HeldUntil = until
				}
			}
		}
		cursor = next
	}
	if len(ids) > 0 {
		sort.Strings(ids)
		p.FirstID, p.LastID = ids[0], ids[len(ids)-1]
	}
	if p.Held > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d strict-mode command(s) are still inside their %s dedupe TTL (until %s): --dedupe keep-id holds them back and leaves them in place; replay again after that time, or pass --dedupe new-id to run them again now under new ids",
			p.Held, opts.DedupeTTL, p.HeldUntil.UTC().Format(time.RFC3339)))
	}
	if opts.Dedupe == wire.DedupeNewID && p.Total > 0 {
		p.Warnings = append(p.Warnings, "--dedupe new-id: every command runs again under a new id, even one a strict route already delivered")
	}
	if p.Skipped > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d record(s) are not readable commands and will be left in place", p.Skipped))
	}
	if p.Refused > 0 {
		p.Warnings = append(p.Warnings, fmt.Sprintf("%d record(s) are refused and will never be replayed (%s): see docs/replay.md, \"What a replay refuses\"", p.Refused, refusedSummary(p.RefusedBy)))
	}
	return p, nil
}

// refusedSummary is "reason: n, ..." in reason order.
func refusedSummary(by map[string]int) string {
	rs := make([]string, 0, len(by))
	for r := range by {
		rs = append(rs, r)
	}
	sort.Strings(rs)
	var b strings.Builder
	for i, r := range rs {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s: %d", r, by[r])
	}
	return b.String()
}

// Begin validates opts and records a new audit for a run over origin that
// plans to send planned commands; Run then runs it.
func (e *Engine) Begin(ctx context.Context, origin string, opts Options, planned int) (wire.ReplayAudit, error) {
	if err := opts.Validate(); err != nil {
		return wire.ReplayAudit{}, err
	}
	a := wire.ReplayAudit{
		ID: uuid.NewString(), Origin: origin, Reason: opts.Reason, Operator: opts.Operator,
		Filter: opts.Filter, Dedupe: opts.Dedupe, DedupeTTLSeconds: int64(opts.DedupeTTL / time.Second), Rate: opts.Rate, Planned: planned,
		Status: wire.ReplayRunning, StartedAt: e.Clock.Now(),
	}
	if err := e.Audits.Create(ctx, a); err != nil {
		return wire.ReplayAudit{}, fmt.Errorf("replay: record the audit: %w", err)
	}
	return a, nil
}

// Start plans, begins and runs a replay over src (whose reads must have no
// side effects for the plan; a DLQ is planned through a peeking source,
// then Begin and Run). progress, if not nil, is called after every batch.
func (e *Engine) Start(ctx context.Context, src Source, opts Options, progress func(wire.ReplayAudit)) (wire.ReplayAudit, error) {
	plan, err := e.Plan(ctx, src, opts)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	a, err := e.Begin(ctx, src.Name(), opts, plan.Total)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	return e.Run(ctx, src, a, opts.Limit, progress)
}

// Resumable reports whether a can be resumed, and why not.
func Resumable(a wire.ReplayAudit) error {
	if a.Status == wire.ReplayDone {
		return fmt.Errorf("replay %s already finished at %s: nothing to resume; start a new replay for what is left", a.ID, a.EndedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// Resume continues an interrupted or paused run from its audit: same
// filter, reason, dedupe mode and rate; records already sent are not sent
// again. limit bounds what this run sends (0: no limit).
func (e *Engine) Resume(ctx context.Context, src Source, id string, limit int, progress func(wire.ReplayAudit)) (wire.ReplayAudit, error) {
	a, err := e.Audits.Get(ctx, id)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	if err := Resumable(a); err != nil {
		return a, err
	}
	if a.Origin != src.Name() {
		return wire.ReplayAudit{}, fmt.Errorf("replay %s read from %s, not %s: resume it with --from %s", id, a.Origin, src.Name(), a.Origin)
	}
	a.Status, a.Resumes, a.Error = wire.ReplayRunning, a.Resumes+1, ""
	return e.Run(ctx, src, a, limit, progress)
}

// AuditOptions returns the run options an audit records.
func AuditOptions(a *wire.ReplayAudit) Options {
	return Options{Filter: a.Filter, Reason: a.Reason, Operator: a.Operator, Dedupe: a.Dedupe, DedupeTTL: time.Duration(a.DedupeTTLSeconds) * time.Second, Rate: a.Rate}
}

func interrupted(a *wire.ReplayAudit) error {
	return fmt.Errorf("replay %s interrupted after %d of %d command(s): resume it with --resume %s", a.ID, a.SentCount, a.Planned, a.ID)
}

// Run runs the replay a over src until the source is exhausted, limit
// commands were sent (status paused), ctx ends (interrupted: the batch in
// hand is finished first, so no accepted command is left unrecorded) or a
// failure. The audit is saved after every batch and at the end.
func (e *Engine) Run(ctx context.Context, src Source, a wire.ReplayAudit, limit int, progress func(wire.ReplayAudit)) (wire.ReplayAudit, error) {
	opts := AuditOptions(&a)
	if err := opts.Validate(); err != nil {
		return a, err
	}
	// Bus, audit and ack calls finish even when ctx ends mid-batch.
	keep := context.WithoutCancel(ctx)
	inHand := false
	finish := func(status wire.ReplayStatus, cause error) (wire.ReplayAudit, error) {
		a.Status, a.EndedAt = status, e.Clock.Now()
		if cause != nil {
			a.Error = cause.Error()
		}
		if l, ok := src.(Leaser); ok && inHand && status != wire.ReplayDone {
			a.ResumeAfter = a.EndedAt.Add(l.Lease())
		}
		// The audit must survive the interruption that ended the run.
		if err := e.Audits.Update(keep, a); err != nil {
			return a, errors.Join(cause, fmt.Errorf("replay: record the audit: %w", err))
		}
		if progress != nil {
			progress(a)
		}
		return a, cause
	}
	if wait := a.ResumeAfter.Sub(e.Clock.Now()); wait > 0 {
		// Records the interrupted run had in hand are still hidden.
		if err := e.Sleep(ctx, wait); err != nil {
			return finish(wire.ReplayInterrupted, interrupted(&a))
		}
	}
	a.ResumeAfter = time.Time{}
	var last time.Time
	sent := make(map[string]bool, len(a.Sent))
	for _, id := range a.Sent {
		sent[id] = true
	}
	held := map[string]bool{}
	sentNow := 0
	for {
		if ctx.Err() != nil {
			return finish(wire.ReplayInterrupted, interrupted(&a))
		}
		if limit > 0 && sentNow >= limit {
			return finish(wire.ReplayPaused, nil)
		}
		n := opts.Batch
		if limit > 0 {
			n = min(n, limit-sentNow)
		}
		recs, next, err := src.Next(ctx, a.Cursor, n)
		if err != nil {
			if ctx.Err() != nil {
				return finish(wire.ReplayInterrupted, interrupted(&a))
			}
			return finish(wire.ReplayFailed, fmt.Errorf("replay: read %s: %w", src.Name(), err))
		}
		if len(recs) == 0 {
			return finish(wire.ReplayDone, nil)
		}
		inHand = true
		var batch []Record
		flush := func() error {
			if len(batch) == 0 {
				return nil
			}
			acc, err := e.signAndPut(keep, src, &a, sent, batch)
			sentNow += acc
			batch = nil
			if progress != nil {
				progress(a)
			}
			return err
		}
		for i := range recs {
			r := &recs[i]
			if r.Refusal != "" {
				// Never sent, never acknowledged: a DLQ keeps it.
				if matchRefused(opts.Filter, r) {
					a.Refused++
					if a.RefusedBy == nil {
						a.RefusedBy = map[string]int{}
					}
					a.RefusedBy[r.Refusal]++
				}
				continue
			}
			env, err := decode(r)
			if err != nil {
				a.Skipped++
				continue
			}
			if !match(opts.Filter, r, &env) || (env.Metadata.Replay && env.Metadata.ReplayID == a.ID) {
				// Not selected, or this replay's own output (the archive
				// keeps what the replay put on the bus).
				continue
			}
			orig := env.Metadata.ID
			if sent[orig] {
				// Sent before an interruption; its Ack may not have
				// happened.
				if err := src.Ack(keep, *r); err != nil {
					return finish(wire.ReplayFailed, fmt.Errorf("replay: acknowledge %s: %w", r.Ref, err))
				}
				continue
			}
			if until, h := e.strictHeld(&opts, r, &env, e.Clock.Now()); h {
				if !held[orig] {
					held[orig] = true
					a.Held++
					if until.After(a.HeldUntil) {
						a.HeldUntil = until
					}
				}
				continue
			}
			if opts.Rate > 0 && !last.IsZero() {
				if err := flush(); err != nil {
					return finish(wire.ReplayFailed, err)
				}
				wait := time.Duration(float64(time.Second)/opts.Rate) - e.Clock.Now().Sub(last)
				if wait > 0 {
					if err := e.Sleep(ctx, wait); err != nil {
						return finish(wire.ReplayInterrupted, interrupted(&a))
					}
				}
			} else if ctx.Err() != nil {
				if err := flush(); err != nil {
					return finish(wire.ReplayFailed, err)
				}
				return finish(wire.ReplayInterrupted, interrupted(&a))
			}
			last = e.Clock.Now()
			batch = append(batch, *r)
		}
		if err := flush(); err != nil {
			return finish(wire.ReplayFailed, err)
		}
		inHand = false
		a.Cursor = next
		if err := e.Audits.Update(keep, a); err != nil {
			return finish(wire.ReplayFailed, fmt.Errorf("replay: record progress: %w", err))
		}
	}
}

// signAndPut re-signs a batch (a refused record is counted and left in
// its source) and puts what was signed.
func (e *Engine) signAndPut(ctx context.Context, src Source, a *wire.ReplayAudit, sent map[string]bool, batch []Record) (int, error) {
	signed, err := e.Signer.Sign(ctx, a, batch)
	if err != nil {
		return 0, err
	}
	if len(signed) != len(batch) {
		return 0, fmt.Errorf("replay: the signer answered %d result(s) for %d command(s)", len(signed), len(batch))
	}
	recs := make([]Record, 0, len(batch))
	events := make([]Event, 0, len(batch))
	for i, sg := range signed {
		if sg.Refusal != "" {
			a.Refused++
			if a.RefusedBy == nil {
				a.RefusedBy = map[string]int{}
			}
			a.RefusedBy[sg.Refusal]++
			continue
		}
		recs, events = append(recs, batch[i]), append(events, sg.Event)
	}
	if len(events) == 0 {
		return 0, nil
	}
	return e.put(ctx, src, a, sent, recs, events)
}

// put sends a batch, records every accepted command as sent in one audit
// write (before acknowledging any to its source, so a crash in between
// re-acks rather than re-sends), then acks them. A refused entry is
// counted and left in its source. It returns how many were accepted.
func (e *Engine) put(ctx context.Context, src Source, a *wire.ReplayAudit, sent map[string]bool, recs []Record, events []Event) (int, error) {
	res, err := e.Bus.PutEvents(ctx, events)
	if err != nil {
		return 0, fmt.Errorf("replay: put %d command(s): %w", len(events), err)
	}
	if len(res) != len(events) {
		return 0, fmt.Errorf("replay: the bus answered %d result(s) for %d command(s)", len(res), len(events))
	}
	var acked []Record
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
		acked = append(acked, recs[i])
	}
	if len(acked) == 0 {
		return 0, nil
	}
	if err := e.Audits.Update(ctx, *a); err != nil {
		return 0, fmt.Errorf("replay: record progress: %w", err)
	}
	for _, r := range acked {
		if err := src.Ack(ctx, r); err != nil {
			return len(acked), fmt.Errorf("replay: acknowledge %s: %w", r.Ref, err)
		}
	}
	return len(acked), nil
}

func originalID(r Record) string {
	env, err := decode(&r)
	if err != nil {
		return r.Ref
	}
	return env.Metadata.ID
}

// Resign re-timestamps env as of now, sets the replay metadata of a,
// picks the id per a's dedupe mode, and signs it with key for source.
func Resign(env *envelope.Envelope, source string, a *wire.ReplayAudit, key *signing.Key, now time.Time) (Event, error) {
	out := *env
	out.Command.Source = ""
	out.Metadata.Timestamp = envelope.FormatTimestamp(now)
	out.Metadata.Replay, out.Metadata.ReplayReason, out.Metadata.ReplayID = true, a.Reason, a.ID
	out.Metadata.VersionID = key.VersionID()
	if a.Dedupe == wire.DedupeNewID {
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
