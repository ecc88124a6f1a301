// This file is the replayer resource: what a replay run by the CLI on an
// aws profile asks of the control function (docs/replay.md, "On AWS").
// The run itself (reading the DLQ or the archive, pacing, putting on the
// bus) is the CLI's; what needs DynamoDB or the tenants' keys is here, so
// the operator's machine holds neither the registry's secrets nor
// DynamoDB access:
//
//	GET  /v1/replayer/audits              the audits, newest first
//	GET  /v1/replayer/audits/{id}         one audit with its sent ids
//	POST /v1/replayer/audits              record a new audit, claimed
//	PUT  /v1/replayer/audits/{id}         record a progress, claim renewed
//	POST /v1/replayer/audits/{id}/claim   claim an audit to resume it
//	POST /v1/replayer/archive/verify      refusals of archived events
//	POST /v1/replayer/sign                verify and re-sign a batch
//
// Everything is for the operator. The local server leaves the resource
// out: it runs replays itself (replays.go).

package controlapi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
)

// Limits of the replayer's requests.
const (
	// maxAuditWriteBody holds an audit and two chunks of sent ids.
	maxAuditWriteBody = 1 << 20
	// maxSignBody is a Function URL's largest request (6 MB): ten of
	// EventBridge's largest entries (256 KB), JSON-escaped, fit.
	maxSignBody = 6 << 20
	// DefaultReplayerViewTTL is how long the registry's keys and routes,
	// read once, serve the following requests of a warm function.
	DefaultReplayerViewTTL = 30 * time.Second
)

// ReplayerAudits keeps the audits of replays run by the CLI
// (awsstore.ReplayAudits on AWS).
type ReplayerAudits interface {
	List(ctx context.Context) ([]wire.ReplayAudit, error)
	// Get is an audit with its sent ids; Claimed without them, and only
	// while runner holds its claim (replay.ErrNotClaimed otherwise).
	Get(ctx context.Context, id string) (wire.ReplayAudit, error)
	Claimed(ctx context.Context, id, runner string) (wire.ReplayAudit, error)
	Create(ctx context.Context, a wire.ReplayAudit, c wire.ReplayClaim) error
	Write(ctx context.Context, a wire.ReplayAudit, sentFrom int, c wire.ReplayClaim) error
	Claim(ctx context.Context, id string, c wire.ReplayClaim) error
}

// ReplayerOptions configure the replayer resource. Audits, Registry and
// Delivery are required.
type ReplayerOptions struct {
	Audits   ReplayerAudits
	Registry registry.Reader
	// KeyPolicy and Shield are the dispatcher's: an archived command is
	// verified again with them, as of when it was received.
	KeyPolicy keys.Policy
	Shield    shield.Config
	// Delivery verifies a DLQ message's delivery signature again before
	// it is re-signed.
	Delivery *provenance.Signer
	// ViewTTL is how long a registry view serves (DefaultReplayerViewTTL).
	ViewTTL time.Duration
	Clock   clock.Clock
	Logger  *slog.Logger
}

// ReplayerAPI serves the replayer endpoints.
type ReplayerAPI struct {
	o  ReplayerOptions
	ep Endpoints

	mu       sync.Mutex
	view     *replay.RegistryView
	viewTime time.Time
}

// NewReplayerAPI returns the API.
func NewReplayerAPI(o ReplayerOptions) (*ReplayerAPI, error) {
	if o.Audits == nil || o.Registry == nil || o.Delivery == nil {
		return nil, errors.New("controlapi: ReplayerOptions: Audits, Registry and Delivery are required")
	}
	if o.ViewTTL <= 0 {
		o.ViewTTL = DefaultReplayerViewTTL
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &ReplayerAPI{o: o, ep: Endpoints{Errors: replayerErrors, Logger: o.Logger}}, nil
}

// replayerErrors maps the audits' errors.
func replayerErrors(err error) *Error {
	switch {
	case errors.Is(err, replay.ErrNotFound):
		return Refuse(http.StatusNotFound, err.Error(), "list the replays with `snavio replay list`")
	case errors.Is(err, replay.ErrRunning):
		return Refuse(http.StatusConflict, err.Error(), "wait for it (snavio replay show ID), or stop the replayer running it and resume once its claim ran out")
	case errors.Is(err, replay.ErrNotClaimed):
		return Refuse(http.StatusConflict, err.Error(), "claim it first (POST /v1/replayer/audits/{id}/claim): `snavio replay --resume ID` does")
	}
	return nil
}

// registryView is the registry's keys and routes, read again once older
// than ViewTTL.
func (a *ReplayerAPI) registryView(ctx context.Context) (*replay.RegistryView, error) {
	now := a.o.Clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.view != nil && now.Sub(a.viewTime) < a.o.ViewTTL {
		return a.view, nil
	}
	v, err := replay.LoadRegistry(ctx, a.o.Registry, a.o.KeyPolicy, now)
	if err != nil {
		return nil, fmt.Errorf("reading the registry's keys and routes: %w", err)
	}
	a.view, a.viewTime = v, now
	return v, nil
}

func (a *ReplayerAPI) list(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	return writeReplayList(w, r, a.o.Audits.List, replay.Shown)
}

func (a *ReplayerAPI) get(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	id, ae := replayID(r)
	if ae != nil {
		return ae
	}
	au, err := a.o.Audits.Get(r.Context(), id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, au)
	return nil
}

// decodeWrite reads an audit write and checks it against the path's id
// (want; "" for a new audit).
func decodeWrite(r *http.Request, want string) (wire.ReplayAuditWrite, error) {
	var req wire.ReplayAuditWrite
	if err := Decode(r, maxAuditWriteBody, &req, "send the JSON object docs/control-api.md documents for the replayer"); err != nil {
		return req, err
	}
	if err := req.ReplayClaim.Validate(); err != nil {
		return req, BadRequest(err.Error(), "send the replayer's claim: its UUID and 1 to 3600 claim_seconds")
	}
	if want != "" && req.Audit.ID != want {
		return req, BadRequest(fmt.Sprintf("the audit names replay %.60q, the path %s", req.Audit.ID, want), "write an audit at its own id")
	}
	if req.SentFrom < 0 || req.SentFrom%1000 != 0 {
		return req, BadRequest(fmt.Sprintf("invalid sent_from %d", req.SentFrom), "send the sent ids from a multiple of 1000 on")
	}
	if err := checkAudit(&req.Audit); err != nil {
		return req, err
	}
	return req, nil
}

// checkAudit refuses an audit the store must not hold.
func checkAudit(au *wire.ReplayAudit) error {
	if _, err := wire.ParseReplayOrigin(au.Origin); err != nil {
		return BadRequest(err.Error(), "record an audit of --from archive or --from dlq:QUEUE")
	}
	switch au.Status {
	case wire.ReplayRunning, wire.ReplayInterrupted, wire.ReplayPaused, wire.ReplayDone, wire.ReplayFailed:
	default:
		return BadRequest(fmt.Sprintf("invalid status %.40q", au.Status), "record a status of running, interrupted, paused, done or failed")
	}
	opts := replay.AuditOptions(au)
	if err := opts.Validate(); err != nil {
		return BadRequest(err.Error(), "record the options the run validated")
	}
	return nil
}

func (a *ReplayerAPI) create(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	req, err := decodeWrite(r, "")
	if err != nil {
		return err
	}
	if err := a.o.Audits.Create(r.Context(), req.Audit, req.ReplayClaim); err != nil {
		return err
	}
	a.o.Logger.Info("replay started", "replay_id", req.Audit.ID, "origin", req.Audit.Origin, "operator", req.Audit.Operator, "reason", req.Audit.Reason, "planned", req.Audit.Planned)
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *ReplayerAPI) write(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	id, ae := replayID(r)
	if ae != nil {
		return ae
	}
	req, err := decodeWrite(r, id)
	if err != nil {
		return err
	}
	if err := a.o.Audits.Write(r.Context(), req.Audit, req.SentFrom, req.ReplayClaim); err != nil {
		return err
	}
	if req.Audit.Status != wire.ReplayRunning {
		a.o.Logger.Info("replay ended", "replay_id", id, "status", req.Audit.Status, "sent", req.Audit.SentCount, "failed", req.Audit.Failed, "held", req.Audit.Held)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (a *ReplayerAPI) claim(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	id, ae := replayID(r)
	if ae != nil {
		return ae
	}
	var req wire.ReplayClaim
	if err := Decode(r, maxReplayBody, &req, "send {\"runner\": UUID, \"claim_seconds\": N}"); err != nil {
		return err
	}
	if err := req.Validate(); err != nil {
		return BadRequest(err.Error(), "send the replayer's claim: its UUID and 1 to 3600 claim_seconds")
	}
	if err := a.o.Audits.Claim(r.Context(), id, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// checkRecords refuses an empty or oversized batch.
func checkRecords(recs []wire.ReplayRecord) error {
	if len(recs) == 0 || len(recs) > wire.MaxReplaySignRecords {
		return BadRequest(fmt.Sprintf("%d records", len(recs)), fmt.Sprintf("send 1 to %d records, a PutEvents batch", wire.MaxReplaySignRecords))
	}
	return nil
}

func archived(rec *wire.ReplayRecord) replay.Archived {
	return replay.Archived{Source: rec.Source, DetailType: rec.DetailType, Detail: []byte(rec.Detail), ReceivedAt: rec.ReceivedAt}
}

func (a *ReplayerAPI) verify(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	var req wire.ReplayVerifyRequest
	if err := Decode(r, maxSignBody, &req, "send {\"records\": [...]}"); err != nil {
		return err
	}
	if err := checkRecords(req.Records); err != nil {
		return err
	}
	view, err := a.registryView(r.Context())
	if err != nil {
		return err
	}
	v, err := replay.NewVerifier(view, a.o.Shield, a.o.Clock.Now())
	if err != nil {
		return fmt.Errorf("replay: the shield configuration: %w", err)
	}
	out := wire.ReplayVerifyResponse{Refusals: make([]string, len(req.Records))}
	for i := range req.Records {
		ar := archived(&req.Records[i])
		out.Refusals[i] = v.Refusal(&ar)
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// sign verifies each record again as its origin requires (an archived
// event by the shield's checks, a DLQ message by its delivery signature)
// and re-signs what passes with the source's current key, for the
// replay's running audit: the control function signs nothing that is not
// a genuine command of a replay it records.
func (a *ReplayerAPI) sign(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	var req wire.ReplaySignRequest
	if err := Decode(r, maxSignBody, &req, "send the JSON object docs/control-api.md documents for the replayer"); err != nil {
		return err
	}
	if err := checkRecords(req.Records); err != nil {
		return err
	}
	if err := (wire.ReplayClaim{Runner: req.Runner, ClaimSeconds: 1}).Validate(); err != nil {
		return BadRequest(err.Error(), "send the replayer's UUID as runner")
	}
	au, err := a.o.Audits.Claimed(r.Context(), req.ReplayID, req.Runner)
	if err != nil {
		return err
	}
	origin, err := wire.ParseReplayOrigin(au.Origin)
	if err != nil {
		return fmt.Errorf("replay %s has a corrupt origin: %w", au.ID, err)
	}
	if !origin.IsArchive() && req.QueueARN == "" {
		return BadRequest("a DLQ replay's records come without the queue's ARN", "send queue_arn, the DLQ's ARN")
	}
	view, err := a.registryView(r.Context())
	if err != nil {
		return err
	}
	refusals := make([]string, len(req.Records))
	if origin.IsArchive() {
		v, err := replay.NewVerifier(view, a.o.Shield, a.o.Clock.Now())
		if err != nil {
			return fmt.Errorf("replay: the shield configuration: %w", err)
		}
		for i := range req.Records {
			ar := archived(&req.Records[i])
			refusals[i] = v.Refusal(&ar)
		}
	} else {
		dc := replay.DeliveryCheck{Verify: a.o.Delivery.Verify, Targets: view.DLQTargets(req.QueueARN)}
		for i, rec := range req.Records {
			refusals[i] = dc.Refusal(rec.Attributes, []byte(rec.Detail))
			if src := rec.Attributes[provenance.AttrSource]; refusals[i] == "" && src != rec.Source {
				// The source the entry would go out as is the one the
				// delivery named.
				refusals[i] = provenance.ReasonBadSignature
			}
		}
	}
	var pass []replay.Record
	for i, in := range req.Records {
		if refusals[i] == "" {
			pass = append(pass, replay.Record{Source: in.Source, Detail: []byte(in.Detail), At: in.ReceivedAt})
		}
	}
	signed, err := replay.KeySigner{Keys: view, Clock: a.o.Clock}.Sign(r.Context(), &au, pass)
	if err != nil {
		return err
	}
	out := wire.ReplaySignResponse{Results: make([]wire.ReplaySigned, len(req.Records))}
	for i := range req.Records {
		if refusals[i] != "" {
			out.Results[i].Refusal = refusals[i]
			continue
		}
		s := signed[0]
		signed = signed[1:]
		out.Results[i] = wire.ReplaySigned{Source: s.Event.Source, DetailType: s.Event.DetailType, Detail: string(s.Event.Detail), Refusal: s.Refusal}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// ReplayerInServer is why the local server leaves the replayer resource
// out: it runs replays itself, with its keys, queues and audits at hand.
var ReplayerInServer = Absence{Code: "runs_in_server",
	Why:     "this server runs replays itself: the replayer endpoints serve a replay the CLI runs on AWS",
	Instead: "start, resume and read replays with the replays endpoints (POST /v1/replays, GET /v1/replays): `snavio replay` on a local profile"}
