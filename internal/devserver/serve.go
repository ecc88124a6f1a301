// Package serve assembles `snavio dispatch serve`: every dispatcher stage
// and background job on one machine, on the embedded store.
//
//	PutEvents ingress (internal/server)
//	  -> node: shield + fast inline, archive (with verdicts), durable hand-off
//	  -> slow workers (node.RunSlow) over the hand-off queue
//	  -> local target queues (embedded store), telemetry outbox per tenant
//	control API (/v1/...) over the same store; jobs on their schedules.
//
// Start returns a running Serve; Shutdown stops it gracefully: the server
// stops taking requests and drains those in flight, the slow workers
// finish their batches, the jobs stop, the alert drain runs once more, and
// the store closes.
package devserver

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/logagg"
	"github.com/snavio/snavio/internal/monitor"
	"github.com/snavio/snavio/internal/pipeline"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// StoreFile is the embedded store's file in the data directory.
const StoreFile = "snavio.db"

// SnapshotKeyID names the Ed25519 key (SigningKeyFile) that signs the
// registry snapshots of `dispatch serve`.
const SnapshotKeyID = "local-ed25519"

// Bounds of an --fsync interval.
const (
	MinSyncEvery = time.Millisecond
	MaxSyncEvery = 10 * time.Minute
)

// ParseFsync reads an --fsync value: "always" (0: sync before each
// acknowledgement) or an interval from MinSyncEvery to MaxSyncEvery
// (Options.SyncEvery).
func ParseFsync(v string) (time.Duration, error) {
	if v == "always" {
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < MinSyncEvery || d > MaxSyncEvery {
		return 0, fmt.Errorf("%q: want always (sync before each acknowledgement) or an interval from %v to %v, such as 100ms", v, MinSyncEvery, MaxSyncEvery)
	}
	return d, nil
}

// Options configure a Serve. DataDir is required.
type Options struct {
	// DataDir holds the store file, the operator token, tenant tokens, the
	// snapshot signing key and the delivery signing key. Created 0700 if
	// missing.
	DataDir string
	// Ephemeral keeps the store in memory (the data directory still holds
	// the operator token and the signing key, so the local profile finds
	// them).
	Ephemeral bool
	// MemoryBudget bounds the bytes an ephemeral store's queued messages
	// hold (embedded.Options.MemoryBudget; 0: its default, 256 MiB).
	// Near it PutEvents requests are refused with 503 and Retry-After and
	// /readyz says memory_budget. Ignored on file.
	MemoryBudget int64
	// SyncEvery is the store's sync interval (embedded.Options.SyncEvery):
	// 0 syncs every write before it is acknowledged.
	SyncEvery time.Duration
	// Listen is the address (default 127.0.0.1:8787; port 0 picks one).
	Listen string
	// Demo seeds a tenant, queues, a route, an ACL and a key.
	Demo bool
	// Clock defaults to the system clock.
	Clock clock.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Limits bound the server's in-flight work.
	Limits server.Limits
	// SlowWorkers bounds concurrent slow-stage work (default 4).
	SlowWorkers int
	// Jobs are the background jobs' schedules; zero fields take defaults.
	Jobs Schedule
	// WebhookURL, with WebhookSecret, adds a signed webhook alert channel
	// named "webhook".
	WebhookURL    string
	WebhookSecret []byte
	// Email, when set, adds an email alert channel named "email".
	Email *alerts.EmailConfig
	// Shadow runs rate limiting and fairness in shadow mode.
	Shadow bool
	// SkewSampleRate is the share of accepted commands that emit
	// snavio.telemetry.skew_sample (shield.Config.SampleRate): 0 is the
	// default, 1%; a negative rate emits none.
	SkewSampleRate float64
	// InProgressTTL is how long a strict command's claim may stay in
	// progress before a retry takes it over (default 30 s), and
	// HandoffVisibility how long a hand-off taken by a slow worker stays
	// hidden before it is retried (default 30 s). Together they bound how
	// late a command whose first attempt crashed is delivered.
	InProgressTTL, HandoffVisibility time.Duration
	// ArchiveBounds bound each tenant's share of the archive (zero fields:
	// 256 MiB, of which 4 MiB for records the shield did not accept).
	ArchiveBounds embedded.ArchiveBounds
	// AllowedHosts are the host names (besides loopback names and IP
	// addresses) the server answers to (--allowed-host).
	AllowedHosts []string
	// OpenIngress leaves PutEvents unauthenticated: only for `make
	// bench-serve` to measure what SigV4 verification costs; `dispatch
	// serve` never sets it.
	OpenIngress bool
}

// Serve is a running dispatcher.
type Serve struct {
	o       Options
	log     *slog.Logger
	clk     clock.Clock
	store   *embedded.Store
	srv     *server.Server
	queues  *controlapi.QueueAPI // the queue API, whose long poll the SQS API shares
	node    *pipeline.Node
	caches  *cache.Caches
	flow    *flow.Flow
	gen     *snapshot.Generator
	loader  *snapshot.Loader
	alerts  *alerts.Router
	monitor *monitor.Monitor
	// registry is the store's registry behind the control API: writes
	// refresh the caches before they return.
	registry *freshRegistry
	sink     *outboxSink
	notify   *notifier
	// logs aggregates repeated log lines; Shutdown logs the last counts.
	logs *logagg.Handler
	// Deps the API packages mount with.
	deps Deps

	alertMu     sync.Mutex
	alertCursor uint64
	alertLoaded bool

	coldSource snapshot.Source
	demo       *DemoInfo
	keyPath    string
	// delivery signs delivered messages (its master: deliveryKeyPath).
	delivery        *provenance.Signer
	deliveryKeyPath string

	// failed delivers the server's failure or the log's (Failed).
	failed     chan error
	logErrOnce sync.Once
	logErr     error

	cancel   context.CancelFunc
	workers  sync.WaitGroup
	stopOnce sync.Once
	stopErr  error
}

// Start opens the store, loads the caches, starts the server, the slow
// workers and the jobs.
func Start(ctx context.Context, o Options) (_ *Serve, err error) {
	if o.DataDir == "" {
		return nil, errors.New("serve: no data directory; pass --data-dir DIR (or set the profile's data_dir)")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	o.Jobs = o.Jobs.withDefaults()
	if o.Listen == "" {
		o.Listen = server.DefaultListen
	}
	// Bound first: a taken port fails before the data directory is made
	// or seeded.
	ln, err := server.Listen(o.Listen)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = ln.Close()
		}
	}()
	if err := os.MkdirAll(o.DataDir, 0o700); err != nil {
		return nil, fmt.Errorf("creating the data directory: %w; pass a writable --data-dir", err)
	}
	metrics := server.NewMetrics()
	// Repeated log lines are counted, not written each time (a flood of
	// refusals filled the disk): docs/server/README.md.
	logs := logagg.New(o.Logger.Handler(), logagg.Options{Clock: o.Clock,
		OnSuppressed: func(l slog.Level) { metrics.LogSuppressed(logagg.LevelName(l)) }})
	o.Logger = slog.New(logs)
	s := &Serve{o: o, log: o.Logger, clk: o.Clock, notify: newNotifier(), logs: logs}

	var onSync func(time.Duration)
	if !o.Ephemeral { // in memory nothing is synced
		observe, err := metrics.Histogram("snavio_store_log_sync_duration_seconds",
			"Latency of the write-ahead log's fdatasyncs: what each PutEvents waits for with --fsync always.", logSyncBuckets)
		if err != nil {
			return nil, err
		}
		onSync = func(d time.Duration) { observe(d.Seconds()) }
	}
	st, err := embedded.Open(embedded.Options{Path: filepath.Join(o.DataDir, StoreFile), Ephemeral: o.Ephemeral, MemoryBudget: o.MemoryBudget, SyncEvery: o.SyncEvery, Clock: o.Clock, OnApplied: s.notify.Notify, OnLogSync: onSync})
	if err != nil {
		return nil, fmt.Errorf("opening the store in %s: %w", o.DataDir, err)
	}
	s.store = st
	if err := st.SetArchiveBounds(o.ArchiveBounds); err != nil {
		_ = st.Close()
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = st.Close()
		}
	}()
	if err := s.ensureInternalQueues(ctx); err != nil {
		return nil, err
	}
	if err := storeMetrics(metrics, st, o.Ephemeral, o.SyncEvery); err != nil {
		return nil, err
	}
	s.sink = &outboxSink{store: st, log: o.Logger}
	reg := st.Registry()

	// Snapshots: signed with a key kept in the data directory.
	priv, keyPath, err := loadOrCreateSigningKey(o.DataDir)
	if err != nil {
		return nil, err
	}
	s.keyPath = keyPath
	// Deliveries: signed with keys derived from a master in the data
	// directory.
	s.delivery, s.deliveryKeyPath, err = loadOrCreateDeliverySigner(o.DataDir)
	if err != nil {
		return nil, err
	}
	signer, err := snapshot.NewEd25519Signer(SnapshotKeyID, priv)
	if err != nil {
		return nil, err
	}
	cacheCfg := cache.Config{} // the defaults, which TTLPolicy records in snapshots
	s.gen, err = snapshot.NewGenerator(snapshot.GeneratorConfig{TTLPolicy: snapshot.DefaultTTLPolicy()}, snapshot.GeneratorDeps{
		Reader: reg, Store: st.Snapshots(), Signer: signer, Clock: o.Clock, Metrics: metrics, Telemetry: s.sink, Logger: o.Logger,
	})
	if err != nil {
		return nil, err
	}
	s.loader, err = snapshot.NewLoader(snapshot.LoaderConfig{
		Trusted: snapshot.TrustedKeys{SnapshotKeyID: priv.Public().(ed25519.PublicKey)},
		MaxAge:  o.Jobs.SnapshotMaxAge,
	}, snapshot.LoaderDeps{Store: st.Snapshots(), Clock: o.Clock, Metrics: metrics, Logger: o.Logger})
	if err != nil {
		return nil, err
	}

	if o.Demo {
		if s.demo, err = seedDemo(ctx, st, o.DataDir, o.Clock); err != nil {
			return nil, fmt.Errorf("seeding the demo: %w", err)
		}
	}
	polls := &tenantPolls{}
	asm, err := dispatch.Assemble(ctx, dispatch.Config{
		Registry: reg, FlowStore: st, Sender: sender{s: st, clk: o.Clock, sink: s.sink, sig: s.delivery},
		Telemetry: s.sink, Clock: o.Clock, Metrics: metrics, Logger: o.Logger, Polls: polls,
		Cache:  cacheCfg,
		Shield: shield.Config{SampleRate: o.SkewSampleRate},
		Flow:   flow.Config{Instance: instanceID(), SoleInstance: true, Shadow: o.Shadow, InProgressTTL: o.InProgressTTL},
		// The fast stage's cold start: the latest signed snapshot, falling
		// back to the registry. On a first start there is no snapshot yet:
		// load the registry without the loader's refusal warning.
		Load: func(ctx context.Context, c *cache.Caches) (err error) {
			if vs, verr := st.Snapshots().Versions(ctx, snapshot.DefaultPaths().Of(snapshot.KindFull)); verr == nil && len(vs) == 0 {
				s.coldSource = snapshot.FromRegistry
				return c.LoadAll(ctx)
			}
			s.coldSource, err = s.loader.ColdStart(ctx, c)
			return err
		},
	})
	if err != nil {
		return nil, err
	}
	s.caches, s.flow = asm.Caches, asm.Deps.Flow
	d := asm.Dispatcher
	s.node, err = pipeline.New(pipeline.Options{Dispatcher: d, Handoff: embedded.Handoff{S: st, Queue: HandoffQueue}, Light: embedded.Handoff{S: st, Queue: LightHandoffQueue}, Archive: embedded.DispatchArchive{S: st}, Clock: o.Clock, Logger: o.Logger, SlowWorkers: o.SlowWorkers, Visibility: o.HandoffVisibility,
		Room: queueRoom(st), HandoffCapacity: localqueue.DefaultMaxDepth,
		Defer: func(ctx context.Context) (context.Context, func() error) {
			ctx, d := embedded.DeferSync(ctx)
			return ctx, d.Wait
		}})
	if err != nil {
		return nil, err
	}
	if err := nodeMetrics(metrics, s.node); err != nil {
		return nil, err
	}

	channels := map[string]alerts.Channel{}
	if o.WebhookURL != "" {
		wh, err := alerts.NewWebhook(o.WebhookURL, o.WebhookSecret)
		if err != nil {
			return nil, fmt.Errorf("--alert-webhook: %w", err)
		}
		channels["webhook"] = wh
	}
	if o.Email != nil {
		em, err := alerts.NewEmail(*o.Email)
		if err != nil {
			return nil, fmt.Errorf("--alert-email-smtp: %w", err)
		}
		channels["email"] = em
	}
	route := alerts.Config{"*": {"dashboard"}}
	for _, n := range []string{"webhook", "email"} {
		if _, ok := channels[n]; ok {
			route["*"] = append(route["*"], n)
		}
	}
	s.alerts = alerts.New(alerts.Options{Channels: channels, Configs: staticAlerts(route), Clock: o.Clock, Logger: o.Logger, Metrics: metrics})
	s.sink.alerts = s.alerts
	s.monitor = monitor.New(monitor.Config{})

	s.registry = &freshRegistry{Store: reg, caches: s.caches, log: o.Logger}
	registryAPI := controlapi.RegistryOptions{Registry: s.registry, Queues: controlapi.EmbeddedRouteQueues(st), KeyHistory: o.Jobs.ArchiveRetention}
	// One tenant token store for the server's authentication and the
	// token API, so that a revoked token stops working at once.
	tokens, err := server.OpenFileTokenStore(filepath.Join(o.DataDir, server.TenantTokensFile), o.Clock)
	if err != nil {
		return nil, err
	}
	// One credential store for the ingress' SigV4 checks and the
	// credential API, so that a revoked credential stops working at once.
	creds, err := server.OpenFileCredentialStore(filepath.Join(o.DataDir, server.IngressCredentialsFile), o.Clock)
	if err != nil {
		return nil, err
	}
	if o.Demo {
		if err := seedDemoCredentials(s.demo, creds, o.DataDir); err != nil {
			return nil, fmt.Errorf("seeding the demo's ingress credentials: %w", err)
		}
	}
	s.deps = Deps{Store: st, Clock: o.Clock, Logger: o.Logger, Dispatcher: d, Changed: s.notify.Changed,
		Generator: s.gen, Loader: s.loader, SigningKey: priv, Polls: polls, Metrics: metrics, Tokens: tokens, Delivery: s.delivery, Credentials: creds}
	api, err := s.mountAPI(registryAPI)
	if err != nil {
		return nil, err
	}

	s.srv, err = server.Start(server.StartOptions{
		Listen: o.Listen, Listener: ln, DataDir: o.DataDir, Pipeline: s.node, Metrics: metrics, Control: api, Tokens: tokens,
		Logger: o.Logger, Clock: o.Clock, Limits: o.Limits, Ready: s.ready, Admit: s.admit,
		Credentials: creds, Telemetry: s.sink, AllowedHosts: o.AllowedHosts, OpenIngress: o.OpenIngress,
		Dashboard: s.dashboardUI(api), SQS: s.sqsAPI,
	})
	if err != nil {
		return nil, err
	}

	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	s.cancel = cancel
	s.workers.Add(1)
	go func() { defer s.workers.Done(); s.node.RunSlow(runCtx) }()
	go s.logs.Run(runCtx)
	s.failed = make(chan error, 2)
	go func() {
		select {
		case err := <-s.srv.Failed():
			s.failed <- err
		case <-runCtx.Done():
		}
	}()
	go s.watchLog(runCtx)
	s.startJobs(runCtx)
	return s, nil
}

// ensureInternalQueues creates the hand-off queues on first start and
// recovers their in-flight items after a crash.
func (s *Serve) ensureInternalQueues(ctx context.Context) error {
	for _, q := range handoffQueues {
		// CreateQueue is idempotent for the same configuration.
		if _, err := s.store.CreateQueue(ctx, localqueue.QueueConfig{Name: q}); err != nil {
			return fmt.Errorf("creating the slow-stage hand-off queue %s: %w", q, err)
		}
		// The store's file lock makes this process its only user: hand-offs
		// in flight belonged to slow workers that died with the last process.
		n, err := s.store.ReleaseInFlight(ctx, q)
		if err != nil {
			return fmt.Errorf("recovering the slow stage's hand-offs: %w", err)
		}
		if n > 0 {
			s.log.Info("recovered hand-offs of the previous run for the slow stage", "queue", q, "count", n)
		}
	}
	return nil
}

// Reasons of /readyz's 503 answers from the store and the slow stage.
const (
	ReasonLogFailed    = "log_failed"
	ReasonStoreFailing = "store_failing"
	ReasonStoreClosed  = "store_closed"
	ReasonHandoffFull  = "handoff_full"
	ReasonMemoryBudget = "memory_budget"
)

// memoryHeadroom is the share of an in-memory store's budget kept for
// the requests already in flight: past the rest, new PutEvents requests
// are refused (the store itself refuses a message past the whole).
const memoryHeadroom = 10 // percent

// memoryFull says why an in-memory store takes no new requests: its
// queued messages hold its budget but the headroom; nil on file.
func (s *Serve) memoryFull() *server.NotReady {
	used, budget := s.store.MemoryUse()
	if budget == 0 || used*100 < budget*(100-memoryHeadroom) {
		return nil
	}
	return &server.NotReady{Reason: ReasonMemoryBudget,
		Err: fmt.Errorf("the in-memory store's queued messages hold %d of its %d-byte memory budget", used, budget),
		Fix: "retry after the Retry-After delay as consumers drain their queues, or raise the budget"}
}

// admit is the ingress's check before each PutEvents request.
func (s *Serve) admit() *server.NotReady { return s.memoryFull() }

// ready is /readyz's source: the store takes writes, and the slow stage's
// shared hand-off has room (docs/server/README.md, Readiness).
func (s *Serve) ready(context.Context) error {
	if err := s.store.Health(); err != nil {
		switch {
		case errors.Is(err, embedded.ErrLogFailed):
			return &server.NotReady{Reason: ReasonLogFailed, Err: err,
				Fix: "free space or repair the disk under " + s.o.DataDir + "; dispatch serve stops so that its supervisor restarts it, and the restart recovers every acknowledged write"}
		case errors.Is(err, embedded.ErrApplyFailing):
			return &server.NotReady{Reason: ReasonStoreFailing, Err: err,
				Fix: "free space or repair the disk under " + s.o.DataDir + "; the store retries and is ready again once a write to its file succeeds"}
		default:
			return &server.NotReady{Reason: ReasonStoreClosed, Err: err, Fix: "wait for the restart"}
		}
	}
	if nr := s.memoryFull(); nr != nil {
		return nr
	}
	if full, err := s.store.QueueFull(HandoffQueue); err == nil && full {
		return &server.NotReady{Reason: ReasonHandoffFull, Err: errors.New("the slow stage's hand-off queue is full: commands that need the slow stage are refused"),
			Fix: "send traffic to another instance, or retry after the Retry-After delay; the slow workers are draining it"}
	}
	return nil
}

// watchLog delivers the log's failure on failed once the store's log
// fails: a failed log refuses every write until the store is reopened, so
// serve stops and its supervisor restarts it (docs/store/embedded.md).
func (s *Serve) watchLog(ctx context.Context) {
	select {
	case <-s.store.LogFailed():
		s.failed <- s.logFailure()
	case <-ctx.Done():
	}
}

// logFailure is the error serve stops with after its store's log failed,
// or nil; the same error each time, so Shutdown and Failed agree.
func (s *Serve) logFailure() error {
	select {
	case <-s.store.LogFailed():
	default:
		return nil
	}
	s.logErrOnce.Do(func() {
		s.logErr = fmt.Errorf("the store's write-ahead log failed and every write since was refused; stopped so that a supervisor restarts dispatch serve, whose restart recovers every acknowledged write (free space or repair the disk under %s first): %w",
			s.o.DataDir, s.store.Health())
	})
	return s.logErr
}

// instanceID names this process in leases, claims and rollups.
func instanceID() string {
	b := make([]byte, 6)
	_, _ = rand.Read(b)
	return "serve-" + hex.EncodeToString(b)
}

// staticAlerts routes every tenant's alerting events the same way: to the
// dashboard log, and to the webhook and email when configured. (Critical
// events reach the dashboard even if a route leaves it out: the alerts
// package does not let them be disabled.)
type staticAlerts alerts.Config

func (c staticAlerts) Alerts(string) alerts.Config { return alerts.Config(c) }

// Info describes a running Serve, for the start banner.
type Info struct {
	URL       string `json:"url"`
	StorePath string `json:"store"`
	// LogPath is the store's write-ahead log directory ("" in memory).
	LogPath string `json:"store_log,omitempty"`
	// Fsync says when the log is synced: "always" (before each
	// acknowledgement) or the interval ("" in memory).
	Fsync             string    `json:"fsync,omitempty"`
	Ephemeral         bool      `json:"ephemeral"`
	DataDir           string    `json:"data_dir"`
	OperatorToken     string    `json:"operator_token_file"`
	TokenCreated      bool      `json:"operator_token_created"`
	SigningKey        string    `json:"snapshot_signing_key_file"`
	DeliveryKey       string    `json:"delivery_signing_key_file"`
	CachesLoadedFrom  string    `json:"caches_loaded_from"`
	Demo              *DemoInfo `json:"demo,omitempty"`
	MetricsURL        string    `json:"metrics_url"`
	HealthURL         string    `json:"health_url"`
	ControlAPIBaseURL string    `json:"control_api"`
	DashboardURL      string    `json:"dashboard"`
	// GC is the garbage collector's target, when the caller set it
	// (TuneGC).
	GC string `json:"gc,omitempty"`
}

// Info returns where state lives and what the server serves.
func (s *Serve) Info() Info {
	path := s.store.Path()
	if s.o.Ephemeral {
		path = "(in memory: nothing survives a restart)"
	}
	u := s.srv.URL()
	fsync := ""
	switch {
	case s.o.Ephemeral:
	case s.o.SyncEvery > 0:
		fsync = s.o.SyncEvery.String()
	default:
		fsync = "always"
	}
	return Info{
		URL: u, StorePath: path, LogPath: s.store.LogDir(), Fsync: fsync, Ephemeral: s.o.Ephemeral, DataDir: s.o.DataDir,
		OperatorToken: s.srv.OperatorTokenPath(), TokenCreated: s.srv.OperatorTokenCreated(),
		SigningKey: s.keyPath, DeliveryKey: s.deliveryKeyPath, CachesLoadedFrom: string(s.coldSource), Demo: s.demo,
		DashboardURL: u + "/", MetricsURL: u + "/metrics", HealthURL: u + "/healthz", ControlAPIBaseURL: u + "/v1/",
	}
}

// Failed reports an unexpected failure: the server's listener, or the
// store's log (then every write is refused until a restart).
func (s *Serve) Failed() <-chan error { return s.failed }

// Node returns the local dispatcher (its counters).
func (s *Serve) Node() *pipeline.Node { return s.node }

// Registry returns the registry as the control API writes it: a write
// returns once the dispatcher's caches have it.
func (s *Serve) Registry() registry.Store { return s.registry }

// Credentials returns the ingress credentials the server verifies with.
func (s *Serve) Credentials() *server.FileCredentialStore { return s.deps.Credentials }

// Store returns the embedded store.
func (s *Serve) Store() *embedded.Store { return s.store }

// Shutdown stops gracefully within ctx: requests in flight finish, the
// slow workers finish their batches, the jobs stop, alerts are drained,
// the store is closed.
func (s *Serve) Shutdown(ctx context.Context) error {
	s.stopOnce.Do(func() {
		var errs []error
		if err := s.srv.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("stopping the server: %w", err))
		}
		s.cancel()
		done := make(chan struct{})
		go func() { s.workers.Wait(); close(done) }()
		select {
		case <-done:
		case <-ctx.Done():
			errs = append(errs, errors.New("slow workers and jobs did not finish in time; unfinished hand-offs are redelivered on the next start"))
		}
		if err := s.drainAlerts(ctx); err != nil {
			errs = append(errs, err)
		}
		if err := s.store.Close(); err != nil {
			errs = append(errs, fmt.Errorf("closing the store: %w", err))
		}
		s.stopErr = errors.Join(errs...)
		if lerr := s.logFailure(); lerr != nil {
			// The one line that matters; what else failed to stop
			// followed from it (the drain's writes were refused too).
			if s.stopErr != nil {
				s.log.Warn("stopping after the log failed", "err", s.stopErr)
			}
			s.stopErr = lerr
		}
		_ = s.logs.Flush(true)
	})
	return s.stopErr
}

// notifier wakes telemetry long-polls: Changed returns a channel closed at
// the next Notify.
type notifier struct {
	mu sync.Mutex
	ch chan struct{}
}

func newNotifier() *notifier { return &notifier{ch: make(chan struct{})} }

func (n *notifier) Notify() {
	n.mu.Lock()
	close(n.ch)
	n.ch = make(chan struct{})
	n.mu.Unlock()
}

func (n *notifier) Changed() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.ch
}

// logSyncBuckets are the upper bounds of the log's sync latency
// histogram: 50 µs to 1 s, finer than the HTTP buckets because an
// fdatasync on a fast disk takes well under a millisecond.
var logSyncBuckets = []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}

// storeMetrics exports the store's write-ahead log and commit counts, read
// at each scrape, and on file its sync interval: what --fsync costs is
// the syncs' rate against the frames'.
func storeMetrics(m *server.Metrics, st *embedded.Store, ephemeral bool, syncEvery time.Duration) error {
	log := func(f func(embedded.LogStats) uint64) func() float64 {
		return func() float64 { return float64(f(st.LogStats())) }
	}
	type metric struct {
		name, help string
		fn         func() float64
	}
	ms := []metric{
		{"snavio_store_log_frames_total", "Frames appended to the store's write-ahead log (in memory too: there they are kept, not written).",
			log(func(l embedded.LogStats) uint64 { return l.Frames })},
		{"snavio_store_log_writes_total", "Group writes to the write-ahead log's files (0 in memory).",
			log(func(l embedded.LogStats) uint64 { return l.Writes })},
		{"snavio_store_log_syncs_total", "fdatasyncs of the write-ahead log: one per group write with --fsync always, one per interval (or apply) otherwise.",
			log(func(l embedded.LogStats) uint64 { return l.Syncs })},
		{"snavio_store_log_segments", "Write-ahead log segment files (sealed and active).",
			log(func(l embedded.LogStats) uint64 { return uint64(l.Segments) })},
		{"snavio_store_commits_total", "Group commits of the store file (applies, purges, flow state).",
			func() float64 { return float64(st.CommitStats().Commits) }},
	}
	if !ephemeral { // in memory nothing is synced
		ms = append(ms, metric{"snavio_store_log_sync_interval_seconds", "The write-ahead log's sync interval (--fsync); 0: synced before each acknowledgement but a queue consumer's (within 10 ms).",
			func() float64 { return syncEvery.Seconds() }})
	}
	for _, mt := range ms {
		if err := m.ReadAtScrape(mt.name, mt.help, mt.fn); err != nil {
			return err
		}
	}
	return nil
}

// nodeMetrics exports the node's counts of the conditions whose log
// lines are aggregated (logagg): a refused entry or a retried hand-off is
// counted here even when its line is not written.
func nodeMetrics(m *server.Metrics, n *pipeline.Node) error {
	for _, mt := range []struct {
		name, help string
		fn         func(pipeline.Stats) int64
	}{
		{"snavio_node_entries_refused_total", "Command entries refused by the dispatcher (the producer retries them): a failed archive, hand-off or stage.",
			func(s pipeline.Stats) int64 { return s.Refused }},
		{"snavio_node_slow_retries_total", "Slow-stage attempts that failed and left their hand-off to be retried.",
			func(s pipeline.Stats) int64 { return s.SlowRetries }},
		{"snavio_node_entries_throttled_total", "Command entries refused with ThrottlingException at admission to the slow stage: their tenant's or route's bound, or their full target queue (counted in refused too).",
			func(s pipeline.Stats) int64 { return s.Throttled }},
		{"snavio_node_slow_target_full_total", "Hand-offs failed at once because their target queue was full at delivery (snavio.command.failed delivery-failure with retry hints).",
			func(s pipeline.Stats) int64 { return s.TargetFull }},
		{"snavio_node_slow_gave_up_total", "Hand-offs the slow stage gave up on after their last attempt (snavio.command.failed delivery-failure).",
			func(s pipeline.Stats) int64 { return s.GaveUp }},
	} {
		fn := mt.fn
		if err := m.ReadAtScrape(mt.name, mt.help, func() float64 { return float64(fn(n.Stats())) }); err != nil {
			return err
		}
	}
	return nil
}
