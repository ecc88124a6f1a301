package main

import (
	"math"
	"time"
)

// Prices are list prices in US dollars (docs/cost.md says which and
// when).
type Prices struct {
	EventBridgePerM   float64 // PutEvents, per million events (64 KB chunks)
	LambdaRequestPerM float64 // per million invocations
	LambdaGBSecond    float64 // arm64 duration, per GB-second
	SQSPerM           float64 // standard queue, per million requests (64 KB chunks)
	DynamoWRUPerM     float64 // on-demand, per million write request units
	SNSPerM           float64 // per million publish requests (64 KB chunks)
}

// ListPrices are the us-east-1 list prices used, as of PricesAsOf.
var ListPrices = Prices{
	EventBridgePerM:   1.00,
	LambdaRequestPerM: 0.20,
	LambdaGBSecond:    0.0000133334,
	SQSPerM:           0.40,
	DynamoWRUPerM:     0.625,
	SNSPerM:           0.50,
}

// PricesAsOf is the date the prices were taken as current.
const PricesAsOf = "2026-11-25"

// Params are the deployment and the measured costs the model runs on.
type Params struct {
	// FastShare is the share of commands the fast stage delivers; the
	// rest escalate to the slow stage (strict routes, no token, misses).
	FastShare float64
	// Memory of each function, in MB.
	IngestMB, SlowMB, OutboxMB int
	// CPU per command: the ingest handler (shield and fast stage), the
	// slow stage, the outbox function per event; and the CPU of one AWS
	// SDK call (signing, HTTP, decoding).
	IngestCPU, SlowCPU, OutboxCPU, SDKCallCPU time.Duration
	// Wait per call: SQS, DynamoDB and SNS round trips in the region.
	SQSWait, DynamoWait, SNSWait time.Duration
	// SlowBatch is escalations per slow invocation (the event source
	// mapping's batch); OutboxBatch stream records per outbox
	// invocation; SNSBatch events per PublishBatch; KeepBatch events per
	// outbox transaction of the ingest function.
	SlowBatch, OutboxBatch, SNSBatch, KeepBatch int
	// EventKB is a telemetry event's outbox item size.
	EventKB float64
}

// Line is one priced item: Units per command at UnitPrice each, costing
// PerM dollars per million commands of its path.
type Line struct {
	Path      string
	Item      string
	Units     float64
	UnitPrice float64
	PerM      float64
}

// Result is the model's answer.
type Result struct {
	Fast, Slow, Telemetry []Line
	// FastPerM, SlowPerM: dollars per million commands that take the
	// path, telemetry included; TotalPerM at Params.FastShare.
	FastPerM, SlowPerM, TotalPerM float64
	// Billed milliseconds per invocation.
	IngestMS, SlowMS, OutboxMS float64
}

// billedMS is Lambda's billed duration: rounded up to the millisecond.
func billedMS(d time.Duration) float64 {
	return math.Ceil(float64(d) / float64(time.Millisecond))
}

func gbSeconds(ms float64, mb int) float64 { return ms / 1000 * float64(mb) / 1024 }

// Model prices one million commands.
func Model(p Params, pr Prices) Result {
	var r Result
	perM := func(path, item string, units, unitPrice float64) Line {
		return Line{Path: path, Item: item, Units: units, UnitPrice: unitPrice, PerM: units * unitPrice * 1e6}
	}
	wru := 2 * math.Ceil(p.EventKB) // a transactional write costs double

	// Telemetry of one event: its outbox item (and a share of the
	// tenant's sequence item), the outbox function, SNS.
	r.OutboxMS = billedMS(time.Duration(p.OutboxBatch)*(p.OutboxCPU) +
		time.Duration(math.Ceil(float64(p.OutboxBatch)/float64(p.SNSBatch)))*(p.SNSWait+p.SDKCallCPU))
	event := []Line{
		perM("telemetry", "DynamoDB outbox item, WRU", wru+2/float64(p.KeepBatch), pr.DynamoWRUPerM/1e6),
		perM("telemetry", "Lambda outbox requests", 1/float64(p.OutboxBatch), pr.LambdaRequestPerM/1e6),
		perM("telemetry", "Lambda outbox GB-s", gbSeconds(r.OutboxMS, p.OutboxMB)/float64(p.OutboxBatch), pr.LambdaGBSecond),
		perM("telemetry", "SNS PublishBatch", 1/float64(p.SNSBatch), pr.SNSPerM/1e6),
	}
	r.Telemetry = event
	eventPerM := sum(event)

	// Fast path: PutEvents, one ingest invocation, one delivery, one
	// event (snavio.command.delivered).
	r.IngestMS = billedMS(p.IngestCPU + p.SDKCallCPU + p.SQSWait)
	r.Fast = []Line{
		perM("fast", "EventBridge PutEvents", 1, pr.EventBridgePerM/1e6),
		perM("fast", "Lambda ingest requests", 1, pr.LambdaRequestPerM/1e6),
		perM("fast", "Lambda ingest GB-s", gbSeconds(r.IngestMS, p.IngestMB), pr.LambdaGBSecond),
		perM("fast", "SQS SendMessage (delivery)", 1, pr.SQSPerM/1e6),
		perM("fast", "telemetry events", 1, eventPerM/1e6),
	}
	r.FastPerM = sum(r.Fast)

	// Slow path: PutEvents, the ingest invocation handing off, the
	// escalation queue (send, receive and delete per batch), the slow
	// invocation's share (claim, complete, delivery; one outbox write per
	// batch), two events (escalated, delivered).
	slowOne := p.SlowCPU + 3*p.SDKCallCPU + 2*p.DynamoWait + p.SQSWait
	r.SlowMS = billedMS(time.Duration(p.SlowBatch)*slowOne + p.SDKCallCPU + p.DynamoWait)
	b := float64(p.SlowBatch)
	r.Slow = []Line{
		perM("slow", "EventBridge PutEvents", 1, pr.EventBridgePerM/1e6),
		perM("slow", "Lambda ingest requests", 1, pr.LambdaRequestPerM/1e6),
		perM("slow", "Lambda ingest GB-s", gbSeconds(r.IngestMS, p.IngestMB), pr.LambdaGBSecond),
		perM("slow", "SQS escalation send, receive, delete", 1+2/b, pr.SQSPerM/1e6),
		perM("slow", "Lambda slow requests", 1/b, pr.LambdaRequestPerM/1e6),
		perM("slow", "Lambda slow GB-s", gbSeconds(r.SlowMS, p.SlowMB)/b, pr.LambdaGBSecond),
		perM("slow", "DynamoDB claim and complete, WRU", 2, pr.DynamoWRUPerM/1e6),
		perM("slow", "SQS SendMessage (delivery)", 1, pr.SQSPerM/1e6),
		perM("slow", "telemetry events", 2, eventPerM/1e6),
	}
	r.SlowPerM = sum(r.Slow)
	r.TotalPerM = p.FastShare*r.FastPerM + (1-p.FastShare)*r.SlowPerM
	return r
}

func sum(ls []Line) float64 {
	t := 0.0
	for _, l := range ls {
		t += l.PerM
	}
	return t
}
