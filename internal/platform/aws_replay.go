package platform

// The replay of an aws profile runs in the CLI, with the operator's
// credentials, on the same engine as `dispatch serve` (internal/replay):
// docs/replay.md, "On AWS", says why. It reads the registry (keys with
// their history, routes) from DynamoDB, the DLQ from SQS or the archive
// through an EventBridge replay into a capture queue, puts on the env's
// bus, and keeps its audits in the flow table (awsstore.ReplayAudits).

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sts"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
)

// DeliveryKeyFileEnv names a file holding the base64 delivery master key
// (the one given to `snavio dispatch deploy --delivery-key-file`): with
// it, a DLQ replay on an aws profile derives each target's verification
// key itself instead of asking the control API for it.
const DeliveryKeyFileEnv = "SNAVIO_DELIVERY_KEY_FILE"

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
	names    stack.Names
	bus      string // the env's command bus
	audits   *awsstore.ReplayAudits
	registry registry.Reader
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
// an aws profile needs its env to name the tables, bus and archive.
func (c *AWS) replayer(ctx context.Context) (*awsReplay, error) {
	t := c.target
	if t.Env == "" {
		return nil, &APIError{Status: http.StatusBadRequest, Message: "the aws profile has no env, which names the tables, bus and archive a replay uses",
			Fix: "set it with `snavio profile set NAME --kind aws --env ENV`"}
	}
	if err := stack.CheckEnv(t.Env); err != nil {
		return nil, &APIError{Status: http.StatusBadRequest, Message: err.Error(), Fix: "fix the profile's env with `snavio profile set NAME --env ENV`"}
	}
	cfg, err := AWSConfig(ctx, t, t.Region)
	if err != nil {
		return nil, err
	}
	sc := awsstore.Config{Env: t.Env, TablePrefix: t.TablePrefix, AWSConfig: cfg}
	audits, err := awsstore.NewReplayAudits(sc, 0)
	if err != nil {
		return nil, err
	}
	reg, err := awsstore.NewRegistryStore(sc)
	if err != nil {
		return nil, err
	}
	names := stack.Names{Env: t.Env}
	// The env's bus, unless the profile names another than the default
	// (aws profiles default bus_name to the spec's snavio-command-bus,
	// which a deployed env does not have).
	busName := names.Bus()
	if t.BusName != "" && t.BusName != DefaultBusName {
		busName = t.BusName
	}
	bt := t
	bt.BusName = busName
	st := sts.NewFromConfig(cfg)
	events := eventbridge.NewFromConfig(cfg)
	r := &awsReplay{
		names: names, bus: busName, audits: audits, registry: reg,
		sqs:    sqs.NewFromConfig(cfg),
		events: events,
		put:    busAdapter{operatorBus(bt, events)},
		operator: func(ctx context.Context) (string, error) {
			id, err := st.GetCallerIdentity(ctx, &sts.GetCallerIdentityInput{})
			if err != nil {
				return "", fmt.Errorf("who is replaying (STS GetCallerIdentity, for the audit): %w", err)
			}
			return awssdk.ToString(id.Arn), nil
		},
		clk: clock.System(), sleep: clock.Sleep, lease: replayLease,
	}
	r.keys, err = deliveryKeys(c)
	if err != nil {
		return nil, err
	}
	return r, nil
}

// deliveryKeys are the targets' delivery keys: derived from the master in
// DeliveryKeyFileEnv's file when it is set, else the control API's.
func deliveryKeys(c *AWS) (replay.DeliveryKeys, error) {
	path, ok := os.LookupEnv(DeliveryKeyFileEnv)
	if !ok || path == "" {
		return controlDeliveryKeys{c}, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s: %v", DeliveryKeyFileEnv, err), Fix: "point it at the delivery master key file given to `snavio dispatch deploy --delivery-key-file`, or unset it"}
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(string(b)))
	if err == nil && len(raw) < provenance.MinMasterLen {
		err = fmt.Errorf("%d bytes", len(raw))
	}
	if err != nil {
		return nil, &APIError{Status: http.StatusBadRequest, Message: fmt.Sprintf("%s %s: not the base64 of a delivery master key (%v)", DeliveryKeyFileEnv, path, err), Fix: fmt.Sprintf("give the file of `snavio dispatch deploy --delivery-key-file`: base64 of %d or more bytes", provenance.MinMasterLen)}
	}
	s, err := provenance.NewSigner(raw)
	if err != nil {
		return nil, err
	}
	return replay.MasterKeys{Signer: s}, nil
}

// controlDeliveryKeys asks the control API for a target's key.
type controlDeliveryKeys struct{ c *AWS }

func (k controlDeliveryKeys) DeliveryKey(ctx context.Context, target string) (provenance.Key, error) {
	dk, err := k.c.DeliveryKey(ctx, target)
	if err != nil {
		var na *NotAvailableError
		if errors.As(err, &na) {
			return provenance.Key{}, fmt.Errorf("the control API cannot give it (%v): set %s to the delivery master key file (deploy's --delivery-key-file) to verify without it", err, DeliveryKeyFileEnv)
		}
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

// engine returns the engine over the registry as it is now.
func (r *awsReplay) engine(ctx context.Context) (*replay.Engine, *replay.RegistryView, error) {
	view, err := replay.LoadRegistry(ctx, r.registry, keys.Policy{}, r.clk.Now())
	if err != nil {
		return nil, nil, fmt.Errorf("reading the registry's keys and routes from DynamoDB: %w", err)
	}
	return &replay.Engine{Bus: r.put, Signer: replay.KeySigner{Keys: view, Clock: r.clk}, Routes: view, Audits: r.audits, Clock: r.clk, Sleep: r.sleep}, view, nil
}

// closingSource is a source with resources to delete after the run.
type closingSource interface {
	replay.Source
	Close(ctx context.Context) error
}

// tagReplayID tags an archive run's capture rule and queue with its
// replay.
const tagReplayID = "snavio:replay-id"

// source opens p's source.
func (r *awsReplay) source(ctx context.Context, p prepared, view *replay.RegistryView) (replay.Source, error) {
	if !p.origin.IsArchive() {
		s, err := replay.NewSQSDLQ(ctx, replay.SQSDLQOptions{API: r.sqs, Queue: p.origin.Queue, Lease: r.lease, Wait: r.wait, View: view, Keys: r.keys})
		return s, replayErr(err, "")
	}
	v, err := replay.NewVerifier(view, shield.Config{}, r.clk.Now())
	if err != nil {
		return nil, fmt.Errorf("replay: the shield configuration: %w", err)
	}
	prefix := r.names.Queue("replay-")
	if _, err := replay.SweepCaptures(ctx, r.sqs, r.events, r.bus, prefix, r.clk.Now()); err != nil {
		return nil, fmt.Errorf("sweeping what crashed archive replays left: %w", err)
	}
	var suffix [4]byte
	_, _ = rand.Read(suffix[:])
	tags := map[string]string{"snavio:env": r.names.Env, "snavio:purpose": "replay-capture"}
	return replay.NewEBArchive(replay.EBArchiveOptions{Events: r.events, SQS: r.sqs, Bus: r.bus, Archive: r.names.Archive(),
		Name: prefix + hex.EncodeToString(suffix[:]), Tags: tags, Filter: p.opts.Filter, Verifier: v, Wait: r.wait})
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
	d := awsstore.DefaultReplayClaim + r.lease
	if rate > 0 {
		d += time.Duration(2 * float64(time.Second) / rate)
	}
	return d
}

func (r *awsReplay) plan(ctx context.Context, req wire.ReplayRequest) (wire.ReplayPlanResponse, error) {
	p, err := r.prepare(req, "")
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	e, view, err := r.engine(ctx)
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	src, err := r.source(ctx, p, view)
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
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
	e, view, err := r.engine(ctx)
	if err != nil {
		return nil, err
	}
	peek, err := r.source(ctx, p, view)
	if err != nil {
		return nil, err
	}
	plan, err := e.Plan(ctx, peek, p.opts)
	if err = errors.Join(err, r.closeSource(ctx, peek)); err != nil {
		return nil, err
	}
	src, err := r.source(ctx, p, view)
	if err != nil {
		return nil, err
	}
	audit, err := e.Begin(ctx, p.origin.String(), p.opts, plan.Total)
	if err != nil {
		return nil, err
	}
	if t, ok := src.(*replay.EBArchive); ok {
		t.Tag(tagReplayID, audit.ID)
	}
	if err := r.audits.Claim(ctx, audit.ID, r.claimFor(p.opts.Rate)); err != nil {
		return nil, replayErr(err, audit.ID)
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
	audit, err := r.audits.Get(ctx, id)
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
	e, view, err := r.engine(ctx)
	if err != nil {
		return nil, err
	}
	src, err := r.source(ctx, prepared{origin: origin, opts: replay.AuditOptions(&audit)}, view)
	if err != nil {
		return nil, err
	}
	if t, ok := src.(*replay.EBArchive); ok {
		t.Tag(tagReplayID, id)
	}
	// Claimed last: nothing after it can fail before the run, whose end
	// releases the claim.
	if err := r.audits.Claim(ctx, id, r.claimFor(audit.Rate)); err != nil {
		return nil, replayErr(err, id)
	}
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
	r, err := c.replayer(ctx)
	if err != nil {
		return wire.ReplayPlanResponse{}, err
	}
	return r.plan(ctx, req)
}

// StartReplay implements Platform.
func (c *AWS) StartReplay(ctx context.Context, req wire.ReplayRequest) (ReplayStream, error) {
	r, err := c.replayer(ctx)
	if err != nil {
		return nil, err
	}
	return r.start(ctx, req)
}

// ResumeReplay implements Platform.
func (c *AWS) ResumeReplay(ctx context.Context, id string, req wire.ReplayResumeRequest) (ReplayStream, error) {
	r, err := c.replayer(ctx)
	if err != nil {
		return nil, err
	}
	return r.resume(ctx, id, req)
}

// ListReplays implements Platform.
func (c *AWS) ListReplays(ctx context.Context) ([]wire.ReplayAudit, error) {
	r, err := c.replayer(ctx)
	if err != nil {
		return nil, err
	}
	all, err := r.audits.List(ctx)
	if err != nil {
		return nil, err
	}
	for i := range all {
		all[i] = replay.Shown(all[i])
	}
	return all, nil
}

// GetReplay implements Platform.
func (c *AWS) GetReplay(ctx context.Context, id string) (wire.ReplayAudit, error) {
	r, err := c.replayer(ctx)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	a, err := r.audits.Get(ctx, id)
	if err != nil {
		return wire.ReplayAudit{}, replayErr(err, id)
	}
	return replay.Shown(a), nil
}
