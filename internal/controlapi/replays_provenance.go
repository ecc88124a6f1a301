package controlapi

import (
	"context"
	"fmt"

	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// deliveryCheck tells a DLQ message the dispatcher delivered from one
// planted in the queue: its delivery signature must verify, and be made
// for a target one of whose routes dead-letters into this queue (a
// genuine message copied from another target's queue is refused too).
type deliveryCheck struct {
	signer *provenance.Signer
	reg    registry.Reader
	queues ReplayQueues
	clk    clock.Clock

	// targets are the targets whose routes name the queue as their DLQ;
	// nil until load.
	targets map[string]bool
}

// load reads which targets dead-letter into queue.
func (c *deliveryCheck) load(ctx context.Context, queue string) error {
	q, err := c.queues.GetQueue(ctx, queue)
	if err != nil {
		return err
	}
	d, err := c.reg.Load(ctx, c.clk.Now(), registry.KindRoute)
	if err != nil {
		return fmt.Errorf("reading the routes that dead-letter into %s: %w", queue, err)
	}
	c.targets = map[string]bool{}
	for i := range d.Routes {
		if d.Routes[i].DLQARN == q.ARN {
			c.targets[d.Routes[i].Target] = true
		}
	}
	return nil
}

// refusal is why a message must not be replayed ("" when it may be).
func (c *deliveryCheck) refusal(attrs map[string]string, body []byte) string {
	check := replay.DeliveryCheck{Verify: c.signer.Verify, Targets: c.targets}
	return check.Refusal(attrs, body)
}
