package envelope

import (
	stdjson "encoding/json"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
)

const (
	goodID   = "0f8fad5b-d9cb-469f-a165-70867728950e"
	goodTS   = "2025-04-07T12:58:00.000Z"
	goodHMAC = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
)

func meta(extra string) string {
	return `{"id":"` + goodID + `","timestamp":"` + goodTS + `","type":"snavio.command-sent","hmac":"` + goodHMAC + `","version_id":"hmac-v2"` + extra + `}`
}

func cmd(extra string) string {
	return `{"target":"discord-bot","name":"notify-user","payload":{"user":"u-1","n":1}` + extra + `}`
}

func good() string { return `{"metadata":` + meta("") + `,"command":` + cmd("") + `}` }

func TestParseValid(t *testing.T) {
	p := NewParser(Limits{})
	env, seen, err := p.Parse([]byte(good()), nil)
	if err != nil {
		t.Fatal(err)
	}
	if seen != (Seen{}) {
		t.Errorf("seen = %+v on success", seen)
	}
	want := Envelope{
		Metadata: Metadata{ID: goodID, Timestamp: goodTS, Type: EventType, HMAC: goodHMAC, VersionID: "hmac-v2"},
		Command:  Command{Target: "discord-bot", Name: "notify-user", Payload: []byte(`{"n":1,"user":"u-1"}`)},
		SentAt:   time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC),
	}
	if env.Metadata != want.Metadata || env.Command.Target != want.Command.Target ||
		env.Command.Name != want.Command.Name || string(env.Command.Payload) != string(want.Command.Payload) ||
		!env.SentAt.Equal(want.SentAt) || env.Command.Source != "" {
		t.Fatalf("got %+v\nwant %+v", env, want)
	}
	// Escaped names and values mean the same thing.
	esc := strings.Replace(good(), `"target":"discord-bot"`, `"t\u0061rget":"discord\u002dbot"`, 1)
	env2, _, err := p.Parse([]byte(esc), nil)
	if err != nil || env2.Command.Target != "discord-bot" {
		t.Fatalf("escaped: %+v %v", env2, err)
	}
	// Member order does not matter, and whitespace is allowed.
	swapped := "{ \"command\" : " + cmd("") + " ,\n \"metadata\": " + meta("") + " }"
	if _, _, err := p.Parse([]byte(swapped), nil); err != nil {
		t.Fatal(err)
	}
}

func TestParseRoundTrip(t *testing.T) {
	p := NewParser(Limits{})
	env, _, err := p.Parse([]byte(good()), nil)
	if err != nil {
		t.Fatal(err)
	}
	out, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	env2, _, err := p.Parse(out, nil)
	if err != nil || env2.Metadata != env.Metadata || string(env2.Command.Payload) != string(env.Command.Payload) {
		t.Fatalf("round trip: %s -> %+v, %v", out, env2, err)
	}
	env.Command.Source = "tenant-a/billing"
	out, _ = env.AppendJSON(nil)
	if !strings.Contains(string(out), `"command":{"source":"tenant-a/billing","target":"discord-bot"`) {
		t.Fatalf("delivered form: %s", out)
	}
	if _, _, err := p.Parse(out, nil); reason.Of(err) != reason.CommandSourcePresent {
		t.Fatalf("delivered form parsed as producer input: %v", err)
	}
}

func TestParseRejects(t *testing.T) {
	repl := func(old, new string) string {
		s := good()
		if !strings.Contains(s, old) {
			panic(old)
		}
		return strings.Replace(s, old, new, 1)
	}
	deep := strings.Repeat("[", 33) + strings.Repeat("]", 33)
	for _, tc := range []struct {
		name, in string
		code     reason.Code
		field    string
	}{
		{"empty", ``, reason.MalformedJSON, ""},
		{"not json", `hello`, reason.MalformedJSON, ""},
		{"array", `[]`, reason.WrongType, ""},
		{"truncated", good()[:40], reason.MalformedJSON, ""},
		{"trailing", good() + `{}`, reason.MalformedJSON, ""},
		{"invalid utf8", repl(`"u-1"`, "\"u-\xff\""), reason.MalformedJSON, ""},
		{"missing metadata", `{"command":` + cmd("") + `}`, reason.MissingField, "metadata"},
		{"missing command", `{"metadata":` + meta("") + `}`, reason.MissingField, "command"},
		{"missing id", repl(`"id":"`+goodID+`",`, ``), reason.MissingField, "metadata.id"},
		{"missing timestamp", repl(`"timestamp":"`+goodTS+`",`, ``), reason.MissingField, "metadata.timestamp"},
		{"missing type", repl(`"type":"snavio.command-sent",`, ``), reason.MissingField, "metadata.type"},
		{"missing hmac", repl(`"hmac":"`+goodHMAC+`",`, ``), reason.MissingField, "metadata.hmac"},
		{"missing version", repl(`,"version_id":"hmac-v2"`, ``), reason.MissingField, "metadata.version_id"},
		{"missing target", repl(`"target":"discord-bot",`, ``), reason.MissingField, "command.target"},
		{"missing name", repl(`"name":"notify-user",`, ``), reason.MissingField, "command.name"},
		{"missing payload", repl(`,"payload":{"user":"u-1","n":1}`, ``), reason.MissingField, "command.payload"},
		{"metadata not object", repl(`"metadata":{`, `"metadata":[],"x":{`), reason.WrongType, "metadata"},
		{"id number", repl(`"id":"`+goodID+`"`, `"id":12`), reason.WrongType, "metadata.id"},
		{"id null", repl(`"id":"`+goodID+`"`, `"id":null`), reason.WrongType, "metadata.id"},
		{"target object", repl(`"target":"discord-bot"`, `"target":{}`), reason.WrongType, "command.target"},
		{"name bool", repl(`"name":"notify-user"`, `"name":true`), reason.WrongType, "command.name"},
		{"id not uuid", repl(goodID, "not-a-uuid"), reason.InvalidID, "metadata.id"},
		{"id uppercase", repl(goodID, strings.ToUpper(goodID)), reason.InvalidID, "metadata.id"},
		{"id braces", repl(`"`+goodID+`"`, `"{`+goodID+`}"`), reason.InvalidID, "metadata.id"},
		{"id nil", repl(goodID, "00000000-0000-0000-0000-000000000000"), reason.InvalidID, "metadata.id"},
		{"timestamp garbage", repl(goodTS, "yesterday"), reason.InvalidTimestamp, "metadata.timestamp"},
		{"timestamp no zone", repl(goodTS, "2025-04-07T12:58:00"), reason.InvalidTimestamp, "metadata.timestamp"},
		{"timestamp feb 30", repl(goodTS, "2025-02-30T12:58:00Z"), reason.InvalidTimestamp, "metadata.timestamp"},
		{"timestamp lowercase z", repl(goodTS, "2025-04-07T12:58:00z"), reason.InvalidTimestamp, "metadata.timestamp"},
		{"type", repl(`snavio.command-sent`, `snavio.command-delivered`), reason.InvalidEventType, "metadata.type"},
		{"hmac short", repl(goodHMAC, "abcd"), reason.InvalidHMAC, "metadata.hmac"},
		{"hmac upper", repl(goodHMAC, strings.ToUpper(goodHMAC)), reason.InvalidHMAC, "metadata.hmac"},
		{"version", repl(`hmac-v2`, `v2`), reason.InvalidVersionID, "metadata.version_id"},
		{"version zero", repl(`hmac-v2`, `hmac-v02`), reason.InvalidVersionID, "metadata.version_id"},
		{"target bad", repl(`discord-bot`, `Discord Bot`), reason.InvalidTarget, "command.target"},
		{"target long", repl(`discord-bot`, strings.Repeat("a", 65)), reason.InvalidTarget, "command.target"},
		{"target empty", repl(`"discord-bot"`, `""`), reason.InvalidTarget, "command.target"},
		{"name bad", repl(`notify-user`, `notify user`), reason.InvalidCommandName, "command.name"},
		{"source", repl(`"target"`, `"source":"tenant-b/x","target"`), reason.CommandSourcePresent, "command.source"},
		{"source null", repl(`"target"`, `"source":null,"target"`), reason.CommandSourcePresent, "command.source"},
		{"source upper", repl(`"target"`, `"SOURCE":"x","target"`), reason.CommandSourcePresent, "command.source"},
		{"source long s", repl(`"target"`, `"ſource":"x","target"`), reason.CommandSourcePresent, "command.source"},
		{"source escaped", repl(`"target"`, `"\u0073ource":"x","target"`), reason.CommandSourcePresent, "command.source"},
		{"source last", repl(`"name":"notify-user"`, `"name":"notify-user","source":"x"`), reason.CommandSourcePresent, "command.source"},
		{"unknown top", repl(`{"metadata"`, `{"x":1,"metadata"`), reason.UnknownMember, ""},
		{"unknown metadata", repl(`"version_id"`, `"extra":1,"version_id"`), reason.UnknownMember, "metadata"},
		{"case variant", repl(`"target"`, `"Target"`), reason.UnknownMember, "command"},
		{"case variant metadata", repl(`"id"`, `"ID"`), reason.UnknownMember, "metadata"},
		{"duplicate field", repl(`"name":"notify-user"`, `"name":"notify-user","name":"other"`), reason.DuplicateMember, "command.name"},
		{"duplicate escaped", repl(`"name":"notify-user"`, `"name":"notify-user","n\u0061me":"other"`), reason.DuplicateMember, "command.name"},
		{"duplicate command", good()[:len(good())-1] + `,"command":` + cmd("") + `}`, reason.DuplicateMember, "command"},
		{"duplicate in payload", repl(`{"user":"u-1","n":1}`, `{"user":"u-1","user":"u-2"}`), reason.DuplicateMember, "command.payload"},
		{"replay fields without replay", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay_id":"r1","replay_reason":"x"`), reason.InvalidReplay, "metadata.replay"},
		{"replay false with fields", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":false,"replay_id":"r1"`), reason.InvalidReplay, "metadata.replay"},
		{"replay without id", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay_reason":"x"`), reason.InvalidReplay, "metadata.replay_id"},
		{"replay without reason", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay_id":"r1"`), reason.InvalidReplay, "metadata.replay_reason"},
		{"replay not bool", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":"yes"`), reason.WrongType, "metadata.replay"},
		{"replay twice", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay":true`), reason.DuplicateMember, "metadata.replay"},
		{"replay reason control char", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay_id":"r1","replay_reason":"a\nb"`), reason.InvalidReplay, "metadata.replay_reason"},
		{"replay id bad", repl(`,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay_id":"r 1","replay_reason":"x"`), reason.InvalidReplay, "metadata.replay_id"},
		{"deep payload", repl(`{"user":"u-1","n":1}`, deep), reason.TooDeep, "command.payload"},
		{"deep non-canonical payload", repl(`{"user":"u-1","n":1}`, strings.Replace(deep, "[]", "[ ]", 1)), reason.TooDeep, "command.payload"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, _, err := NewParser(Limits{}).Parse([]byte(tc.in), nil)
			var re *reason.Error
			if !errors.As(err, &re) {
				t.Fatalf("err = %v, want %s", err, tc.code)
			}
			if re.Code != tc.code || re.Field != tc.field {
				t.Fatalf("got %s at %q (%v), want %s at %q", re.Code, re.Field, err, tc.code, tc.field)
			}
			if re.Msg == "" {
				t.Error("empty message")
			}
			if env.Metadata != (Metadata{}) || env.Command.Target != "" || env.Command.Payload != nil {
				t.Errorf("partial envelope returned: %+v", env)
			}
		})
	}
}

func TestParseReplay(t *testing.T) {
	in := strings.Replace(good(), `,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":true,"replay_reason":"DLQ drain","replay_id":"rp-1"`, 1)
	p := NewParser(Limits{})
	env, _, err := p.Parse([]byte(in), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !env.Metadata.Replay || env.Metadata.ReplayReason != "DLQ drain" || env.Metadata.ReplayID != "rp-1" {
		t.Fatalf("replay metadata: %+v", env.Metadata)
	}
	out, _ := env.AppendJSON(nil)
	if !strings.Contains(string(out), `"version_id":"hmac-v2","replay":true,"replay_reason":"DLQ drain","replay_id":"rp-1"}`) {
		t.Fatalf("wire form: %s", out)
	}
	back, _, err := p.Parse(out, nil)
	if err != nil || back.Metadata != env.Metadata {
		t.Fatalf("round trip: %+v %v", back.Metadata, err)
	}
	// "replay": false alone is live traffic.
	live := strings.Replace(good(), `,"version_id":"hmac-v2"`, `,"version_id":"hmac-v2","replay":false`, 1)
	if env, _, err := p.Parse([]byte(live), nil); err != nil || env.Metadata.Replay {
		t.Fatalf("replay false: %+v %v", env.Metadata, err)
	}
}

func TestParseSize(t *testing.T) {
	p := NewParser(Limits{MaxBytes: 1 << 30})
	if p.Limits().MaxBytes != DefaultMaxBytes {
		t.Fatalf("MaxBytes above the transport limit was kept: %d", p.Limits().MaxBytes)
	}
	pad := strings.Repeat("x", DefaultMaxBytes)
	big := strings.Replace(good(), `"u-1"`, `"`+pad+`"`, 1)
	if _, _, err := p.Parse([]byte(big), nil); reason.Of(err) != reason.TooLarge {
		t.Fatalf("oversized: %v", err)
	}
	fits := strings.Replace(good(), `"u-1"`, `"`+pad[:DefaultMaxBytes-len(good())+3]+`"`, 1)
	if len(fits) != DefaultMaxBytes {
		t.Fatalf("test setup: %d", len(fits))
	}
	if _, _, err := p.Parse([]byte(fits), nil); err != nil {
		t.Fatalf("exactly at the limit: %v", err)
	}
	small := NewParser(Limits{MaxBytes: 100, MaxDepth: 1})
	if _, _, err := small.Parse([]byte(good()), nil); reason.Of(err) != reason.TooLarge {
		t.Fatalf("custom limit: %v", err)
	}
}

// TestParseCanonicalSize: the canonical payload is what is signed and
// delivered, so the detail with it in place is held to the limit too; on
// the fast path and on the token parser alike. 1e400 is 5 bytes as sent and
// 23 canonical; whitespace shrinks.
func TestParseCanonicalSize(t *testing.T) {
	p := NewParser(Limits{})
	withPayload := func(payload string) []byte {
		return []byte(strings.Replace(good(), `{"user":"u-1","n":1}`, payload, 1))
	}
	grows := withPayload("[" + strings.Repeat("1e400,", 38_000) + "1e400]")
	if len(grows) > DefaultMaxBytes {
		t.Fatalf("test setup: %d bytes as sent", len(grows))
	}
	// Just over: the sent detail is at the limit and one number grows.
	base := withPayload(`["` + strings.Repeat("x", DefaultMaxBytes) + `",1e20]`)
	justOver := withPayload(`["` + strings.Repeat("x", DefaultMaxBytes-(len(base)-DefaultMaxBytes)) + `",1e20]`)
	if len(justOver) != DefaultMaxBytes {
		t.Fatalf("test setup: %d bytes", len(justOver))
	}
	// Grows by one byte (1e3 is 1000) to exactly the limit: accepted.
	atLimitPayload := `["` + strings.Repeat("x", DefaultMaxBytes-1-len(withPayload(`["",1e3]`))) + `",1e3]`
	atLimit := withPayload(atLimitPayload)
	if len(atLimit) != DefaultMaxBytes-1 {
		t.Fatalf("test setup: %d bytes", len(atLimit))
	}
	for _, c := range []struct {
		name   string
		detail []byte
		want   reason.Code
	}{
		{"1e400 x 38001", grows, reason.TooLarge},
		{"at the limit as sent, 1e20 grows", justOver, reason.TooLarge},
		{"canonical exactly at the limit", atLimit, ""},
	} {
		for _, fast := range []bool{true, false} {
			env, _, err := p.parse(c.detail, nil, fast)
			if reason.Of(err) != c.want {
				t.Fatalf("%s (fast path %v): %v, want %q", c.name, fast, err, c.want)
			}
			if c.want == reason.TooLarge && !strings.Contains(err.Error(), "command.payload") {
				t.Fatalf("%s: %v does not name the payload", c.name, err)
			}
			if c.want == "" && (len(env.Command.Payload) != len(atLimitPayload)+1 || !strings.HasSuffix(string(env.Command.Payload), ",1000]")) {
				t.Fatalf("%s: canonical payload of %d bytes", c.name, len(env.Command.Payload))
			}
		}
	}
}

func TestParseCheckStopsEarly(t *testing.T) {
	p := NewParser(Limits{})
	stop := errors.New("outside window")
	var got time.Time
	// The payload after target and name is malformed: an early stop must not reach it.
	in := `{"metadata":` + meta("") + `,"command":{"target":"discord-bot","name":"notify-user","payload":{"a":}}}`
	_, seen, err := p.Parse([]byte(in), func(t time.Time) error { got = t; return stop })
	if err != stop {
		t.Fatalf("err = %v", err)
	}
	if !got.Equal(time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC)) {
		t.Fatalf("check got %v", got)
	}
	want := Seen{ID: goodID, Timestamp: goodTS, Target: "discord-bot", Name: "notify-user"}
	if seen != want {
		t.Fatalf("seen = %+v, want %+v", seen, want)
	}
	// Malformed identifying fields are not reported.
	bad := strings.Replace(good(), `"notify-user"`, `"notify user"`, 1)
	_, seen, _ = p.Parse([]byte(bad), nil)
	if seen != (Seen{ID: goodID, Timestamp: goodTS, Target: "discord-bot"}) {
		t.Fatalf("seen = %+v", seen)
	}
}

func TestParseTimestamp(t *testing.T) {
	for in, want := range map[string]time.Time{
		"2025-04-07T12:58:00Z":                time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC),
		"2025-04-07T12:58:00.5Z":              time.Date(2025, 4, 7, 12, 58, 0, 5e8, time.UTC),
		"2025-04-07T12:58:00.123456789Z":      time.Date(2025, 4, 7, 12, 58, 0, 123456789, time.UTC),
		"2025-04-07T14:58:00+02:00":           time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC),
		"2025-04-07T12:58:00-00:00":           time.Date(2025, 4, 7, 12, 58, 0, 0, time.UTC),
		"2024-02-29T00:00:00Z":                time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC),
		"2025-04-07T12:58:00.1234567890Z":     {},
		"2025-04-07T12:58:60Z":                {},
		"2025-02-29T00:00:00Z":                {},
		"2025-04-07 12:58:00Z":                {},
		"2025-04-07T12:58:00.Z":               {},
		"2025-04-07T12:58:00+0200":            {},
		"2025-13-07T12:58:00Z":                {},
		"2025-04-07T12:58:00+24:00":           {},
		"+2025-04-07T12:58:00Z":               {},
		"2025-04-07T12:58:00.000000000+02:00": time.Date(2025, 4, 7, 10, 58, 0, 0, time.UTC),
	} {
		got, ok := ParseTimestamp(in)
		if ok != !want.IsZero() || ok && !got.Equal(want) {
			t.Errorf("ParseTimestamp(%q) = %v, %v; want %v", in, got, ok, want)
		}
	}
	if got := FormatTimestamp(time.Date(2025, 4, 7, 14, 58, 0, 123456789, time.FixedZone("", 7200))); got != "2025-04-07T12:58:00.123Z" {
		t.Fatal(got)
	}
}

func TestValidSource(t *testing.T) {
	for s, want := range map[string]bool{
		"tenant-a/billing": true, "123456789012/account-service": true,
		"tenant-a": false, "/billing": false, "tenant-a/": false, "tenant a/billing": false,
		"tenant-a/Billing": false, "a/b/c": false, strings.Repeat("t", 65) + "/x": false,
	} {
		if got := ValidSource(s); got != want {
			t.Errorf("ValidSource(%q) = %v", s, got)
		}
	}
}

func TestValidTenant(t *testing.T) {
	for s, want := range map[string]bool{"acme": true, "Acme.eu-1_x": true, "9": true, "": false, "-a": false, ".a": false, "a/b": false, strings.Repeat("a", 65): false, strings.Repeat("a", 64): true,
		// Accepted by the telemetry API's old, looser rule (printable ASCII, 256 bytes):
		// no source can carry them, so no stream can have them.
		"_platform": false, "acme!": false, "a~b": false, strings.Repeat("a", 256): false} {
		if got := ValidTenant(s); got != want {
			t.Errorf("ValidTenant(%q) = %v", s, got)
		}
		if got := ValidSource(s + "/billing"); got != want {
			t.Errorf("ValidSource(%q) = %v, ValidTenant says %v", s+"/billing", got, want)
		}
	}
}

// v1Envelope is how a check written against encoding/json (v1) would see
// the message: a struct with a source field it can test for emptiness.
type v1Envelope struct {
	Metadata struct {
		ID string `json:"id"`
	} `json:"metadata"`
	Command struct {
		Source string `json:"source"`
		Target string `json:"target"`
	} `json:"command"`
}

// TestParserDifferential is the attack: each input smuggles
// command.source (or a second value for a field) past encoding/json v1.
// v1 accepts every one of them, with an empty or attacker-chosen result; the
// strict parser must reject every one.
func TestParserDifferential(t *testing.T) {
	m := meta("")
	for _, tc := range []struct {
		name, in string
		v1       func(v1Envelope) bool // what v1 makes of it
	}{
		{"upper-case SOURCE", `{"metadata":` + m + `,"command":` + cmd(`,"SOURCE":"tenant-b/x"`) + `}`,
			func(e v1Envelope) bool { return e.Command.Source == "tenant-b/x" }},
		{"long s (U+017F) folds to s", `{"metadata":` + m + `,"command":` + cmd(`,"ſource":"tenant-b/x"`) + `}`,
			func(e v1Envelope) bool { return e.Command.Source == "tenant-b/x" }},
		{"escaped name", `{"metadata":` + m + `,"command":` + cmd(`,"\u0073ource":"tenant-b/x"`) + `}`,
			func(e v1Envelope) bool { return e.Command.Source == "tenant-b/x" }},
		{"duplicate key, last wins", `{"metadata":` + m + `,"command":` + cmd(`,"source":"tenant-b/x","source":""`) + `}`,
			func(e v1Envelope) bool { return e.Command.Source == "" }},
		{"second command object merged", `{"metadata":` + m + `,"command":` + cmd("") + `,"command":{"source":"tenant-b/x"}}`,
			func(e v1Envelope) bool { return e.Command.Source == "tenant-b/x" && e.Command.Target == "discord-bot" }},
		{"case variant of command", `{"metadata":` + m + `,"command":` + cmd("") + `,"Command":{"source":"tenant-b/x"}}`,
			func(e v1Envelope) bool { return e.Command.Source == "tenant-b/x" }},
		{"duplicate target", `{"metadata":` + m + `,"command":` + cmd(`,"target":"admin-service"`) + `}`,
			func(e v1Envelope) bool { return e.Command.Target == "admin-service" }},
		{"unknown member", `{"metadata":` + m + `,"command":` + cmd(`,"sourсe":"tenant-b/x"`) + `}`, // Cyrillic с
			func(e v1Envelope) bool { return e.Command.Source == "" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e v1Envelope
			if err := stdjson.Unmarshal([]byte(tc.in), &e); err != nil {
				t.Fatalf("encoding/json v1 rejected it (%v); the differential no longer holds", err)
			}
			if !tc.v1(e) {
				t.Fatalf("encoding/json v1 decoded %+v, not what this case documents", e)
			}
			_, _, err := NewParser(Limits{}).Parse([]byte(tc.in), nil)
			if err == nil {
				t.Fatal("strict parser accepted it")
			}
			if !reason.Known(reason.Of(err)) {
				t.Fatalf("rejection without a known reason code: %v", err)
			}
		})
	}
}

func TestParseAllocs(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not meaningful under -race")
	}
	p := NewParser(Limits{})
	in := []byte(strings.Replace(good(), `{"user":"u-1","n":1}`, `{"n":1,"user":"u-1"}`, 1))
	if _, _, err := p.Parse(in, nil); err != nil {
		t.Fatal(err)
	}
	// Canonical payload: one string for all fields and one payload copy.
	if n := testing.AllocsPerRun(200, func() { _, _, _ = p.Parse(in, nil) }); n > 2 {
		t.Fatalf("Parse allocates %v times per message, want <= 2", n)
	}
}

func BenchmarkParse(b *testing.B) {
	p := NewParser(Limits{})
	benchParse(b, []byte(good()), func(in []byte) error { _, _, err := p.Parse(in, nil); return err })
}

// TestParseWorstCaseAllocation feeds the parser the most expensive inputs
// that fit in the size limit and checks that memory stays bounded (24 times
// the largest input) and every rejection is coded.
func TestParseWorstCaseAllocation(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation figures are not meaningful under -race")
	}
	wrap := func(payload string) []byte {
		s := strings.Replace(good(), `{"user":"u-1","n":1}`, payload, 1)
		if len(s) > DefaultMaxBytes {
			s = s[:0] + strings.Replace(good(), `{"user":"u-1","n":1}`, payload[:len(payload)-(len(s)-DefaultMaxBytes)], 1)
		}
		return []byte(s)
	}
	n := DefaultMaxBytes - len(good()) - 16
	members := func(count int, pad int) string {
		var b strings.Builder
		b.WriteString("{")
		for i := 0; i < count; i++ {
			// Reverse order forces the exact (allocating) path.
			fmt.Fprintf(&b, `"k%07d%s":0,`, 9999999-i, strings.Repeat("x", pad))
		}
		return strings.TrimSuffix(b.String(), ",") + "}"
	}
	for _, tc := range []struct {
		name string
		in   []byte
		code reason.Code
	}{
		{"nesting beyond the tokenizer limit", wrap(strings.Repeat("[", n/2) + strings.Repeat("]", n/2)), reason.TooDeep},
		{"nesting at 33", wrap(strings.Repeat("[", 33) + strings.Repeat("]", 33)), reason.TooDeep},
		{"escapes everywhere", wrap(`"` + strings.Repeat(`\u0041`, n/6) + `"`), ""},
		{"many empty objects", wrap("[" + strings.Repeat(`{ },`, n/4-1) + "{}]"), ""},
		{"members beyond the limit", wrap(members(n/14, 0)), reason.TooManyMembers},
		{"members at the limit, out of order", wrap(members(DefaultMaxMembers, 0)), ""},
		{"members at the limit, long names", wrap(members(DefaultMaxMembers, n/DefaultMaxMembers-14)), ""},
		{"1024 members, longer names", wrap(members(1024, n/1024-14)), ""},
		{"256 members, long names", wrap(members(256, n/256-14)), ""},
		{"many numbers to reformat", wrap("[" + strings.Repeat(`1.0,`, n/4-1) + "1]"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := NewParser(Limits{})
			if len(tc.in) > DefaultMaxBytes {
				t.Fatalf("input %d bytes", len(tc.in))
			}
			_, _, _ = p.Parse(tc.in, nil) // warm the pools
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			_, _, err := p.Parse(tc.in, nil)
			runtime.ReadMemStats(&after)
			if reason.Of(err) != tc.code {
				t.Fatalf("err = %v, want %q", err, tc.code)
			}
			// The bound is absolute: 24 times the largest input (6 MiB).
			got := after.TotalAlloc - before.TotalAlloc
			if limit := uint64(24 * DefaultMaxBytes); got > limit {
				t.Fatalf("allocated %d bytes for a %d-byte input (limit %d)", got, len(tc.in), limit)
			}
			t.Logf("%d-byte input: %d bytes allocated", len(tc.in), got)
		})
	}
}
