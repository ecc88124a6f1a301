package devserver

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// outboxSink is the dispatcher's telemetry.Sink: every event is appended
// durably to its tenant's stream before Emit returns (the store
// group-commits concurrent appends), so an acknowledged command's
// invalid or failed event survives a crash. Alerts of the tenant catalog
// are delivered from the outbox by the drain job; the platform's own
// alerting events (snapshot failures, from background jobs) are delivered
// here, since the drain decodes the catalog only.
type outboxSink struct {
	store  *embedded.Store
	alerts *alerts.Router
	log    *slog.Logger
	// lost counts events the store refused (it was closing or broken).
	lost atomic.Int64
}

var _ telemetry.Sink = (*outboxSink)(nil)

func (s *outboxSink) Emit(e telemetry.Event) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	tenant, catalog := telemetry.StreamOf(e)
	if _, err := s.store.AppendTelemetry(ctx, []embedded.OutboxEntry{{Tenant: tenant, Event: e}}); err != nil {
		s.lost.Add(1)
		s.log.Error("telemetry outbox append failed; event lost", "event", e.EventName(), "err", err)
		return
	}
	// Telemetry readers are woken by the store once the event is
	// readable (embedded.Options.OnApplied).
	if !catalog && e.Alert() && s.alerts != nil {
		if _, err := s.alerts.Handle(ctx, telemetry.PlatformTenant, e); err != nil {
			s.log.Warn("delivering a platform alert failed", "event", e.EventName(), "err", err)
		}
	}
}

// entry is e as the outbox files it: under its tenant's stream. Writers
// that append an event with other state (the sender's transactional
// outbox) use it.
func (s *outboxSink) entry(e telemetry.Event) *embedded.OutboxEntry {
	tenant, _ := telemetry.StreamOf(e)
	return &embedded.OutboxEntry{Tenant: tenant, Event: e}
}
