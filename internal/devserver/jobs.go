package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/monitor"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Schedule sets how often each background job runs, and the retentions
// they enforce. Zero fields take the defaults in parentheses.
type Schedule struct {
	// Snapshot generation (5 min); the fast stage's cold start accepts a
	// snapshot up to SnapshotMaxAge old (30 min).
	Snapshot, SnapshotMaxAge time.Duration
	// Queue monitor (30 s).
	Monitor time.Duration
	// Fairness rollups (60 s) and auditor (90 s).
	Rollups, Audit time.Duration
	// Alert drain from the outbox (1 s).
	Alerts time.Duration
	// Purge of aged-out telemetry, archive and flow records (1 min).
	Purge time.Duration
	// TelemetryRetention (24 h) and ArchiveRetention (7 days).
	TelemetryRetention, ArchiveRetention time.Duration
}

func (s Schedule) withDefaults() Schedule {
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&s.Snapshot, 5*time.Minute)
	def(&s.SnapshotMaxAge, 30*time.Minute)
	def(&s.Monitor, 30*time.Second)
	def(&s.Rollups, 60*time.Second)
	def(&s.Audit, 90*time.Second)
	def(&s.Alerts, time.Second)
	def(&s.Purge, time.Minute)
	def(&s.TelemetryRetention, 24*time.Hour)
	def(&s.ArchiveRetention, 7*24*time.Hour)
	return s
}

// Job names, for RunJob and the logs.
const (
	JobSnapshot = "snapshot"
	JobMonitor  = "queue-monitor"
	JobRollups  = "fairness-rollups"
	JobAudit    = "fairness-audit"
	JobAlerts   = "alert-drain"
	JobPurge    = "purge"
)

// jobs returns every job with its period.
func (s *Serve) jobs() []struct {
	name  string
	every time.Duration
	run   func(context.Context) error
} {
	j := s.o.Jobs
	return []struct {
		name  string
		every time.Duration
		run   func(context.Context) error
	}{
		{JobSnapshot, j.Snapshot, s.generateSnapshot},
		{JobMonitor, j.Monitor, s.monitorQueues},
		{JobRollups, j.Rollups, func(ctx context.Context) error { return s.flow.FlushRollups(ctx, time.Hour) }},
		{JobAudit, j.Audit, s.audit},
		{JobAlerts, j.Alerts, s.drainAlerts},
		{JobPurge, j.Purge, s.purge},
	}
}

// RunJob runs the named job once, now (tests, and `snapshot generate`).
func (s *Serve) RunJob(ctx context.Context, name string) error {
	for _, j := range s.jobs() {
		if j.name == name {
			return j.run(ctx)
		}
	}
	return fmt.Errorf("no job %q", name)
}

// startJobs runs every job on its period until ctx ends. The snapshot
// job also runs at once, so the next start can cold-start from it.
func (s *Serve) startJobs(ctx context.Context) {
	for _, j := range s.jobs() {
		s.workers.Add(1)
		go func() {
			defer s.workers.Done()
			if j.name == JobSnapshot {
				s.runLogged(ctx, j.name, j.run)
			}
			t := time.NewTicker(j.every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
					s.runLogged(ctx, j.name, j.run)
				}
			}
		}()
	}
}

// runLogged runs one job to its end even if shutdown begins meanwhile (a
// half-published snapshot or half-saved cursor helps nobody); shutdown
// waits for it within its timeout.
func (s *Serve) runLogged(ctx context.Context, name string, run func(context.Context) error) {
	if err := run(context.WithoutCancel(ctx)); err != nil {
		s.log.Warn("background job failed; it runs again on its schedule", "job", name, "err", err)
	}
}

func (s *Serve) generateSnapshot(ctx context.Context) error {
	p, err := s.gen.Generate(ctx)
	if err != nil {
		return err
	}
	s.log.Debug("snapshot published", "version_id", p.VersionID)
	return nil
}

// monitorQueues samples every route's queue and reports health changes
// (expected_drain_seconds: unhealthy past 2x; stalled; unpolled) to the
// alert channels and the log.
func (s *Serve) monitorQueues(ctx context.Context) error {
	data, err := s.store.Registry().Load(ctx, s.clk.Now(), registry.KindRoute)
	if err != nil {
		return err
	}
	stats, err := s.store.ListQueues(ctx)
	if err != nil {
		return err
	}
	byARN := make(map[string]localqueue.QueueStats, len(stats))
	for _, q := range stats {
		byARN[q.ARN] = q
	}
	now := s.clk.Now()
	for _, r := range data.Routes {
		q, ok := byARN[r.QueueARN]
		if !ok {
			continue
		}
		_, ev := s.monitor.Observe(monitor.Queue{Target: r.Target, Command: r.Command, QueueARN: r.QueueARN,
			ExpectedDrain: time.Duration(r.DrainSeconds()) * time.Second},
			monitor.Sample{At: now, Depth: int64(q.Visible), InFlight: int64(q.InFlight), OldestAge: q.OldestAge})
		if ev == nil {
			continue
		}
		s.log.Warn("route queue health changed", "target", ev.Target, "command", ev.CommandName, "health", ev.Health, "previous", ev.Previous, "reason", ev.Reason)
		s.deps.Metrics.Count("Snavio.Route.Health."+string(ev.Health), 1)
		if _, err := s.alerts.Handle(ctx, telemetry.PlatformTenant, *ev); err != nil {
			s.log.Warn("delivering a route health alert failed", "err", err)
		}
	}
	return nil
}

func (s *Serve) audit(ctx context.Context) error {
	found, err := s.flow.Audit(ctx, flow.AuditConfig{})
	for _, a := range found {
		s.log.Warn("fairness abuse detected; source banned from the warm path", "source", a.Source)
	}
	return err
}

// purge enforces the telemetry and archive retentions and the archive's
// per-tenant bounds, and reclaims expired flow records. Dropped telemetry
// is reported to its tenant.
func (s *Serve) purge(ctx context.Context) error {
	const batch = 10_000
	var errs []error
	for {
		dropped, n, err := s.store.PurgeTelemetry(ctx, s.o.Jobs.TelemetryRetention, batch)
		for _, d := range dropped {
			s.sink.Emit(d)
		}
		if err != nil {
			errs = append(errs, err)
		}
		if err != nil || n < batch {
			break
		}
	}
	for _, purge := range []func() (int, error){
		func() (int, error) {
			return s.store.ArchivePurge(ctx, s.clk.Now().Add(-s.o.Jobs.ArchiveRetention), batch)
		},
		func() (int, error) { return s.store.ArchivePurgeOverBudget(ctx, batch) },
	} {
		for {
			n, err := purge()
			if err != nil {
				errs = append(errs, err)
			}
			if err != nil || n < batch {
				break
			}
		}
	}
	if _, err := s.store.PurgeExpired(ctx, s.clk.Now(), batch); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// alertCursorFile keeps the alert drain's position in the outbox.
const alertCursorFile = "alerts.cursor"

// drainAlerts delivers alerting events from the outbox to the alert
// channels, at least once: the cursor advances only past delivered (or
// non-alerting) records and is saved, durably, when the run ends: once a
// period at most, since each save syncs the disk the log syncs too.
func (s *Serve) drainAlerts(ctx context.Context) error {
	s.alertMu.Lock()
	defer s.alertMu.Unlock()
	if !s.alertLoaded {
		s.alertCursor = s.loadAlertCursor()
		s.alertLoaded = true
	}
	saved := s.alertCursor
	defer func() {
		if s.alertCursor != saved {
			s.saveAlertCursor()
		}
	}()
	// Most of the stream (delivered events) never alerts: skipped by
	// name, without decoding. Names outside the catalog (the platform's
	// own events) are decoded and logged below.
	mayAlert := func(name string) bool {
		alert, known := telemetry.AlertsByName(name)
		return alert || !known
	}
	for {
		recs, last, err := s.store.ScanAllTelemetry(ctx, s.alertCursor, 500, mayAlert)
		if err != nil {
			return fmt.Errorf("alert drain: %w", err)
		}
		if last == s.alertCursor {
			return nil
		}
		for _, r := range recs {
			ev, err := r.Decode()
			if err != nil {
				// The platform's own events (escalations, cache refreshes)
				// are outside the catalog; the sink alerted on them.
				s.log.Debug("alert drain: not a catalog event", "global", r.Global, "name", r.Name, "err", err)
			} else if ev.Alert() {
				if _, err := s.alerts.Handle(ctx, r.Tenant, ev); err != nil {
					s.log.Warn("alert delivery failed on a channel", "tenant", r.Tenant, "event", ev.EventName(), "err", err)
				}
			}
			s.alertCursor = r.Global
		}
		s.alertCursor = last
	}
}

func (s *Serve) loadAlertCursor() uint64 {
	if s.o.Ephemeral {
		return 0
	}
	b, err := os.ReadFile(filepath.Join(s.o.DataDir, alertCursorFile))
	if err != nil {
		return 0
	}
	n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		s.log.Warn("alert cursor unreadable; alerts are re-delivered from the start of the outbox", "err", err)
		return 0
	}
	return n
}

func (s *Serve) saveAlertCursor() {
	if s.o.Ephemeral {
		return
	}
	p := filepath.Join(s.o.DataDir, alertCursorFile)
	if err := atomicfile.Write(p, []byte(strconv.FormatUint(s.alertCursor, 10)+"\n"), 0o600); err != nil {
		s.log.Warn("saving the alert cursor failed; some alerts may be delivered twice after a restart", "err", err)
	}
}
