package embedded

import (
	"context"
	"time"

	"github.com/snavio/snavio/pkg/dispatch"
)

// The durability ports of pkg/dispatch (dispatch.Archive,
// dispatch.HandoffQueue) on the embedded store; they pass
// dispatchtest.TestDurability.

// DispatchArchive is dispatch.Archive over the store's archive.
type DispatchArchive struct{ S *Store }

var _ dispatch.Archive = DispatchArchive{}

// Append implements dispatch.Archive.
func (a DispatchArchive) Append(ctx context.Context, events []dispatch.Archived) error {
	evs := make([]ArchivedEvent, len(events))
	for i, e := range events {
		evs[i] = ArchivedEvent{EventID: e.EventID, Source: e.Source, DetailType: e.DetailType, Detail: e.Detail, ReceivedAt: e.ReceivedAt,
			Verdict: Verdict(e.Verdict), Reason: e.Reason, KeyVersion: e.KeyVersion}
	}
	return a.S.ArchiveAppendBatch(ctx, evs)
}

// Handoff is dispatch.HandoffQueue over one of the store's queues
// (durable, with SQS visibility semantics); the queue must exist.
type Handoff struct {
	S     *Store
	Queue string
}

var _ dispatch.HandoffQueue = Handoff{}

// Put implements dispatch.Handoff.
func (h Handoff) Put(ctx context.Context, payload []byte) error {
	_, err := h.S.Send(ctx, h.Queue, payload, nil)
	return err
}

// Take implements dispatch.HandoffQueue.
func (h Handoff) Take(ctx context.Context, n int, visibility time.Duration) ([]dispatch.HandoffItem, error) {
	got, err := h.S.Receive(ctx, h.Queue, n, visibility)
	if err != nil {
		return nil, err
	}
	out := make([]dispatch.HandoffItem, len(got))
	for i, m := range got {
		out[i] = dispatch.HandoffItem{Handle: m.ReceiptHandle, Payload: m.Body, Receives: m.ReceiveCount}
	}
	return out, nil
}

// Done implements dispatch.HandoffQueue.
func (h Handoff) Done(ctx context.Context, it dispatch.HandoffItem) error {
	return h.S.DeleteMessage(ctx, h.Queue, it.Handle)
}

// Retry implements dispatch.HandoffQueue.
func (h Handoff) Retry(ctx context.Context, it dispatch.HandoffItem, d time.Duration) error {
	return h.S.ChangeMessageVisibility(ctx, h.Queue, it.Handle, d)
}
