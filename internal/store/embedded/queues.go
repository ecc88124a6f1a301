package embedded

import (
	"context"
	"time"

	"github.com/snavio/snavio/internal/store/localqueue"
)

// The local queues are package localqueue's; the store composes them and
// keeps their methods and names here for its callers. Deliver and
// SendAndComplete, which write more than a message, are deliver.go's.

// CreateQueue creates a queue, or returns the existing one if its
// configuration is the same; a different configuration is ErrQueueExists.
func (s *Store) CreateQueue(ctx context.Context, cfg localqueue.QueueConfig) (localqueue.Queue, error) {
	return s.queues.CreateQueue(ctx, cfg)
}

// GetQueue returns the queue name.
func (s *Store) GetQueue(ctx context.Context, name string) (localqueue.Queue, error) {
	return s.queues.GetQueue(ctx, name)
}

// ListQueues returns every queue with its counts, in name order.
func (s *Store) ListQueues(ctx context.Context) ([]localqueue.QueueStats, error) {
	return s.queues.ListQueues(ctx)
}

// Send stores a message in queue and returns its id, once durable (or
// queued, under DeferSync).
func (s *Store) Send(ctx context.Context, queue string, body []byte, attrs map[string]string) (string, error) {
	return s.queues.Send(ctx, queue, body, attrs)
}

// Receive returns up to max visible messages of queue and makes them
// invisible for visibility (0: the queue's timeout); localqueue's Receive
// says how redrive works.
func (s *Store) Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]localqueue.Received, error) {
	return s.queues.Receive(ctx, queue, max, visibility)
}

// DeleteMessage deletes the message whose latest receipt handle is
// receipt; an older handle is ErrStaleReceipt.
func (s *Store) DeleteMessage(ctx context.Context, queue, receipt string) error {
	return s.queues.DeleteMessage(ctx, queue, receipt)
}

// DeleteMessageBatch deletes, in one write, the messages of 1 to 10
// receipt handles: errs[i] is receipts[i]'s outcome, err a failure of the
// whole call.
func (s *Store) DeleteMessageBatch(ctx context.Context, queue string, receipts []string) (errs []error, err error) {
	return s.queues.DeleteMessageBatch(ctx, queue, receipts)
}

// ChangeMessageVisibility makes the message whose latest receipt handle is
// receipt visible again after visibility (0: now).
func (s *Store) ChangeMessageVisibility(ctx context.Context, queue, receipt string, visibility time.Duration) error {
	return s.queues.ChangeMessageVisibility(ctx, queue, receipt, visibility)
}

// PurgeQueue deletes every message of queue and returns how many.
func (s *Store) PurgeQueue(ctx context.Context, queue string) (int, error) {
	return s.queues.PurgeQueue(ctx, queue)
}

// ReleaseInFlight makes every received, undeleted message of queue
// visible now and returns how many (at start-up, for the queues the
// process owns alone).
func (s *Store) ReleaseInFlight(ctx context.Context, queue string) (int, error) {
	return s.queues.ReleaseInFlight(ctx, queue)
}

// QueueRoom says how many more messages queue takes before a send to it
// fails with ErrQueueFull.
func (s *Store) QueueRoom(queue string) (int, error) { return s.queues.QueueRoom(queue) }

// QueueFull says whether queue holds its MaxDepth of messages.
func (s *Store) QueueFull(queue string) (bool, error) { return s.queues.QueueFull(queue) }

// MemoryUse returns the bytes an ephemeral store's queued messages hold
// and its budget (Options.MemoryBudget); both 0 on file.
func (s *Store) MemoryUse() (used, budget int64) { return s.queues.MemoryUse() }

// QueueARN returns the ARN of the local queue name.
func QueueARN(name string) string { return localqueue.QueueARN(name) }

// ParseQueueARN returns the name of the local queue arn names.
func ParseQueueARN(arn string) (string, error) { return localqueue.ParseQueueARN(arn) }
