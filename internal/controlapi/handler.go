package controlapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// Config is what the control API is built from: each resource's options
// (their stores and services) and what they share. A host fills it: the
// local server (internal/devserver) now, a Lambda host next.
type Config struct {
	// Auth turns a request's credential into its principal for every
	// endpoint; nil is ContextAuth (behind the server's bearer-token
	// middleware).
	Auth Authenticator
	// Clock and Logger are every resource's unless its options set one.
	Clock  clock.Clock
	Logger *slog.Logger

	Registry    RegistryOptions
	Archive     ArchiveOptions
	Credentials CredentialOptions
	Delivery    DeliveryOptions
	Explain     ExplainOptions
	Queues      QueueOptions
	Replays     ReplayOptions
	Replayer    ReplayerOptions
	Snapshots   SnapshotOptions
	Telemetry   TelemetryOptions
	Tokens      TokenOptions

	// LeftOut are the resources this host leaves out on purpose, each
	// with why and what to use instead: their options stay empty and
	// their routes answer 501 (absent.go). The local server leaves the
	// replayer out (it runs replays itself); the AWS host the rest.
	LeftOut map[Resource]Absence

	// Alerts and Stats serve the host's GET /v1/alerts and GET
	// /v1/serve/stats (what only the host knows: its alert channels, its
	// dispatcher's counters); nil leaves the route out.
	Alerts, Stats HandlerFunc
}

// Handler is the control API: every resource's endpoints on one mux,
// registered by endpoints.
type Handler struct {
	Registry    *RegistryAPI
	Archive     *ArchiveAPI
	Credentials *CredentialAPI
	Delivery    *DeliveryAPI
	Explain     *ExplainAPI
	Queues      *QueueAPI
	Replays     *ReplayAPI
	Replayer    *ReplayerAPI
	Snapshots   *SnapshotAPI
	Telemetry   *TelemetryAPI
	Tokens      *TokenAPI

	meta          Endpoints
	auth          Authenticator
	clock         clock.Clock
	alerts, stats HandlerFunc
	leftOut       map[Resource]Absence
	mux           *http.ServeMux
}

// New builds every resource from c, except those c leaves out, and
// registers every resource's endpoints.
func New(c Config) (*Handler, error) {
	if err := c.checkLeftOut(); err != nil {
		return nil, err
	}
	if c.Clock == nil {
		c.Clock = clock.System()
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Auth == nil {
		c.Auth = ContextAuth{}
	}
	for _, clk := range []*clock.Clock{&c.Registry.Clock, &c.Delivery.Clock, &c.Queues.Clock, &c.Replays.Clock, &c.Replayer.Clock, &c.Telemetry.Clock} {
		if *clk == nil {
			*clk = c.Clock
		}
	}
	for _, log := range []**slog.Logger{&c.Registry.Logger, &c.Archive.Logger, &c.Credentials.Logger, &c.Delivery.Logger,
		&c.Queues.Logger, &c.Replays.Logger, &c.Replayer.Logger, &c.Snapshots.Logger, &c.Telemetry.Logger, &c.Tokens.Logger} {
		if *log == nil {
			*log = c.Logger
		}
	}
	h := &Handler{meta: Endpoints{Logger: c.Logger}, auth: c.Auth, clock: c.Clock, alerts: c.Alerts, stats: c.Stats, leftOut: c.LeftOut}
	var errs []error
	build := func(r Resource, f func() error) {
		if _, out := c.LeftOut[r]; !out {
			errs = append(errs, f())
		}
	}
	build(ResourceRegistry, func() (err error) {
		c.Registry.Auth = c.Auth // required by NewRegistryAPI
		h.Registry, err = NewRegistryAPI(c.Registry)
		return err
	})
	build(ResourceArchive, func() (err error) { h.Archive, err = NewArchiveAPI(c.Archive); return err })
	build(ResourceCredentials, func() (err error) { h.Credentials, err = NewCredentialAPI(c.Credentials); return err })
	build(ResourceDelivery, func() (err error) { h.Delivery, err = NewDeliveryAPI(c.Delivery); return err })
	build(ResourceExplain, func() (err error) { h.Explain, err = NewExplainAPI(c.Explain); return err })
	build(ResourceQueues, func() (err error) { h.Queues, err = NewQueueAPI(c.Queues); return err })
	build(ResourceReplays, func() (err error) { h.Replays, err = NewReplayAPI(c.Replays); return err })
	build(ResourceReplayer, func() (err error) { h.Replayer, err = NewReplayerAPI(c.Replayer); return err })
	build(ResourceSnapshots, func() (err error) { h.Snapshots, err = NewSnapshotAPI(c.Snapshots); return err })
	build(ResourceTelemetry, func() (err error) { h.Telemetry, err = NewTelemetryAPI(c.Telemetry); return err })
	build(ResourceTokens, func() (err error) { h.Tokens, err = NewTokenAPI(c.Tokens); return err })
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	h.mux = http.NewServeMux()
	register(h.mux, h.endpoints())
	return h, nil
}

// ServeHTTP serves the control API.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// endpoint is one route of the control API: its ServeMux pattern ("METHOD /v1/path") and
// its handler, authenticated and access-checked (Endpoints.Handle).
type endpoint struct {
	pattern string
	h       http.HandlerFunc
}

func register(mux *http.ServeMux, rs []endpoint) {
	for _, r := range rs {
		mux.HandleFunc(r.pattern, r.h)
	}
}

// endpoints is the control API, the one list of its endpoints (openapi.json
// describes each; TestOpenAPIMatchesEndpoints holds them together). A
// resource the host left out (Config.LeftOut) keeps its routes, answering
// 501; any other nil resource's endpoints are not routed.
func (h *Handler) endpoints() []endpoint {
	var rs []endpoint
	add := func(more ...endpoint) { rs = append(rs, more...) }
	// use makes e authenticate through the handler's Authenticator.
	use := func(e *Endpoints) *Endpoints {
		if h.auth != nil {
			e.Auth = h.auth
		}
		return e
	}
	if h.clock != nil {
		m := use(&h.meta)
		openAPI := OpenAPI
		if len(h.leftOut) > 0 {
			openAPI = h.openAPI
		}
		add(endpoint{"GET /v1/openapi.json", m.Handle(AnyPrincipal, openAPI)},
			endpoint{"GET /v1/whoami", m.Handle(AnyPrincipal, h.whoami)})
		if h.alerts != nil {
			add(endpoint{"GET /v1/alerts", m.Handle(AnyPrincipal, h.alerts)})
		}
		if h.stats != nil {
			add(endpoint{"GET /v1/serve/stats", m.Handle(Operator, h.stats)})
		}
	}
	if a := h.Registry; a != nil {
		e := use(&a.ep)
		add(endpoint{"GET /v1/registry", e.Handle(AnyPrincipal, a.list)},
			endpoint{"GET /v1/registry/item", e.Handle(AnyPrincipal, a.get)},
			endpoint{"PUT /v1/registry/item", e.Handle(registryWriter, a.put)},
			endpoint{"DELETE /v1/registry/item", e.Handle(registryWriter, a.delete)},
			endpoint{"GET /v1/registry/history", e.Handle(AnyPrincipal, a.history)},
			endpoint{"POST /v1/registry/apply", e.Handle(registryWriter, a.apply)},
			// acls
			endpoint{"POST /v1/registry/acl/revoke", e.Handle(registryWriter, a.revoke)},
			// keys
			endpoint{"POST /v1/keys/create", e.Handle(registryWriter, a.createKey)},
			endpoint{"POST /v1/keys/rotate", e.Handle(registryWriter, a.rotateKey)},
			endpoint{"GET /v1/tenants/{tenant}/config", e.Handle(AnyPrincipal, a.tenantConfig)})
	}
	if a := h.Tokens; a != nil {
		use(&a.ep)
		add(endpoint{"POST /v1/tokens", a.ep.Handle(issuer, a.issue)},
			endpoint{"GET /v1/tokens", a.ep.Handle(AnyPrincipal, a.list)},
			endpoint{"DELETE /v1/tokens/{id}", a.ep.Handle(revoker, a.revoke)})
	}
	if a := h.Credentials; a != nil {
		use(&a.ep)
		add(endpoint{"POST /v1/credentials", a.ep.Handle(AnyPrincipal, a.create)},
			endpoint{"GET /v1/credentials", a.ep.Handle(AnyPrincipal, a.list)},
			endpoint{"DELETE /v1/credentials/{id}", a.ep.Handle(AnyPrincipal, a.revoke)})
	}
	if a := h.Telemetry; a != nil {
		use(&a.ep)
		add(endpoint{"GET /v1/telemetry", a.ep.Handle(AnyPrincipal, a.read)},
			endpoint{"GET /v1/telemetry/streams", a.ep.Handle(AnyPrincipal, a.streams)},
			endpoint{"POST /v1/telemetry/ack", a.ep.Handle(AnyPrincipal, a.ack)})
	}
	if a := h.Queues; a != nil {
		use(&a.ep)
		add(endpoint{"GET /v1/queues", a.ep.Handle(AnyPrincipal, a.list)},
			endpoint{"GET /v1/queues/{name}", a.ep.Handle(AnyPrincipal, a.get)},
			endpoint{"POST /v1/queues", a.ep.Handle(queueOperator, a.create)},
			endpoint{"POST /v1/queues/{name}/receive", a.ep.Handle(queueOperator, a.receive)},
			endpoint{"POST /v1/queues/{name}/messages/delete", a.ep.Handle(queueOperator, a.deleteMessages)},
			endpoint{"POST /v1/queues/{name}/purge", a.ep.Handle(queueOperator, a.purge)})
	}
	if a := h.Snapshots; a != nil {
		use(&a.ep)
		add(endpoint{"POST /v1/snapshots/generate", a.ep.Handle(snapshotOperator, a.generate)},
			endpoint{"GET /v1/snapshots", a.ep.Handle(AnyPrincipal, a.list)},
			endpoint{"GET /v1/snapshots/public-key", a.ep.Handle(AnyPrincipal, a.publicKey)},
			endpoint{"GET /v1/snapshots/{kind}/latest", a.ep.Handle(snapshotOperator, a.latest)})
	}
	if a := h.Replays; a != nil {
		use(&a.ep)
		add(endpoint{"POST /v1/replays/plan", a.ep.Handle(Operator, a.plan)},
			endpoint{"POST /v1/replays", a.ep.Handle(Operator, a.start)},
			endpoint{"POST /v1/replays/{id}/resume", a.ep.Handle(Operator, a.resume)},
			endpoint{"GET /v1/replays", a.ep.Handle(Operator, a.list)},
			endpoint{"GET /v1/replays/{id}", a.ep.Handle(Operator, a.get)})
	}
	if a := h.Replayer; a != nil {
		use(&a.ep)
		add(endpoint{"GET /v1/replayer/audits", a.ep.Handle(Operator, a.list)},
			endpoint{"GET /v1/replayer/audits/{id}", a.ep.Handle(Operator, a.get)},
			endpoint{"POST /v1/replayer/audits", a.ep.Handle(Operator, a.create)},
			endpoint{"PUT /v1/replayer/audits/{id}", a.ep.Handle(Operator, a.write)},
			endpoint{"POST /v1/replayer/audits/{id}/claim", a.ep.Handle(Operator, a.claim)},
			endpoint{"POST /v1/replayer/archive/verify", a.ep.Handle(Operator, a.verify)},
			endpoint{"POST /v1/replayer/sign", a.ep.Handle(Operator, a.sign)})
	}
	if a := h.Archive; a != nil {
		use(&a.ep)
		add(endpoint{"GET /v1/archive", a.ep.Handle(Operator, a.list)})
	}
	if a := h.Delivery; a != nil {
		use(&a.ep)
		add(endpoint{"GET /v1/delivery-keys/{target}", a.ep.Handle(Operator, a.get)})
	}
	if a := h.Explain; a != nil {
		use(&a.ep)
		add(endpoint{"POST /v1/explain", a.ep.Handle(AnyPrincipal, a.explain)})
	}
	if len(h.leftOut) > 0 {
		add(h.leftOutEndpoints(use(&h.meta))...)
	}
	return rs
}

func (h *Handler) whoami(w http.ResponseWriter, _ *http.Request, p server.Principal) error {
	WriteJSON(w, http.StatusOK, wire.Whoami{Principal: p.String(), Operator: p.Operator, Tenant: p.Tenant, ServerTime: h.clock.Now().UTC()})
	return nil
}

// Register adds a's endpoints to mux (a host serving this resource alone,
// as tests do).
func (a *RegistryAPI) Register(mux *http.ServeMux) {
	register(mux, (&Handler{Registry: a}).endpoints())
}

// Register adds a's endpoints to mux.
func (a *ArchiveAPI) Register(mux *http.ServeMux) { register(mux, (&Handler{Archive: a}).endpoints()) }

// Register adds a's endpoints to mux.
func (a *CredentialAPI) Register(mux *http.ServeMux) {
	register(mux, (&Handler{Credentials: a}).endpoints())
}

// Register adds a's endpoints to mux.
func (a *DeliveryAPI) Register(mux *http.ServeMux) {
	register(mux, (&Handler{Delivery: a}).endpoints())
}

// Register adds a's endpoints to mux.
func (a *ExplainAPI) Register(mux *http.ServeMux) { register(mux, (&Handler{Explain: a}).endpoints()) }

// Register adds a's endpoints to mux.
func (a *QueueAPI) Register(mux *http.ServeMux) { register(mux, (&Handler{Queues: a}).endpoints()) }

// Register adds a's endpoints to mux.
func (a *ReplayAPI) Register(mux *http.ServeMux) { register(mux, (&Handler{Replays: a}).endpoints()) }

// Register adds a's endpoints to mux.
func (a *SnapshotAPI) Register(mux *http.ServeMux) {
	register(mux, (&Handler{Snapshots: a}).endpoints())
}

// Register adds a's endpoints to mux.
func (a *TelemetryAPI) Register(mux *http.ServeMux) {
	register(mux, (&Handler{Telemetry: a}).endpoints())
}

// Register adds a's endpoints to mux.
func (a *TokenAPI) Register(mux *http.ServeMux) { register(mux, (&Handler{Tokens: a}).endpoints()) }
