package devserver

import (
	"context"
	"errors"
	"fmt"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// The adapters between the dispatcher's ports and the embedded store.

// HandoffQueue is the internal queue between the fast and slow stages;
// LightHandoffQueue holds the commands of tenants with few waiting, which
// the slow workers take first (node.Options.Light).
const (
	HandoffQueue      = "snavio-internal-slow-handoff"
	LightHandoffQueue = "snavio-internal-slow-handoff-light"
)

// handoffQueues are the internal hand-off queues.
var handoffQueues = []string{HandoffQueue, LightHandoffQueue}

// sender delivers commands to the embedded store's queues, each signed for
// its target. A message, its delivered event and (on a strict route) its
// claim's completion are one atomic, durable write: a crash cannot leave a
// delivered message without its event, nor let a retry deliver a
// strict-mode command twice.
type sender struct {
	s    *embedded.Store
	clk  clock.Clock
	sink *outboxSink // files the event under its tenant
	sig  *provenance.Signer
}

var _ dispatch.Sender = sender{}

func (x sender) Send(ctx context.Context, d *dispatch.Delivery) error {
	name, err := embedded.ParseQueueARN(d.QueueARN)
	if err != nil {
		return fmt.Errorf("route queue %s: %w", d.QueueARN, err)
	}
	m := provenance.Message{CommandID: d.CommandID, Source: d.Source, Target: d.Target, Command: d.Command, Body: d.Body}
	if err := x.sig.Sign(&m); err != nil {
		return fmt.Errorf("signing the delivery of %s to %s: %w", d.CommandID, d.Target, err)
	}
	del := embedded.Delivery{Queue: name, Body: d.Body, Attributes: m.Attributes()}
	if d.Event.CommandID != "" {
		del.Event = x.sink.entry(d.Event)
	}
	if c := d.Claim; c != nil {
		del.Claim = &embedded.ClaimCompletion{ID: c.Key, Owner: c.Owner, ExpiresAt: c.ExpiresAt, Now: x.clk.Now()}
	}
	if _, err := x.s.Deliver(ctx, del); err != nil {
		if errors.Is(err, localqueue.ErrQueueFull) {
			return fmt.Errorf("%w: %w", dispatch.ErrTargetFull, err)
		}
		return err
	}
	d.Completed = d.Claim != nil
	d.EventWritten = del.Event != nil
	return nil
}

// queueRoom is node.Options.Room over the store's queues.
func queueRoom(st *embedded.Store) func(queueARN string) (int, bool) {
	return func(queueARN string) (int, bool) {
		name, err := embedded.ParseQueueARN(queueARN)
		if err != nil {
			return 0, false
		}
		room, err := st.QueueRoom(name)
		if err != nil {
			return 0, false
		}
		return room, true
	}
}
