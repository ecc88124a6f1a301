package embedded

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// Local queues with the semantics of standard SQS queues: at-least-once,
// visibility timeout, receipt handles, redrive to a dead-letter queue after
// a maximum number of receives. Every message is durable once Send returns.

// Queue limits, as SQS's where SQS has one.
const (
	// MaxQueueNameLen is the longest queue name.
	MaxQueueNameLen = 80
	// MaxReceiveBatch is the most messages one Receive returns.
	MaxReceiveBatch = 10
	// MaxMessageBytes bounds a message's body plus its attribute names and
	// values.
	MaxMessageBytes = 256 << 10
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

// storedMsg is a message's header and id as the committer reads them; the
// rest of its record (attributes, body) is decoded only when returned.
type storedMsg struct {
	msgHeader
	ID string
}

// Per-queue bucket layout: key "cfg" holds the Queue (encodeQueue), "n"
// the message count; sub-bucket "msgs" maps id to the message's record
// (encodeMsg), "vis" maps
// timeKey(visible_at, seq) to id (the receive order), "age" maps
// timeKey(sent_at, seq) to id (the oldest message).
var (
	kCfg  = []byte("cfg")
	kN    = []byte("n")
	bMsgs = []byte("msgs")
	bVis  = []byte("vis")
	bAge  = []byte("age")
)

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
func (s *Store) CreateQueue(ctx context.Context, cfg QueueConfig) (Queue, error) {
	if err := cfg.normalise(); err != nil {
		return Queue{}, err
	}
	now := s.clock.Now().UTC()
	var q Queue
	var failure error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		root := tx.Bucket(bQueues)
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
		for _, name := range [][]byte{bMsgs, bVis, bAge} {
			if _, err := qb.CreateBucket(name); err != nil {
				return err
			}
		}
		q = Queue{QueueConfig: cfg, ARN: QueueARN(cfg.Name), CreatedAt: now}
		if err := qb.Put(kCfg, encodeQueue(&q)); err != nil {
			return err
		}
		return qb.Put(kN, u64(0))
	})
	if err != nil {
		return Queue{}, err
	}
	return q, failure
}

func loadQueue(qb *bolt.Bucket, name string) (Queue, error) {
	q, err := decodeQueue(qb.Get(kCfg))
	if err != nil {
		return Queue{}, corrupt("queue config", name, err)
	}
	return q, nil
}

func queueBucket(tx *bolt.Tx, name string) (*bolt.Bucket, error) {
	qb := tx.Bucket(bQueues).Bucket([]byte(name))
	if qb == nil {
		if err := checkQueueName(name); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("queue %s: %w: create it first", name, ErrQueueNotFound)
	}
	return qb, nil
}

// GetQueue returns the queue name.
func (s *Store) GetQueue(ctx context.Context, name string) (Queue, error) {
	var q Queue
	err := s.view(ctx, func(tx *bolt.Tx) error {
		qb, err := queueBucket(tx, name)
		if err != nil {
			return err
		}
		q, err = loadQueue(qb, name)
		return err
	})
	return q, err
}

// ListQueues returns every queue with its counts at the store clock's now,
// in name order. The in-flight count walks only the invisible messages.
func (s *Store) ListQueues(ctx context.Context) ([]QueueStats, error) {
	now := s.clock.Now()
	var out []QueueStats
	err := s.view(ctx, func(tx *bolt.Tx) error {
		out = nil
		return tx.Bucket(bQueues).ForEachBucket(func(name []byte) error {
			qb := tx.Bucket(bQueues).Bucket(name)
			q, err := loadQueue(qb, string(name))
			if err != nil {
				return err
			}
			st := QueueStats{Queue: q}
			total := int(binary.BigEndian.Uint64(qb.Get(kN)))
			c := qb.Bucket(bVis).Cursor()
			for k, _ := c.Seek(timeKey(nanos(now)+1, 0)); k != nil; k, _ = c.Next() {
				st.InFlight++
			}
			st.Visible = total - st.InFlight
			if k, _ := qb.Bucket(bAge).Cursor().First(); k != nil {
				st.OldestAge = max(0, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(k[:8])))))
			}
			out = append(out, st)
			return nil
		})
	})
	return out, err
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

// newID returns a UUID version 7 (RFC 9562): now's Unix milliseconds, then
// random bits. Time-ordered ids are appended to the message bucket instead
// of being inserted at random pages.
func newID(now time.Time) (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("message id: %w", err)
	}
	binary.BigEndian.PutUint16(b[4:], uint16(now.UnixMilli()))
	binary.BigEndian.PutUint32(b[0:], uint32(now.UnixMilli()>>16))
	b[6] = b[6]&0x0f | 0x70
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16]), nil
}

// Send stores a message in queue and returns its id. The message is
// durable when Send returns.
func (s *Store) Send(ctx context.Context, queue string, body []byte, attrs map[string]string) (string, error) {
	if err := checkMessage(queue, body, attrs); err != nil {
		return "", err
	}
	id, err := newID(s.clock.Now())
	if err != nil {
		return "", err
	}
	rec := newMsgRecord(id, body, attrs, s.clock.Now())
	var failure error
	err = s.update(ctx, func(tx *bolt.Tx) error {
		var err error
		failure, err = sendTx(tx, queue, rec)
		return err
	})
	if err != nil {
		return "", err
	}
	if failure != nil {
		return "", failure
	}
	return id, nil
}

// newMsgRecord encodes a new message, visible from sentAt. It is encoded
// before the write is queued, so the committer only assigns its sequence
// number.
func newMsgRecord(id string, body []byte, attrs map[string]string, sentAt time.Time) []byte {
	sent := nanos(sentAt)
	return encodeMsg(&msgHeader{VisibleAt: sent, SentAt: sent}, &Message{ID: id, Body: body, Attributes: attrs})
}

// sendTx stores the new message rec in queue inside tx. failure is a
// refusal (no such queue, full); err a storage failure.
func sendTx(tx *bolt.Tx, queue string, rec []byte) (failure, err error) {
	qb, err := queueBucket(tx, queue)
	if err != nil {
		return err, nil
	}
	q, err := loadQueue(qb, queue)
	if err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint64(qb.Get(kN))
	if n >= uint64(q.MaxDepth) {
		return fmt.Errorf("send to %s: %w: %d messages, its max depth (retry after consumers catch up, or raise MaxDepth)", queue, ErrQueueFull, n), nil
	}
	return nil, insertTx(qb, rec)
}

// insertTx adds the message record rec (an encodeMsg result the caller
// hands over: the transaction keeps it until it commits) to the queue
// bucket qb, giving it the queue's next sequence number.
func insertTx(qb *bolt.Bucket, rec []byte) error {
	seq, err := qb.NextSequence()
	if err != nil {
		return err
	}
	binary.BigEndian.PutUint64(rec[msgOffSeq:], seq)
	h, id, err := decodeMsgHeader(rec)
	if err != nil {
		return err
	}
	if err := appendOnly(qb.Bucket(bMsgs)).Put([]byte(id), rec); err != nil {
		return err
	}
	if err := appendOnly(qb.Bucket(bVis)).Put(timeKey(h.VisibleAt, seq), []byte(id)); err != nil {
		return err
	}
	if err := appendOnly(qb.Bucket(bAge)).Put(timeKey(h.SentAt, seq), []byte(id)); err != nil {
		return err
	}
	return qb.Put(kN, u64(binary.BigEndian.Uint64(qb.Get(kN))+1))
}

// removeTx deletes m from the queue bucket qb.
func removeTx(qb *bolt.Bucket, m storedMsg) error {
	if err := qb.Bucket(bMsgs).Delete([]byte(m.ID)); err != nil {
		return err
	}
	if err := qb.Bucket(bVis).Delete(timeKey(m.VisibleAt, m.Seq)); err != nil {
		return err
	}
	if err := qb.Bucket(bAge).Delete(timeKey(m.SentAt, m.Seq)); err != nil {
		return err
	}
	return qb.Put(kN, u64(binary.BigEndian.Uint64(qb.Get(kN))-1))
}

// loadMsg reads the header and id of message id; rec is its record,
// valid only inside the transaction.
func loadMsg(qb *bolt.Bucket, id []byte) (m storedMsg, rec []byte, ok bool, err error) {
	rec = qb.Bucket(bMsgs).Get(id)
	if rec == nil {
		return storedMsg{}, nil, false, nil
	}
	h, rid, err := decodeMsgHeader(rec)
	if err == nil && rid != string(id) {
		err = fmt.Errorf("record of message %q", rid)
	}
	if err != nil {
		return storedMsg{}, nil, false, corrupt("message", string(id), err)
	}
	return storedMsg{msgHeader: h, ID: rid}, rec, true, nil
}

// rewriteMsg stores m's header over a copy of its record rec and returns
// the copy.
func rewriteMsg(qb *bolt.Bucket, m *storedMsg, rec []byte) ([]byte, error) {
	nrec := bytes.Clone(rec)
	putHeader(nrec, &m.msgHeader)
	return nrec, qb.Bucket(bMsgs).Put([]byte(m.ID), nrec)
}

// Receive returns up to max (1 to 10) visible messages of queue in the
// order they became visible, and makes them invisible for visibility (0:
// the queue's timeout). A message already received MaxReceives times is
// not returned: it moves to the queue's dead-letter queue with the
// attributes AttrDLQReason, AttrDLQSourceQueue and AttrDLQReceiveCount.
// An empty result means nothing is visible now.
func (s *Store) Receive(ctx context.Context, queue string, max int, visibility time.Duration) ([]Received, error) {
	if max < 1 || max > MaxReceiveBatch {
		return nil, fmt.Errorf("receive from %s: max %d outside 1..%d", queue, max, MaxReceiveBatch)
	}
	if visibility < 0 || visibility > MaxVisibilityTimeout {
		return nil, fmt.Errorf("receive from %s: visibility timeout %v outside 0..%v", queue, visibility, MaxVisibilityTimeout)
	}
	now := s.clock.Now().UTC()
	// recs are the received messages' new records; they are decoded
	// after the commit, outside the committer.
	var recs [][]byte
	var failure error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		recs, failure = recs[:0], nil
		qb, err := queueBucket(tx, queue)
		if err != nil {
			failure = fmt.Errorf("receive: %w", err)
			return nil
		}
		q, err := loadQueue(qb, queue)
		if err != nil {
			return err
		}
		vt := visibility
		if vt == 0 {
			vt = q.VisibilityTimeout
		}
		type dueMsg struct {
			m   storedMsg
			rec []byte
		}
		var due []dueMsg
		c := qb.Bucket(bVis).Cursor()
		scanned, receivable := 0, 0
		for k, id := c.First(); k != nil && receivable < max && scanned < scanLimit; k, id = c.Next() {
			if int64(binary.BigEndian.Uint64(k[:8])) > nanos(now) {
				break
			}
			scanned++
			m, rec, ok, err := loadMsg(qb, id)
			if err != nil {
				return err
			}
			if !ok {
				return corrupt("queue index", queue, fmt.Errorf("no message %s", id))
			}
			due = append(due, dueMsg{m, rec})
			if q.DeadLetterQueue == "" || int(m.ReceiveCount) < q.MaxReceives {
				receivable++
			}
		}
		for _, d := range due {
			m := d.m
			if q.DeadLetterQueue != "" && int(m.ReceiveCount) >= q.MaxReceives {
				if err := redriveTx(tx, qb, q, m, d.rec); err != nil {
					return err
				}
				continue
			}
			if err := qb.Bucket(bVis).Delete(timeKey(m.VisibleAt, m.Seq)); err != nil {
				return err
			}
			m.ReceiveCount++
			if m.FirstRecv == 0 {
				m.FirstRecv = nanos(now)
			}
			m.VisibleAt = nanos(now.Add(vt))
			if _, err := rand.Read(m.Nonce[:]); err != nil {
				return fmt.Errorf("receipt handle: %w", err)
			}
			m.HasReceipt = true
			nrec, err := rewriteMsg(qb, &m, d.rec)
			if err != nil {
				return err
			}
			if err := appendOnly(qb.Bucket(bVis)).Put(timeKey(m.VisibleAt, m.Seq), []byte(m.ID)); err != nil {
				return err
			}
			recs = append(recs, nrec)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if failure != nil {
		return nil, failure
	}
	out := make([]Received, 0, len(recs))
	for _, rec := range recs {
		h, m, err := decodeMsg(rec)
		if err != nil {
			return nil, corrupt("message", queue, err)
		}
		out = append(out, Received{Message: m, ReceiptHandle: receiptOf(m.ID, h.Nonce), ReceiveCount: int(h.ReceiveCount), FirstReceivedAt: time.Unix(0, h.FirstRecv).UTC()})
	}
	return out, nil
}

// redriveTx moves m (record rec) from the queue q (bucket qb) to q's
// dead-letter queue, keeping its id, body, attributes and sent time. The
// dead-letter queue's depth limit does not apply: a redrive never loses a
// message.
func redriveTx(tx *bolt.Tx, qb *bolt.Bucket, q Queue, m storedMsg, rec []byte) error {
	dqb := tx.Bucket(bQueues).Bucket([]byte(q.DeadLetterQueue))
	if dqb == nil {
		return corrupt("queue config", q.Name, fmt.Errorf("dead-letter queue %s missing", q.DeadLetterQueue))
	}
	_, msg, err := decodeMsg(rec)
	if err != nil {
		return corrupt("message", m.ID, err)
	}
	attrs := make(map[string]string, len(msg.Attributes)+3)
	for k, v := range msg.Attributes {
		attrs[k] = v
	}
	attrs[AttrDLQReason] = DLQReasonMaxReceives
	attrs[AttrDLQSourceQueue] = q.ARN
	attrs[AttrDLQReceiveCount] = strconv.Itoa(int(m.ReceiveCount))
	msg.Attributes = attrs
	dh := msgHeader{VisibleAt: max(m.VisibleAt, m.SentAt), SentAt: m.SentAt}
	// Encoded before removeTx: msg's body aliases rec, which the removal
	// may invalidate.
	drec := encodeMsg(&dh, &msg)
	if err := removeTx(qb, m); err != nil {
		return err
	}
	return insertTx(dqb, drec)
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
func (s *Store) DeleteMessage(ctx context.Context, queue, receipt string) error {
	errs, err := s.DeleteMessageBatch(ctx, queue, []string{receipt})
	if err != nil {
		return err
	}
	return errs[0]
}

// DeleteMessageBatch deletes, in one durable write, the messages whose
// latest receipt handles are receipts (1 to 10), like SQS's
// DeleteMessageBatch: errs[i] is receipts[i]'s outcome (nil: deleted; a
// malformed or stale handle, as DeleteMessage reports it), and err a
// failure of the whole call (no such queue, storage), in which case
// nothing was deleted.
func (s *Store) DeleteMessageBatch(ctx context.Context, queue string, receipts []string) (errs []error, err error) {
	if len(receipts) == 0 || len(receipts) > MaxDeleteBatch {
		return nil, fmt.Errorf("delete from %s: %d receipt handles: give 1 to %d per call", queue, len(receipts), MaxDeleteBatch)
	}
	type target struct {
		id    string
		nonce [nonceLen]byte
	}
	targets := make([]target, len(receipts))
	errs = make([]error, len(receipts))
	for i, r := range receipts {
		id, nonce, err := parseReceipt(r)
		if err != nil {
			errs[i] = fmt.Errorf("delete from %s: %w", queue, err)
			continue
		}
		targets[i] = target{id, nonce}
	}
	var failure error
	stale := make([]bool, len(receipts))
	err = s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		clear(stale)
		qb, err := queueBucket(tx, queue)
		if err != nil {
			failure = fmt.Errorf("delete: %w", err)
			return nil
		}
		for i, t := range targets {
			if errs[i] != nil {
				continue
			}
			m, _, ok, err := loadMsg(qb, []byte(t.id))
			if err != nil {
				return err
			}
			if !ok || !m.HasReceipt || m.Nonce != t.nonce {
				stale[i] = true
				continue
			}
			if err := removeTx(qb, m); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if failure != nil {
		return nil, failure
	}
	for i, st := range stale {
		if st {
			errs[i] = fmt.Errorf("delete message %s from %s: %w: it was received again after its visibility timeout, or deleted; delete with the latest receive's handle", targets[i].id, queue, ErrStaleReceipt)
		}
	}
	return errs, nil
}

// ChangeMessageVisibility makes the message whose latest receipt handle is
// receipt visible again after visibility (0: now), like SQS's
// ChangeMessageVisibility: a consumer that failed to handle a message
// gives it back sooner than its visibility timeout. A stale or malformed
// handle is ErrStaleReceipt or a parse error; the message is unchanged.
func (s *Store) ChangeMessageVisibility(ctx context.Context, queue, receipt string, visibility time.Duration) error {
	if visibility < 0 || visibility > MaxVisibilityTimeout {
		return fmt.Errorf("change visibility in %s: %v outside 0..%v", queue, visibility, MaxVisibilityTimeout)
	}
	id, nonce, err := parseReceipt(receipt)
	if err != nil {
		return fmt.Errorf("change visibility in %s: %w", queue, err)
	}
	at := nanos(s.clock.Now().Add(visibility))
	var failure error
	err = s.update(ctx, func(tx *bolt.Tx) error {
		failure = nil
		qb, err := queueBucket(tx, queue)
		if err != nil {
			failure = fmt.Errorf("change visibility: %w", err)
			return nil
		}
		m, rec, ok, err := loadMsg(qb, []byte(id))
		if err != nil {
			return err
		}
		if !ok || !m.HasReceipt || m.Nonce != nonce {
			failure = fmt.Errorf("change visibility of message %s in %s: %w: it was received again after its visibility timeout, or deleted", id, queue, ErrStaleReceipt)
			return nil
		}
		if err := qb.Bucket(bVis).Delete(timeKey(m.VisibleAt, m.Seq)); err != nil {
			return err
		}
		m.VisibleAt = at
		if _, err := rewriteMsg(qb, &m, rec); err != nil {
			return err
		}
		return appendOnly(qb.Bucket(bVis)).Put(timeKey(m.VisibleAt, m.Seq), []byte(m.ID))
	})
	if err != nil {
		return err
	}
	return failure
}

// PurgeQueue deletes every message of queue, visible or in flight, and returns
// how many it deleted.
func (s *Store) PurgeQueue(ctx context.Context, queue string) (int, error) {
	var n int
	var failure error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		n, failure = 0, nil
		qb, err := queueBucket(tx, queue)
		if err != nil {
			failure = fmt.Errorf("purge: %w", err)
			return nil
		}
		n = int(binary.BigEndian.Uint64(qb.Get(kN)))
		for _, name := range [][]byte{bMsgs, bVis, bAge} {
			if err := qb.DeleteBucket(name); err != nil {
				return err
			}
			if _, err := qb.CreateBucket(name); err != nil {
				return err
			}
		}
		return qb.Put(kN, u64(0))
	})
	if err != nil {
		return 0, err
	}
	return n, failure
}

func countBuckets(b *bolt.Bucket) int {
	n := 0
	_ = b.ForEachBucket(func([]byte) error { n++; return nil })
	return n
}

// SendAndComplete sends a message to queue and completes owner's dedupe
// claim on claimID (turning it into a delivered record expiring at
// expiresAt) in one transaction: either both happen or neither does, so a
// crash between the send and the completion cannot let a retry deliver a
// strict-mode command twice. If the claim is not owner's live in-progress
// record the message is not sent and the error wraps flow.ErrNotOwner; if
// the send is refused (no such queue, full) the claim is left in progress
// for the caller to release.
func (s *Store) SendAndComplete(ctx context.Context, queue string, body []byte, attrs map[string]string, claimID, owner string, expiresAt, now time.Time) (string, error) {
	return s.Deliver(ctx, Delivery{Queue: queue, Body: body, Attributes: attrs, Claim: &ClaimCompletion{ID: claimID, Owner: owner, ExpiresAt: expiresAt, Now: now}})
}

// ClaimCompletion is a strict dedupe claim a Delivery completes.
type ClaimCompletion struct {
	ID, Owner      string
	ExpiresAt, Now time.Time
}

// Delivery is a message to send together with what must become durable
// with it, in the same transaction.
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

// Deliver sends d's message and, in the same transaction, completes its
// claim and appends its event: all of them happen or none. It returns the
// message id. Errors as Send's and SendAndComplete's; an event that cannot
// be encoded refuses the delivery before anything is written.
func (s *Store) Deliver(ctx context.Context, d Delivery) (string, error) {
	if err := checkMessage(d.Queue, d.Body, d.Attributes); err != nil {
		return "", err
	}
	now := s.clock.Now()
	id, err := newID(now)
	if err != nil {
		return "", err
	}
	rec := newMsgRecord(id, d.Body, d.Attributes, now)
	var tel []telRecord
	var seqs []uint64
	if d.Event != nil {
		r, err := encodeOutboxEntry(*d.Event, now.UTC())
		if err != nil {
			return "", fmt.Errorf("send to %s: its telemetry event: %w", d.Queue, err)
		}
		tel, seqs = []telRecord{r}, make([]uint64, 1)
	}
	c := d.Claim
	var failure error
	var notOwner bool
	err = s.update(ctx, func(tx *bolt.Tx) error {
		failure, notOwner = nil, false
		if c != nil {
			if _, ok, err := ownedTx(tx, c.ID, c.Owner, c.Now); err != nil || !ok {
				notOwner = !ok
				return err
			}
		}
		var err error
		if failure, err = sendTx(tx, d.Queue, rec); err != nil || failure != nil {
			return err
		}
		if c != nil {
			if _, err := completeTx(tx, c.ID, c.Owner, c.ExpiresAt, c.Now); err != nil {
				return err
			}
		}
		if tel != nil {
			return appendTelemetryTx(tx, tel, seqs)
		}
		return nil
	})
	switch {
	case err != nil:
		return "", err
	case notOwner:
		return "", fmt.Errorf("send %s to %s: claim %q: %w", id, d.Queue, c.ID, flow.ErrNotOwner)
	case failure != nil:
		return "", failure
	}
	return id, nil
}

// ReleaseInFlight makes every received, undeleted message of queue
// visible now (SQS ChangeMessageVisibility to 0 for each) and returns how
// many it released; their receipt handles go stale. A process that owns
// the store alone calls it at start-up for its internal queues: the
// receivers of those messages died with the previous process, so waiting
// out their visibility timeouts would only delay the work.
func (s *Store) ReleaseInFlight(ctx context.Context, queue string) (int, error) {
	now := nanos(s.clock.Now())
	var released int
	var failure error
	err := s.update(ctx, func(tx *bolt.Tx) error {
		released, failure = 0, nil
		qb, err := queueBucket(tx, queue)
		if err != nil {
			failure = fmt.Errorf("release in-flight messages: %w", err)
			return nil
		}
		vis := qb.Bucket(bVis)
		c := vis.Cursor()
		var ids [][]byte
		for k, id := c.Seek(timeKey(now+1, 0)); k != nil; k, id = c.Next() {
			ids = append(ids, bytes.Clone(id))
		}
		for _, id := range ids {
			m, rec, ok, err := loadMsg(qb, id)
			if err != nil {
				return err
			}
			if !ok {
				return corrupt("queue index", queue, fmt.Errorf("no message %s", id))
			}
			if err := vis.Delete(timeKey(m.VisibleAt, m.Seq)); err != nil {
				return err
			}
			m.VisibleAt, m.HasReceipt, m.Nonce = now, false, [nonceLen]byte{}
			if _, err := rewriteMsg(qb, &m, rec); err != nil {
				return err
			}
			if err := vis.Put(timeKey(m.VisibleAt, m.Seq), []byte(m.ID)); err != nil {
				return err
			}
			released++
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return released, failure
}
