package controlapi

import (
	"context"
	"errors"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// ReplayArchive is the embedded store's archive query.
type ReplayArchive interface {
	ArchiveQuery(ctx context.Context, q embedded.ArchiveQuery) ([]embedded.ArchivedEvent, string, error)
}

// ReplayQueues is what a DLQ replay needs of the embedded store's queues.
type ReplayQueues interface {
	GetQueue(ctx context.Context, name string) (localqueue.Queue, error)
	Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]localqueue.Received, error)
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
	v *replay.Verifier
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
				out[i] = replay.Record{Ref: e.EventID, Source: e.Source, Detail: e.Detail, At: e.ReceivedAt, Refusal: s.v.Refusal(&replay.Archived{
					Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: e.ReceivedAt,
					Verdict: string(e.Verdict), Reason: e.Reason, KeyVersion: e.KeyVersion,
				})}
			}
			return out, next, nil
		}
		// A short filtered page: keep reading.
		cursor = next
	}
}

func (s *archiveSource) Ack(context.Context, replay.Record) error { return nil }

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
	got, err := s.q.Receive(ctx, s.queue, min(max(limit, 1), localqueue.MaxReceiveBatch), s.lease)
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
			Reason: m.Attributes[localqueue.AttrDLQReason], Refusal: s.check.refusal(m.Attributes, m.Body),
		})
	}
	return out, dlqCursor, nil
}

// Ack deletes the message. A stale receipt (the lease ran out and the
// message is visible again) is forgotten so that this pass receives it
// again; the engine then finds it sent and acks it with the new receipt.
func (s *dlqSource) Ack(ctx context.Context, r replay.Record) error {
	err := s.q.DeleteMessage(ctx, s.queue, r.Ref)
	if errors.Is(err, localqueue.ErrStaleReceipt) {
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
