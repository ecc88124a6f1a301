package wire

import (
	"fmt"
	"strings"
	"time"
)

// Limits of the queue API. The store enforces the same figures; a test of
// the server checks that they agree.
const (
	// QueueMaxWait is the longest long poll, as SQS's WaitTimeSeconds.
	QueueMaxWait = 20 * time.Second
	// QueueMaxPage is the largest list page.
	QueueMaxPage = 1000
	// QueueDefaultPage is the list page size when ?limit is absent.
	QueueDefaultPage = 100
	// QueueMaxDeleteBatch is the most receipt handles one delete takes.
	QueueMaxDeleteBatch = 10
	// QueueMaxReceiptLen bounds one receipt handle.
	QueueMaxReceiptLen = 512
	// QueueMaxNameLen is the longest queue name (as SQS).
	QueueMaxNameLen = 80
	// QueueMaxReceiveBatch is the most messages one receive returns.
	QueueMaxReceiveBatch = 10
	// QueueMaxVisibilityTimeout is the longest visibility timeout.
	QueueMaxVisibilityTimeout = 12 * time.Hour
	// QueueMaxMaxReceives is the highest max receives of a DLQ policy.
	QueueMaxMaxReceives = 1000
	// QueueDefaultMaxDepth is a queue's depth when a create sets none.
	QueueDefaultMaxDepth = 100_000
	// QueueMaxMaxDepth is the highest max depth.
	QueueMaxMaxDepth = 10_000_000
	// QueueMaxCount is the most queues a platform holds.
	QueueMaxCount = 1000
	// QueueDefaultMaxReceives is a dead-letter queue's max receives when a
	// create request names a DLQ without one: a few retries, without
	// parking a poison message for long.
	QueueDefaultMaxReceives = 5
)

// QueueInfo is a queue with its configuration and current counts.
type QueueInfo struct {
	Name                     string    `json:"name"`
	ARN                      string    `json:"arn"`
	DeadLetterQueue          string    `json:"dlq,omitempty"`
	MaxReceives              int       `json:"max_receives,omitempty"`
	VisibilityTimeoutSeconds float64   `json:"visibility_timeout_seconds"`
	MaxDepth                 int       `json:"max_depth"`
	CreatedAt                time.Time `json:"created_at"`
	// Visible is ApproximateNumberOfMessages, InFlight
	// ApproximateNumberOfMessagesNotVisible, OldestAgeSeconds
	// ApproximateAgeOfOldestMessage.
	Visible          int     `json:"visible"`
	InFlight         int     `json:"in_flight"`
	OldestAgeSeconds float64 `json:"oldest_age_seconds"`
	// Reserved marks a queue of the dispatcher itself: read-only here.
	Reserved bool `json:"reserved,omitempty"`
}

// QueueList is a page of queues in name order. Next, when set, is the
// ?after value of the next page.
type QueueList struct {
	Queues []QueueInfo `json:"queues"`
	Next   *string     `json:"next,omitempty"`
}

// CheckQueueName validates a queue name the way the store does, naming
// what (queue, dlq) in the error. FIFO names are refused with the fix.
func CheckQueueName(what, name string) error {
	if strings.HasSuffix(name, ".fifo") {
		return fmt.Errorf("%s %q is a FIFO queue name: Snavio delivers to standard queues only (FIFO would serialise every tenant behind one message group); drop the .fifo suffix", what, name)
	}
	if name == "" || len(name) > QueueMaxNameLen {
		return fmt.Errorf("%s name %.90q must be 1 to %d characters", what, name, QueueMaxNameLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("%s name %q: character %q is not allowed: use letters, digits, - and _", what, name, r)
		}
	}
	return nil
}

// QueueCreateRequest is the body of POST /v1/queues.
type QueueCreateRequest struct {
	Name string `json:"name"`
	// DeadLetterQueue names an existing queue; with it MaxReceives is
	// 1..1000, 0 taking QueueDefaultMaxReceives.
	DeadLetterQueue string `json:"dlq,omitempty"`
	MaxReceives     int    `json:"max_receives,omitempty"`
	// VisibilityTimeoutSeconds is 0..43200; 0 takes the default (30 s).
	VisibilityTimeoutSeconds int `json:"visibility_timeout_seconds,omitempty"`
	// MaxDepth is 0..10,000,000; 0 takes the default (100,000).
	MaxDepth int `json:"max_depth,omitempty"`
}

// Normalize checks every field and returns the request with its defaults
// filled in (a DLQ's max receives).
func (c QueueCreateRequest) Normalize() (QueueCreateRequest, error) {
	if err := CheckQueueName("queue", c.Name); err != nil {
		return c, err
	}
	if c.DeadLetterQueue != "" {
		if err := CheckQueueName("dead-letter queue", c.DeadLetterQueue); err != nil {
			return c, err
		}
		if c.DeadLetterQueue == c.Name {
			return c, fmt.Errorf("queue %s cannot be its own dead-letter queue: create a separate DLQ first", c.Name)
		}
		if c.MaxReceives == 0 {
			c.MaxReceives = QueueDefaultMaxReceives
		}
		if c.MaxReceives < 1 || c.MaxReceives > QueueMaxMaxReceives {
			return c, fmt.Errorf("max receives %d: with a dead-letter queue it must be 1 to %d (or left out for %d)", c.MaxReceives, QueueMaxMaxReceives, QueueDefaultMaxReceives)
		}
	} else if c.MaxReceives != 0 {
		return c, fmt.Errorf("max receives %d without a dead-letter queue: set both or neither", c.MaxReceives)
	}
	maxVT := int(QueueMaxVisibilityTimeout / time.Second)
	if c.VisibilityTimeoutSeconds < 0 || c.VisibilityTimeoutSeconds > maxVT {
		return c, fmt.Errorf("visibility timeout %d s: must be 0 to %d s (0: the default, 30 s)", c.VisibilityTimeoutSeconds, maxVT)
	}
	if c.MaxDepth < 0 || c.MaxDepth > QueueMaxMaxDepth {
		return c, fmt.Errorf("max depth %d: must be 0 to %d (0: the default, %d)", c.MaxDepth, QueueMaxMaxDepth, QueueDefaultMaxDepth)
	}
	return c, nil
}

// QueueCreateResult is the answer of a create: the queue, and whether it
// was created now (false: it existed with the same configuration).
type QueueCreateResult struct {
	Created bool `json:"created"`
	QueueInfo
}

// QueueReceiveRequest is the body of POST /v1/queues/{name}/receive.
type QueueReceiveRequest struct {
	// Max is 1..10 (0: 1).
	Max int `json:"max,omitempty"`
	// VisibilityTimeoutSeconds is 0..43200; 0 takes the queue's.
	VisibilityTimeoutSeconds int `json:"visibility_timeout_seconds,omitempty"`
	// WaitSeconds is the long poll, 0..20: how long to wait for a
	// message when none is visible.
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// QueueMessage is a received message. Body is the body as text when it is
// valid UTF-8 (BodyEncoding "utf-8"), else base64 (BodyEncoding "base64").
type QueueMessage struct {
	ID              string            `json:"id"`
	Body            string            `json:"body"`
	BodyEncoding    string            `json:"body_encoding"`
	Attributes      map[string]string `json:"attributes,omitempty"`
	SentAt          time.Time         `json:"sent_at"`
	ReceiptHandle   string            `json:"receipt_handle"`
	ReceiveCount    int               `json:"receive_count"`
	FirstReceivedAt time.Time         `json:"first_received_at"`
}

// QueueReceived is the answer of a receive; an empty list means nothing
// became visible within the wait.
type QueueReceived struct {
	Queue    string         `json:"queue"`
	Messages []QueueMessage `json:"messages"`
}

// QueueDeleteRequest is the body of POST /v1/queues/{name}/messages/delete.
type QueueDeleteRequest struct {
	ReceiptHandles []string `json:"receipt_handles"`
}

// QueueDeleteOutcome is one receipt handle's outcome. Error is set when it
// was not deleted: Code "stale_receipt" (received again since, or already
// deleted) or "invalid_receipt" (not a handle this server issued).
type QueueDeleteOutcome struct {
	ReceiptHandle string `json:"receipt_handle"`
	Deleted       bool   `json:"deleted"`
	Code          string `json:"code,omitempty"`
	Error         string `json:"error,omitempty"`
}

// QueueDeleteResult lists each handle's outcome, in the request's order.
type QueueDeleteResult struct {
	Queue   string               `json:"queue"`
	Results []QueueDeleteOutcome `json:"results"`
}

// QueuePurgeResult is the answer of a purge.
type QueuePurgeResult struct {
	Queue  string `json:"queue"`
	Purged int    `json:"purged"`
}

// SecondsMS is d in seconds to the millisecond, as the wire's
// *_seconds fields carry it: 1.128, never 1.1280000000000001 (which
// Duration.Seconds gives, adding the fraction to the whole seconds).
func SecondsMS(d time.Duration) float64 {
	return float64(d.Round(time.Millisecond).Milliseconds()) / 1000
}
