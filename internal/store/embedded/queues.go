package embedded

import "github.com/snavio/snavio/internal/store/localqueue"

// The local queues are package localqueue's; the store composes them
// (Store.Queues) and keeps their names here for its callers.

type (
	// QueueConfig is a queue's configuration.
	QueueConfig = localqueue.QueueConfig
	// Queue is a queue as stored.
	Queue = localqueue.Queue
	// QueueStats is a queue with its current counts.
	QueueStats = localqueue.QueueStats
	// Message is a message to send or as sent.
	Message = localqueue.Message
	// Received is a message as a Receive returns it.
	Received = localqueue.Received
)

// Queue limits (localqueue's).
const (
	MaxQueueNameLen          = localqueue.MaxQueueNameLen
	MaxReceiveBatch          = localqueue.MaxReceiveBatch
	MaxMessageBytes          = localqueue.MaxMessageBytes
	MaxMessageAttributes     = localqueue.MaxMessageAttributes
	MaxVisibilityTimeout     = localqueue.MaxVisibilityTimeout
	DefaultVisibilityTimeout = localqueue.DefaultVisibilityTimeout
	MaxMaxReceives           = localqueue.MaxMaxReceives
	DefaultMaxDepth          = localqueue.DefaultMaxDepth
	MaxMaxDepth              = localqueue.MaxMaxDepth
	MaxQueues                = localqueue.MaxQueues
	MaxDeleteBatch           = localqueue.MaxDeleteBatch
)

// Attributes set on a message moved to a dead-letter queue (localqueue's).
const (
	AttrDLQReason        = localqueue.AttrDLQReason
	AttrDLQSourceQueue   = localqueue.AttrDLQSourceQueue
	AttrDLQReceiveCount  = localqueue.AttrDLQReceiveCount
	DLQReasonMaxReceives = localqueue.DLQReasonMaxReceives
)

// Queue errors (localqueue's).
var (
	ErrQueueNotFound = localqueue.ErrQueueNotFound
	ErrQueueExists   = localqueue.ErrQueueExists
	ErrQueueFull     = localqueue.ErrQueueFull
	ErrStaleReceipt  = localqueue.ErrStaleReceipt
	ErrTooManyQueues = localqueue.ErrTooManyQueues
	ErrMemoryBudget  = localqueue.ErrMemoryBudget
)

// QueueARN returns the ARN of the local queue name.
func QueueARN(name string) string { return localqueue.QueueARN(name) }

// ParseQueueARN returns the name of the local queue arn names.
func ParseQueueARN(arn string) (string, error) { return localqueue.ParseQueueARN(arn) }
