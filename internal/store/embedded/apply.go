package embedded

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/snavio/snavio/internal/store/localqueue"

	"github.com/snavio/snavio/internal/store/storecodec"
	"github.com/snavio/snavio/internal/store/wal"
)

// Applying the log to the bbolt file: telemetry records, archived events
// and claim completions are durable once their frame is synced, and are
// applied to the file by one goroutine in large transactions (at most one
// every applyEvery), together with the lsn they are applied up to. Reads
// of telemetry and of the archive first wait for what was written before
// them to be applied (awaitApplied), so a caller reads its own writes.
// Recovery applies again whatever the file had not when the process
// stopped.

// applyEvery paces the applies: under load one transaction carries this
// long's worth of writes (bbolt's cost per record falls as its
// transactions grow: fewer rewrites of each bucket's last leaf and of the
// branches above it), and a reader waits at most about this long. On
// file, where every bbolt commit is two fdatasyncs on the disk the log
// syncs to, 25 ms carried 15.8 k commands/s against 12.5 k with 2 ms (and
// 100 ms no more); in memory, with 16 KiB pages, it took the full
// pipeline from 0.39-0.51x the sink to 0.49-0.51x in interleaved runs,
// with a lower heap. Measured with `make bench-serve`
// (docs/store/embedded.md).
const applyEvery = 25 * time.Millisecond

// applyItem is one op to apply: its kind and payload as in the log.
type applyItem struct {
	kind    byte
	payload []byte
}

// bWAL holds kApplied: every op of a frame up to that lsn is applied.
var (
	bWAL     = []byte("wal")
	kApplied = []byte("applied")
)

type applier struct {
	mu    sync.Mutex
	items []applyItem
	// upTo is the lsn of the last synced frame: every item of a frame up
	// to it is in items (or applied).
	upTo uint64
	// lastItem is the lsn of the newest frame with items.
	lastItem uint64
	err      error
	// applied is the lsn every item is applied up to.
	applied atomic.Uint64
	// changed is closed (and replaced) after each apply.
	changed chan struct{}

	wake, kick chan struct{}
	stop       chan struct{}
	done       chan struct{}
}

func newApplier(applied uint64) *applier {
	a := &applier{changed: make(chan struct{}), wake: make(chan struct{}, 1), kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	a.applied.Store(applied)
	a.upTo = applied
	return a
}

func signal(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// logCommitted is the log's OnCommitted: it runs in the flusher, in lsn
// order, once frames are durable (or written, with a sync interval). It
// hands them to the queues (their messages become receivable) and
// queues their ops to apply.
func (s *Store) logCommitted(frames []*frame) {
	s.queues.Committed(frames)
	a := s.ap
	a.mu.Lock()
	items := false
	var ops []wal.Op
	for _, f := range frames {
		if !f.Applies {
			continue
		}
		// The frame was built by this process: its ops are well formed.
		ops, _ = wal.SplitOps(ops[:0], f.B[wal.HeaderLen:], 0)
		for _, op := range ops {
			if appliesToFile(op.Kind) {
				a.items = append(a.items, applyItem{op.Kind, op.Payload})
			}
		}
		a.lastItem = f.LSN()
		items = true
	}
	a.upTo = frames[len(frames)-1].LSN()
	a.mu.Unlock()
	if items {
		signal(a.wake)
	}
}

// applyLoop applies the queued items until the store closes.
func (s *Store) applyLoop() {
	a := s.ap
	defer close(a.done)
	var last time.Time
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	for {
		select {
		case <-a.wake:
		case <-a.kick:
			s.maintain()
			continue
		case <-a.stop:
			s.applyOnce()
			return
		}
		if d := s.applyEvery - time.Since(last); d > 0 {
			timer.Reset(d)
			select {
			case <-timer.C:
			case <-a.stop:
				timer.Stop()
				s.applyOnce()
				return
			}
		}
		last = time.Now()
		s.applyOnce()
		s.maintain()
	}
}

// applyOnce applies every queued item in one transaction.
func (s *Store) applyOnce() {
	a := s.ap
	a.mu.Lock()
	items, upTo := a.items, a.upTo
	a.items = nil
	a.mu.Unlock()
	var err error
	if len(items) > 0 {
		// The write-ahead rule, with a sync interval: what the file
		// records (an applied lsn, a completed claim) is never ahead of
		// what a power loss leaves in the log.
		err = s.wal.SyncThrough(upTo)
	}
	if err == nil && len(items) > 0 {
		err = s.update(context.Background(), func(tx *bolt.Tx) error { return applyTx(tx, items, upTo) })
	}
	if err == nil {
		s.completed(items, upTo)
		if len(items) > 0 && s.onApplied != nil {
			s.onApplied()
		}
	}
	a.mu.Lock()
	if err != nil {
		// Kept for the next attempt, in order.
		a.items = append(items, a.items...)
		a.err = err
	} else {
		a.err = nil
		a.applied.Store(upTo)
	}
	close(a.changed)
	a.changed = make(chan struct{})
	retry := err != nil
	a.mu.Unlock()
	if retry {
		signal(a.wake)
	}
}

// awaitApplied returns once every item written before the call is
// applied to the file.
func (s *Store) awaitApplied(ctx context.Context) error {
	a := s.ap
	a.mu.Lock()
	target := a.lastItem
	a.mu.Unlock()
	return s.awaitLSN(ctx, target)
}

// awaitClaim returns once no completion of claim id written before the
// call is waiting to be applied: the claim's record in the file is then
// up to date.
func (s *Store) awaitClaim(ctx context.Context, id string) error {
	s.cmu.Lock()
	lsn, ok := s.completing[id]
	s.cmu.Unlock()
	if !ok {
		return nil
	}
	return s.awaitLSN(ctx, lsn)
}

// awaitLSN returns once every item of a frame up to lsn is applied.
func (s *Store) awaitLSN(ctx context.Context, target uint64) error {
	a := s.ap
	for {
		a.mu.Lock()
		if a.applied.Load() >= target {
			a.mu.Unlock()
			return nil
		}
		ch, err := a.changed, a.err
		a.mu.Unlock()
		if err != nil {
			return fmt.Errorf("embedded store: applying the log: %w", err)
		}
		signal(a.wake)
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		}
	}
}

// completed forgets the claim completions now applied.
func (s *Store) completed(items []applyItem, upTo uint64) {
	s.cmu.Lock()
	defer s.cmu.Unlock()
	if len(s.completing) == 0 {
		return
	}
	for _, it := range items {
		if it.kind != opClaim {
			continue
		}
		if c, err := decodeClaimOp(it.payload); err == nil {
			if lsn, ok := s.completing[c.ID]; ok && lsn <= upTo {
				delete(s.completing, c.ID)
			}
		}
	}
}

// applyTx applies items, in order, and records upTo.
func applyTx(tx *bolt.Tx, items []applyItem, upTo uint64) error {
	type stream struct {
		tb *bolt.Bucket
		m  streamMeta
	}
	var (
		tenants, all *bolt.Bucket
		streams      map[string]*stream
		maxGlobal    uint64
		ev, ids      *bolt.Bucket
	)
	for _, it := range items {
		switch it.kind {
		case opTel:
			tenant, seq, rec, err := decodeTelOp(it.payload)
			if err != nil {
				return storecodec.Corrupt("log telemetry op", "", err)
			}
			if tenants == nil {
				if tenants, all, err = outboxBuckets(tx); err != nil {
					return err
				}
				appendOnly(all)
				streams = make(map[string]*stream)
			}
			st := streams[tenant]
			if st == nil {
				st = &stream{}
				if st.tb = tenants.Bucket([]byte(tenant)); st.tb == nil {
					if st.tb, err = tenants.CreateBucket([]byte(tenant)); err != nil {
						return err
					}
					if _, err := st.tb.CreateBucket(bEv); err != nil {
						return err
					}
				} else if st.m, err = loadMeta(st.tb, tenant); err != nil {
					return err
				}
				streams[tenant] = st
			}
			global := binary.BigEndian.Uint64(rec[telOffGlobal:])
			if err := appendOnly(st.tb.Bucket(bEv)).Put(u64(seq), rec); err != nil {
				return err
			}
			if err := all.Put(u64(global), append(u64(seq), tenant...)); err != nil {
				return err
			}
			st.m.Last = max(st.m.Last, seq)
			maxGlobal = max(maxGlobal, global)
		case opArch:
			if ev == nil {
				var err error
				ab := tx.Bucket(bArchive)
				if ev, err = ab.CreateBucketIfNotExists(bArchEv); err != nil {
					return err
				}
				if ids, err = ab.CreateBucketIfNotExists(bArchIDs); err != nil {
					return err
				}
				appendOnly(ev)
				appendOnly(ids) // ids from node.Node are time-ordered
			}
			id, err := archivedID(it.payload)
			if err != nil {
				return storecodec.Corrupt("log archive op", "", err)
			}
			if ids.Get([]byte(id)) != nil {
				continue
			}
			seq, err := ev.NextSequence()
			if err != nil {
				return err
			}
			k := timeKey(int64(binary.BigEndian.Uint64(it.payload[1:])), seq)
			if err := ev.Put(k, it.payload); err != nil {
				return err
			}
			if err := ids.Put([]byte(id), k); err != nil {
				return err
			}
		case opClaim:
			c, err := decodeClaimOp(it.payload)
			if err != nil {
				return storecodec.Corrupt("log claim op", "", err)
			}
			// Its owner checked the claim before the message was
			// written; a claim whose lease ran out in the meantime (a
			// lease is seconds, an apply milliseconds) is left as it is.
			if _, err := completeTx(tx, c.ID, c.Owner, c.ExpiresAt, c.Now); err != nil {
				return err
			}
		default:
			return storecodec.Corrupt("log op", "", fmt.Errorf("kind %d cannot be applied", it.kind))
		}
	}
	for _, st := range streams {
		if err := st.tb.Put(kMeta, encodeMeta(st.m)); err != nil {
			return err
		}
	}
	if all != nil && maxGlobal > all.Sequence() {
		if err := all.SetSequence(maxGlobal); err != nil {
			return err
		}
	}
	wb, err := tx.CreateBucketIfNotExists(bWAL)
	if err != nil {
		return err
	}
	return wb.Put(kApplied, u64(upTo))
}

// Op payloads.

func appendTelOp(f *frame, tenant []byte, seq uint64, rec []byte) {
	p := f.Op(opTel)
	f.B = binary.AppendUvarint(f.B, uint64(len(tenant)))
	f.B = append(f.B, tenant...)
	f.B = binary.BigEndian.AppendUint64(f.B, seq)
	f.B = append(f.B, rec...)
	f.End(p)
	f.Applies = true
}

func decodeTelOp(p []byte) (tenant string, seq uint64, rec []byte, err error) {
	r := storecodec.Reader{B: p}
	tenant = r.Str(MaxTenantLen)
	seq = r.U64()
	if r.Err == nil && len(r.B) < 17 {
		r.Fail(storecodec.ErrShort)
	}
	return tenant, seq, r.B, r.Err
}

func appendArchOp(f *frame, e *ArchivedEvent) {
	p := f.Op(opArch)
	f.B = appendArchived(f.B, e)
	f.End(p)
	f.Applies = true
}

func appendClaimOp(f *frame, c *ClaimCompletion) {
	p := f.Op(opClaim)
	f.B = storecodec.AppendStr(f.B, c.ID)
	f.B = storecodec.AppendStr(f.B, c.Owner)
	f.B = binary.BigEndian.AppendUint64(f.B, uint64(storecodec.Nanos(c.ExpiresAt)))
	f.B = binary.BigEndian.AppendUint64(f.B, uint64(storecodec.Nanos(c.Now)))
	f.End(p)
	f.Applies = true
}

func decodeClaimOp(p []byte) (ClaimCompletion, error) {
	r := storecodec.Reader{B: p}
	c := ClaimCompletion{ID: r.Str(maxKeyLen), Owner: r.Str(maxKeyLen)}
	c.ExpiresAt = time.Unix(0, int64(r.U64())).UTC()
	c.Now = time.Unix(0, int64(r.U64())).UTC()
	if r.Err == nil && len(r.B) != 0 {
		r.Fail(fmt.Errorf("%d trailing bytes", len(r.B)))
	}
	return c, r.Err
}

// maintain deletes the segments nothing needs any more, and copies the
// messages of the oldest forward when more than walKeepSegments sealed
// segments are kept only for their messages.
func (s *Store) maintain() {
	// One at a time: the applier runs it, and so do tests, which then
	// see every removal done when it returns.
	s.maintainMu.Lock()
	defer s.maintainMu.Unlock()
	for {
		applied := s.ap.applied.Load()
		var seg *segment
		s.queues.Locked(func() { seg = s.wal.DetachOldest(applied) })
		if seg != nil {
			if err := s.wal.Remove(seg); err != nil {
				s.logErr.Store(&err)
				return
			}
			continue
		}
		sealed := s.wal.Sealed()
		// An ephemeral log has no files to delete: its segments are
		// counters, and a message keeps only its own record alive. A
		// segment still dense with queued messages (a backlog) is not
		// copied: that would rewrite the backlog again and again.
		if s.wal.Ephemeral() || len(sealed) <= walKeepSegments || s.wal.MaxApply(sealed[0]) > applied || !s.queues.Sparse(sealed[0]) {
			return
		}
		moved, err := s.queues.Compact(sealed[0])
		if err != nil {
			s.logErr.Store(&err)
			return
		}
		if moved == 0 {
			// The segment holds no queued message, yet DetachOldest
			// kept it: the log is closing, a read holds the segment, or
			// the next one's frames are not yet durable. Nothing to do
			// until the next apply; looping would spin (and did, during
			// Close).
			return
		}
	}
}

// appliedLSN reads the lsn the file has applied the log up to.
func (s *Store) appliedLSN() (uint64, error) {
	var applied uint64
	err := s.db.View(func(tx *bolt.Tx) error {
		if wb := tx.Bucket(bWAL); wb != nil {
			if v := wb.Get(kApplied); len(v) == 8 {
				applied = binary.BigEndian.Uint64(v)
			}
		}
		return nil
	})
	return applied, err
}

// recovery rebuilds the queues from the log's frames (replay, the log's
// Config.Replay) and collects the ops the file has not applied.
type recovery struct {
	s       *Store
	applied uint64
	last    uint64
	pending []applyItem
}

func (r *recovery) replay(sg *segment, lsn uint64, ops []wal.Op) (applies bool, err error) {
	r.last = lsn
	for _, op := range ops {
		if localqueue.IsOp(op.Kind) {
			if err := r.s.queues.Replay(sg, lsn, op); err != nil {
				return false, err
			}
			continue
		}
		if !appliesToFile(op.Kind) {
			return false, fmt.Errorf("unknown op kind %d", op.Kind)
		}
		applies = true
		if lsn > r.applied {
			r.pending = append(r.pending, applyItem{op.Kind, append([]byte(nil), op.Payload...)})
		}
	}
	return applies, nil
}

// finish applies to the file what it had not applied; it returns the lsn
// the file is applied up to.
func (r *recovery) finish() (uint64, error) {
	s := r.s
	upTo := max(r.last, r.applied)
	if len(r.pending) > 0 {
		if err := s.db.Update(func(tx *bolt.Tx) error { return applyTx(tx, r.pending, upTo) }); err != nil {
			return 0, fmt.Errorf("embedded store: apply the log: %w", err)
		}
	}
	return upTo, nil
}
