// Package localqueue holds the local queues of the embedded store, with
// the semantics of standard SQS queues: at-least-once, visibility timeout,
// receipt handles, redrive to a dead-letter queue after a maximum number
// of receives. A queue's configuration is in the store file (Bucket);
// its messages are in the write-ahead log (package wal) only, indexed in
// memory (memqueue.go) and rebuilt from the log at Open (Replay). Every
// message is durable once Send returns. docs/store/embedded.md has the
// design and its figures.
package localqueue

import (
	"container/heap"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/internal/uuidv7"
)

// Queue limits, as SQS's where SQS has one.
const (
	// MaxQueueNameLen is the longest queue name.
	MaxQueueNameLen = 80
	// MaxReceiveBatch is the most messages one Receive returns.
	MaxReceiveBatch = 10
	// MaxMessageBytes bounds a message's body plus its attribute names and
	// values: 1 MiB, as SQS since 2025. A command the dispatcher accepts
	// (a detail of at most 256 KiB, also in canonical form) weighs more once
	// delivered or handed off (command.source, the hand-off's wrapping,
	// the attributes), and must always fit.
	MaxMessageBytes = 1 << 20
	// MaxMessageAttributes is the most attributes a message carries.
	MaxMessageAttributes = 10
	// MaxVisibilityTimeout is the longest visibility timeout.
	MaxVisibilityTimeout = 12 * time.Hour
	// DefaultVisibilityTimeout is a queue's visibility timeout when its
	// config gives none.
	DefaultVisibilityTimeout = 30 * time.Second
	// MaxMaxReceives bounds QueueConfig.MaxReceives.
	MaxMaxReceives = 1000
	// DefaultMaxDepth is a queue's capacity when its config gives none.
	DefaultMaxDepth = 100_000
	// MaxMaxDepth bounds QueueConfig.MaxDepth.
	MaxMaxDepth = 10_000_000
	// MaxQueues is the most queues one store holds.
	MaxQueues = 1000
	// scanLimit bounds the entries one Receive examines (redrives and
	// retries included), so one call never walks a whole large queue.
	scanLimit = 1000
)

// Attributes the store sets on a message it moves to a dead-letter queue.
const (
	// AttrDLQReason says why: DLQReasonMaxReceives.
	AttrDLQReason = "snavio.dlq.reason"
	// AttrDLQSourceQueue is the ARN of the queue the message left.
	AttrDLQSourceQueue = "snavio.dlq.source_queue"
	// AttrDLQReceiveCount is how many times it had been received there.
	AttrDLQReceiveCount = "snavio.dlq.receive_count"
	// DLQReasonMaxReceives: received more than the queue's MaxReceives
	// times without being deleted.
	DLQReasonMaxReceives = "max_receives_exceeded"
)

// arnPrefix prefixes every local queue's ARN.
const arnPrefix = "arn:snavio:sqs:local:000000000000:"

// Queue errors; each returned error wraps one of these and names the queue.
var (
	ErrQueueNotFound = errors.New("queue does not exist")
	ErrQueueExists   = errors.New("queue exists with a different configuration")
	ErrQueueFull     = errors.New("queue is full")
	// ErrStaleReceipt: the receipt handle is not the message's latest (it
	// was received again after its visibility timeout), or the message is
	// gone.
	ErrStaleReceipt  = errors.New("receipt handle is stale")
	ErrTooManyQueues = errors.New("too many queues")
	// ErrMemoryBudget: an ephemeral store's queued messages hold its
	// memory budget (Config.MemoryBudget); retry once consumers catch up.
	ErrMemoryBudget = errors.New("embedded store: memory budget for queued messages spent")
)

// QueueARN returns the ARN of the local queue name.
func QueueARN(name string) string { return arnPrefix + name }

// ParseQueueARN returns the name of the local queue arn names.
func ParseQueueARN(arn string) (string, error) {
	name, ok := strings.CutPrefix(arn, arnPrefix)
	if !ok {
		return "", fmt.Errorf("queue ARN %q: a local queue's ARN has the form %s<name>", arn, arnPrefix)
	}
	if err := checkQueueName(name); err != nil {
		return "", fmt.Errorf("queue ARN %q: %w", arn, err)
	}
	return name, nil
}

func checkQueueName(name string) error {
	if strings.HasSuffix(name, ".fifo") {
		return fmt.Errorf("queue name %q: FIFO queues are not supported (Snavio delivers to standard queues): drop the .fifo suffix", name)
	}
	if name == "" || len(name) > MaxQueueNameLen {
		return fmt.Errorf("queue name %q: must be 1 to %d characters", name, MaxQueueNameLen)
	}
	for _, r := range name {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
			return fmt.Errorf("queue name %q: character %q not allowed: use letters, digits, - and _", name, r)
		}
	}
	return nil
}

// QueueConfig is a queue's configuration.
type QueueConfig struct {
	// Name: 1 to 80 letters, digits, - and _; never ending in .fifo.
	Name string `json:"name"`
	// DeadLetterQueue names the queue that receives messages received more
	// than MaxReceives times. It must exist already. Empty: no redrive.
	DeadLetterQueue string `json:"dlq,omitempty"`
	// MaxReceives is how many times a message may be received before the
	// next receive moves it to DeadLetterQueue (1 to 1000). Required with a
	// dead-letter queue; must be 0 without one.
	MaxReceives int `json:"max_receives,omitempty"`
	// VisibilityTimeout is how long a received message stays invisible
	// (0 to 12 h). Zero means DefaultVisibilityTimeout.
	VisibilityTimeout time.Duration `json:"visibility_timeout"`
	// MaxDepth is the most messages the queue holds; Send beyond it fails
	// with ErrQueueFull. Zero means DefaultMaxDepth.
	MaxDepth int `json:"max_depth"`
}

// Queue is a queue as stored.
type Queue struct {
	QueueConfig
	// ARN is arn:snavio:sqs:local:000000000000:<name>.
	ARN       string    `json:"-"`
	CreatedAt time.Time `json:"created_at"`
}

// QueueStats is a queue with its current counts, the data of a queue
// monitor.
type QueueStats struct {
	Queue
	// Visible is how many messages a Receive could return now
	// (ApproximateNumberOfMessages).
	Visible int
	// InFlight is how many received messages are invisible now
	// (ApproximateNumberOfMessagesNotVisible).
	InFlight int
	// OldestAge is the age of the oldest message, visible or not
	// (ApproximateAgeOfOldestMessage); zero when empty.
	OldestAge time.Duration
}

// Message is a message to send or as sent.
type Message struct {
	ID         string            `json:"id"`
	Body       []byte            `json:"body"`
	Attributes map[string]string `json:"attrs,omitempty"`
	SentAt     time.Time         `json:"sent_at"`
}

// Received is a message as a Receive returns it.
type Received struct {
	Message
	// ReceiptHandle deletes the message; only the latest receive's handle
	// is valid.
	ReceiptHandle string
	// ReceiveCount counts this receive.
	ReceiveCount int
	// FirstReceivedAt is the time of the first receive.
	FirstReceivedAt time.Time
}

// Per-queue bucket layout: key "cfg" holds the Queue (encodeQueue). The
// messages are in memory and in the write-ahead log (memqueue.go, queues.go).
var kCfg = []byte("cfg")

func (c *QueueConfig) normalise() error {
	if err := checkQueueName(c.Name); err != nil {
		return err
	}
	if c.DeadLetterQueue != "" {
		if err := checkQueueName(c.DeadLetterQueue); err != nil {
			return fmt.Errorf("queue %s: dead-letter %w", c.Name, err)
		}
		if c.DeadLetterQueue == c.Name {
			return fmt.Errorf("queue %s: cannot be its own dead-letter queue", c.Name)
		}
		if c.MaxReceives < 1 || c.MaxReceives > MaxMaxReceives {
			return fmt.Errorf("queue %s: max receives %d outside 1..%d (required with a dead-letter queue)", c.Name, c.MaxReceives, MaxMaxReceives)
		}
	} else if c.MaxReceives != 0 {
		return fmt.Errorf("queue %s: max receives %d without a dead-letter queue: set both or neither", c.Name, c.MaxReceives)
	}
	if c.VisibilityTimeout < 0 || c.VisibilityTimeout > MaxVisibilityTimeout {
		return fmt.Errorf("queue %s: visibility timeout %v outside 0..%v", c.Name, c.VisibilityTimeout, MaxVisibilityTimeout)
	}
	if c.VisibilityTimeout == 0 {
		c.VisibilityTimeout = DefaultVisibilityTimeout
	}
	if c.MaxDepth < 0 || c.MaxDepth > MaxMaxDepth {
		return fmt.Errorf("queue %s: max depth %d outside 0..%d", c.Name, c.MaxDepth, MaxMaxDepth)
	}
	if c.MaxDepth == 0 {
		c.MaxDepth = DefaultMaxDepth
	}
	return nil
}

// CreateQueue creates a queue, or returns the existing one if its
// configuration is the same (as SQS's CreateQueue does); a different
// configuration is ErrQueueExists.
func (qs *Queues) CreateQueue(ctx context.Context, cfg QueueConfig) (Queue, error) {
	if err := cfg.normalise(); err != nil {
		return Queue{}, err
	}
	now := qs.clock.Now().UTC()
	var q Queue
	var failure error
	err := qs.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		root := tx.Bucket(Bucket)
		if qb := root.Bucket([]byte(cfg.Name)); qb != nil {
			old, err := loadQueue(qb, cfg.Name)
			if err != nil {
				return err
			}
			if old.QueueConfig != cfg {
				failure = fmt.Errorf("create queue %s: %w (%+v): delete it first or create it with the same settings", cfg.Name, ErrQueueExists, old.QueueConfig)
			}
			q = old
			return nil
		}
		if cfg.DeadLetterQueue != "" && root.Bucket([]byte(cfg.DeadLetterQueue)) == nil {
			failure = fmt.Errorf("create queue %s: dead-letter queue %s: %w: create it first", cfg.Name, cfg.DeadLetterQueue, ErrQueueNotFound)
			return nil
		}
		if n := countBuckets(root); n >= MaxQueues {
			failure = fmt.Errorf("create queue %s: %w: a store holds at most %d", cfg.Name, ErrTooManyQueues, MaxQueues)
			return nil
		}
		qb, err := root.CreateBucket([]byte(cfg.Name))
		if err != nil {
			return err
		}
		q = Queue{QueueConfig: cfg, ARN: QueueARN(cfg.Name), CreatedAt: now}
		return qb.Put(kCfg, encodeQueue(&q))
	})
	if err != nil {
		return Queue{}, err
	}
	if failure == nil {
		qs.mu.Lock()
		if qs.queues[q.Name] == nil {
			qs.queues[q.Name] = newMemQueue(q)
		}
		qs.mu.Unlock()
	}
	return q, failure
}

func loadQueue(qb *bolt.Bucket, name string) (Queue, error) {
	q, err := decodeQueue(qb.Get(kCfg))
	if err != nil {
		return Queue{}, storecodec.Corrupt("queue config", name, err)
	}
	return q, nil
}

// commitUnlock queues f to the log if it holds any op, releases qs.mu,
// which the caller holds so that f's place in the log follows its changes
// to the queues, and waits for f to be durable.
func (qs *Queues) commitUnlock(f *Frame) error {
	return qs.queueUnlock(f, (*group).Wait)
}

// commitUnlockWritten is commitUnlock for a queue consumer's change
// (receive, delete, visibility): it waits for f to be written, not
// synced. Undone by a power loss, such a change delivers its message
// again, which SQS's at-least-once delivery allows; waiting for its sync
// kept the log syncing most of the time under load (the package comment
// of package wal). A frame that also moves messages to a dead-letter queue
// waits for its commit, as a send does: the moved messages are in the
// dead-letter queue when the call returns.
func (qs *Queues) commitUnlockWritten(f *Frame) error {
	if len(f.Meta.inserts) > 0 {
		return qs.commitUnlock(f)
	}
	f.Lazy = true
	return qs.queueUnlock(f, (*group).WaitWritten)
}

// queueUnlock queues f as commitUnlock does and waits for it with wait.
func (qs *Queues) queueUnlock(f *Frame, wait func(*group) error) error {
	if f.Empty() {
		qs.mu.Unlock()
		return nil
	}
	g, err := qs.log.Add(f)
	qs.mu.Unlock()
	if err != nil {
		return err
	}
	return wait(g)
}

// queueOf returns the queue name; qs.mu is held.
func (qs *Queues) queueOf(name string) (*memQueue, error) {
	if qs.closed.Load() {
		return nil, wal.ErrClosed
	}
	q := qs.queues[name]
	if q == nil {
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("queue %s: %w: create it first", name, ErrQueueNotFound)
	}
	return q, nil
}

// lockQueue takes qs.mu and returns the queue name. It keeps the lock
// only when it returns no error; an error is prefixed with what (the
// operation), unless what is empty.
func (qs *Queues) lockQueue(name, what string) (*memQueue, error) {
	qs.mu.Lock()
	q, err := qs.queueOf(name)
	if err != nil {
		qs.mu.Unlock()
		if what != "" {
			err = fmt.Errorf("%s: %w", what, err)
		}
		return nil, err
	}
	return q, nil
}

// GetQueue returns the queue name.
func (qs *Queues) GetQueue(ctx context.Context, name string) (Queue, error) {
	if err := ctx.Err(); err != nil {
		return Queue{}, err
	}
	qs.mu.Lock()
	defer qs.mu.Unlock()
	q, err := qs.queueOf(name)
	if err != nil {
		return Queue{}, err
	}
	return q.q, nil
}

// ListQueues returns every queue with its counts at the store clock's now,
// in name order.
func (qs *Queues) ListQueues(ctx context.Context) ([]QueueStats, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if qs.closed.Load() {
		return nil, wal.ErrClosed
	}
	now := storecodec.Nanos(qs.clock.Now())
	qs.mu.Lock()
	defer qs.mu.Unlock()
	out := make([]QueueStats, 0, len(qs.queues))
	for _, q := range qs.queues {
		st := QueueStats{Queue: q.q}
		oldest := int64(0)
		if e, _, ok := q.fresh.front(); ok {
			oldest = e.sentAt
		}
		for _, m := range q.msgs {
			if m.h.VisibleAt > now {
				st.InFlight++
			}
			if oldest == 0 || m.h.SentAt < oldest {
				oldest = m.h.SentAt
			}
		}
		st.Visible = q.depth() - st.InFlight
		if oldest != 0 {
			st.OldestAge = time.Duration(max(0, now-oldest))
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b QueueStats) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

func checkMessage(queue string, body []byte, attrs map[string]string) error {
	if len(body) == 0 {
		return fmt.Errorf("send to %s: empty body: a message needs at least one byte", queue)
	}
	if len(attrs) > MaxMessageAttributes {
		return fmt.Errorf("send to %s: %d attributes, over the limit of %d", queue, len(attrs), MaxMessageAttributes)
	}
	size := len(body)
	for k, v := range attrs {
		if k == "" || len(k) > 256 {
			return fmt.Errorf("send to %s: attribute name %.40q must be 1 to 256 bytes", queue, k)
		}
		size += len(k) + len(v)
	}
	if size > MaxMessageBytes {
		return fmt.Errorf("send to %s: message of %d bytes (body and attributes), over the limit of %d", queue, size, MaxMessageBytes)
	}
	return nil
}

// Send stores a message in queue and returns its id. The message is
// durable when Send returns, or queued to the log if ctx is from
// wal.DeferSync.
func (qs *Queues) Send(ctx context.Context, queue string, body []byte, attrs map[string]string) (string, error) {
	f, id, err := qs.PrepareSend(ctx, queue, body, attrs, qs.clock.Now(), 0)
	if err != nil {
		return "", err
	}
	if err := qs.Reserve(f); err != nil {
		return "", fmt.Errorf("send %s to %s: %w", id, queue, err)
	}
	g, err := qs.log.Add(f)
	if err != nil {
		qs.Unreserve(f)
		return "", fmt.Errorf("send %s to %s: %w", id, queue, err)
	}
	if err := g.Settle(ctx); err != nil {
		return "", err
	}
	return id, nil
}

// PrepareSend checks a message for queue and returns a frame holding it,
// sent at now, with room for extra more bytes of ops, and its id (a
// UUIDv7 of now). Reserve it before adding it to the log.
func (qs *Queues) PrepareSend(ctx context.Context, queue string, body []byte, attrs map[string]string, now time.Time, extra int) (*Frame, string, error) {
	if err := checkMessage(queue, body, attrs); err != nil {
		return nil, "", err
	}
	if err := ctx.Err(); err != nil {
		return nil, "", err
	}
	uid := uuidv7.New(now)
	id := uid.String()
	sent := storecodec.Nanos(now)
	h := msgHeader{VisibleAt: sent, SentAt: sent}
	msg := &Message{ID: id, Body: body, Attributes: attrs}
	// Room for the message with its attributes, so that the frame is
	// allocated once.
	f := wal.NewFrame[Changes](64 + len(queue) + msgLen(msg) + extra)
	off, n := newMsgOp(f, queue, &h, msg)
	f.Meta.inserts = append(f.Meta.inserts, insert{queue: queue, id: uid, h: h, n: n, off: off})
	return f, id, nil
}

// Reserve counts the message of f (PrepareSend) against its queue's
// MaxDepth and the memory budget until it is committed, or fails with
// ErrQueueFull, ErrMemoryBudget or ErrQueueNotFound. Unreserve undoes
// it if f is not added to the log.
func (qs *Queues) Reserve(f *Frame) error {
	in := &f.Meta.inserts[0]
	q, err := qs.lockQueue(in.queue, "")
	if err != nil {
		return err
	}
	if q.full() {
		n := q.depth() + q.reserved
		qs.mu.Unlock()
		return fmt.Errorf("%w: %d messages, its max depth (retry after consumers catch up, or raise MaxDepth)", ErrQueueFull, n)
	}
	if !qs.memReserve(in.n, false) {
		used := qs.memBytes
		qs.mu.Unlock()
		return fmt.Errorf("%w: %d of %d bytes held by queued messages (retry after consumers catch up, or raise the budget)", ErrMemoryBudget, used, qs.memBudget)
	}
	q.reserved++
	qs.mu.Unlock()
	in.q = q
	return nil
}

// Unreserve undoes Reserve for a frame that was not added to the log.
func (qs *Queues) Unreserve(f *Frame) {
	in := &f.Meta.inserts[0]
	qs.mu.Lock()
	in.q.reserved--
	qs.memRelease(in.n)
	qs.mu.Unlock()
}

// Receive returns up to max (1 to 10) visible messages of queue in the
// order they became visible, and makes them invisible for visibility (0:
// the queue's timeout). A message already received MaxReceives times is
// not returned: it moves to the queue's dead-letter queue with the
// attributes AttrDLQReason, AttrDLQSourceQueue and AttrDLQReceiveCount.
// An empty result means nothing is visible now.
func (qs *Queues) Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]Received, error) {
	if max < 1 || max > MaxReceiveBatch {
		return nil, fmt.Errorf("receive from %s: max %d outside 1..%d", queue, max, MaxReceiveBatch)
	}
	if visibility < 0 || visibility > MaxVisibilityTimeout {
		return nil, fmt.Errorf("receive from %s: visibility timeout %v outside 0..%v", queue, visibility, MaxVisibilityTimeout)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	nonces := make([]byte, max*nonceLen)
	if _, err := rand.Read(nonces); err != nil {
		return nil, fmt.Errorf("receipt handle: %w", err)
	}
	now := qs.clock.Now().UTC()
	type got struct {
		h   msgHeader
		ref msgRef
	}
	var out []got
	f := newFrame()
	q, err := qs.lockQueue(queue, "receive")
	if err != nil {
		return nil, err
	}
	vt := visibility
	if vt == 0 {
		vt = q.q.VisibilityTimeout
	}
	for scanned := 0; len(out) < max && scanned < scanLimit; scanned++ {
		m := q.next(storecodec.Nanos(now))
		if m == nil {
			break
		}
		if q.q.DeadLetterQueue != "" && int(m.h.ReceiveCount) >= q.q.MaxReceives {
			if err := qs.redrive(f, q, m); err != nil {
				qs.mu.Unlock()
				return nil, err
			}
			continue
		}
		m.h.ReceiveCount++
		if m.h.FirstRecv == 0 {
			m.h.FirstRecv = storecodec.Nanos(now)
		}
		m.h.VisibleAt = storecodec.Nanos(now.Add(vt))
		copy(m.h.Nonce[:], nonces[len(out)*nonceLen:])
		m.h.HasReceipt = true
		heap.Fix(&q.vis, m.idx)
		stateOp(f, queue, m)
		out = append(out, got{m.h, m.ref()})
	}
	err = qs.commitUnlockWritten(f)
	res := make([]Received, 0, len(out))
	for _, o := range out {
		rec, rerr := o.ref.load()
		if err != nil {
			continue // every reference is released
		}
		if rerr != nil {
			err = rerr
			continue
		}
		_, m, derr := decodeMsg(rec)
		if derr != nil {
			err = storecodec.Corrupt("message", queue, derr)
			continue
		}
		res = append(res, Received{Message: m, ReceiptHandle: receiptOf(m.ID, o.h.Nonce), ReceiveCount: int(o.h.ReceiveCount), FirstReceivedAt: time.Unix(0, o.h.FirstRecv).UTC()})
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// redrive moves m from q to q's dead-letter queue in frame f, keeping its
// id, body, attributes and sent time. The dead-letter queue's depth limit
// does not apply: a redrive never loses a message. qs.mu is held.
func (qs *Queues) redrive(f *Frame, q *memQueue, m *memMsg) error {
	dq := qs.queues[q.q.DeadLetterQueue]
	if dq == nil {
		return storecodec.Corrupt("queue config", q.q.Name, fmt.Errorf("dead-letter queue %s missing", q.q.DeadLetterQueue))
	}
	rec, err := m.ref().load()
	if err != nil {
		return err
	}
	_, msg, err := decodeMsg(rec)
	if err != nil {
		return storecodec.Corrupt("message", m.id, err)
	}
	attrs := make(map[string]string, len(msg.Attributes)+3)
	for k, v := range msg.Attributes {
		attrs[k] = v
	}
	attrs[AttrDLQReason] = DLQReasonMaxReceives
	attrs[AttrDLQSourceQueue] = q.q.ARN
	attrs[AttrDLQReceiveCount] = strconv.Itoa(int(m.h.ReceiveCount))
	msg.Attributes = attrs
	dh := msgHeader{VisibleAt: max(m.h.VisibleAt, m.h.SentAt), SentAt: m.h.SentAt}
	drec := encodeMsg(&dh, &msg)
	id, err := parseID(m.id)
	if err != nil {
		return storecodec.Corrupt("message", m.id, err)
	}
	q.removeReceived(m)
	m.seg.Drop(m.n)
	qs.memRelease(m.n)
	delOp(f, q.q.Name, m.id)
	off := msgOp(f, dq.q.Name, drec)
	dq.reserved++
	qs.memReserve(len(drec), true)
	f.Meta.inserts = append(f.Meta.inserts, insert{q: dq, id: id, h: dh, n: len(drec), off: off})
	return nil
}

// receiptPrefix starts every receipt handle; the version lets the format
// change.
const receiptPrefix = "r1."

// receiptOf returns the receipt handle of message id's receive with
// nonce.
func receiptOf(id string, nonce [nonceLen]byte) string {
	return receiptPrefix + id + "." + hex.EncodeToString(nonce[:])
}

// parseReceipt returns the message id and the nonce inside a receipt
// handle.
func parseReceipt(h string) (string, [nonceLen]byte, error) {
	var nonce [nonceLen]byte
	rest, ok := strings.CutPrefix(h, receiptPrefix)
	i := strings.LastIndexByte(rest, '.')
	if !ok || i <= 0 || len(rest)-i-1 != 2*nonceLen {
		return "", nonce, fmt.Errorf("receipt handle %.60q: malformed: pass the ReceiptHandle a Receive returned, unchanged", h)
	}
	if _, err := hex.Decode(nonce[:], []byte(rest[i+1:])); err != nil {
		return "", nonce, fmt.Errorf("receipt handle %.60q: malformed nonce: pass the ReceiptHandle a Receive returned, unchanged", h)
	}
	return rest[:i], nonce, nil
}

// MaxDeleteBatch is the most receipt handles one DeleteMessageBatch
// takes (SQS's DeleteMessageBatch limit).
const MaxDeleteBatch = 10

// DeleteMessage deletes the message whose latest receipt handle is receipt. A
// handle from an earlier receive (the visibility timeout expired and the
// message was received again) or of a message already deleted is
// ErrStaleReceipt: the message is not deleted.
func (qs *Queues) DeleteMessage(ctx context.Context, queue, receipt string) error {
	errs, err := qs.DeleteMessageBatch(ctx, queue, []string{receipt})
	if err != nil {
		return err
	}
	return errs[0]
}

// DeleteMessageBatch deletes, in one write, the messages whose
// latest receipt handles are receipts (1 to 10), like SQS's
// DeleteMessageBatch: errs[i] is receipts[i]'s outcome (nil: deleted; a
// malformed or stale handle, as DeleteMessage reports it), and err a
// failure of the whole call (no such queue, storage), in which case
// nothing was deleted.
func (qs *Queues) DeleteMessageBatch(ctx context.Context, queue string, receipts []string) (errs []error, err error) {
	if len(receipts) == 0 || len(receipts) > MaxDeleteBatch {
		return nil, fmt.Errorf("delete from %s: %d receipt handles: give 1 to %d per call", queue, len(receipts), MaxDeleteBatch)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	errs = make([]error, len(receipts))
	f := newFrame()
	q, err := qs.lockQueue(queue, "delete")
	if err != nil {
		return nil, err
	}
	for i, r := range receipts {
		id, nonce, err := parseReceipt(r)
		if err != nil {
			errs[i] = fmt.Errorf("delete from %s: %w", queue, err)
			continue
		}
		m := q.msgs[id]
		if m == nil || !m.h.HasReceipt || m.h.Nonce != nonce {
			errs[i] = fmt.Errorf("delete message %s from %s: %w: it was received again after its visibility timeout, or deleted; delete with the latest receive's handle", id, queue, ErrStaleReceipt)
			continue
		}
		q.removeReceived(m)
		m.seg.Drop(m.n)
		qs.memRelease(m.n)
		delOp(f, queue, id)
	}
	if err := qs.commitUnlockWritten(f); err != nil {
		return nil, err
	}
	return errs, nil
}

// ChangeMessageVisibility makes the message whose latest receipt handle is
// receipt visible again after visibility (0: now), like SQS's
// ChangeMessageVisibility: a consumer that failed to handle a message
// gives it back sooner than its visibility timeout. A stale or malformed
// handle is ErrStaleReceipt or a parse error; the message is unchanged.
func (qs *Queues) ChangeMessageVisibility(ctx context.Context, queue, receipt string, visibility time.Duration) error {
	if visibility < 0 || visibility > MaxVisibilityTimeout {
		return fmt.Errorf("change visibility in %s: %v outside 0..%v", queue, visibility, MaxVisibilityTimeout)
	}
	id, nonce, err := parseReceipt(receipt)
	if err != nil {
		return fmt.Errorf("change visibility in %s: %w", queue, err)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	at := storecodec.Nanos(qs.clock.Now().Add(visibility))
	f := newFrame()
	q, err := qs.lockQueue(queue, "change visibility")
	if err != nil {
		return err
	}
	m := q.msgs[id]
	if m == nil || !m.h.HasReceipt || m.h.Nonce != nonce {
		qs.mu.Unlock()
		return fmt.Errorf("change visibility of message %s in %s: %w: it was received again after its visibility timeout, or deleted", id, queue, ErrStaleReceipt)
	}
	m.h.VisibleAt = at
	heap.Fix(&q.vis, m.idx)
	stateOp(f, queue, m)
	return qs.commitUnlockWritten(f)
}

// PurgeQueue deletes every message of queue, visible or in flight, and returns
// how many it deleted.
func (qs *Queues) PurgeQueue(ctx context.Context, queue string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	f := newFrame()
	p := f.Op(OpPurge)
	f.B = storecodec.AppendStr(f.B, queue)
	f.End(p)
	f.Meta.purge = queue
	if _, err := qs.lockQueue(queue, "purge"); err != nil {
		return 0, err
	}
	if err := qs.commitUnlock(f); err != nil {
		return 0, err
	}
	return f.Meta.purged, nil
}

func countBuckets(b *bolt.Bucket) int {
	n := 0
	_ = b.ForEachBucket(func([]byte) error { n++; return nil })
	return n
}

// ReleaseInFlight makes every received, undeleted message of queue
// visible now (SQS ChangeMessageVisibility to 0 for each) and returns how
// many it released; their receipt handles go stale. A process that owns
// the store alone calls it at start-up for its internal queues: the
// receivers of those messages died with the previous process, so waiting
// out their visibility timeouts would only delay the work.
func (qs *Queues) ReleaseInFlight(ctx context.Context, queue string) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := storecodec.Nanos(qs.clock.Now())
	f := newFrame()
	q, err := qs.lockQueue(queue, "release in-flight messages")
	if err != nil {
		return 0, err
	}
	released := 0
	for _, m := range q.msgs {
		if m.h.VisibleAt <= now {
			continue
		}
		m.h.VisibleAt, m.h.HasReceipt, m.h.Nonce = now, false, [nonceLen]byte{}
		heap.Fix(&q.vis, m.idx)
		stateOp(f, queue, m)
		released++
	}
	if err := qs.commitUnlock(f); err != nil {
		return 0, err
	}
	return released, nil
}
