package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/google/uuid"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// DefaultListen is where the server listens unless told otherwise: the
// loopback interface only.
const DefaultListen = "127.0.0.1:8787"

// StartOptions configure Start. Pipeline and DataDir are required; every
// other field has a default.
type StartOptions struct {
	// Listen is the TCP address to listen on (default DefaultListen).
	// Port 0 picks a free port; Server.Addr tells which.
	Listen string
	// Listener, when set, is used instead of listening on Listen: a caller
	// that binds first can fail on a taken port before it writes anything.
	Listener net.Listener
	// DataDir holds the operator token (operator.token) and the default
	// tenant token file (tenant-tokens.json); created 0700 if missing.
	DataDir string
	// Pipeline takes the valid PutEvents entries.
	Pipeline Pipeline
	// Ready reports whether the server can take traffic (store open and
	// writable, caches loaded, shared capacity left); /readyz answers 503
	// with its error, whose reason a *NotReady gives. Nil: ready (the
	// server still checks its own in-flight limit).
	Ready func(context.Context) error
	// Admit, when set, is asked before each PutEvents request: a
	// *NotReady refuses the whole request with 503 ThrottlingException
	// and Retry-After, its Reason counted in snavio_http_rejected_total
	// (serve: the in-memory store's memory budget is spent). It must be
	// cheap. Nil admits every request.
	Admit func() *NotReady
	// Metrics is the registry /metrics serves; pass the same one to the
	// dispatcher as its telemetry.Metrics. Nil: a new one.
	Metrics *Metrics
	// Tokens resolves tenant tokens. Nil: a FileTokenStore at
	// DataDir/tenant-tokens.json.
	Tokens TokenStore
	// Control is the control API, mounted at /v1/ behind bearer-token
	// authentication: handlers find the caller with PrincipalFrom (the
	// control API's controlapi.ContextAuth). Nil: /v1/ answers 404.
	Control http.Handler
	// Dashboard, when set, builds the web dashboard from the server's
	// authenticator; it serves GET / and everything under /ui/.
	Dashboard func(*Authenticator) http.Handler
	// Logger logs server events; nil discards.
	Logger *slog.Logger
	// Clock times requests for the latency histogram (default clock.System()).
	Clock clock.Clock
	// Limits bound in-flight work; zero fields take the defaults.
	Limits Limits
	// Credentials are the tenants' ingress credentials PutEvents is signed
	// with. Nil: a FileCredentialStore at DataDir/ingress-credentials.json.
	Credentials *FileCredentialStore
	// OpenIngress leaves PutEvents unauthenticated: for the benchmarks'
	// floor only; `dispatch serve` never sets it.
	OpenIngress bool
	// Telemetry receives the ingress's refusal reports (IngressRefused,
	// at most one per reason and key every 10 s); nil: none.
	Telemetry telemetry.Sink
	// SQS, when set, builds the handler of POST / requests whose
	// X-Amz-Target starts with "AmazonSQS." (the SQS JSON protocol), given
	// a SigV4 verifier of the ingress credentials for service "sqs" and
	// the ingress's refusal reporter (nil without Telemetry).
	SQS func(*SigV4Verifier, *RefusalReporter) (http.Handler, error)
	// AllowedHosts are the host names, besides loopback names and IP
	// addresses, that requests may name in their Host header.
	AllowedHosts []string
}

// Server is a running `dispatch serve` HTTP server.
type Server struct {
	http      *http.Server
	ln        net.Listener
	ingress   *Ingress
	sqs       http.Handler
	metrics   *Metrics
	tokens    TokenStore
	creds     *FileCredentialStore
	tokenPath string
	created   bool
	log       *slog.Logger

	draining atomic.Bool
	stopping chan struct{} // closed once Shutdown has closed the listener
	serveErr chan error    // Serve's unexpected error, if any

	mu    sync.Mutex
	hooks []drainHook

	shutdownOnce sync.Once
	shutdownErr  error
}

type drainHook struct {
	name string
	fn   func(context.Context) error
}

// Listen binds addr, with the error a user of --listen can act on.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("server: cannot listen on %s: %w; free the port or pass another --listen address", addr, err)
	}
	return ln, nil
}

// Start validates opts, loads (or creates) the operator token, listens and
// starts serving in the background. It returns once the listener is bound,
// so Addr is valid and requests can be sent at once.
func Start(opts StartOptions) (*Server, error) {
	if opts.Pipeline == nil {
		return nil, errors.New("server: StartOptions.Pipeline is nil; pass the dispatcher's pipeline")
	}
	if opts.DataDir == "" {
		return nil, errors.New("server: StartOptions.DataDir is empty; pass the data directory that holds the operator token")
	}
	if opts.Listen == "" {
		opts.Listen = DefaultListen
	}
	if opts.Clock == nil {
		opts.Clock = clock.System()
	}
	if opts.Metrics == nil {
		opts.Metrics = NewMetrics()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	token, tokenPath, created, err := LoadOrCreateOperatorToken(opts.DataDir)
	if err != nil {
		return nil, err
	}
	if opts.Tokens == nil {
		fts, err := OpenFileTokenStore(filepath.Join(opts.DataDir, TenantTokensFile), opts.Clock)
		if err != nil {
			return nil, err
		}
		opts.Tokens = fts
	}
	auth, err := NewAuthenticator(token, opts.Tokens)
	if err != nil {
		return nil, err
	}
	auth.metrics = opts.Metrics
	if opts.Credentials == nil {
		if opts.Credentials, err = OpenFileCredentialStore(filepath.Join(opts.DataDir, IngressCredentialsFile), opts.Clock); err != nil {
			return nil, err
		}
	}
	hosts, err := newHostCheck(opts.AllowedHosts)
	if err != nil {
		return nil, err
	}
	iopts := IngressOptions{Pipeline: opts.Pipeline, Limits: opts.Limits, Metrics: opts.Metrics, Logger: log}
	if !opts.OpenIngress {
		if iopts.Auth, err = NewSigV4Verifier(opts.Credentials, opts.Clock, 0); err != nil {
			return nil, err
		}
		if opts.Telemetry != nil {
			if iopts.Refusals, err = NewRefusalReporter(opts.Telemetry, opts.Clock, 0); err != nil {
				return nil, err
			}
		}
	}
	ingress, err := NewIngress(iopts)
	if err != nil {
		return nil, err
	}
	ln := opts.Listener
	if ln == nil {
		if ln, err = Listen(opts.Listen); err != nil {
			return nil, err
		}
	}
	ln = newClientCapListener(ln, ingress.limits.MaxConnsPerClient, ingress.limits.RetryAfter, opts.Metrics)
	s := &Server{
		ln: ln, ingress: ingress, metrics: opts.Metrics, tokens: opts.Tokens, creds: opts.Credentials,
		tokenPath: tokenPath, created: created, log: log,
		stopping: make(chan struct{}),
		serveErr: make(chan error, 1),
	}
	if opts.SQS != nil {
		v, err := NewSigV4Verifier(opts.Credentials, opts.Clock, 0)
		if err != nil {
			return nil, err
		}
		if s.sqs, err = opts.SQS(v.ForService("sqs"), iopts.Refusals); err != nil {
			return nil, err
		}
	}
	s.http = &http.Server{
		Handler:           hosts.wrap(opts.Metrics, s.routes(opts, auth)),
		ReadHeaderTimeout: ingress.limits.HeaderTimeout,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	if iopts.Refusals != nil {
		s.OnDrain("ingress refusal report", func(context.Context) error { iopts.Refusals.Flush(); return nil })
	}
	var once sync.Once
	s.http.RegisterOnShutdown(func() { once.Do(func() { close(s.stopping) }) })
	go func() {
		if err := s.http.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.serveErr <- err
		}
	}()
	log.Debug("server listening", "addr", s.Addr(), "operator_token", tokenPath, "token_created", created)
	return s, nil
}

// routes builds the handler tree.
func (s *Server) routes(opts StartOptions, auth *Authenticator) http.Handler {
	now := opts.Clock.Now
	m := opts.Metrics
	retry := s.ingress.limits.RetryAfter
	mux := http.NewServeMux()
	// PutEvents passes admission; SQS consumers, which drain the queues,
	// do not.
	root := admit(opts.Admit, s.ingress, m)
	if s.sqs != nil {
		sqs, pe := m.instrument("sqs", now, limitControl(s.ingress.limits, m, s.sqs)), m.instrument("putevents", now, root)
		root = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasPrefix(r.Header.Get("X-Amz-Target"), "AmazonSQS.") {
				sqs.ServeHTTP(w, r)
				return
			}
			pe.ServeHTTP(w, r)
		})
	} else {
		root = m.instrument("putevents", now, root)
	}
	mux.Handle("/{$}", root)
	mux.Handle("GET /healthz", m.instrument("healthz", now, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		writeStatus(w, http.StatusOK, map[string]string{"status": "ok"}, 0)
	})))
	mux.Handle("GET /readyz", m.instrument("readyz", now, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nr := s.notReady(r.Context(), opts.Ready); nr != nil {
			writeStatus(w, http.StatusServiceUnavailable, map[string]string{"status": nr.status(), "reason": nr.Reason, "error": nr.Err.Error(), "fix": nr.Fix}, retry)
			return
		}
		writeStatus(w, http.StatusOK, map[string]string{"status": "ready"}, 0)
	})))
	mux.Handle("GET /metrics", m.instrument("metrics", now, m.Handler()))

	control := opts.Control
	if control == nil {
		control = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			WriteAPIError(w, http.StatusNotFound, "no control API is mounted on this server", "use a server started by `snavio dispatch serve`")
		})
	}
	mux.Handle("/v1/", m.instrument("control", now, limitControl(s.ingress.limits, m, auth.Middleware(control))))
	if opts.Dashboard != nil {
		ui := m.instrument("dashboard", now, opts.Dashboard(auth))
		mux.Handle("GET /{$}", ui)
		mux.Handle("/ui/", ui)
	}
	mux.Handle("/", m.instrument("other", now, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		WriteAPIError(w, http.StatusNotFound, "no such endpoint: "+r.URL.Path,
			"PutEvents is POST /; health is /healthz and /readyz; metrics /metrics; the control API is under /v1/")
	})))
	return mux
}

// Reasons /readyz gives in its 503 answers (NotReady.Reason).
const (
	// ReasonDraining: the server is shutting down.
	ReasonDraining = "draining"
	// ReasonSaturated: every PutEvents request slot is taken.
	ReasonSaturated = "saturated_requests"
	// ReasonNotReady: a Ready error that is not a *NotReady.
	ReasonNotReady = "not_ready"
)

// NotReady is why the server cannot take traffic: StartOptions.Ready
// returns one to give /readyz a reason and a fix.
type NotReady struct {
	// Reason is a stable word for scripts and load balancers, such as
	// log_failed or handoff_full.
	Reason string
	// Err says what is wrong.
	Err error
	// Fix says what brings the server back.
	Fix string
}

func (e *NotReady) Error() string { return e.Reason + ": " + e.Err.Error() }

func (e *NotReady) Unwrap() error { return e.Err }

func (e *NotReady) status() string {
	if e.Reason == ReasonDraining {
		return "draining"
	}
	return "not ready"
}

// notReady says why /readyz answers 503, or nil: the readiness source's
// reason first (the most specific, such as a failed store), then a drain,
// then the ingress's in-flight limit. /healthz says only that the process
// serves.
func (s *Server) notReady(ctx context.Context, ready func(context.Context) error) *NotReady {
	if ready != nil {
		if err := ready(ctx); err != nil {
			var nr *NotReady
			if errors.As(err, &nr) {
				return nr
			}
			return &NotReady{Reason: ReasonNotReady, Err: err, Fix: "wait and retry; the server log says what it is waiting for"}
		}
	}
	if s.draining.Load() {
		return &NotReady{Reason: ReasonDraining, Err: errors.New("the server is shutting down"), Fix: "send traffic to another instance, or wait for the restart"}
	}
	if s.metrics.saturationNow() >= 1 {
		return &NotReady{Reason: ReasonSaturated, Err: fmt.Errorf("all %d PutEvents request slots are in use", s.ingress.limits.MaxInFlightRequests),
			Fix: "send traffic to another instance, or retry after the Retry-After delay"}
	}
	return nil
}

// admit refuses a PutEvents request with 503 and Retry-After while
// check returns a reason, before its body is read.
func admit(check func() *NotReady, in *Ingress, m *Metrics) http.Handler {
	if check == nil {
		return in
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if nr := check(); nr != nil {
			m.reject("putevents", nr.Reason)
			writeAWSError(w, uuid.NewString(), &awsError{Status: http.StatusServiceUnavailable, Type: ErrCodeThrottling, Reason: nr.Reason,
				RetryAfter: in.limits.RetryAfter, Message: nr.Err.Error() + "; " + nr.Fix})
			return
		}
		in.ServeHTTP(w, r)
	})
}

// limitControl bounds in-flight control-API requests, refusing the rest
// with 503 and Retry-After.
func limitControl(l Limits, m *Metrics, next http.Handler) http.Handler {
	lim := newLimiter(l.MaxInFlightControl)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !lim.tryAcquire(1) {
			m.reject("control", "saturated_requests")
			w.Header().Set("Retry-After", retryAfterSeconds(l.RetryAfter))
			WriteAPIError(w, http.StatusServiceUnavailable,
				fmt.Sprintf("%d control requests are already in flight, the most this server takes at once", l.MaxInFlightControl),
				"retry after the Retry-After delay")
			return
		}
		defer lim.release(1)
		next.ServeHTTP(w, r)
	})
}

func writeStatus(w http.ResponseWriter, status int, body map[string]string, retryAfter time.Duration) {
	b, err := json.Marshal(body, json.Deterministic(true))
	if err != nil { // cannot happen: a map of strings
		b = []byte(`{"status":"error"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	h.Set("Cache-Control", "no-store")
	if retryAfter > 0 {
		h.Set("Retry-After", retryAfterSeconds(retryAfter))
	}
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Addr returns the address the server listens on, such as 127.0.0.1:8787.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// URL returns the server's base URL, http://<Addr>: the endpoint to give
// an AWS SDK (BaseEndpoint, or AWS_ENDPOINT_URL_EVENTBRIDGE).
func (s *Server) URL() string { return "http://" + s.Addr() }

// OperatorTokenPath returns the file holding the operator token.
func (s *Server) OperatorTokenPath() string { return s.tokenPath }

// OperatorTokenCreated reports whether this start created the operator
// token (first start on this data directory).
func (s *Server) OperatorTokenCreated() bool { return s.created }

// Metrics returns the server's metrics, to hand to the dispatcher.
func (s *Server) Metrics() *Metrics { return s.metrics }

// Credentials returns the ingress credential store in use.
func (s *Server) Credentials() *FileCredentialStore { return s.creds }

// Tokens returns the tenant token store in use.
func (s *Server) Tokens() TokenStore { return s.tokens }

// Limits returns the limits in force, defaults filled in.
func (s *Server) Limits() Limits { return s.ingress.limits }

// Failed delivers an error if the server stops serving on its own (the
// listener failed). It never delivers after a Shutdown.
func (s *Server) Failed() <-chan error { return s.serveErr }

// OnDrain registers fn to run during Shutdown, after in-flight requests
// have finished, in registration order (the outbox flush goes here). A
// hook's error does not stop the hooks after it; Shutdown returns them all.
func (s *Server) OnDrain(name string, fn func(context.Context) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hooks = append(s.hooks, drainHook{name: name, fn: fn})
}

// Shutdown stops the server gracefully: /readyz turns to 503, the listener
// closes (new connections are refused), idle connections close, in-flight
// requests run to completion, and then the drain hooks run in order with
// ctx. If ctx ends before the requests finish, the remaining connections
// are closed and the hooks still run (with the ended ctx, so they should
// do only what they can at once). Later calls return the first call's
// result.
func (s *Server) Shutdown(ctx context.Context) error {
	s.shutdownOnce.Do(func() {
		s.draining.Store(true)
		var errs []error
		if err := s.http.Shutdown(ctx); err != nil {
			errs = append(errs, fmt.Errorf("server: in-flight requests did not finish in time (%w); their connections were closed", err))
			_ = s.http.Close()
		}
		s.mu.Lock()
		hooks := append([]drainHook(nil), s.hooks...)
		s.mu.Unlock()
		for _, h := range hooks {
			if err := h.fn(ctx); err != nil {
				errs = append(errs, fmt.Errorf("server: drain hook %s: %w", h.name, err))
				s.log.Error("drain hook failed", "hook", h.name, "err", err)
			}
		}
		s.shutdownErr = errors.Join(errs...)
	})
	return s.shutdownErr
}
