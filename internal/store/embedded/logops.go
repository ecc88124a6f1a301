package embedded

import (
	"context"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/wal"
)

// What the store writes to its write-ahead log (package wal): the hot
// path's writes, each call one frame. The queue ops (a message, its
// state, its deletion, a purge) are package localqueue's, kinds 1 to 4;
// the store's own ops, below, are applied to the bbolt file in large
// background transactions (apply.go), which is where they are read. A
// segment is deleted once everything in it is applied and none of its
// messages is still in a queue (maintain; the queues' Compact copies the
// last few forward).

// The store's op kinds, after the queues' (localqueue.IsOp).
const (
	opTel   byte = 5 // tenant, seq, then a telemetry record (encodeTelemetry)
	opArch  byte = 6 // an archived event (encodeArchived)
	opClaim byte = 7 // claim id, owner, expires_at, now: a strict dedupe claim completed
)

// walSuffix names the log's directory beside the store file.
const walSuffix = "-wal"

// walKeepSegments is how many sealed segments pinned only by their
// messages are kept before the oldest one's messages are copied forward
// so that it can be deleted.
const walKeepSegments = 4

// appliesToFile reports whether ops of kind are applied to the bbolt file.
func appliesToFile(kind byte) bool { return kind == opTel || kind == opArch || kind == opClaim }

type (
	frame    = localqueue.Frame
	walGroup = wal.Group[localqueue.Changes]
	segment  = wal.Segment
)

// newFrame returns an empty frame with room for a few small ops.
func newFrame() *frame { return wal.NewFrame[localqueue.Changes](512 - wal.HeaderLen) }

// Deferred collects the log writes made with a context from DeferSync:
// they return once queued, and Wait returns once all of them are
// durable (wal.Deferred).
type Deferred = wal.Deferred

// DeferSync returns a context whose log writes do not wait, and the
// Deferred to wait on for them.
func DeferSync(ctx context.Context) (context.Context, *Deferred) { return wal.DeferSync(ctx) }
