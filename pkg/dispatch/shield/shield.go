// Package shield is the first stage of the dispatcher: it decides, without
// any I/O of its own, whether an event from the bus is a valid, authentic,
// fresh command from its sender, and fails fast with snavio.command.invalid
// otherwise.
//
// Checks run cheapest first, and each rejection carries one stable reason
// code (docs/security/reason-codes.md):
//
//  1. bus source format (<tenant-id>/<service>);
//  2. size, then the strict envelope schema, including the forbidden
//     command.source (package envelope);
//  3. the replay window, applied as soon as metadata.timestamp is parsed
//     and so before the payload is read or any HMAC is computed;
//  4. the key version (unknown, not yet valid, expired), looked up by id;
//  5. the HMAC, one computation, compared in constant time;
//  6. the ban list for (source, target, command).
//
// An accepted command comes back with command.source set to the bus source;
// that is the only way a source enters a delivered command.
package shield

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

// Defaults for Config.
const (
	DefaultWindow         = 60 * time.Second
	DefaultNearLimitRatio = 0.8
	DefaultSampleRate     = 0.01
	DefaultNoticeInterval = time.Hour
	// maxNotices bounds the memory of the notice throttle.
	maxNotices = 1 << 16
)

// KeyResolver finds the key to verify a message with. *keys.Keyring
// implements it. Implementations must be safe for concurrent use and must
// not do I/O on the request path.
type KeyResolver interface {
	// Resolve returns the key of source's version versionID if it is
	// accepted at now, or a *reason.Error (UnknownSource,
	// UnknownKeyVersion, KeyNotYetValid, KeyExpired).
	Resolve(source, versionID string, now time.Time) (keys.Match, error)
}

// Ban is the ban state of a (source, target, command) triple.
type Ban int

// Ban states.
const (
	// NotBanned: no restriction.
	NotBanned Ban = iota
	// ColdOnly: the source is barred from the warm path (global
	// warm-path ban or cold-only denylist); the command is accepted and
	// must go through the slow stage.
	ColdOnly
	// Blocked: the source is denied outright; the shield rejects the
	// command with source_banned.
	Blocked
)

// BanList tells the ban state of a triple, from the cached ban list.
// Implementations must be safe for concurrent use and must not do I/O on
// the request path.
type BanList interface {
	Ban(source, target, command string, now time.Time) Ban
}

// Config tunes the shield. The zero value means the defaults.
type Config struct {
	// Limits bound the envelope (size, payload depth).
	Limits envelope.Limits
	// Window is the replay window: a message is accepted if its timestamp
	// is within ±Window of the dispatcher's clock, bounds included.
	// Default 60 s.
	Window time.Duration
	// NearLimitRatio: an accepted message whose |skew| is at least this
	// fraction of Window emits snavio.telemetry.skew_near_limit.
	// Default 0.8; must be in (0, 1].
	NearLimitRatio float64
	// SampleRate is the share of accepted messages that emit
	// snavio.telemetry.skew_sample. 0 means the default, 1%; a negative
	// value disables sampling; 1 samples every message.
	SampleRate float64
	// NoticeInterval is the shortest time between two legacy_key_used (or
	// two key_expiry_imminent) events for the same source and key version.
	// 0 means the default, 1 hour; a negative value emits one per message.
	NoticeInterval time.Duration
	// InvalidBudget is how many invalid entries of one bus source per
	// InvalidInterval each emit their own snavio.command.invalid; the
	// rest of the interval's are throttled: counted into one aggregate
	// event (Invalid.Suppressed) once the interval ends, and reported by
	// Throttled so that they are not archived. 0 means the default, 100; a
	// negative value disables the budget.
	InvalidBudget int
	// InvalidInterval is the budget's window. 0 means the default, 1 minute.
	InvalidInterval time.Duration
	// InvalidBanAfter: a source over its budget in this many consecutive
	// intervals is handed to Deps.BanRepeatInvalid. 0 means the default,
	// 5; a negative value never bans.
	InvalidBanAfter int
}

// Deps are the shield's collaborators.
type Deps struct {
	// Clock is required.
	Clock clock.Clock
	// Keys is required.
	Keys KeyResolver
	// Bans is optional; nil means no bans.
	Bans BanList
	// Polls is optional; nil means no producer's poll time is known, so
	// every producer using a soon-to-expire key counts as overdue.
	Polls keys.PollTracker
	// Policy supplies the expected poll interval for key_expiry_imminent;
	// zero fields take the keys package defaults.
	Policy keys.Policy
	// Telemetry receives events; nil means telemetry.Discard.
	Telemetry telemetry.Sink
	// Rand returns uniform numbers in [0, 1) for skew sampling. It must be
	// safe for concurrent use. nil means math/rand/v2's Float64.
	Rand func() float64
	// BanRepeatInvalid is optional: it receives a source whose invalid
	// traffic stayed over budget for Config.InvalidBanAfter consecutive
	// intervals, with its invalid count in the current one (the spec's
	// ban for repeat offenders; flow.Flow.BanRepeatInvalid). Called on the
	// request path: it must not block.
	BanRepeatInvalid func(source string, invalid int64, at time.Time)
}

// Shield is the shield stage. It is safe for concurrent use.
type Shield struct {
	cfg    Config
	parser *envelope.Parser
	clock  clock.Clock
	keys   KeyResolver
	bans   BanList
	polls  keys.PollTracker
	policy keys.Policy
	sink   telemetry.Sink
	rand   func() float64
	near   time.Duration

	mu      sync.Mutex
	notices map[notice]time.Time // last emission per (kind, source, version)

	invalid *budget // nil: no budget
}

type notice struct {
	kind            byte
	source, version string
}

// Accepted is a command that passed the shield.
type Accepted struct {
	// Envelope is the parsed message with Command.Source set to the bus
	// source; Command.Payload is canonical. It is what gets delivered.
	Envelope envelope.Envelope
	// ReceivedAt is the shield's clock when the check started.
	ReceivedAt time.Time
	// ColdOnly tells later stages the source may not use the warm path.
	ColdOnly bool
}

// New returns a Shield. It fails if a required dependency is missing or the
// configuration is out of range.
func New(cfg Config, deps Deps) (*Shield, error) {
	if deps.Clock == nil || deps.Keys == nil {
		return nil, errors.New("shield: Deps.Clock and Deps.Keys are required")
	}
	if cfg.Window == 0 {
		cfg.Window = DefaultWindow
	}
	if cfg.Window < 0 {
		return nil, errors.New("shield: Config.Window must be positive (it is the ± replay window)")
	}
	if cfg.NearLimitRatio == 0 {
		cfg.NearLimitRatio = DefaultNearLimitRatio
	}
	if cfg.NearLimitRatio < 0 || cfg.NearLimitRatio > 1 {
		return nil, errors.New("shield: Config.NearLimitRatio must be in (0, 1]")
	}
	if cfg.SampleRate == 0 {
		cfg.SampleRate = DefaultSampleRate
	}
	if cfg.SampleRate > 1 {
		return nil, errors.New("shield: Config.SampleRate must be at most 1")
	}
	if cfg.NoticeInterval == 0 {
		cfg.NoticeInterval = DefaultNoticeInterval
	}
	if cfg.InvalidBudget == 0 {
		cfg.InvalidBudget = DefaultInvalidBudget
	}
	if cfg.InvalidInterval == 0 {
		cfg.InvalidInterval = DefaultInvalidInterval
	}
	if cfg.InvalidInterval < 0 {
		return nil, errors.New("shield: Config.InvalidInterval must be positive")
	}
	if cfg.InvalidBanAfter == 0 {
		cfg.InvalidBanAfter = DefaultInvalidBanAfter
	}
	s := &Shield{
		cfg:     cfg,
		parser:  envelope.NewParser(cfg.Limits),
		clock:   deps.Clock,
		keys:    deps.Keys,
		bans:    deps.Bans,
		polls:   deps.Polls,
		policy:  deps.Policy.WithDefaults(),
		sink:    deps.Telemetry,
		rand:    deps.Rand,
		near:    time.Duration(float64(cfg.Window) * cfg.NearLimitRatio),
		notices: make(map[notice]time.Time),
	}
	if s.sink == nil {
		s.sink = telemetry.Discard{}
	}
	if s.rand == nil {
		s.rand = rand.Float64
	}
	s.invalid = newBudget(cfg, deps.BanRepeatInvalid, s.sink)
	return s, nil
}

// Config returns the effective configuration.
func (s *Shield) Config() Config { return s.cfg }

// Check runs every shield check on detail, the EventBridge event detail,
// sent with the bus event source busSource. It does not retain detail.
//
// On success it returns the accepted command and emits the skew and key
// notices that apply. On rejection it emits exactly one
// snavio.command.invalid (or, for a source over its invalid budget, counts
// the rejection into the source's aggregate event; see Throttled) and
// returns a *reason.Error. Any other error means
// a collaborator failed (for example a KeyResolver returning something other
// than a *reason.Error); the message was not judged, no telemetry was
// emitted, and the caller should retry or dead-letter it.
func (s *Shield) Check(busSource string, detail []byte) (Accepted, error) {
	return s.CheckTrace(busSource, detail, nil)
}

// The checks of the shield, in the order Check runs them, as a trace
// names them.
const (
	CheckBusSource    = "bus_source"
	CheckEnvelope     = "envelope"
	CheckReplayWindow = "replay_window"
	CheckKeyVersion   = "key_version"
	CheckHMAC         = "hmac"
	CheckBan          = "ban"
)

// CheckTrace is Check recording each check into tr (nil: none). A dry run
// (tr.DryRun) decides the same and emits nothing: no invalid event, no
// skew or key notice, nothing counted into the invalid budget.
func (s *Shield) CheckTrace(busSource string, detail []byte, tr *trace.Trace) (Accepted, error) {
	now := s.clock.Now()
	dry := tr.Dry()
	if s.invalid != nil && !dry {
		s.invalid.sweep(now)
	}
	if !envelope.ValidSource(busSource) {
		return s.reject(now, busSource, envelope.Seen{}, reason.New(reason.InvalidBusSource, "bus source",
			"the event source must be <tenant-id>/<service> as registered; check the source your producer sends with"), tr, CheckBusSource)
	}
	tr.Add(trace.Shield, CheckBusSource, trace.Pass, busSource)
	env, seen, err := s.parser.Parse(detail, func(sentAt time.Time) error { return s.window(sentAt, now) })
	if err != nil {
		check := CheckEnvelope
		if tr != nil {
			if c := reason.Of(err); c == reason.TimestampTooOld || c == reason.TimestampTooNew {
				tr.Add(trace.Shield, CheckEnvelope, trace.Pass, "schema and size checked up to metadata.timestamp")
				check = CheckReplayWindow
			}
		}
		return s.reject(now, busSource, seen, err, tr, check)
	}
	if tr != nil {
		tr.Add(trace.Shield, CheckEnvelope, trace.Pass, "schema, size and payload depth within limits")
		tr.Add(trace.Shield, CheckReplayWindow, trace.Pass, "skew "+now.Sub(env.SentAt).Round(time.Millisecond).String()+" within ±"+s.cfg.Window.String())
	}
	seen = envelope.Seen{ID: env.Metadata.ID, Timestamp: env.Metadata.Timestamp, Target: env.Command.Target, Name: env.Command.Name}
	match, err := s.keys.Resolve(busSource, env.Metadata.VersionID, now)
	if err != nil {
		return s.reject(now, busSource, seen, err, tr, CheckKeyVersion)
	}
	if match.Key == nil {
		tr.Add(trace.Shield, CheckKeyVersion, trace.Skip, "")
		skipAfter(tr, CheckKeyVersion)
		return Accepted{}, errors.New("shield: key resolver returned no key and no error for " + busSource + " " + env.Metadata.VersionID)
	}
	if tr != nil {
		kd := env.Metadata.VersionID + " accepted"
		switch {
		case match.Legacy:
			kd += " (previous version, inside the overlap: rotate to the current one)"
		case match.ExpiringSoon:
			kd += " (expiring soon: poll the tenant config)"
		}
		tr.Add(trace.Shield, CheckKeyVersion, trace.Pass, kd)
	}
	msg := signing.FromEnvelope(&env, busSource)
	msg.PayloadCanonical = true // envelope.Parser returns the canonical form
	if err := match.Key.Verify(&msg, env.Metadata.HMAC); err != nil {
		return s.reject(now, busSource, seen, err, tr, CheckHMAC)
	}
	tr.Add(trace.Shield, CheckHMAC, trace.Pass, "signature matches "+signing.Scheme)
	ban := NotBanned
	if s.bans != nil {
		ban = s.bans.Ban(busSource, env.Command.Target, env.Command.Name, now)
	}
	switch ban {
	case Blocked:
		return s.reject(now, busSource, seen, reason.New(reason.SourceBanned, "bus source",
			busSource+" is banned from sending "+env.Command.Name+" to "+env.Command.Target+"; see your fairness telemetry and wait for the ban to end"), tr, CheckBan)
	case ColdOnly:
		tr.Add(trace.Shield, CheckBan, trace.Pass, "cold-only: the source may not use the warm path")
	default:
		tr.Add(trace.Shield, CheckBan, trace.Pass, "not banned")
	}
	env.Command.Source = busSource
	if tr != nil {
		tr.CommandID, tr.Target, tr.Command = env.Metadata.ID, env.Command.Target, env.Command.Name
	}
	if !dry {
		s.afterAccept(&env, &match, now)
	}
	return Accepted{Envelope: env, ReceivedAt: now, ColdOnly: ban == ColdOnly}, nil
}

// skipAfter records the checks after check as not reached.
func skipAfter(tr *trace.Trace, check string) {
	if tr == nil {
		return
	}
	after := false
	for _, c := range [...]string{CheckBusSource, CheckEnvelope, CheckReplayWindow, CheckKeyVersion, CheckHMAC, CheckBan} {
		if after {
			tr.Add(trace.Shield, c, trace.Skip, "")
		}
		after = after || c == check
	}
}

// window applies the replay window to a parsed timestamp.
func (s *Shield) window(sentAt, now time.Time) error {
	skew := now.Sub(sentAt)
	switch {
	case skew > s.cfg.Window:
		return reason.New(reason.TimestampTooOld, "metadata.timestamp",
			"is "+skew.Round(time.Millisecond).String()+" behind the dispatcher clock; the window is ±"+s.cfg.Window.String()+
				": sign with the current time and keep the producer clock synchronized (NTP)")
	case skew < -s.cfg.Window:
		return reason.New(reason.TimestampTooNew, "metadata.timestamp",
			"is "+(-skew).Round(time.Millisecond).String()+" ahead of the dispatcher clock; the window is ±"+s.cfg.Window.String()+
				": keep the producer clock synchronized (NTP)")
	}
	return nil
}

// reject emits snavio.command.invalid for a rejection, or counts it into
// the source's aggregate when the source is over its invalid budget (the
// error then satisfies Throttled). An error that is not a *reason.Error is
// a collaborator's failure, not the producer's: it is returned wrapped,
// without telemetry.
//
// It records check as failed in tr, and the checks after it as skipped; a
// dry run emits and counts nothing.
func (s *Shield) reject(now time.Time, busSource string, seen envelope.Seen, err error, tr *trace.Trace, check string) (Accepted, error) {
	if tr != nil {
		tr.Add(trace.Shield, check, trace.Fail, err.Error())
		skipAfter(tr, check)
	}
	var re *reason.Error
	if !errors.As(err, &re) {
		return Accepted{}, fmt.Errorf("shield: internal failure, message not judged: %w", err)
	}
	if tr.Dry() {
		return Accepted{}, err
	}
	ev := telemetry.Invalid{
		CommandID: seen.ID, Target: seen.Target, CommandName: seen.Name, Timestamp: seen.Timestamp,
		Reason: re.Code,
	}
	if envelope.ValidSource(busSource) {
		ev.Source = busSource
	}
	if s.invalid != nil && !s.invalid.admit(ev, now) {
		return Accepted{}, throttle(err)
	}
	s.sink.Emit(ev)
	return Accepted{}, err
}

// afterAccept emits the telemetry of an accepted message: skew near the
// limit, the skew sample, and the key notices.
func (s *Shield) afterAccept(env *envelope.Envelope, m *keys.Match, now time.Time) {
	skew := now.Sub(env.SentAt)
	if skew >= s.near || -skew >= s.near {
		s.sink.Emit(telemetry.SkewNearLimit{
			CommandID: env.Metadata.ID, Source: env.Command.Source,
			SentAt: env.SentAt.UTC(), ReceivedAt: now.UTC(), SkewSeconds: skew.Seconds(),
		})
	}
	if s.cfg.SampleRate > 0 && s.rand() < s.cfg.SampleRate {
		s.sink.Emit(telemetry.SkewSample{
			Source: env.Command.Source, SkewSeconds: skew.Seconds(), SentAt: env.SentAt.UTC(), ReceivedAt: now.UTC(),
		})
	}
	if !m.Legacy && !m.ExpiringSoon {
		return
	}
	source, version := env.Command.Source, env.Metadata.VersionID
	var last time.Time
	var known bool
	if s.polls != nil {
		last, known = s.polls.LastPoll(source)
	}
	if known {
		last = last.UTC()
	}
	if m.Legacy && s.due(notice{'L', source, version}, now) {
		s.sink.Emit(telemetry.LegacyKeyUsed{VersionID: version, Source: source, TimeOfLastConfigPoll: last})
	}
	if m.ExpiringSoon && keys.PollOverdue(s.policy, last, known, now) && s.due(notice{'E', source, version}, now) {
		s.sink.Emit(telemetry.KeyExpiryImminent{VersionID: version, Source: source, TimeOfLastConfigPoll: last})
	}
}

// due reports whether a notice may be emitted now, and records it if so.
func (s *Shield) due(n notice, now time.Time) bool {
	if s.cfg.NoticeInterval < 0 {
		return true
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if last, ok := s.notices[n]; ok && now.Sub(last) < s.cfg.NoticeInterval {
		return false
	}
	if len(s.notices) >= maxNotices {
		for k, t := range s.notices {
			if now.Sub(t) >= s.cfg.NoticeInterval {
				delete(s.notices, k)
			}
		}
		if len(s.notices) >= maxNotices {
			clear(s.notices) // bounded memory beats a missed duplicate notice
		}
	}
	s.notices[n] = now
	return true
}
