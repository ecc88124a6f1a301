package replay

import (
	"context"
	"errors"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Refusals of archived records (docs/replay.md, "What a replay refuses").
// A re-verification failure is refused with the shield's own reason code.
const (
	// RefuseNotCommand: an event whose detail-type the dispatcher does not
	// consume.
	RefuseNotCommand = "not_a_command"
	// RefuseShieldPrefix prefixes the reason the shield rejected a command
	// with when it was received ("shield:bad_signature").
	RefuseShieldPrefix = "shield:"
	// RefuseKeyVersionMismatch: the command verifies now with another key
	// version than the one the shield recorded.
	RefuseKeyVersionMismatch = "key_version_mismatch"
	// RefuseKeyRevoked: the key version it was signed with has been
	// revoked since (NotAfter): a leaked key could have signed it.
	RefuseKeyRevoked = "key_revoked"
	// RefuseUnverifiable: the re-verification itself failed (a bug).
	RefuseUnverifiable = "unverifiable"
)

// Verdicts an archive may record beside an entry (the embedded store's
// archive does; the EventBridge archive records none).
const (
	VerdictAccepted   = "accepted"
	VerdictRejected   = "rejected"
	VerdictNotCommand = "not_command"
)

// Archived is one archived bus entry as a replay verifies it.
type Archived struct {
	Source, DetailType string
	Detail             []byte
	ReceivedAt         time.Time
	// Verdict, Reason and KeyVersion are what the shield made of the
	// entry when it arrived, if the archive recorded it ("" otherwise).
	Verdict, Reason, KeyVersion string
}

// RegistryView is the registry's keys (with their history, for
// re-verification), strict routes and DLQs, loaded once per run (a replay
// signs with the version current when it started, which the dispatcher
// accepts through the rotation overlap). It implements Keys and Routes.
type RegistryView struct {
	*RouteView
	ring *keys.Keyring
	// revoked is when a key version was revoked (its NotAfter), by source
	// and version id.
	revoked map[[2]string]time.Time
}

// RouteView is what a run needs of the routes: the strict ones, and the
// targets that dead-letter into each DLQ. It implements Routes and
// DLQRoutes.
type RouteView struct {
	strict map[[2]string]bool
	// dlqTargets are the targets whose routes dead-letter into a queue,
	// by the queue's ARN.
	dlqTargets map[string]map[string]bool
}

// DLQRoutes tells which targets dead-letter into a queue.
type DLQRoutes interface {
	DLQTargets(arn string) map[string]bool
}

// NewRouteView is the view of routes.
func NewRouteView(routes []registry.Route) *RouteView {
	v := &RouteView{strict: map[[2]string]bool{}, dlqTargets: map[string]map[string]bool{}}
	for i := range routes {
		rt := &routes[i]
		if rt.Strict() {
			v.strict[[2]string{rt.Target, rt.Command}] = true
		}
		if rt.DLQARN != "" {
			if v.dlqTargets[rt.DLQARN] == nil {
				v.dlqTargets[rt.DLQARN] = map[string]bool{}
			}
			v.dlqTargets[rt.DLQARN][rt.Target] = true
		}
	}
	return v
}

// LoadRegistry reads the keys and routes of r as of now.
func LoadRegistry(ctx context.Context, r registry.Reader, policy keys.Policy, now time.Time) (*RegistryView, error) {
	d, err := r.Load(ctx, now, registry.KindKey, registry.KindRoute)
	if err != nil {
		return nil, err
	}
	versions := map[string][]keys.Version{}
	revoked := map[[2]string]time.Time{}
	for _, k := range d.Keys {
		for _, v := range k.Versions {
			versions[k.Source] = append(versions[k.Source], keys.Version{ID: v.ID, Secret: v.Secret, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter})
			if !v.NotAfter.IsZero() {
				revoked[[2]string{k.Source, v.ID}] = v.NotAfter
			}
		}
	}
	ring, err := keys.NewKeyring(policy, versions)
	if err != nil {
		return nil, err
	}
	return &RegistryView{RouteView: NewRouteView(d.Routes), ring: ring, revoked: revoked}, nil
}

// SigningKey implements Keys with the platform's copy of the key.
func (v *RegistryView) SigningKey(source string, now time.Time) (*signing.Key, error) {
	cur, ok := v.ring.Current(source, now)
	if !ok {
		return nil, errors.New("no current HMAC key is registered for " + source + ": create one with `snavio key create --source " + source + "`")
	}
	return signing.NewKey(cur.ID, cur.Secret)
}

// Strict implements Routes.
func (v *RouteView) Strict(target, command string) bool {
	return v.strict[[2]string{target, command}]
}

// DLQTargets are the targets one of whose routes dead-letters into the
// queue of ARN arn (nil when none does).
func (v *RouteView) DLQTargets(arn string) map[string]bool { return v.dlqTargets[arn] }

// ArchiveVerifier decides, for a batch of archived events, why each must
// never be replayed ("" when it may be): Verifier in the process holding
// the keys, the control function's for the CLI on AWS.
type ArchiveVerifier interface {
	Refusals(ctx context.Context, evs []Archived) ([]string, error)
}

// Verifier re-runs the shield's checks (schema, forbidden command.source,
// window, key version, HMAC) on an archived command as of the moment it
// was received, against the registry's key history. Not safe for
// concurrent use: a source uses it from one goroutine.
type Verifier struct {
	at   time.Time // the time the shield reads: the record's ReceivedAt
	now  time.Time // when the replay runs
	sh   *shield.Shield
	view *RegistryView
}

// NewVerifier returns a verifier with the dispatcher's shield
// configuration cfg, for a replay running at now.
func NewVerifier(view *RegistryView, cfg shield.Config, now time.Time) (*Verifier, error) {
	v := &Verifier{now: now, view: view}
	cfg.SampleRate, cfg.NoticeInterval = -1, -1 // no telemetry to sample or throttle
	sh, err := shield.New(cfg, shield.Deps{Clock: clock.Func(func() time.Time { return v.at }), Keys: view.ring, Telemetry: telemetry.Discard{}})
	if err != nil {
		return nil, err
	}
	v.sh = sh
	return v, nil
}

// Refusal is why e must never be replayed, or "" when it may be: only a
// command the shield accepted (or, without a recorded verdict, one that
// passes the shield's checks again) whose original signature verifies
// against the key version valid when it was received.
func (v *Verifier) Refusal(e *Archived) string {
	switch {
	case e.Verdict == VerdictNotCommand || e.DetailType != envelope.EventType:
		return RefuseNotCommand
	case e.Verdict == VerdictRejected:
		return RefuseShieldPrefix + e.Reason
	}
	v.at = e.ReceivedAt
	acc, err := v.sh.Check(e.Source, e.Detail)
	if err != nil {
		if c := reason.Of(err); c != "" {
			return string(c)
		}
		return RefuseUnverifiable
	}
	version := acc.Envelope.Metadata.VersionID
	if e.Verdict == VerdictAccepted && e.KeyVersion != "" && version != e.KeyVersion {
		return RefuseKeyVersionMismatch
	}
	if at, ok := v.view.revoked[[2]string{e.Source, version}]; ok && !v.now.Before(at) {
		return RefuseKeyRevoked
	}
	return ""
}

// Refusals implements ArchiveVerifier.
func (v *Verifier) Refusals(_ context.Context, evs []Archived) ([]string, error) {
	out := make([]string, len(evs))
	for i := range evs {
		out[i] = v.Refusal(&evs[i])
	}
	return out, nil
}

// DeliveryCheck tells a DLQ message the dispatcher delivered from one
// planted in the queue: its delivery signature must verify, and be made
// for a target one of whose routes dead-letters into this queue (a
// genuine message copied from another target's queue is refused too).
type DeliveryCheck struct {
	// Verify checks m's delivery signature (provenance.Signer.Verify with
	// the master, or provenance.Verify with the target's key).
	Verify func(m *provenance.Message) error
	// Targets are the targets that dead-letter into the queue.
	Targets map[string]bool
}

// Refusal is why a message must not be replayed ("" when it may be).
func (c *DeliveryCheck) Refusal(attrs map[string]string, body []byte) string {
	m := provenance.FromAttributes(attrs, body)
	if err := c.Verify(&m); err != nil {
		if r := provenance.Reason(err); r != "" {
			return r
		}
		return provenance.ReasonBadSignature
	}
	if !c.Targets[m.Target] {
		return provenance.ReasonForeignTarget
	}
	return ""
}
