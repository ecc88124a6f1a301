// This file is the replay API of `snavio dispatch serve`, the
// server side of `snavio replay` (docs/replay.md). Replays run in the
// server: it holds the platform's copies of the HMAC keys (they never
// leave it), the DLQs, the archive and the audits (in the data directory,
// so `snavio replay list` answers the same from any machine).
//
//	POST /v1/replays/plan          plan (dry run): changes nothing
//	POST /v1/replays               start; the answer streams NDJSON updates
//	POST /v1/replays/{id}/resume   resume an interrupted or paused replay
//	GET  /v1/replays               the audits, newest first
//	GET  /v1/replays/{id}          one audit
//
// Everything is for the operator. A run lives as long as its request: when
// the client goes away (Ctrl-C) or the server shuts down, the run finishes
// the batch in hand, records its audit as interrupted and ends; `--resume`
// continues it without re-sending what was sent.

package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
)

// Defaults.
const (
	// DefaultLease is how long a DLQ message received by a replay stays
	// hidden: enough to sign, put and delete a batch.
	DefaultLease = 30 * time.Second
	// peekLease hides a message a plan received for as short as possible.
	peekLease = time.Millisecond
	// DefaultMaxRuns bounds replays running at once.
	DefaultMaxRuns = 4
	// AuditDir is the audits' directory under the data directory.
	AuditDir      = "replays"
	maxReplayBody = 64 << 10
)

// ReplayOptions configure the API. Store (or Archive and Queues), Registry,
// Pipeline and Audits are required.
type ReplayOptions struct {
	// Store provides Archive and Queues when they are nil.
	Store    *embedded.Store
	Archive  ReplayArchive
	Queues   ReplayQueues
	Registry registry.Reader
	// KeyPolicy is the key rotation policy (the dispatcher's).
	KeyPolicy keys.Policy
	// Shield is the dispatcher's shield configuration (its replay window
	// and limits): an archived command is verified again with it, as of
	// when it was received, before it is replayed.
	Shield shield.Config
	// Pipeline takes replayed commands: the same pipeline as PutEvents.
	Pipeline server.Pipeline
	// Audits keeps the audits (default: replay.FileAudits in
	// DataDir/replays).
	Audits replay.AuditStore
	// DataDir is the server's data directory, for the default Audits.
	DataDir string
	// Delivery verifies that a DLQ message was delivered by the
	// dispatcher (docs/security/delivery-signature.md).
	Delivery *provenance.Signer
	// DedupeTTL is the dispatcher's strict dedupe TTL (default 300 s).
	DedupeTTL time.Duration
	// Lease is a DLQ message's visibility during a replay (default 30 s).
	Lease   time.Duration
	MaxRuns int
	Clock   clock.Clock
	Logger  *slog.Logger
	// Sleep waits for d or until ctx ends (default: a timer on Clock's
	// wall time); tests advance a fake clock.
	Sleep func(ctx context.Context, d time.Duration) error
}

// ReplayAPI serves the replay endpoints.
type ReplayAPI struct {
	o  ReplayOptions
	ep Endpoints

	mu       sync.Mutex
	active   map[string]context.CancelFunc
	closed   bool
	done     chan struct{} // closed by Close
	doneOnce sync.Once
	hookOnce sync.Once
}

// NewReplayAPI returns the API.
func NewReplayAPI(o ReplayOptions) (*ReplayAPI, error) {
	if o.Store != nil {
		if o.Archive == nil {
			o.Archive = o.Store
		}
		if o.Queues == nil {
			o.Queues = o.Store
		}
	}
	if o.Audits == nil && o.DataDir != "" {
		o.Audits = &replay.FileAudits{Dir: filepath.Join(o.DataDir, AuditDir)}
	}
	if o.Archive == nil || o.Queues == nil || o.Registry == nil || o.Pipeline == nil || o.Audits == nil || o.Delivery == nil {
		return nil, errors.New("controlapi: ReplayOptions: Store (or Archive and Queues), Registry, Pipeline, Audits (or DataDir) and Delivery are required")
	}
	if o.DedupeTTL <= 0 {
		o.DedupeTTL = 300 * time.Second
	}
	if o.Lease <= 0 {
		o.Lease = DefaultLease
	}
	if o.MaxRuns <= 0 {
		o.MaxRuns = DefaultMaxRuns
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Sleep == nil {
		o.Sleep = clock.Sleep
	}
	return &ReplayAPI{o: o, ep: Endpoints{Errors: replayErrors, Logger: o.Logger}, active: map[string]context.CancelFunc{}, done: make(chan struct{})}, nil
}

// MountReplays builds the API from o and registers it on mux.
func MountReplays(mux *http.ServeMux, o ReplayOptions) error {
	a, err := NewReplayAPI(o)
	if err != nil {
		return err
	}
	a.Register(mux)
	return nil
}

// Close interrupts every running replay (each records its audit as
// interrupted) and refuses new ones. The API calls it itself when the
// http.Server it runs in shuts down.
func (a *ReplayAPI) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.doneOnce.Do(func() { close(a.done) })
	a.closed = true
	for _, cancel := range a.active {
		cancel()
	}
}

// replayErrors maps the audits' and queues' errors.
func replayErrors(err error) *Error {
	switch {
	case errors.Is(err, replay.ErrNotFound):
		return Refuse(http.StatusNotFound, err.Error(), "list the replays with `snavio replay list`")
	case errors.Is(err, localqueue.ErrQueueNotFound):
		return Refuse(http.StatusNotFound, err.Error(), "name an existing dead-letter queue: `snavio queue list` shows them")
	}
	return nil
}

func decodeReplay(r *http.Request, v any) error {
	return Decode(r, maxReplayBody, v, "send the JSON object docs/replay.md documents")
}

// prepared is a validated request.
type prepared struct {
	origin wire.ReplayOrigin
	opts   replay.Options
}

func (a *ReplayAPI) prepare(ctx context.Context, req wire.ReplayRequest, operator string) (prepared, error) {
	origin, opts, err := replay.Prepare(req, operator, a.o.Clock.Now(), a.o.DedupeTTL)
	var bad *replay.BadRequest
	if errors.As(err, &bad) {
		return prepared{}, BadRequest(bad.Msg, bad.Fix)
	}
	if err != nil {
		return prepared{}, err
	}
	if !origin.IsArchive() {
		if _, err := a.o.Queues.GetQueue(ctx, origin.Queue); err != nil {
			return prepared{}, err
		}
	}
	return prepared{origin: origin, opts: opts}, nil
}

// engine returns a replay engine over the registry as it is now, and its
// view of the registry for the sources.
func (a *ReplayAPI) engine(ctx context.Context) (*replay.Engine, *replay.RegistryView, error) {
	view, err := replay.LoadRegistry(ctx, a.o.Registry, a.o.KeyPolicy, a.o.Clock.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("reading the registry's keys and routes: %w", err)
	}
	return &replay.Engine{Bus: pipelineBus{a.o.Pipeline}, Signer: replay.KeySigner{Keys: view, Clock: a.o.Clock}, Routes: view, Audits: a.o.Audits, Clock: a.o.Clock, Sleep: a.o.Sleep}, view, nil
}

func (a *ReplayAPI) source(p prepared, lease time.Duration, view *replay.RegistryView) (replay.Source, error) {
	if p.origin.IsArchive() {
		v, err := replay.NewVerifier(view, a.o.Shield, a.o.Clock.Now())
		if err != nil {
			return nil, fmt.Errorf("replay: the shield configuration: %w", err)
		}
		return &archiveSource{a: a.o.Archive, f: p.opts.Filter, v: v}, nil
	}
	return newDLQ(a.o.Queues, p.origin.Queue, lease, &deliveryCheck{signer: a.o.Delivery, reg: a.o.Registry, queues: a.o.Queues, clk: a.o.Clock}), nil
}

// begin reads a plan's or a run's request and loads the engine over the
// registry as it is now.
func (a *ReplayAPI) begin(r *http.Request, who server.Principal) (prepared, *replay.Engine, *replay.RegistryView, error) {
	var req wire.ReplayRequest
	if err := decodeReplay(r, &req); err != nil {
		return prepared{}, nil, nil, err
	}
	p, err := a.prepare(r.Context(), req, who.String())
	if err != nil {
		return prepared{}, nil, nil, err
	}
	e, view, err := a.engine(r.Context())
	return p, e, view, err
}

func (a *ReplayAPI) plan(w http.ResponseWriter, r *http.Request, who server.Principal) error {
	p, e, view, err := a.begin(r, who)
	if err != nil {
		return err
	}
	src, err := a.source(p, peekLease, view)
	if err != nil {
		return err
	}
	plan, err := e.Plan(r.Context(), src, p.opts)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wire.ReplayPlanResponse{Plan: plan, End: p.opts.Filter.End})
	return nil
}

// claim registers a run of id; false if it runs already or the API is
// closed or full.
func (a *ReplayAPI) claim(id string, cancel context.CancelFunc) *Error {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case a.closed:
		return Refuse(http.StatusServiceUnavailable, "the server is shutting down", "resume the replay once the server is back: snavio replay --resume "+id)
	case a.active[id] != nil:
		return Refuse(http.StatusConflict, "replay "+id+" is running already", "wait for it, or stop the client running it (Ctrl-C) and resume")
	case len(a.active) >= a.o.MaxRuns:
		return Refuse(http.StatusTooManyRequests, fmt.Sprintf("%d replays are running, the most this server runs at once", a.o.MaxRuns), "wait for one to finish (snavio replay list) and retry")
	}
	a.active[id] = cancel
	return nil
}

func (a *ReplayAPI) release(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.active, id)
}

func (a *ReplayAPI) running(id string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.active[id] != nil
}

// runContext ends when the client goes away or the server shuts down.
func (a *ReplayAPI) runContext(r *http.Request) (context.Context, context.CancelFunc) {
	if hs, ok := r.Context().Value(http.ServerContextKey).(*http.Server); ok {
		a.hookOnce.Do(func() { hs.RegisterOnShutdown(a.Close) })
	}
	return context.WithCancel(r.Context())
}

// stream answers 200 with NDJSON updates and returns the writer.
func stream(w http.ResponseWriter) func(wire.ReplayUpdate) {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	rc := http.NewResponseController(w)
	enc := json.NewEncoder(w)
	return func(u wire.ReplayUpdate) {
		u.Replay = replay.Shown(u.Replay)
		_ = enc.Encode(u)
		_ = rc.Flush()
	}
}

func (a *ReplayAPI) start(w http.ResponseWriter, r *http.Request, who server.Principal) error {
	p, e, view, err := a.begin(r, who)
	if err != nil {
		return err
	}
	peek, err := a.source(p, peekLease, view)
	if err != nil {
		return err
	}
	src, err := a.source(p, a.o.Lease, view)
	if err != nil {
		return err
	}
	ctx, cancel := a.runContext(r)
	defer cancel()
	plan, err := e.Plan(ctx, peek, p.opts)
	if err != nil {
		return err
	}
	if !p.origin.IsArchive() {
		// Let the plan's receives expire so the run sees every message.
		if err := a.o.Sleep(ctx, 2*peekLease); err != nil {
			return nil // the client went away
		}
	}
	audit, err := e.Begin(ctx, p.origin.String(), p.opts, plan.Total)
	if err != nil {
		return err
	}
	if ae := a.claim(audit.ID, cancel); ae != nil {
		return ae
	}
	defer a.release(audit.ID)
	a.o.Logger.Info("replay started", "replay_id", audit.ID, "origin", audit.Origin, "operator", audit.Operator, "reason", audit.Reason, "planned", audit.Planned)
	a.run(ctx, w, e, src, audit, p.opts.Limit)
	return nil
}

func (a *ReplayAPI) run(ctx context.Context, w http.ResponseWriter, e *replay.Engine, src replay.Source, audit wire.ReplayAudit, limit int) {
	send := stream(w)
	send(wire.ReplayUpdate{Event: wire.ReplayEventStarted, Replay: audit})
	final, err := e.Run(ctx, src, audit, limit, func(p wire.ReplayAudit) {
		send(wire.ReplayUpdate{Event: wire.ReplayEventProgress, Replay: p})
	})
	u := wire.ReplayUpdate{Event: wire.ReplayEventFinished, Replay: final}
	if err != nil {
		u.Error = err.Error()
	}
	a.o.Logger.Info("replay ended", "replay_id", final.ID, "status", final.Status, "sent", final.SentCount, "failed", final.Failed, "held", final.Held, "err", err)
	send(u)
}

// replayID returns the {id} path value, checked.
func replayID(r *http.Request) (string, *Error) {
	id := r.PathValue("id")
	if !envelope.ValidID(id) {
		return "", BadRequest(fmt.Sprintf("invalid replay id %.60q", id), "use the id `snavio replay list` shows, a UUID")
	}
	return id, nil
}

func (a *ReplayAPI) resume(w http.ResponseWriter, r *http.Request, who server.Principal) error {
	id, ae := replayID(r)
	if ae != nil {
		return ae
	}
	var req wire.ReplayResumeRequest
	if r.ContentLength != 0 {
		if err := decodeReplay(r, &req); err != nil {
			return err
		}
	}
	if req.Limit < 0 {
		return BadRequest(fmt.Sprintf("invalid --limit %d", req.Limit), "use 0 (no limit) or a positive count")
	}
	audit, err := a.o.Audits.Get(r.Context(), id)
	if err != nil {
		return err
	}
	if err := replay.Resumable(audit); err != nil {
		return Refuse(http.StatusConflict, err.Error(), "see `snavio replay show "+id+"`")
	}
	origin, err := wire.ParseReplayOrigin(audit.Origin)
	if err != nil {
		return fmt.Errorf("replay %s has a corrupt origin: %w", id, err)
	}
	if !origin.IsArchive() {
		if _, err := a.o.Queues.GetQueue(r.Context(), origin.Queue); err != nil {
			return err
		}
	}
	e, view, err := a.engine(r.Context())
	if err != nil {
		return err
	}
	src, err := a.source(prepared{origin: origin, opts: replay.AuditOptions(&audit)}, a.o.Lease, view)
	if err != nil {
		return err
	}
	ctx, cancel := a.runContext(r)
	defer cancel()
	if ae := a.claim(id, cancel); ae != nil {
		return ae
	}
	defer a.release(id)
	audit.Status, audit.Resumes, audit.Error = wire.ReplayRunning, audit.Resumes+1, ""
	a.o.Logger.Info("replay resumed", "replay_id", id, "operator", who.String())
	a.run(ctx, w, e, src, audit, req.Limit)
	return nil
}

// view is an audit as the API shows it: without the sent ids (a resume
// reads them from the store), and a run that is recorded as running but
// runs nowhere (the server stopped under it) as interrupted.
func (a *ReplayAPI) view(au wire.ReplayAudit) wire.ReplayAudit {
	if au.Status == wire.ReplayRunning && !a.running(au.ID) {
		au.Status = wire.ReplayInterrupted
		if au.Error == "" {
			au.Error = "the server stopped during the replay: resume it with --resume " + au.ID
		}
	}
	return replay.Shown(au)
}

func (a *ReplayAPI) list(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	return writeReplayList(w, r, a.o.Audits.List, a.view)
}

// writeReplayList answers a list of replay audits, each as view shows it.
func writeReplayList(w http.ResponseWriter, r *http.Request, list func(context.Context) ([]wire.ReplayAudit, error), view func(wire.ReplayAudit) wire.ReplayAudit) error {
	all, err := list(r.Context())
	if err != nil {
		return err
	}
	out := wire.ReplayList{Replays: make([]wire.ReplayAudit, 0, len(all))}
	for _, au := range all {
		out.Replays = append(out.Replays, view(au))
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *ReplayAPI) get(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	id, ae := replayID(r)
	if ae != nil {
		return ae
	}
	au, err := a.o.Audits.Get(r.Context(), id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, a.view(au))
	return nil
}
