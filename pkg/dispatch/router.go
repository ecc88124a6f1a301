package dispatch

import (
	"context"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/routing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// NewRouter adapts the cache-backed router of package routing to the
// Router port.
func NewRouter(r *routing.Router) Router { return routingRouter{r} }

type routingRouter struct{ r *routing.Router }

func (a routingRouter) Fast(source, target, command string) (Route, string, bool) {
	return a.FastAt(source, target, command, a.r.Now())
}

// FastAt implements RouterAt: the decision at the time the shield
// received the message, without another clock read.
func (a routingRouter) FastAt(source, target, command string, now time.Time) (Route, string, bool) {
	d := a.r.FastAt(source, target, command, now)
	if !d.Deliver {
		return Route{}, string(d.Escalate), false
	}
	return Route{QueueARN: d.QueueARN(), Flow: d.Flow}, "", true
}

func (a routingRouter) Slow(ctx context.Context, source, target, command string) (Route, telemetry.FailReason, error) {
	d, err := a.r.Slow(ctx, source, target, command)
	if err != nil {
		return Route{}, "", err
	}
	if !d.Deliver {
		return Route{}, d.Fail, nil
	}
	return Route{QueueARN: d.QueueARN(), Flow: d.Flow}, "", nil
}
