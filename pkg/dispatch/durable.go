package dispatch

import (
	"context"
	"time"
)

// The durability ports: what a host needs to acknowledge a bus event only
// once nothing can lose it (docs/library.md, "Durability"). Intake runs
// the contract over them; pkg/dispatch/dispatchtest holds the suite every
// adapter passes.

// MaxArchiveBatch is the most events one Archive.Append must take: one
// PutEvents request's entries.
const MaxArchiveBatch = 10

// Archive stores the events put on the bus with the dispatcher's verdict
// on each (like the EventBridge archive, plus the verdict), for replay.
// Safe for concurrent use.
type Archive interface {
	// Append stores events (1 to MaxArchiveBatch) durably, all of them or,
	// on an error, none, and returns once they are durable (or queued,
	// under a host's deferred context). An event id already archived, or
	// repeated in events, is stored once: the first copy stays.
	Append(ctx context.Context, events []Archived) error
}

// Archived is one archived bus event and what the dispatcher made of it.
type Archived struct {
	// EventID is the bus's id of the event; required.
	EventID    string
	Source     string
	DetailType string
	Detail     []byte
	// ReceivedAt is when the bus accepted the event; required.
	ReceivedAt time.Time
	// Verdict is the shield's verdict on a command, or VerdictNotCommand.
	Verdict Verdict
	// Reason is the shield's reason code for a rejected command.
	Reason string
	// KeyVersion is the key version the shield verified an accepted
	// command with.
	KeyVersion string
}

// Verdict is what the dispatcher made of an archived event. Only an
// accepted command may ever be replayed (docs/replay.md).
type Verdict string

// Verdicts.
const (
	VerdictAccepted   Verdict = "accepted"
	VerdictRejected   Verdict = "rejected"
	VerdictNotCommand Verdict = "not_command"
)

// Handoff is the durable hand-off from the fast stage to the slow stage.
// Safe for concurrent use.
type Handoff interface {
	// Put stores payload (an Escalation's wire form) and returns once it
	// is durable (or queued, under a host's deferred context).
	Put(ctx context.Context, payload []byte) error
}

// HandoffQueue is a Handoff that a slow-stage worker polls, with SQS
// semantics: Take hides items for the visibility timeout; an item not
// Done by then is taken again. A host whose queue pushes items to the
// slow stage (an SQS event source mapping) needs only Handoff.
type HandoffQueue interface {
	Handoff
	// Take returns up to n items (n from 1 to 10), hidden for
	// visibility; none when nothing is visible.
	Take(ctx context.Context, n int, visibility time.Duration) ([]HandoffItem, error)
	// Done deletes a taken item.
	Done(ctx context.Context, it HandoffItem) error
	// Retry makes a taken item visible again after d instead of after its
	// visibility timeout (SQS ChangeMessageVisibility).
	Retry(ctx context.Context, it HandoffItem, d time.Duration) error
}

// HandoffItem is one item taken from a HandoffQueue.
type HandoffItem struct {
	// Handle identifies this receipt for Done and Retry.
	Handle string
	// Payload is what was Put.
	Payload []byte
	// Receives counts the takes of the item, this one included.
	Receives int
}
