package controlapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// ErrNoQueue is what a Queues port returns (wrapped) for a queue that does
// not exist, or that this platform cannot address (e.g. an AWS ARN given to
// a local server).
var ErrNoQueue = errors.New("control: no such queue")

// QueueInfo is what registration's test routing needs to know of a queue.
type QueueInfo struct {
	// FIFO is true for a FIFO queue (Snavio delivers to Standard queues
	// only).
	FIFO bool
	// DeadLetterARN is the ARN of the queue its redrive policy moves
	// messages to; "" for none.
	DeadLetterARN string
	// Problems are what else the port found that would stop delivery (an
	// SQS queue's encryption or policy, SQSRouteQueues); each is refused.
	Problems []QueueProblem
	// Opaque is true when the port could not read the queue's attributes:
	// Problems says why, and FIFO and DeadLetterARN are unknown.
	Opaque bool
}

// QueueProblem is one reason a queue cannot take a route's deliveries,
// and its fix.
type QueueProblem struct {
	Problem, Fix string
}

// RouteQueues is the port through which registration checks a route's queues.
// Queue must be safe for concurrent use and honour ctx. It returns an
// error wrapping ErrNoQueue when arn names no queue; any other error is the
// port's failure (the registration answers 500 and may be retried).
type RouteQueues interface {
	Queue(ctx context.Context, arn string) (QueueInfo, error)
}

// RouteQueuesFunc adapts a function to Queues.
type RouteQueuesFunc func(ctx context.Context, arn string) (QueueInfo, error)

// Queue implements Queues.
func (f RouteQueuesFunc) Queue(ctx context.Context, arn string) (QueueInfo, error) {
	return f(ctx, arn)
}

// MaxRoutingProblems bounds the problems one refusal lists.
const MaxRoutingProblems = 10

// queueName is the last part of an SQS ARN, for messages and fixes.
func queueName(arn string) string {
	if i := strings.LastIndexByte(arn, ':'); i >= 0 {
		return arn[i+1:]
	}
	return arn
}

// testRouting checks that each route could deliver: its queue exists, is
// not FIFO, has none of the port's Problems and redrives to the route's
// DLQ, which exists. Every problem is
// listed in one 422 refusal, so a file is fixed in one pass.
func (a *RegistryAPI) testRouting(ctx context.Context, routes []*registry.Route) error {
	if a.o.Queues == nil || len(routes) == 0 {
		return nil
	}
	var problems, fixes []string
	add := func(problem, fix string) {
		problems = append(problems, problem)
		if fix != "" && len(fixes) < 3 {
			fixes = append(fixes, fix)
		}
	}
	for _, r := range routes {
		id := fmt.Sprintf("route %s %s", r.Target, r.Command)
		q, err := a.o.Queues.Queue(ctx, r.QueueARN)
		switch {
		case errors.Is(err, ErrNoQueue):
			add(fmt.Sprintf("%s: queue %s does not exist", id, r.QueueARN),
				fmt.Sprintf("create it with its DLQ (snavio queue create %s --dlq %s --max-receives 5), or correct the queue ARN", queueName(r.QueueARN), queueName(r.DLQARN)))
			continue
		case err != nil:
			return fmt.Errorf("test routing of %s: queue %s: %w", id, r.QueueARN, err)
		}
		for _, p := range q.Problems {
			add(fmt.Sprintf("%s: queue %s: %s", id, r.QueueARN, p.Problem), p.Fix)
		}
		if q.FIFO {
			add(fmt.Sprintf("%s: queue %s is a FIFO queue", id, r.QueueARN), "use a Standard queue: Snavio delivers to Standard queues only")
		}
		_, err = a.o.Queues.Queue(ctx, r.DLQARN)
		switch {
		case errors.Is(err, ErrNoQueue):
			add(fmt.Sprintf("%s: dead-letter queue %s does not exist", id, r.DLQARN),
				fmt.Sprintf("create it (snavio queue create %s) and make it %s's DLQ, or correct the DLQ ARN", queueName(r.DLQARN), queueName(r.QueueARN)))
			continue
		case err != nil:
			return fmt.Errorf("test routing of %s: dead-letter queue %s: %w", id, r.DLQARN, err)
		}
		if q.Opaque {
			continue
		}
		switch q.DeadLetterARN {
		case r.DLQARN:
		case "":
			add(fmt.Sprintf("%s: queue %s has no dead-letter queue, and the route names %s", id, r.QueueARN, r.DLQARN),
				fmt.Sprintf("recreate %s with --dlq %s --max-receives N (snavio queue create) so that failed messages are kept", queueName(r.QueueARN), queueName(r.DLQARN)))
		default:
			add(fmt.Sprintf("%s: queue %s redrives to %s, not to the route's DLQ %s", id, r.QueueARN, q.DeadLetterARN, r.DLQARN),
				"register the route with the queue's DLQ ("+q.DeadLetterARN+"), or change the queue's")
		}
	}
	if len(problems) == 0 {
		return nil
	}
	msg := "test routing failed: "
	if len(problems) > MaxRoutingProblems {
		msg += strings.Join(problems[:MaxRoutingProblems], "; ") + fmt.Sprintf("; and %d more", len(problems)-MaxRoutingProblems)
	} else {
		msg += strings.Join(problems, "; ")
	}
	return Refuse(http.StatusUnprocessableEntity, msg, strings.Join(fixes, "; ")+"; nothing was written")
}

// inheritProfiles gives each ACL without a sensitivity profile its route's:
// a route in the same request first, else the stored one. Registration
// copies the route's profile when the caller sets none (registry.ACL).
func inheritProfiles(its []registry.Item, stored []registry.Route) {
	profiles := map[registry.RouteKey]registry.Profile{}
	for i := range stored {
		profiles[stored[i].Key()] = stored[i].Profile
	}
	for _, it := range its {
		if it.Route != nil {
			profiles[it.Route.Key()] = it.Route.Profile
		}
	}
	for _, it := range its {
		if a := it.ACL; a != nil && a.Profile == "" {
			a.Profile = profiles[registry.RouteKey{Target: a.Target, Command: a.Command}]
		}
	}
}

// filter selects registry records by exact field values; an empty field
// matches everything, and a record without the field never matches a set
// one (a route has no source).
type filter struct {
	source, target, command, tenant string
}

func parseFilter(q url.Values) (filter, error) {
	f := filter{source: q.Get("source"), target: q.Get("target"), command: q.Get("command"), tenant: q.Get("tenant")}
	for name, v := range map[string]string{"source": f.source, "target": f.target, "command": f.command, "tenant": f.tenant} {
		if len(v) > 256 || strings.ContainsAny(v, " \t\n") {
			return filter{}, BadRequest(fmt.Sprintf("invalid %s filter %q", name, v), "give one exact value without spaces")
		}
	}
	return f, nil
}

func (f filter) match(it registry.Item) bool {
	var source, target, command string
	switch {
	case it.Route != nil:
		target, command = it.Route.Target, it.Route.Command
	case it.ACL != nil:
		source, target, command = it.ACL.Source, it.ACL.Target, it.ACL.Command
	case it.Key != nil:
		source = it.Key.Source
	case it.Ban != nil:
		source = it.Ban.Source
	case it.Quota != nil:
		source, target, command = it.Quota.Source, it.Quota.Target, it.Quota.Command
	}
	tenant, _, _ := strings.Cut(source, "/")
	return eq(f.source, source) && eq(f.target, target) && eq(f.command, command) && eq(f.tenant, tenant)
}

func eq(want, got string) bool { return want == "" || want == got }
