package lambda

import (
	"context"
	"fmt"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// MetricAbuseDetected counts the sources the fairness auditor banned.
const MetricAbuseDetected = "Snavio.Fairness.AbuseDetected"

// Auditor is the fairness auditor function: on its schedule (every 90 s
// locally; a rule's rate of 1 or 2 minutes on AWS) it reads the fleet's
// fairness rollups from the flow table (written by every ingest and slow
// environment), flags sources that dominate routes, stores their global
// warm-path bans and emits snavio.fairness.abuse_detected: flow.Audit,
// the same code `dispatch serve` runs.
type Auditor struct {
	jobBase
	flow *flow.Flow
}

// NewAuditor builds the auditor on the flow table of cfg.Store.
func NewAuditor(cfg JobConfig) (*Auditor, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	fs, err := awsstore.NewFlowStore(cfg.Store)
	if err != nil {
		return nil, err
	}
	base, err := newJobBase(cfg)
	if err != nil {
		return nil, err
	}
	a := &Auditor{jobBase: base}
	a.flow, err = flow.New(flow.Config{Instance: cfg.Instance, Clock: cfg.Clock, Metrics: a.metrics, Logger: cfg.Logger}, fs, a.sink, nil)
	if err != nil {
		return nil, err
	}
	return a, nil
}

// Handle runs one audit. Its events are stored in the outbox before it
// returns; an error fails the invocation, and the next run audits again.
func (a *Auditor) Handle(ctx context.Context, _ events.CloudWatchEvent) error {
	// The bans already stored (by any run), so that a ban is not stored
	// and reported again within its window.
	if err := a.flow.RefreshBans(ctx); err != nil {
		return fmt.Errorf("fairness audit: loading the global ban list: %w", err)
	}
	found, auditErr := a.flow.Audit(ctx, flow.AuditConfig{})
	a.metrics.Count(MetricAbuseDetected, int64(len(found)))
	for _, f := range found {
		a.log.Warn("fairness abuse detected; source banned from the warm path", "source", f.Source, "until", f.BanAppliedUntil)
	}
	err := a.finish(ctx)
	if auditErr != nil {
		return fmt.Errorf("fairness audit: %w", auditErr)
	}
	if err != nil {
		return fmt.Errorf("fairness audit: storing its telemetry: %w", err)
	}
	return nil
}
