package devserver

import (
	"crypto/ed25519"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/pipeline"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/sqsapi"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Deps are what the /v1 API packages are built from.
type Deps struct {
	Store      *embedded.Store
	Clock      clock.Clock
	Logger     *slog.Logger
	Dispatcher *dispatch.Dispatcher
	// Changed returns a channel closed at the next telemetry append.
	Changed    func() <-chan struct{}
	Generator  *snapshot.Generator
	Loader     *snapshot.Loader
	SigningKey ed25519.PrivateKey
	Polls      *tenantPolls
	Metrics    *server.Metrics
	// Tokens is the tenant token store the server authenticates with.
	Tokens *server.FileTokenStore
	// Delivery signs delivered messages; it gives targets their keys.
	Delivery *provenance.Signer
	// Credentials are the ingress credentials the ingress verifies with.
	Credentials *server.FileCredentialStore
}

// mountAPI builds the /v1/ handler: the control API over the embedded
// store and this server's dispatcher, tokens and credentials, with the
// registry options serve.go assembles.
func (s *Serve) mountAPI(registry controlapi.RegistryOptions) (http.Handler, error) {
	d := s.deps
	api, err := controlapi.New(controlapi.Config{
		Clock: s.clk, Logger: s.log,
		Registry:    registry,
		Archive:     controlapi.ArchiveOptions{Archive: s.store},
		Credentials: controlapi.CredentialOptions{Credentials: d.Credentials},
		Delivery:    controlapi.DeliveryOptions{Signer: d.Delivery, Registry: s.store.Registry()},
		Explain:     controlapi.ExplainOptions{Dispatcher: d.Dispatcher},
		Queues:      controlapi.QueueOptions{Queues: s.store, Changed: d.Changed, Reserved: isHandoffQueue},
		Replays:     controlapi.ReplayOptions{Store: s.store, Registry: s.store.Registry(), Pipeline: s.node, DataDir: s.o.DataDir, Delivery: d.Delivery},
		Snapshots:   controlapi.SnapshotOptions{Store: s.store.Snapshots(), Generator: d.Generator, KeyID: SnapshotKeyID, PublicKey: d.SigningKey.Public().(ed25519.PublicKey)},
		Telemetry:   controlapi.TelemetryOptions{Store: d.Store, Changed: d.Changed},
		Tokens:      controlapi.TokenOptions{Tokens: d.Tokens},
		LeftOut:     map[controlapi.Resource]controlapi.Absence{controlapi.ResourceReplayer: controlapi.ReplayerInServer},
		Alerts:      s.recentAlerts,
		Stats:       s.stats,
	})
	if err != nil {
		return nil, err
	}
	s.queues = api.Queues
	return s.recordPolls(api), nil
}

// recordPolls notes when a producer fetched its tenant config, so the
// shield can tell a producer that ignores key rotation
// (snavio.secret.key_expiry_imminent).
func (s *Serve) recordPolls(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest, ok := strings.CutPrefix(r.URL.Path, "/v1/tenants/")
		tenant, ok2 := strings.CutSuffix(rest, "/config")
		if r.Method != http.MethodGet || !ok || !ok2 || tenant == "" || strings.Contains(tenant, "/") {
			next.ServeHTTP(w, r)
			return
		}
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		next.ServeHTTP(sw, r)
		if sw.status == http.StatusOK {
			s.deps.Polls.Record(tenant, s.clk.Now())
		}
	})
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

// tenantPolls is the shield's keys.PollTracker: a producer polls its
// tenant's config, which covers every service of the tenant.
type tenantPolls struct{ p keys.Polls }

func (t *tenantPolls) Record(tenant string, at time.Time) { t.p.Record(tenant, at) }

func (t *tenantPolls) LastPoll(source string) (time.Time, bool) {
	tenant, _, _ := strings.Cut(source, "/")
	return t.p.LastPoll(tenant)
}

// Stats is the answer of GET /v1/serve/stats (operators): what the local
// dispatcher did, and the slow stage's backlog.
type Stats struct {
	Node pipeline.Stats `json:"node"`
	// HandoffVisible and HandoffInFlight are the hand-off queue's waiting
	// and in-progress escalations.
	HandoffVisible  int `json:"handoff_visible"`
	HandoffInFlight int `json:"handoff_in_flight"`
	// TelemetryLost counts events the outbox refused (store failures).
	TelemetryLost int64 `json:"telemetry_lost"`
}

func (s *Serve) stats(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	qs, err := s.store.ListQueues(r.Context())
	if err != nil {
		return fmt.Errorf("reading the queues: %w", err)
	}
	st := Stats{Node: s.node.Stats(), TelemetryLost: s.sink.lost.Load()}
	for _, q := range qs {
		if slices.Contains(handoffQueues, q.QueueConfig.Name) {
			st.HandoffVisible += q.Visible
			st.HandoffInFlight += q.InFlight
		}
	}
	controlapi.WriteJSON(w, http.StatusOK, st)
	return nil
}

// recentAlerts answers GET /v1/alerts: the dashboard-log channel's recent
// alerts and channel delivery failures, newest last; a tenant sees its own.
func (s *Serve) recentAlerts(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	tenant := r.URL.Query().Get("tenant")
	switch {
	case p.Operator:
	case tenant == "":
		tenant = p.Tenant
	case tenant != p.Tenant:
		return controlapi.Refuse(http.StatusForbidden, "a tenant token reads its own alerts only", "omit ?tenant= or use the operator token")
	}
	recent := s.alerts.Dashboard().Recent(tenant)
	if recent == nil {
		recent = []alerts.Alert{}
	}
	failures := s.alerts.Dashboard().Failures(tenant)
	if failures == nil {
		failures = []alerts.Failure{}
	}
	for i := range failures {
		if !p.Operator { // the error names the operator's relay or webhook
			failures[i].Error = ""
		}
	}
	controlapi.WriteJSON(w, http.StatusOK, map[string]any{"alerts": recent, "delivery_failures": failures, "unrouted_critical": s.alerts.Unrouted()})
	return nil
}

// sqsAPI serves the local queues over the SQS JSON protocol (docs/sqs.md).
func (s *Serve) sqsAPI(v *server.SigV4Verifier, refusals *server.RefusalReporter) (http.Handler, error) {
	return sqsapi.New(sqsapi.Options{Queues: s.store, Poll: s.queues.Poll, Verifier: v, Refusals: refusals,
		Reserved: isHandoffQueue, Tenants: s.credentialTenants, Logger: s.log})
}

// isHandoffQueue reports whether q is one of the dispatcher's own queues.
func isHandoffQueue(q string) bool { return slices.Contains(handoffQueues, q) }

// credentialTenants lists the tenants holding ingress credentials.
func (s *Serve) credentialTenants() []string {
	creds := s.deps.Credentials.List()
	out := make([]string, 0, len(creds))
	for _, c := range creds {
		out = append(out, c.Tenant)
	}
	return out
}
