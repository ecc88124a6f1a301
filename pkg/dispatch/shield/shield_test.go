package shield

import (
	"bytes"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

const (
	src    = "tenant-a/billing"
	testID = "0f8fad5b-d9cb-469f-a165-70867728950e"
	day    = 24 * time.Hour
)

// T is the dispatcher's time in most cases.
var T = time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC)

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// testRing: hmac-v1 active from T-40d, hmac-v2 from T-3d, so at T v1 is the
// previous version, accepted until T+4d.
func testRing(t testing.TB) *keys.Keyring {
	t.Helper()
	k, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{
		src:                 {{ID: "hmac-v1", Secret: secret(1), ActivatedAt: T.Add(-40 * day)}, {ID: "hmac-v2", Secret: secret(2), ActivatedAt: T.Add(-3 * day)}},
		"tenant-b/other":    {{ID: "hmac-v1", Secret: secret(9), ActivatedAt: T.Add(-40 * day)}},
		"tenant-a/revoking": {{ID: "hmac-v1", Secret: secret(5), ActivatedAt: T.Add(-10 * day), NotAfter: T.Add(day)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func key(t testing.TB, version string, b byte) *signing.Key {
	t.Helper()
	k, err := signing.NewKey(version, secret(b))
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// message builds a signed detail. mut edits the envelope before signing;
// post edits the wire bytes after.
func message(t testing.TB, sentAt time.Time, k *signing.Key, mut func(*envelope.Envelope)) []byte {
	t.Helper()
	env := envelope.Envelope{
		Metadata: envelope.Metadata{ID: testID, Timestamp: envelope.FormatTimestamp(sentAt), Type: envelope.EventType},
		Command:  envelope.Command{Target: "discord-bot", Name: "notify-user", Payload: []byte(`{"amount":1250,"user":"u-42"}`)},
	}
	if mut != nil {
		mut(&env)
	}
	if err := k.SignEnvelope(&env, src); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

type banKey struct{ source, target, command string }

type bans map[banKey]Ban

func (b bans) Ban(source, target, command string, _ time.Time) Ban {
	return b[banKey{source, target, command}]
}

type fixture struct {
	clock *clock.Fake
	sink  *telemetry.Memory
	polls *keys.Polls
	sh    *Shield
	rnd   float64
}

func newFixture(t testing.TB, cfg Config) *fixture {
	t.Helper()
	f := &fixture{clock: clock.NewFake(T), sink: &telemetry.Memory{}, polls: &keys.Polls{}, rnd: 0.5}
	sh, err := New(cfg, Deps{
		Clock: f.clock, Keys: testRing(t), Telemetry: f.sink, Polls: f.polls,
		Bans: bans{{src, "discord-bot", "blocked-cmd"}: Blocked, {src, "discord-bot", "cold-cmd"}: ColdOnly},
		Rand: func() float64 { return f.rnd },
	})
	if err != nil {
		t.Fatal(err)
	}
	f.sh = sh
	return f
}

// golden renders the events emitted as NDJSON.
func (f *fixture) golden(t *testing.T) string {
	t.Helper()
	var sb strings.Builder
	for _, e := range f.sink.Events() {
		b, err := telemetry.Marshal(e)
		if err != nil {
			t.Fatal(err)
		}
		sb.Write(b)
		sb.WriteByte('\n')
	}
	return sb.String()
}

func replace(t testing.TB, b []byte, old, new string) []byte {
	t.Helper()
	if !bytes.Contains(b, []byte(old)) {
		t.Fatalf("%q not in %s", old, b)
	}
	return bytes.Replace(b, []byte(old), []byte(new), 1)
}

const invalidFull = `{"event":"snavio.command.invalid","command_id":"` + testID + `","source":"tenant-a/billing","target":"discord-bot","command_name":"notify-user","timestamp":"%s","reason":"%s"}` + "\n"

func TestCheck(t *testing.T) {
	v2 := key(t, "hmac-v2", 2)
	v1 := key(t, "hmac-v1", 1)
	ts := "2025-04-07T12:58:00.000Z"
	inv := func(code reason.Code) string {
		return strings.Replace(strings.Replace(invalidFull, "%s", ts, 1), "%s", string(code), 1)
	}
	for _, tc := range []struct {
		name   string
		source string
		detail func(t *testing.T) []byte
		at     time.Time // dispatcher clock; zero means T
		code   reason.Code
		events string
	}{
		{"valid", src, func(t *testing.T) []byte { return message(t, T, v2, nil) }, T, "", ""},
		{"valid, re-serialized payload", src, func(t *testing.T) []byte {
			return replace(t, message(t, T, v2, nil), `{"amount":1250,"user":"u-42"}`, `{ "user": "u\u002d42", "amount": 1.25e3 }`)
		}, T, "", ""},
		{"missing field", src, func(t *testing.T) []byte {
			return replace(t, message(t, T, v2, nil), `"name":"notify-user",`, ``)
		}, T, reason.MissingField,
			`{"event":"snavio.command.invalid","command_id":"` + testID + `","source":"tenant-a/billing","target":"discord-bot","timestamp":"` + ts + `","reason":"missing_field"}` + "\n"},
		{"malformed", src, func(t *testing.T) []byte { return []byte(`{"metadata":`) }, T, reason.MalformedJSON,
			`{"event":"snavio.command.invalid","source":"tenant-a/billing","reason":"malformed_json"}` + "\n"},
		{"wrong type", src, func(t *testing.T) []byte {
			return replace(t, message(t, T, v2, nil), `"target":"discord-bot"`, `"target":7`)
		}, T, reason.WrongType,
			`{"event":"snavio.command.invalid","command_id":"` + testID + `","source":"tenant-a/billing","timestamp":"` + ts + `","reason":"wrong_type"}` + "\n"},
		{"non-UUID id", src, func(t *testing.T) []byte {
			return message(t, T, v2, func(e *envelope.Envelope) { e.Metadata.ID = "order-1234" })
		}, T, reason.InvalidID,
			`{"event":"snavio.command.invalid","source":"tenant-a/billing","reason":"invalid_id"}` + "\n"},
		{"timestamp 61 s in the past", src, func(t *testing.T) []byte { return message(t, T.Add(-61*time.Second), v2, nil) }, T, reason.TimestampTooOld,
			strings.Replace(strings.Replace(invalidFull, "%s", "2025-04-07T12:56:59.000Z", 1), "%s", "timestamp_too_old", 1)},
		{"timestamp 61 s in the future", src, func(t *testing.T) []byte { return message(t, T.Add(61*time.Second), v2, nil) }, T, reason.TimestampTooNew,
			strings.Replace(strings.Replace(invalidFull, "%s", "2025-04-07T12:59:01.000Z", 1), "%s", "timestamp_too_new", 1)},
		{"window is checked before the HMAC", src, func(t *testing.T) []byte {
			return message(t, T.Add(-61*time.Second), key(t, "hmac-v2", 7), nil)
		}, T, reason.TimestampTooOld, strings.Replace(strings.Replace(invalidFull, "%s", "2025-04-07T12:56:59.000Z", 1), "%s", "timestamp_too_old", 1)},
		{"flipped bit in payload", src, func(t *testing.T) []byte { return replace(t, message(t, T, v2, nil), `"u-42"`, `"u-43"`) },
			T, reason.BadSignature, inv(reason.BadSignature)},
		{"flipped bit in target", src, func(t *testing.T) []byte { return replace(t, message(t, T, v2, nil), `"discord-bot"`, `"discord-bou"`) },
			T, reason.BadSignature, strings.Replace(inv(reason.BadSignature), "discord-bot", "discord-bou", 1)},
		{"flipped bit in id", src, func(t *testing.T) []byte { return replace(t, message(t, T, v2, nil), `950e"`, `950f"`) },
			T, reason.BadSignature, strings.Replace(inv(reason.BadSignature), "950e", "950f", 1)},
		{"flipped bit in timestamp", src, func(t *testing.T) []byte { return replace(t, message(t, T, v2, nil), `:00.000Z`, `:01.000Z`) },
			T, reason.BadSignature, strings.Replace(inv(reason.BadSignature), ":00.000Z", ":01.000Z", 1)},
		{"flipped bit in hmac", src, func(t *testing.T) []byte {
			b := message(t, T, v2, nil)
			i := bytes.Index(b, []byte(`"hmac":"`)) + len(`"hmac":"`)
			b[i] ^= 1 // '0'..'9' <-> neighbour digit, still hex
			if !envelope.ValidHMAC(b[i : i+64]) {
				b[i] = '0'
			}
			return b
		}, T, reason.BadSignature, inv(reason.BadSignature)},
		{"signed as another source", "tenant-b/other", func(t *testing.T) []byte {
			return message(t, T, key(t, "hmac-v1", 9), nil) // signed with tenant-b's key but for src
		}, T, reason.BadSignature, strings.Replace(inv(reason.BadSignature), src, "tenant-b/other", 1)},
		{"wrong key version label", src, func(t *testing.T) []byte {
			return replace(t, message(t, T, v2, nil), `"hmac-v2"`, `"hmac-v1"`)
		}, T, reason.BadSignature, inv(reason.BadSignature)},
		{"unknown key version", src, func(t *testing.T) []byte { return message(t, T, key(t, "hmac-v9", 2), nil) },
			T, reason.UnknownKeyVersion, inv(reason.UnknownKeyVersion)},
		{"unknown source", "tenant-z/nobody", func(t *testing.T) []byte { return message(t, T, v2, nil) },
			T, reason.UnknownSource, strings.Replace(inv(reason.UnknownSource), src, "tenant-z/nobody", 1)},
		{"previous key inside the overlap", src, func(t *testing.T) []byte { return message(t, T, v1, nil) }, T, "",
			`{"event":"snavio.secret.legacy_key_used","version_id":"hmac-v1","source":"tenant-a/billing"}` + "\n"},
		{"revoked (expired) current key", "tenant-a/revoking", func(t *testing.T) []byte {
			return message(t, T.Add(2*day), key(t, "hmac-v1", 5), nil)
		}, T.Add(2 * day), reason.KeyExpired,
			`{"event":"snavio.command.invalid","command_id":"` + testID + `","source":"tenant-a/revoking","target":"discord-bot","command_name":"notify-user","timestamp":"2025-04-09T12:58:00.000Z","reason":"key_expired"}` + "\n"},
		{"previous key outside the overlap", src, func(t *testing.T) []byte { return message(t, T.Add(4*day), v1, nil) },
			T.Add(4 * day), reason.KeyExpired,
			strings.Replace(strings.Replace(invalidFull, "%s", "2025-04-11T12:58:00.000Z", 1), "%s", "key_expired", 1)},
		{"command.source present", src, func(t *testing.T) []byte {
			return replace(t, message(t, T, v2, nil), `"target"`, `"source":"tenant-b/other","target"`)
		}, T, reason.CommandSourcePresent,
			`{"event":"snavio.command.invalid","command_id":"` + testID + `","source":"tenant-a/billing","timestamp":"` + ts + `","reason":"command_source_present"}` + "\n"},
		{"oversized payload", src, func(t *testing.T) []byte {
			return message(t, T, v2, func(e *envelope.Envelope) {
				e.Command.Payload = []byte(`"` + strings.Repeat("x", envelope.DefaultMaxBytes) + `"`)
			})
		}, T, reason.TooLarge, `{"event":"snavio.command.invalid","source":"tenant-a/billing","reason":"too_large"}` + "\n"},
		{"deeply nested payload", src, func(t *testing.T) []byte {
			return message(t, T, v2, func(e *envelope.Envelope) {
				e.Command.Payload = []byte(strings.Repeat("[", 33) + strings.Repeat("]", 33))
			})
		}, T, reason.TooDeep, inv(reason.TooDeep)},
		{"banned", src, func(t *testing.T) []byte {
			return message(t, T, v2, func(e *envelope.Envelope) { e.Command.Name = "blocked-cmd" })
		}, T, reason.SourceBanned, strings.Replace(inv(reason.SourceBanned), "notify-user", "blocked-cmd", 1)},
		{"invalid bus source", "billing", func(t *testing.T) []byte { return message(t, T, v2, nil) }, T, reason.InvalidBusSource,
			`{"event":"snavio.command.invalid","reason":"invalid_bus_source"}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, Config{})
			detail := tc.detail(t)
			f.clock.Set(tc.at)
			acc, err := f.sh.Check(tc.source, detail)
			if reason.Of(err) != tc.code {
				t.Fatalf("Check = %v, want %q", err, tc.code)
			}
			if got := f.golden(t); got != tc.events {
				t.Fatalf("telemetry\n got %s\nwant %s", got, tc.events)
			}
			if err != nil {
				if acc.Envelope.Metadata.ID != "" || acc.Envelope.Command.Payload != nil {
					t.Fatalf("partial result on rejection: %+v", acc)
				}
				return
			}
			if acc.Envelope.Command.Source != tc.source || !acc.ReceivedAt.Equal(tc.at) || acc.ColdOnly {
				t.Fatalf("accepted: %+v", acc)
			}
			if got := string(acc.Envelope.Command.Payload); got != `{"amount":1250,"user":"u-42"}` {
				t.Fatalf("payload %s", got)
			}
		})
	}
}

func TestWindowBoundsAndSkewTelemetry(t *testing.T) {
	v2 := key(t, "hmac-v2", 2)
	f := newFixture(t, Config{})
	// Exactly at the limit (inclusive) is accepted, and near the limit.
	if _, err := f.sh.Check(src, message(t, T.Add(-60*time.Second), v2, nil)); err != nil {
		t.Fatal(err)
	}
	// 47 s is under 0.8 * 60 s = 48 s: quiet.
	if _, err := f.sh.Check(src, message(t, T.Add(47*time.Second), v2, nil)); err != nil {
		t.Fatal(err)
	}
	// 48 s ahead: near the limit, negative skew.
	if _, err := f.sh.Check(src, message(t, T.Add(48*time.Second), v2, nil)); err != nil {
		t.Fatal(err)
	}
	want := `{"event":"snavio.telemetry.skew_near_limit","command_id":"` + testID + `","source":"tenant-a/billing","sent_at":"2025-04-07T12:57:00Z","received_at":"2025-04-07T12:58:00Z","skew_seconds":60}` + "\n" +
		`{"event":"snavio.telemetry.skew_near_limit","command_id":"` + testID + `","source":"tenant-a/billing","sent_at":"2025-04-07T12:58:48Z","received_at":"2025-04-07T12:58:00Z","skew_seconds":-48}` + "\n"
	if got := f.golden(t); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	// A configured window of 10 s.
	f = newFixture(t, Config{Window: 10 * time.Second})
	if _, err := f.sh.Check(src, message(t, T.Add(-11*time.Second), v2, nil)); reason.Of(err) != reason.TimestampTooOld {
		t.Fatalf("10 s window, 11 s old: %v", err)
	}
	if _, err := f.sh.Check(src, message(t, T.Add(-9*time.Second), v2, nil)); err != nil {
		t.Fatalf("10 s window, 9 s old: %v", err)
	}
}

func TestSkewSample(t *testing.T) {
	v2 := key(t, "hmac-v2", 2)
	f := newFixture(t, Config{})
	f.clock.Set(T.Add(1500 * time.Millisecond))
	f.rnd = 0.0099 // below the default 1%
	if _, err := f.sh.Check(src, message(t, T, v2, nil)); err != nil {
		t.Fatal(err)
	}
	f.rnd = 0.01 // not below
	if _, err := f.sh.Check(src, message(t, T, v2, nil)); err != nil {
		t.Fatal(err)
	}
	want := `{"event":"snavio.telemetry.skew_sample","source":"tenant-a/billing","skew_seconds":1.5,"sent_at":"2025-04-07T12:58:00Z","received_at":"2025-04-07T12:58:01.5Z"}` + "\n"
	if got := f.golden(t); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	// Sampling off.
	f = newFixture(t, Config{SampleRate: -1})
	f.rnd = 0
	if _, err := f.sh.Check(src, message(t, T, v2, nil)); err != nil || len(f.sink.Events()) != 0 {
		t.Fatalf("sampling disabled: %v %v", err, f.sink.Events())
	}
	// Every message.
	f = newFixture(t, Config{SampleRate: 1})
	f.rnd = 0.999
	if _, err := f.sh.Check(src, message(t, T, v2, nil)); err != nil || len(f.sink.Events()) != 1 {
		t.Fatalf("sampling all: %v %v", err, f.sink.Events())
	}
}

func TestKeyNotices(t *testing.T) {
	v1 := key(t, "hmac-v1", 1)
	v2 := key(t, "hmac-v2", 2)
	legacy := `{"event":"snavio.secret.legacy_key_used","version_id":"hmac-v1","source":"tenant-a/billing"%s}` + "\n"
	imminent := `{"event":"snavio.secret.key_expiry_imminent","version_id":"hmac-v1","source":"tenant-a/billing"%s}` + "\n"
	noPoll := func(s string) string { return strings.Replace(s, "%s", "", 1) }
	withPoll := func(s, at string) string { return strings.Replace(s, "%s", `,"time_of_last_config_poll":"`+at+`"`, 1) }

	// Previous key inside the overlap, 4 days before it expires: legacy only.
	f := newFixture(t, Config{})
	if _, err := f.sh.Check(src, message(t, T, v1, nil)); err != nil {
		t.Fatal(err)
	}
	// The same source and version again within the notice interval: quiet.
	f.clock.Advance(59 * time.Minute)
	if _, err := f.sh.Check(src, message(t, f.clock.Now(), v1, nil)); err != nil {
		t.Fatal(err)
	}
	// The current key never notices.
	if _, err := f.sh.Check(src, message(t, f.clock.Now(), v2, nil)); err != nil {
		t.Fatal(err)
	}
	// After the interval, again, now with a known poll time.
	f.polls.Record(src, T.Add(-2*time.Hour))
	f.clock.Advance(time.Minute)
	if _, err := f.sh.Check(src, message(t, f.clock.Now(), v1, nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.golden(t), noPoll(legacy)+withPoll(legacy, "2025-04-07T10:58:00Z"); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}

	// Within 72 h of expiry (T+4d): soon to expire. Never polled: imminent.
	f = newFixture(t, Config{})
	at := T.Add(2 * day)
	f.clock.Set(at)
	if _, err := f.sh.Check(src, message(t, at, v1, nil)); err != nil {
		t.Fatal(err)
	}
	// Polled 11 h ago: not overdue, legacy only (interval -1: every message).
	f = newFixture(t, Config{NoticeInterval: -1})
	f.clock.Set(at)
	f.polls.Record(src, at.Add(-11*time.Hour))
	if _, err := f.sh.Check(src, message(t, at, v1, nil)); err != nil {
		t.Fatal(err)
	}
	// Polled 13 h ago: overdue, imminent too.
	f.polls.Record(src, at.Add(-13*time.Hour)) // older: ignored by Polls
	f2 := newFixture(t, Config{NoticeInterval: -1})
	f2.clock.Set(at)
	f2.polls.Record(src, at.Add(-13*time.Hour))
	if _, err := f2.sh.Check(src, message(t, at, v1, nil)); err != nil {
		t.Fatal(err)
	}
	if _, err := f2.sh.Check(src, message(t, at, v1, nil)); err != nil {
		t.Fatal(err)
	}
	if got, want := f.golden(t), withPoll(legacy, "2025-04-09T01:58:00Z"); got != want {
		t.Fatalf("polled recently:\ngot\n%s\nwant\n%s", got, want)
	}
	p := "2025-04-08T23:58:00Z"
	if got, want := f2.golden(t), withPoll(legacy, p)+withPoll(imminent, p)+withPoll(legacy, p)+withPoll(imminent, p); got != want {
		t.Fatalf("overdue, every message:\ngot\n%s\nwant\n%s", got, want)
	}
}

func TestCurrentKeyRevokedSoon(t *testing.T) {
	// The current (not legacy) version ends in one day: imminent only.
	f := newFixture(t, Config{})
	k := key(t, "hmac-v1", 5)
	env := envelope.Envelope{
		Metadata: envelope.Metadata{ID: testID, Timestamp: envelope.FormatTimestamp(T), Type: envelope.EventType},
		Command:  envelope.Command{Target: "discord-bot", Name: "notify-user", Payload: []byte(`{}`)},
	}
	if err := k.SignEnvelope(&env, "tenant-a/revoking"); err != nil {
		t.Fatal(err)
	}
	b, _ := env.AppendJSON(nil)
	if _, err := f.sh.Check("tenant-a/revoking", b); err != nil {
		t.Fatal(err)
	}
	want := `{"event":"snavio.secret.key_expiry_imminent","version_id":"hmac-v1","source":"tenant-a/revoking"}` + "\n"
	if got := f.golden(t); got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

func TestNoticeMemoryIsBounded(t *testing.T) {
	f := newFixture(t, Config{})
	for i := range maxNotices + 10 {
		f.sh.due(notice{'L', "t/" + string(rune('a'+i%26)) + strings.Repeat("x", i/26), "hmac-v1"}, T)
	}
	if n := len(f.sh.notices); n > maxNotices {
		t.Fatalf("%d notices kept", n)
	}
}

func TestReplayAccepted(t *testing.T) {
	f := newFixture(t, Config{})
	detail := message(t, T, key(t, "hmac-v2", 2), func(e *envelope.Envelope) {
		e.Metadata.Replay, e.Metadata.ReplayReason, e.Metadata.ReplayID = true, "DLQ drain", "rp-1"
	})
	acc, err := f.sh.Check(src, detail)
	if err != nil {
		t.Fatal(err)
	}
	if m := acc.Envelope.Metadata; !m.Replay || m.ReplayReason != "DLQ drain" || m.ReplayID != "rp-1" {
		t.Fatalf("replay metadata lost: %+v", m)
	}
}

func TestColdOnly(t *testing.T) {
	f := newFixture(t, Config{})
	acc, err := f.sh.Check(src, message(t, T, key(t, "hmac-v2", 2), func(e *envelope.Envelope) { e.Command.Name = "cold-cmd" }))
	if err != nil || !acc.ColdOnly {
		t.Fatalf("cold-only: %+v %v", acc, err)
	}
}

func TestDeliveredSource(t *testing.T) {
	f := newFixture(t, Config{})
	acc, err := f.sh.Check(src, message(t, T, key(t, "hmac-v2", 2), nil))
	if err != nil {
		t.Fatal(err)
	}
	out, err := acc.Envelope.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out, []byte(`"command":{"source":"tenant-a/billing","target":"discord-bot","name":"notify-user","payload":{"amount":1250,"user":"u-42"}}`)) {
		t.Fatalf("delivered: %s", out)
	}
}

func TestNew(t *testing.T) {
	ring := testRing(t)
	c := clock.NewFake(T)
	for name, tc := range map[string]struct {
		cfg  Config
		deps Deps
	}{
		"no clock":       {Config{}, Deps{Keys: ring}},
		"no keys":        {Config{}, Deps{Clock: c}},
		"negative win":   {Config{Window: -time.Second}, Deps{Clock: c, Keys: ring}},
		"ratio too big":  {Config{NearLimitRatio: 1.5}, Deps{Clock: c, Keys: ring}},
		"sample too big": {Config{SampleRate: 2}, Deps{Clock: c, Keys: ring}},
	} {
		if _, err := New(tc.cfg, tc.deps); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := New(Config{}, Deps{Clock: c, Keys: ring})
	if err != nil {
		t.Fatal(err)
	}
	cfg := s.Config()
	if cfg.Window != 60*time.Second || cfg.NearLimitRatio != 0.8 || cfg.SampleRate != 0.01 || cfg.NoticeInterval != time.Hour {
		t.Fatalf("defaults: %+v", cfg)
	}
}

type brokenKeys struct{ err error }

func (b brokenKeys) Resolve(string, string, time.Time) (keys.Match, error) {
	return keys.Match{}, b.err
}

func TestCollaboratorFailureIsNotARejection(t *testing.T) {
	for name, err := range map[string]error{"error": errors.New("registry unreachable"), "no key": nil} {
		sink := &telemetry.Memory{}
		sh, _ := New(Config{}, Deps{Clock: clock.NewFake(T), Keys: brokenKeys{err}, Telemetry: sink})
		_, got := sh.Check(src, message(t, T, key(t, "hmac-v2", 2), nil))
		if got == nil || reason.Of(got) != "" {
			t.Errorf("%s: err = %v, want an internal error", name, got)
		}
		if len(sink.Events()) != 0 {
			t.Errorf("%s: telemetry for an internal failure: %v", name, sink.Events())
		}
	}
}

type countingKeys struct {
	KeyResolver
	calls    int
	versions []string
}

func (c *countingKeys) Resolve(source, version string, now time.Time) (keys.Match, error) {
	c.calls++
	c.versions = append(c.versions, version)
	return c.KeyResolver.Resolve(source, version, now)
}

// TestOneKeyPerMessage: the shield resolves exactly the version the message
// names, once, and verifies with that key only (so one HMAC), even when the
// signature is bad and other versions exist.
func TestOneKeyPerMessage(t *testing.T) {
	ck := &countingKeys{KeyResolver: testRing(t)}
	sh, err := New(Config{}, Deps{Clock: clock.NewFake(T), Keys: ck})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sh.Check(src, message(t, T, key(t, "hmac-v2", 2), nil)); err != nil {
		t.Fatal(err)
	}
	// Signed with v1's secret but labelled v2: no fallback to v1.
	bad := replace(t, message(t, T, key(t, "hmac-v1", 1), nil), `"hmac-v1"`, `"hmac-v2"`)
	if _, err := sh.Check(src, bad); reason.Of(err) != reason.BadSignature {
		t.Fatalf("relabelled: %v", err)
	}
	if ck.calls != 2 || ck.versions[0] != "hmac-v2" || ck.versions[1] != "hmac-v2" {
		t.Fatalf("Resolve calls %d %v", ck.calls, ck.versions)
	}
}
