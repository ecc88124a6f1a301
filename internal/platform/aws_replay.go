package platform

// The replay of an aws profile runs in the CLI, with the operator's
// credentials, on the same engine as `dispatch serve` (internal/replay):
// docs/replay.md, "On AWS", says why. It reads the DLQ from SQS or the
// archive through an EventBridge replay into a capture queue and puts on
// the env's bus; what needs DynamoDB or the tenants' keys (the audits,
// the archive's verification, re-signing) it asks of the control API's
// replayer endpoints (controlReplayer), so the CLI links no DynamoDB
// store and holds no tenant's HMAC secret.

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"
	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// replayLease is how long a DLQ message a replay received stays hidden.
const replayLease = 30 * time.Second

// replaySQS is what the replayer calls of SQS (a DLQ, a capture queue).
type replaySQS interface {
	replay.SQSAPI
	replay.CaptureSQSAPI
}

// awsReplay is a replayer of an aws profile: its clients and settings.
// Tests build one on the emulators with a fake clock.
type awsReplay struct {
	names   stack.Names
	bus     string // the env's command bus
	control *controlReplayer
	// routes reads the routes (strict ones, DLQs) through the control API.
	routes   func(ctx context.Context) (*replay.RouteView, error)
	sqs      replaySQS
	events   replay.EventBridgeAPI
	put      replay.Bus
	keys     replay.DeliveryKeys
	operator func(ctx context.Context) (string, error)
	clk      clock.Clock
	sleep    func(ctx context.Context, d time.Duration) error
	lease    time.Duration
	wait     time.Duration // SQS long polls (0: 1 s; negative: none)
}

// replayer builds the profile's replayer. It checks the profile first:
// an aws profile needs its control_url (the replayer endpoints) and its
// env to name the bus, archive and queues. what names the command.
func (c *AWS) replayer(ctx context.Context, what string) (*awsReplay, error) {
	t := c.target
	api, err := c.api(what)
	if err != nil {
		return nil, err
	}
	if t.Env == "" {
		return nil, &APIError{Status: http.StatusBadRequest, Message: "the aws profile has no env, which names the bus, archive and queues a replay uses",
			Fix: "set it with `snavio profile set NAME --kind aws --env ENV`"}
	}
	if err := stack.CheckEnv(t.Env); err != nil {
		return nil, &APIError{Status: http.StatusBadRequest, Message: err.Error(), Fix: "fix the profile's env with `snavio profile set NAME --env ENV`"}
	}
	cfg, err := AWSConfig(ctx, t, t.Region)
	if err != nil {
		return nil, err
	}
	names := stack.Names{Env: t.Env}
	bt := t
	bt.BusName = BusNameOf(t)
	st := sts.NewFromConfig(cfg)
	events := eventbridge.NewFromConfig(cfg)
	return &awsReplay{
		names: names, bus: bt.BusName, control: newControlReplayer(api),
		routes: func(ctx context.Context) (*replay.RouteView, error) { return routeView(ctx, api) },
		sqs:    sqs.NewFromConfig(cfg),
		events: events,
		put:    busAdapter{operatorBus(bt, events)},
		keys:   controlDeliveryKeys{c},
		operator: func(ctx context.Context) (string, error) {
			id, err := st.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			if err != nil {
				return "", fmt.Errorf("who is replaying (STS GetCallerIdentity, for the audit): %w", err)
			}
			return awssdk.ToString(id.Arn), nil
		},
		clk: clock.System(), sleep: clock.Sleep, lease: replayLease,
	}, nil
}

// routeView reads the routes through the control API: which are strict,
// which targets dead-letter into each DLQ.
func routeView(ctx context.Context, api Platform) (*replay.RouteView, error) {
	items, err := api.ListRegistry(ctx, registry.KindRoute, RegistryFilter{})
	if err != nil {
		return nil, fmt.Errorf("reading the routes through the control API: %w", err)
	}
	routes := make([]registry.Route, 0, len(items))
	for _, it := range items {
		if it.Route != nil {
			routes = append(routes, *it.Route)
		}
	}
	return replay.NewRouteView(routes), nil
}

// controlDeliveryKeys asks the control API for a target's key.
type controlDeliveryKeys struct{ c *AWS }

func (k controlDeliveryKeys) DeliveryKey(ctx context.Context, target string) (provenance.Key, error) {
	dk, err := k.c.DeliveryKey(ctx, target)
	if err != nil {
		return provenance.Key{}, err
	}
	secret, err := base64.RawURLEncoding.DecodeString(dk.Key)
	if err != nil {
		return provenance.Key{}, fmt.Errorf("the control API's delivery key of %s is not base64url: %w", target, err)
	}
	return provenance.Key{Target: target, ID: dk.KeyID, Secret: secret}, nil
}

// operatorBus is the env's bus with the operator's own credentials: a
// replay puts commands of every tenant, so it cannot take one tenant's
// emit role as send does.
func operatorBus(t Target, c *eventbridge.Client) Bus {
	b := &sdkBus{target: t, client: c}
	b.once.Do(func() {})
	return b
}

// busAdapter puts replayed commands through the profile's Bus: the same
// PutEvents client producers use.
type busAdapter struct{ b Bus }

func (a busAdapter) PutEvents(ctx context.Context, evs []replay.Event) ([]replay.Result, error) {
	in := make([]Event, len(evs))
	for i, e := range evs {
		in[i] = Event{Source: e.Source, DetailType: e.DetailType, Detail: e.Detail}
	}
	res, err := a.b.PutEvents(ctx, in)
	if err != nil {
		return nil, err
	}
	out := make([]replay.Result, len(res))
	for i, r := range res {
		out[i] = replay.Result{EventID: r.EventID, ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage}
	}
	return out, nil
}

// badRequest is a refused input, as the local API answers it (exit 2).
func badRequest(msg, fix string) error {
	return &APIError{Status: http.StatusBadRequest, Message: msg, Fix: fix}
}

// replayErr maps the engine's and stores' errors as the local API does.
func replayErr(err error, id string) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, replay.ErrNotFound):
		return &APIError{Status: http.StatusNotFound, Message: err.Error(), Fix: "list the replays with `snavio replay list`"}
	case errors.Is(err, replay.ErrNoQueue):
		return &APIError{Status: http.StatusNotFound, Message: err.Error(), Fix: "name an existing dead-letter queue: `snavio queue list` shows them"}
	case errors.Is(err, replay.ErrRunning):
		return &APIError{Status: http.StatusConflict, Message: err.Error(), Fix: "wait for it (snavio replay show " + id + "), or stop the replayer running it and resume"}
	}
	return err
}

// prepared is a validated request.
type prepared struct {
	origin wire.ReplayOrigin
	opts   replay.Options
}

// prepare validates req as the local API does.
func (r *awsReplay) prepare(req wire.ReplayRequest, operator string) (prepared, error) {
	origin, opts, err := replay.Prepare(req, operator, r.clk.Now(), 0)
	var bad *replay.BadRequest
	if errors.As(err, &bad) {
		return prepared{}, badRequest(bad.Msg, bad.Fix)
	}
	if err != nil {
		return prepared{}, err
	}
	if origin.IsArchive() && !opts.Filter.Start.Before(opts.Filter.End) {
		return prepared{}, badRequest("--start is not before the end of the range", "give a --start in the past, before --end")
	}
	return prepared{origin: origin, opts: opts}, nil
}

// closingSource is a source with resources to delete after the run.
type closingSource interface {
	replay.Source
	Close(ctx context.Context) error
}

// tagReplayID tags an archive run's capture rule and queue with its
// replay.
const tagReplayID = "snavio:replay-id"

// source opens p's source, and the signer of what it reads.
func (r *awsReplay) source(ctx context.Context, p prepared, view *replay.RouteView) (replay.Source, replay.Signer, error) {
	if !p.origin.IsArchive() {
		s, err := replay.NewSQSDLQ(ctx, replay.SQSDLQOptions{API: r.sqs, Queue: p.origin.Queue, Lease: r.lease, Wait: r.wait, View: view, Keys: r.keys})
		if err != nil {
			return nil, nil, replayErr(err, "")
		}
		return s, r.control.signer(s.ARN()), nil
	}
	prefix := r.names.Queue("replay-")
	if _, err := replay.SweepCaptures(ctx, r.sqs, r.events, r.bus, prefix, r.clk.Now()); err != nil {
		return nil, nil, fmt.Errorf("sweeping what crashed archive replays left: %w", err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	tags := map[string]string{"snavio:env": r.names.Env, "snavio:purpose": "replay-capture"}
	s, err := replay.NewEBArchive(replay.EBArchiveOptions{Events: r.events, SQS: r.sqs, Bus: r.bus, Archive: r.names.Archive(),
		Name: prefix + hex.EncodeToString(suffix[:]), Tags: tags, Filter: p.opts.Filter, Verifier: r.control, Wait: r.wait})
	if err != nil {
		return nil, nil, err
	}
	return s, r.control.signer(""), nil
}

// closeSource deletes what an archive source created, even after an
// interruption.
func (r *awsReplay) closeSource(ctx context.Context, src replay.Source) error {
	if c, ok := src.(closingSource); ok {
		return c.Close(context.WithoutCancel(ctx))
	}
	return nil
}

// claimFor is how long a run's claim must outlast its writes: the wait
// for leased messages and the longest pause its rate makes.
func (r *awsReplay) claimFor(rate float64) time.Duration {
	d := defaultReplayClaim + r.lease
	if rate > 0 {
		d += time.Duration(2 * float64(time.Second) / rate)
	}
	return min(d, wire.MaxReplayClaimSeconds*time.Second)
}

func (r *awsReplay) plan(ctx context.Context, req wire.ReplayRequest) (wire.ReplayPlanResponse, error) {
	p, err := r.prepare(req, "")
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	view, err := r.routes(ctx)
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	src, _, err := r.source(ctx, p, view)
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	e := &replay.Engine{Routes: view, Clock: r.clk}
	plan, err := e.Plan(ctx, src, p.opts)
	err = errors.Join(err, r.closeSource(ctx, src))
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	return wire.ReplayPlanResponse{Plan: plan, End: p.opts.Filter.End}, nil
}

func (r *awsReplay) start(ctx context.Context, req wire.ReplayRequest) (ReplayStream, error) {
	operator, err := r.operator(ctx)
	if err != nil {
		return nil, err
	}
	p, err := r.prepare(req, operator)
	if err != nil {
		return nil, err
	}
	view, err := r.routes(ctx)
	if err != nil {
		return nil, err
	}
	peek, _, err := r.source(ctx, p, view)
	if err != nil {
		return nil, err
	}
	planner := &replay.Engine{Routes: view, Clock: r.clk}
	plan, err := planner.Plan(ctx, peek, p.opts)
	if err = errors.Join(err, r.closeSource(ctx, peek)); err != nil {
		return nil, err
	}
	src, sign, err := r.source(ctx, p, view)
	if err != nil {
		return nil, err
	}
	e := &replay.Engine{Bus: r.put, Signer: sign, Routes: view, Audits: r.control, Clock: r.clk, Sleep: r.sleep}
	// The audit is created claimed for the run's whole claim.
	r.control.setClaim("", r.claimFor(p.opts.Rate))
	audit, err := e.Begin(ctx, p.origin.String(), p.opts, plan.Total)
	if err != nil {
		_ = r.closeSource(ctx, src)
		return nil, replayErr(err, "")
	}
	if t, ok := src.(*replay.EBArchive); ok {
		t.Tag(tagReplayID, audit.ID)
	}
	return r.stream(ctx, audit, func(ctx context.Context, progress func(wire.ReplayAudit)) (wire.ReplayAudit, error) {
		defer func() { _ = r.closeSource(ctx, src) }()
		return e.Run(ctx, src, audit, p.opts.Limit, progress)
	}), nil
}

func (r *awsReplay) resume(ctx context.Context, id string, req wire.ReplayResumeRequest) (ReplayStream, error) {
	if req.Limit < 0 {
		return nil, badRequest(fmt.Sprintf("invalid --limit %d", req.Limit), "use 0 (no limit) or a positive count")
	}
	audit, err := r.control.Get(ctx, id)
	if err != nil {
		return nil, replayErr(err, id)
	}
	if err := replay.Resumable(audit); err != nil {
		return nil, &APIError{Status: http.StatusConflict, Message: err.Error(), Fix: "see `snavio replay show " + id + "`"}
	}
	origin, err := wire.ParseReplayOrigin(audit.Origin)
	if err != nil {
		return nil, fmt.Errorf("replay %s has a corrupt origin: %w", id, err)
	}
	view, err := r.routes(ctx)
	if err != nil {
		return nil, err
	}
	src, sign, err := r.source(ctx, prepared{origin: origin, opts: replay.AuditOptions(&audit)}, view)
	if err != nil {
		return nil, err
	}
	if t, ok := src.(*replay.EBArchive); ok {
		t.Tag(tagReplayID, id)
	}
	// Claimed last: nothing after it can fail before the run, whose end
	// releases the claim.
	if err := r.control.Claim(ctx, id, r.claimFor(audit.Rate)); err != nil {
		_ = r.closeSource(ctx, src)
		return nil, replayErr(err, id)
	}
	e := &replay.Engine{Bus: r.put, Signer: sign, Routes: view, Audits: r.control, Clock: r.clk, Sleep: r.sleep}
	audit.Status = wire.ReplayRunning
	return r.stream(ctx, audit, func(ctx context.Context, progress func(wire.ReplayAudit)) (wire.ReplayAudit, error) {
		defer func() { _ = r.closeSource(ctx, src) }()
		return e.Resume(ctx, src, id, req.Limit, progress)
	}), nil
}

// stream runs a replay in the background and streams its updates as the
// local API's NDJSON answer does: started, progress, finished.
func (r *awsReplay) stream(ctx context.Context, audit wire.ReplayAudit, run func(context.Context, func(wire.ReplayAudit)) (wire.ReplayAudit, error)) ReplayStream {
	ctx, cancel := context.WithCancel(ctx)
	s := &runStream{ch: make(chan wire.ReplayUpdate, 16), cancel: cancel}
	go func() {
		defer close(s.ch)
		s.ch <- wire.ReplayUpdate{Event: wire.ReplayEventStarted, Replay: replay.Shown(audit)}
		final, err := run(ctx, func(a wire.ReplayAudit) {
			s.ch <- wire.ReplayUpdate{Event: wire.ReplayEventProgress, Replay: replay.Shown(a)}
		})
		u := wire.ReplayUpdate{Event: wire.ReplayEventFinished, Replay: replay.Shown(final)}
		if err != nil {
			u.Error = err.Error()
		}
		s.ch <- u
	}()
	return s
}

// runStream is a replay running in this process.
type runStream struct {
	ch     chan wire.ReplayUpdate
	cancel context.CancelFunc
}

func (s *runStream) Next() (wire.ReplayUpdate, error) {
	u, ok := <-s.ch
	if !ok {
		return wire.ReplayUpdate{}, io.EOF
	}
	return u, nil
}

// Close stops the run after the batch in hand (it records itself
// interrupted) and waits for it.
func (s *runStream) Close() error {
	s.cancel()
	for range s.ch {
	}
	return nil
}

// PlanReplay implements Platform.
func (c *AWS) PlanReplay(ctx context.Context, req wire.ReplayRequest) (wire.ReplayPlanResponse, error) {
	r, err := c.replayer(ctx, "replay --dry-run")
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	return r.plan(ctx, req)
}

// StartReplay implements Platform.
func (c *AWS) StartReplay(ctx context.Context, req wire.ReplayRequest) (ReplayStream, error) {
	r, err := c.replayer(ctx, "replay")
	if err != nil {
		return nil, err
	}
	return r.start(ctx, req)
}

// ResumeReplay implements Platform.
func (c *AWS) ResumeReplay(ctx context.Context, id string, req wire.ReplayResumeRequest) (ReplayStream, error) {
	r, err := c.replayer(ctx, "replay --resume")
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, id, req)
}

// ListReplays implements Platform: one request to the control API.
func (c *AWS) ListReplays(ctx context.Context) ([]wire.ReplayAudit, error) {
	api, err := c.api("replay list")
	if err != nil {
		return nil, err
	}
	return newControlReplayer(api).List(ctx)
}

// GetReplay implements Platform: one request to the control API.
func (c *AWS) GetReplay(ctx context.Context, id string) (wire.ReplayAudit, error) {
	api, err := c.api("replay show")
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	a, err := newControlReplayer(api).Get(ctx, id)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	return replay.Shown(a), nil
}

// defaultReplayClaim is how long a claim outlasts a write when nothing
// in the run's pace asks for longer.
const defaultReplayClaim = 5 * time.Minute

// controlReplayer is the control API's replayer resource as a run needs
// it: the audit store (replay.AuditStore, each write renewing this
// process's claim), the archive's verifier and the re-signer.
type controlReplayer struct {
	api    *Local
	runner string // this process's claim id

	mu sync.Mutex
	// stored is how many sent ids of an audit the control API holds, so
	// a write carries only the chunk that changed.
	stored map[string]int
	// claims is how long each claim lasts past a write ("" is the claim
	// of the next audit created).
	claims map[string]time.Duration
}

var (
	_ replay.AuditStore      = (*controlReplayer)(nil)
	_ replay.ArchiveVerifier = (*controlReplayer)(nil)
)

func newControlReplayer(api *Local) *controlReplayer {
	return &controlReplayer{api: api, runner: uuid.NewString(), stored: map[string]int{}, claims: map[string]time.Duration{}}
}

const pathReplayer = "/v1/replayer/"

// setClaim sets how long the claim of audit id lasts past each write.
func (c *controlReplayer) setClaim(id string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.claims[id] = d
}

// claim is this process's claim of audit id.
func (c *controlReplayer) claim(id string) wire.ReplayClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.claims[id]
	if !ok {
		d = c.claims[""]
	}
	if d <= 0 {
		d = defaultReplayClaim
	}
	return wire.ReplayClaim{Runner: c.runner, ClaimSeconds: int64((d + time.Second - 1) / time.Second)}
}

// Create implements replay.AuditStore.
func (c *controlReplayer) Create(ctx context.Context, a wire.ReplayAudit) error {
	cl := c.claim(a.ID)
	if err := c.api.do(ctx, http.MethodPost, pathReplayer+"audits", nil, wire.ReplayAuditWrite{ReplayClaim: cl, Audit: a}, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.stored[a.ID], c.claims[a.ID] = 0, cl.For()
	c.mu.Unlock()
	return nil
}

// Update implements replay.AuditStore: the audit and the sent ids from
// the chunk holding the first the control API does not have.
func (c *controlReplayer) Update(ctx context.Context, a wire.ReplayAudit) error {
	c.mu.Lock()
	have := c.stored[a.ID]
	c.mu.Unlock()
	from := min(have, len(a.Sent)) / 1000 * 1000
	w := wire.ReplayAuditWrite{ReplayClaim: c.claim(a.ID), SentFrom: from, Audit: a}
	w.Audit.Sent = a.Sent[from:]
	if err := c.api.do(ctx, http.MethodPut, pathReplayer+"audits/"+a.ID, nil, w, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.stored[a.ID] = len(a.Sent)
	c.mu.Unlock()
	return nil
}

// Get implements replay.AuditStore: the audit with its sent ids.
func (c *controlReplayer) Get(ctx context.Context, id string) (wire.ReplayAudit, error) {
	var a wire.ReplayAudit
	if err := c.api.do(ctx, http.MethodGet, pathReplayer+"audits/"+id, nil, nil, &a); err != nil {
		return wire.ReplayAudit{}, err
	}
	c.mu.Lock()
	c.stored[id] = len(a.Sent)
	c.mu.Unlock()
	return a, nil
}

// List implements replay.AuditStore.
func (c *controlReplayer) List(ctx context.Context) ([]wire.ReplayAudit, error) {
	var l wire.ReplayList
	if err := c.api.do(ctx, http.MethodGet, pathReplayer+"audits", nil, nil, &l); err != nil {
		return nil, err
	}
	return l.Replays, nil
}

// Claim makes this process the runner of audit id, for d past each
// write (409 while another replayer holds it).
func (c *controlReplayer) Claim(ctx context.Context, id string, d time.Duration) error {
	c.setClaim(id, d)
	return c.api.do(ctx, http.MethodPost, pathReplayer+"audits/"+id+"/claim", nil, c.claim(id), nil)
}

// Refusals implements replay.ArchiveVerifier: the control function
// verifies the events against the registry's key history.
func (c *controlReplayer) Refusals(ctx context.Context, evs []replay.Archived) ([]string, error) {
	out := make([]string, 0, len(evs))
	for len(evs) > 0 {
		n := min(len(evs), wire.MaxReplaySignRecords)
		req := wire.ReplayVerifyRequest{Records: make([]wire.ReplayRecord, n)}
		for i, e := range evs[:n] {
			req.Records[i] = wire.ReplayRecord{Source: e.Source, DetailType: e.DetailType, Detail: string(e.Detail), ReceivedAt: e.ReceivedAt}
		}
		var res wire.ReplayVerifyResponse
		if err := c.api.do(ctx, http.MethodPost, pathReplayer+"archive/verify", nil, req, &res); err != nil {
			return nil, err
		}
		if len(res.Refusals) != n {
			return nil, fmt.Errorf("the control API answered %d verdicts for %d events", len(res.Refusals), n)
		}
		out = append(out, res.Refusals...)
		evs = evs[n:]
	}
	return out, nil
}

// signer re-signs through the control API the records of a DLQ of ARN
// queueARN, or of the archive ("").
func (c *controlReplayer) signer(queueARN string) replay.Signer {
	return controlSigner{c: c, queueARN: queueARN}
}

type controlSigner struct {
	c        *controlReplayer
	queueARN string
}

// Sign implements replay.Signer.
func (s controlSigner) Sign(ctx context.Context, a *wire.ReplayAudit, recs []replay.Record) ([]replay.Signed, error) {
	out := make([]replay.Signed, 0, len(recs))
	for len(recs) > 0 {
		n := min(len(recs), wire.MaxReplaySignRecords)
		req := wire.ReplaySignRequest{ReplayID: a.ID, Runner: s.c.runner, QueueARN: s.queueARN, Records: make([]wire.ReplayRecord, n)}
		for i, r := range recs[:n] {
			req.Records[i] = wire.ReplayRecord{Source: r.Source, Detail: string(r.Detail), ReceivedAt: r.At, Attributes: r.Attributes}
			if s.queueARN == "" {
				// Only commands reach the signer: the verifier refused
				// any other detail-type.
				req.Records[i].DetailType = envelope.EventType
			}
		}
		var res wire.ReplaySignResponse
		if err := s.c.api.do(ctx, http.MethodPost, pathReplayer+"sign", nil, req, &res); err != nil {
			return nil, fmt.Errorf("replay: re-sign %d command(s) through the control API: %w", n, err)
		}
		if len(res.Results) != n {
			return nil, fmt.Errorf("replay: the control API answered %d signatures for %d commands", len(res.Results), n)
		}
		for _, r := range res.Results {
			out = append(out, replay.Signed{Event: replay.Event{Source: r.Source, DetailType: r.DetailType, Detail: []byte(r.Detail)}, Refusal: r.Refusal})
		}
		recs = recs[n:]
	}
	return out, nil
}
