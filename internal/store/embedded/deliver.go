package embedded

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// SendAndComplete sends a message to queue and completes owner's dedupe
// claim on claimID (turning it into a delivered record expiring at
// expiresAt) in one durable write: either both happen or neither does, so
// a crash between the send and the completion cannot let a retry deliver a
// strict-mode command twice. If the claim is not owner's live in-progress
// record the message is not sent and the error wraps flow.ErrNotOwner; if
// the send is refused (no such queue, full) the claim is left in progress
// for the caller to release.
func (s *Store) SendAndComplete(ctx context.Context, queue string, body []byte, attrs map[string]string, claimKey, owner string, expiresAt, now time.Time) (string, error) {
	return s.Deliver(ctx, Delivery{Queue: queue, Body: body, Attributes: attrs, Claim: &ClaimCompletion{ID: claimKey, Owner: owner, ExpiresAt: expiresAt, Now: now}})
}

// ClaimCompletion is a strict dedupe claim a Delivery completes. ID is the
// claim's key in the store (flow.DedupeRecord.Key, flow.Completion.Key);
// the log keeps it as written.
type ClaimCompletion struct {
	ID, Owner      string
	ExpiresAt, Now time.Time
}

// Delivery is a message to send together with what must become durable
// with it, in the same write.
type Delivery struct {
	Queue      string
	Body       []byte
	Attributes map[string]string
	// Claim, when set, is completed with the send (see SendAndComplete).
	Claim *ClaimCompletion
	// Event, when set, is appended to its tenant's telemetry stream with
	// the send: the transactional outbox, so a delivered message always
	// has its delivered event and an event never tells of a message that
	// was not sent.
	Event *OutboxEntry
}

// Deliver sends d's message and, in the same log frame (one atomic, durable
// write), completes its claim and appends its event: all of them happen or
// none. It returns the message id once the frame is durable, or queued if
// ctx is from DeferSync. Errors as Send's and SendAndComplete's;
// an event that cannot be encoded refuses the delivery before anything is
// written.
func (s *Store) Deliver(ctx context.Context, d Delivery) (string, error) {
	now := s.clock.Now()
	// 512 bytes of room for a claim and an event, so that the frame is
	// allocated once.
	f, id, err := s.queues.PrepareSend(ctx, d.Queue, d.Body, d.Attributes, now, 512)
	if err != nil {
		return "", err
	}
	var tels []telRecord
	if d.Event != nil {
		tel, err := encodeOutboxEntry(*d.Event, now.UTC())
		if err != nil {
			return "", fmt.Errorf("send to %s: its telemetry event: %w", d.Queue, err)
		}
		tels = []telRecord{tel}
	}
	if d.Claim != nil {
		appendClaimOp(f, d.Claim)
	}
	g, err := s.queueDelivery(ctx, d, f, tels)
	if err != nil {
		return "", fmt.Errorf("send %s to %s: %w", id, d.Queue, err)
	}
	if err := g.Settle(ctx); err != nil {
		return "", err
	}
	return id, nil
}

// queueDelivery checks d's claim and its queue's depth and queues f, the
// frame of its message, claim completion and events tels.
func (s *Store) queueDelivery(ctx context.Context, d Delivery, f *frame, tels []telRecord) (*walGroup, error) {
	if c := d.Claim; c != nil {
		// Held until the frame is queued: two deliveries under one claim
		// cannot both find it theirs.
		s.cmu.Lock()
		defer s.cmu.Unlock()
		owned := false
		if _, completing := s.completing[c.ID]; !completing {
			if err := s.view(ctx, func(tx *bolt.Tx) error {
				var err error
				_, owned, err = ownedTx(tx, c.ID, c.Owner, c.Now)
				return err
			}); err != nil {
				return nil, err
			}
		}
		if !owned {
			return nil, fmt.Errorf("claim %q: %w", c.ID, flow.ErrNotOwner)
		}
	}
	if err := s.queues.Reserve(f); err != nil {
		return nil, err
	}
	var g *walGroup
	var err error
	if tels != nil {
		g, err = s.addTelemetry(f, tels, nil)
	} else {
		g, err = s.wal.Add(f)
	}
	if err != nil {
		s.queues.Unreserve(f)
		return nil, err
	}
	if d.Claim != nil {
		s.completing[d.Claim.ID] = f.LSN() // s.cmu is held
	}
	return g, nil
}
