package lambda

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/cloudwatch"
	cwtypes "github.com/aws/aws-sdk-go-v2/service/cloudwatch/types"

	"github.com/snavio/snavio/internal/monitor"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// The queue monitor's reading of CloudWatch.
const (
	// ageLookback is how far back GetMetricData reads: SQS publishes its
	// metrics every minute, a few minutes late.
	ageLookback = 10 * time.Minute
	// maxMetricQueries is GetMetricData's limit of queries a call.
	maxMetricQueries = 500
)

// MetricRouteHealth prefixes the count of route queues that changed to
// each state (Snavio.Route.Health.unhealthy, ...), as `dispatch serve`.
const MetricRouteHealth = "Snavio.Route.Health."

// GetMetricDataAPI is CloudWatch's GetMetricData.
type GetMetricDataAPI interface {
	GetMetricData(ctx context.Context, in *cloudwatch.GetMetricDataInput, optFns ...func(*cloudwatch.Options)) (*cloudwatch.GetMetricDataOutput, error)
}

// queueStatter reads a route queue's attributes (*awsstore.QueueStats).
type queueStatter interface {
	Stat(ctx context.Context, arn string) (awsstore.QueueStat, error)
}

// QueueMonitor is the queue monitor function: on its schedule (every
// 30 s locally; a rule's rate of 1 minute on AWS, SQS's metric period) it
// reads every route's queue (depth and messages in flight from SQS's
// attributes, the age of the oldest message from CloudWatch, where SQS
// publishes it) and judges it with internal/monitor, as `dispatch serve`
// does. A change of state is snavio.route.health on the platform's
// telemetry stream (alerting when the route turns bad).
type QueueMonitor struct {
	jobBase
	reg   registry.Reader
	stats queueStatter
	cw    GetMetricDataAPI
	mon   *monitor.Monitor
	clock clock.Clock
}

// NewQueueMonitor builds the monitor on the registry tables of cfg.Store,
// SQS and CloudWatch. The monitor's history of samples lives as long as
// the execution environment: a cold start judges from its first sample.
func NewQueueMonitor(cfg JobConfig) (*QueueMonitor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	reg, err := awsstore.NewRegistryStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	stats, err := awsstore.NewQueueStats(cfg.Store)
	if err != nil {
		return nil, err
	}
	base, err := newJobBase(cfg)
	if err != nil {
		return nil, err
	}
	return &QueueMonitor{jobBase: base, reg: reg, stats: stats, cw: cloudwatch.NewFromConfig(cfg.Store.AWSConfig, cfg.CloudWatchOptions...),
		mon: monitor.New(monitor.Config{}), clock: cfg.Clock}, nil
}

// routeQueue is a route's queue as read this run.
type routeQueue struct {
	route registry.Route
	stat  awsstore.QueueStat
}

// Handle samples every route's queue once. A queue that cannot be read
// is logged and skipped (the others are still judged); the invocation
// fails if any could not, or the events could not be stored.
func (q *QueueMonitor) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	now := q.clock.Now()
	data, err := q.reg.Load(ctx, now, registry.KindRoute)
	if err != nil {
		return fmt.Errorf("queue monitor: reading the routes: %w", err)
	}
	var errs []error
	var queues []routeQueue
	for _, r := range data.Routes {
		st, err := q.stats.Stat(ctx, r.QueueARN)
		if err != nil {
			q.log.Warn("queue monitor: reading a route's queue failed", "target", r.Target, "command", r.Command, "err", err)
			errs = append(errs, err)
			continue
		}
		queues = append(queues, routeQueue{route: r, stat: st})
	}
	ages, err := q.oldestAges(ctx, now, queues)
	if err != nil {
		// Depth and in-flight still judge stalled and unpolled queues.
		q.log.Warn("queue monitor: reading ApproximateAgeOfOldestMessage from CloudWatch failed", "err", err)
		errs = append(errs, err)
	}
	for i, rq := range queues {
		r := rq.route
		_, ev := q.mon.Observe(monitor.Queue{Target: r.Target, Command: r.Command, QueueARN: r.QueueARN,
			ExpectedDrain: time.Duration(r.DrainSeconds()) * time.Second},
			monitor.Sample{At: now, Depth: rq.stat.Visible, InFlight: rq.stat.InFlight, OldestAge: ages[i]})
		if ev == nil {
			continue
		}
		q.log.Warn("route queue health changed", "target", ev.Target, "command", ev.CommandName, "health", ev.Health, "previous", ev.Previous, "reason", ev.Reason)
		q.metrics.Count(MetricRouteHealth+string(ev.Health), 1)
		q.sink.Emit(*ev) // the platform's stream (telemetry.StreamOf)
	}
	if err := q.finish(ctx); err != nil {
		errs = append(errs, fmt.Errorf("queue monitor: storing route health events: %w", err))
	}
	return errors.Join(errs...)
}

// oldestAges reads AWS/SQS ApproximateAgeOfOldestMessage (Maximum over a
// minute) of each queue with GetMetricData, 500 queries a call, and
// returns the latest value of each (0 when CloudWatch has none: an empty
// or new queue).
func (q *QueueMonitor) oldestAges(ctx context.Context, now time.Time, queues []routeQueue) ([]time.Duration, error) {
	ages := make([]time.Duration, len(queues))
	found := make([]bool, len(queues))
	for start := 0; start < len(queues); start += maxMetricQueries {
		end := min(start+maxMetricQueries, len(queues))
		in := &cloudwatch.GetMetricDataInput{
			StartTime: aws.Time(now.Add(-ageLookback)), EndTime: aws.Time(now),
			ScanBy: cwtypes.ScanByTimestampDescending,
		}
		for i := start; i < end; i++ {
			in.MetricDataQueries = append(in.MetricDataQueries, cwtypes.MetricDataQuery{
				Id: aws.String(fmt.Sprintf("q%d", i)),
				MetricStat: &cwtypes.MetricStat{
					Metric: &cwtypes.Metric{Namespace: aws.String("AWS/SQS"), MetricName: aws.String("ApproximateAgeOfOldestMessage"),
						Dimensions: []cwtypes.Dimension{{Name: aws.String("QueueName"), Value: aws.String(queues[i].stat.Name)}}},
					Period: aws.Int32(60), Stat: aws.String("Maximum"),
				},
				ReturnData: aws.Bool(true),
			})
		}
		for {
			out, err := q.cw.GetMetricData(ctx, in)
			if err != nil {
				return ages, err
			}
			for _, r := range out.MetricDataResults {
				var i int
				if _, err := fmt.Sscanf(aws.ToString(r.Id), "q%d", &i); err != nil || i < start || i >= end {
					return ages, fmt.Errorf("GetMetricData answered an id %q this call did not ask for", aws.ToString(r.Id))
				}
				// ScanBy TimestampDescending: the first value is the latest;
				// a later page of the same id holds older ones.
				if len(r.Values) > 0 && !found[i] {
					ages[i], found[i] = time.Duration(r.Values[0]*float64(time.Second)), true
				}
			}
			if out.NextToken == nil {
				break
			}
			in.NextToken = out.NextToken
		}
	}
	return ages, nil
}
