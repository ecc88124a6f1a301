package shield

import (
	"errors"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// Step is one shield check as Explain reports it.
type Step struct {
	// Check names the check: bus_source, envelope, replay_window,
	// key_version, hmac, ban.
	Check string
	// Pass reports that the check passed; Skipped that it was not reached.
	Pass, Skipped bool
	// Reason is the rejection's reason code when the check failed.
	Reason reason.Code
	// Detail says what the check saw (never a secret).
	Detail string
}

// The checks of Explain, in order.
const (
	StepBusSource    = "bus_source"
	StepEnvelope     = "envelope"
	StepReplayWindow = "replay_window"
	StepKeyVersion   = "key_version"
	StepHMAC         = "hmac"
	StepBan          = "ban"
)

// stepOrder returns the shield's checks in the order Check runs them.
func stepOrder() []string {
	return []string{StepBusSource, StepEnvelope, StepReplayWindow, StepKeyVersion, StepHMAC, StepBan}
}

// Explain runs the checks of Check on detail from busSource and reports
// each one, without side effects: it emits no telemetry (no invalid event,
// no skew or key notices) and records no notice. It decides exactly as
// Check does (TestExplainAgreesWithCheck holds the two together). err is
// the rejection (*reason.Error) or a collaborator's failure, as from
// Check.
func (s *Shield) Explain(busSource string, detail []byte) (Accepted, []Step, error) {
	now := s.clock.Now()
	order := stepOrder()
	steps := make([]Step, 0, len(order))
	done := func(err error) (Accepted, []Step, error) {
		for _, c := range order[len(steps):] {
			steps = append(steps, Step{Check: c, Skipped: true})
		}
		return Accepted{}, steps, err
	}
	fail := func(check string, err error) (Accepted, []Step, error) {
		st := Step{Check: check, Detail: err.Error()}
		var re *reason.Error
		if errors.As(err, &re) {
			st.Reason = re.Code
		}
		steps = append(steps, st)
		return done(err)
	}
	if !envelope.ValidSource(busSource) {
		return fail(StepBusSource, reason.New(reason.InvalidBusSource, "bus source",
			"the event source must be <tenant-id>/<service> as registered; check the source your producer sends with"))
	}
	steps = append(steps, Step{Check: StepBusSource, Pass: true, Detail: busSource})
	var windowErr error
	var skew time.Duration
	env, _, err := s.parser.Parse(detail, func(sentAt time.Time) error {
		skew = now.Sub(sentAt)
		windowErr = s.window(sentAt, now)
		return windowErr
	})
	if err != nil {
		if windowErr != nil && errors.Is(err, windowErr) {
			steps = append(steps, Step{Check: StepEnvelope, Pass: true, Detail: "schema and size checked up to metadata.timestamp"})
			return fail(StepReplayWindow, err)
		}
		return fail(StepEnvelope, err)
	}
	steps = append(steps,
		Step{Check: StepEnvelope, Pass: true, Detail: "schema, size and payload depth within limits"},
		Step{Check: StepReplayWindow, Pass: true, Detail: "skew " + skew.Round(time.Millisecond).String() + " within ±" + s.cfg.Window.String()})
	match, err := s.keys.Resolve(busSource, env.Metadata.VersionID, now)
	if err != nil {
		return fail(StepKeyVersion, err)
	}
	if match.Key == nil {
		return done(errors.New("shield: key resolver returned no key and no error for " + busSource + " " + env.Metadata.VersionID))
	}
	kd := env.Metadata.VersionID + " accepted"
	switch {
	case match.Legacy:
		kd += " (previous version, inside the overlap: rotate to the current one)"
	case match.ExpiringSoon:
		kd += " (expiring soon: poll the tenant config)"
	}
	steps = append(steps, Step{Check: StepKeyVersion, Pass: true, Detail: kd})
	msg := signing.FromEnvelope(&env, busSource)
	msg.PayloadCanonical = true
	if err := match.Key.Verify(&msg, env.Metadata.HMAC); err != nil {
		return fail(StepHMAC, err)
	}
	steps = append(steps, Step{Check: StepHMAC, Pass: true, Detail: "signature matches " + signing.Scheme})
	ban := NotBanned
	if s.bans != nil {
		ban = s.bans.Ban(busSource, env.Command.Target, env.Command.Name, now)
	}
	switch ban {
	case Blocked:
		return fail(StepBan, reason.New(reason.SourceBanned, "bus source",
			busSource+" is banned from sending "+env.Command.Name+" to "+env.Command.Target+"; see your fairness telemetry and wait for the ban to end"))
	case ColdOnly:
		steps = append(steps, Step{Check: StepBan, Pass: true, Detail: "cold-only: the source may not use the warm path"})
	default:
		steps = append(steps, Step{Check: StepBan, Pass: true, Detail: "not banned"})
	}
	env.Command.Source = busSource
	return Accepted{Envelope: env, ReceivedAt: now, ColdOnly: ban == ColdOnly}, steps, nil
}
