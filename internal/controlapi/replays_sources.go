package controlapi

import (
	"context"
	"errors"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// ReplayArchive is the embedded store's archive query.
type ReplayArchive interface {
	ArchiveQuery(ctx context.Context, q embedded.ArchiveQuery) ([]embedded.ArchivedEvent, string, error)
}

// ReplayQueues is what a DLQ replay needs of the embedded store's queues.
type ReplayQueues interface {
	GetQueue(ctx context.Context, name string) (embedded.Queue, error)
	Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]embedded.Received, error)
	DeleteMessage(ctx context.Context, queue, receipt string) error
}

// archiveEnd is the cursor of an exhausted archive source.
const archiveEnd = "end"

// archiveSource reads the archive through the filter's time range and
// source, target and command (the store filters those; the engine the
// rest), and marks every record that must never be replayed with its
// Refusal (verify). Ack does nothing: the archive keeps everything.
type archiveSource struct {
	a ReplayArchive
	f wire.ReplayFilter
	v *verifier
}

func (s *archiveSource) Name() string { return wire.ReplayOriginArchive }

func (s *archiveSource) Next(ctx context.Context, cursor string, limit int) ([]replay.Record, string, error) {
	if cursor == archiveEnd {
		return nil, cursor, nil
	}
	for {
		evs, next, err := s.a.ArchiveQuery(ctx, embedded.ArchiveQuery{
			From: s.f.Start, To: s.f.End, Source: s.f.Source, Target: s.f.Target, Command: s.f.Command,
			Limit: limit, PageToken: cursor,
		})
		if err != nil {
			return nil, cursor, err
		}
		if next == "" {
			next = archiveEnd
		}
		if len(evs) > 0 || next == archiveEnd {
			out := make([]replay.Record, len(evs))
			for i, e := range evs {
				out[i] = replay.Record{Ref: e.EventID, Source: e.Source, Detail: e.Detail, At: e.ReceivedAt, Refusal: s.v.refusal(&e)}
			}
			return out, next, nil
		}
		// A short filtered page: keep reading.
		cursor = next
	}
}

func (s *archiveSource) Ack(context.Context, replay.Record) error { return nil }

// Refusals of archived records (docs/replay.md, "What a replay refuses").
// A re-verification failure is refused with the shield's own reason code.
const (
	// RefuseNotCommand: an event whose detail-type the dispatcher does not
	// consume.
	RefuseNotCommand = "not_a_command"
	// refuseShieldPrefix prefixes the reason the shield rejected a command
	// with when it was received ("shield:bad_signature").
	refuseShieldPrefix = "shield:"
	// RefuseKeyVersionMismatch: the command verifies now with another key
	// version than the one the shield recorded.
	RefuseKeyVersionMismatch = "key_version_mismatch"
	// RefuseKeyRevoked: the key version it was signed with has been
	// revoked since (NotAfter): a leaked key could have signed it.
	RefuseKeyRevoked = "key_revoked"
	// RefuseUnverifiable: the re-verification itself failed (a bug).
	RefuseUnverifiable = "unverifiable"
)

// verifier re-runs the shield's checks (schema, forbidden command.source,
// window, key version, HMAC) on an archived command as of the moment it
// was received, against the registry's key history. Not safe for
// concurrent use: a source uses it from one goroutine.
type verifier struct {
	at   time.Time // the time the shield reads: the record's ReceivedAt
	now  time.Time // when the replay runs
	sh   *shield.Shield
	view *registryView
}

func newVerifier(view *registryView, cfg shield.Config, now time.Time) (*verifier, error) {
	v := &verifier{now: now, view: view}
	cfg.SampleRate, cfg.NoticeInterval = -1, -1 // no telemetry to sample or throttle
	sh, err := shield.New(cfg, shield.Deps{Clock: clock.Func(func() time.Time { return v.at }), Keys: view.ring, Telemetry: telemetry.Discard{}})
	if err != nil {
		return nil, err
	}
	v.sh = sh
	return v, nil
}

// refusal is why e must never be replayed, or "" when it may be: only a
// command the shield accepted (or, archived before verdicts were
// recorded, one that passes the shield's checks again) whose original
// signature verifies against the key version valid when it was received.
func (v *verifier) refusal(e *embedded.ArchivedEvent) string {
	switch {
	case e.Verdict == embedded.VerdictNotCommand || e.DetailType != envelope.EventType:
		return RefuseNotCommand
	case e.Verdict == embedded.VerdictRejected:
		return refuseShieldPrefix + e.Reason
	}
	v.at = e.ReceivedAt
	acc, err := v.sh.Check(e.Source, e.Detail)
	if err != nil {
		if c := reason.Of(err); c != "" {
			return string(c)
		}
		return RefuseUnverifiable
	}
	version := acc.Envelope.Metadata.VersionID
	if e.Verdict == embedded.VerdictAccepted && e.KeyVersion != "" && version != e.KeyVersion {
		return RefuseKeyVersionMismatch
	}
	if at, ok := v.view.revoked[[2]string{e.Source, version}]; ok && !v.now.Before(at) {
		return RefuseKeyRevoked
	}
	return ""
}

// attrSource is the message attribute internal/devserver's sender sets to the
// command's bus source.
const attrSource = provenance.AttrSource

// dlqCursor is the cursor of a DLQ source once a pass has begun.
const dlqCursor = "dlq"

// dlqSource reads a DLQ with receives (SQS has no peek, and neither does
// the AWS DLQ redrive): each record is hidden for lease, and Ack deletes
// it. It remembers the message ids it returned in this pass, and ends the
// pass when a receive returns only those (never-received messages come
// before re-received ones, so none is left unread). A message the
// dispatcher did not deliver to a target that dead-letters into this queue
// comes with a Refusal (deliveryCheck).
type dlqSource struct {
	q     ReplayQueues
	queue string
	lease time.Duration
	check *deliveryCheck
	seen  map[string]bool
	ids   map[string]string // receipt handle -> message id
}

func newDLQ(q ReplayQueues, queue string, lease time.Duration, check *deliveryCheck) *dlqSource {
	return &dlqSource{q: q, queue: queue, lease: lease, check: check, seen: map[string]bool{}, ids: map[string]string{}}
}

func (s *dlqSource) Name() string { return "dlq:" + s.queue }

// Lease implements replay.Leaser.
func (s *dlqSource) Lease() time.Duration { return s.lease }

func (s *dlqSource) Next(ctx context.Context, cursor string, limit int) ([]replay.Record, string, error) {
	if cursor == "" {
		clear(s.seen)
		clear(s.ids)
	}
	// Which targets dead-letter here: read at each pass's start, and at a
	// resumed run's first call.
	if cursor == "" || s.check.targets == nil {
		if err := s.check.load(ctx, s.queue); err != nil {
			return nil, cursor, err
		}
	}
	got, err := s.q.Receive(ctx, s.queue, min(max(limit, 1), embedded.MaxReceiveBatch), s.lease)
	if err != nil {
		return nil, dlqCursor, err
	}
	var out []replay.Record
	for _, m := range got {
		if s.seen[m.ID] {
			continue
		}
		s.seen[m.ID] = true
		s.ids[m.ReceiptHandle] = m.ID
		out = append(out, replay.Record{
			Ref: m.ReceiptHandle, Source: m.Attributes[attrSource], Detail: m.Body, At: m.SentAt,
			Reason: m.Attributes[embedded.AttrDLQReason], Refusal: s.check.refusal(m.Attributes, m.Body),
		})
	}
	return out, dlqCursor, nil
}

// Ack deletes the message. A stale receipt (the lease ran out and the
// message is visible again) is forgotten so that this pass receives it
// again; the engine then finds it sent and acks it with the new receipt.
func (s *dlqSource) Ack(ctx context.Context, r replay.Record) error {
	err := s.q.DeleteMessage(ctx, s.queue, r.Ref)
	if errors.Is(err, embedded.ErrStaleReceipt) {
		delete(s.seen, s.ids[r.Ref])
		err = nil
	}
	delete(s.ids, r.Ref)
	return err
}

// pipelineBus puts replayed commands through the server's pipeline, the
// same path as PutEvents: archived, then shield, fast and slow stages.
type pipelineBus struct{ p server.Pipeline }

func (b pipelineBus) PutEvents(ctx context.Context, evs []replay.Event) ([]replay.Result, error) {
	entries := make([]server.Entry, len(evs))
	for i, e := range evs {
		entries[i] = server.Entry{Index: i, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, EventBusName: "default"}
	}
	res := b.p.Ingest(ctx, entries)
	if len(res) != len(evs) {
		return nil, errors.New("the pipeline answered a different number of results")
	}
	out := make([]replay.Result, len(res))
	for i, r := range res {
		out[i] = replay.Result{EventID: r.EventID, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage}
	}
	return out, nil
}

// registryView is the registry's keys (with their history, for
// re-verification) and strict routes, loaded once per run (a replay signs
// with the version current when it started, which the dispatcher accepts
// through the rotation overlap).
type registryView struct {
	ring *keys.Keyring
	// revoked is when a key version was revoked (its NotAfter), by source
	// and version id.
	revoked map[[2]string]time.Time
	strict  map[[2]string]bool
}

func loadRegistry(ctx context.Context, r registry.Reader, policy keys.Policy, now time.Time) (*registryView, error) {
	d, err := r.Load(ctx, now, registry.KindKey, registry.KindRoute)
	if err != nil {
		return nil, err
	}
	versions := map[string][]keys.Version{}
	revoked := map[[2]string]time.Time{}
	for _, k := range d.Keys {
		for _, v := range k.Versions {
			versions[k.Source] = append(versions[k.Source], keys.Version{ID: v.ID, Secret: v.Secret, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter})
			if !v.NotAfter.IsZero() {
				revoked[[2]string{k.Source, v.ID}] = v.NotAfter
			}
		}
	}
	ring, err := keys.NewKeyring(policy, versions)
	if err != nil {
		return nil, err
	}
	v := &registryView{ring: ring, revoked: revoked, strict: map[[2]string]bool{}}
	for i := range d.Routes {
		if d.Routes[i].Strict() {
			v.strict[[2]string{d.Routes[i].Target, d.Routes[i].Command}] = true
		}
	}
	return v, nil
}

// SigningKey implements replay.Keys with the platform's copy of the key.
func (v *registryView) SigningKey(source string, now time.Time) (*signing.Key, error) {
	cur, ok := v.ring.Current(source, now)
	if !ok {
		return nil, errors.New("no current HMAC key is registered for " + source + ": create one with `snavio key create --source " + source + "`")
	}
	return signing.NewKey(cur.ID, cur.Secret)
}

// Strict implements replay.Routes.
func (v *registryView) Strict(target, command string) bool {
	return v.strict[[2]string{target, command}]
}
