package controlapi

import (
	"context"
	"errors"
	"fmt"

	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
)

// EmbeddedRouteQueues is the Queues port over the local queues of the embedded
// store: an ARN that is not a local queue's (arn:snavio:sqs:local:...),
// or names no queue, is ErrNoQueue. Local queues are never FIFO (the store
// refuses .fifo names).
func EmbeddedRouteQueues(s *embedded.Store) RouteQueues {
	return RouteQueuesFunc(func(ctx context.Context, arn string) (QueueInfo, error) {
		name, err := embedded.ParseQueueARN(arn)
		if err != nil {
			return QueueInfo{}, fmt.Errorf("%w: %v", ErrNoQueue, err)
		}
		q, err := s.GetQueue(ctx, name)
		if errors.Is(err, localqueue.ErrQueueNotFound) {
			return QueueInfo{}, fmt.Errorf("%w: %v", ErrNoQueue, err)
		}
		if err != nil {
			return QueueInfo{}, err
		}
		info := QueueInfo{}
		if q.DeadLetterQueue != "" {
			info.DeadLetterARN = embedded.QueueARN(q.DeadLetterQueue)
		}
		return info, nil
	})
}
