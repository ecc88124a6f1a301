package send

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	keycmd "github.com/snavio/snavio/internal/cli/key"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

var (
	t0     = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	secret = []byte("0123456789abcdef0123456789abcdef")
)

func testKey(t *testing.T) *signing.Key {
	t.Helper()
	k, err := signing.NewKey("hmac-v1", secret)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestBuildIsWhatTheDispatcherVerifies: the built detail parses with the
// dispatcher's parser, its payload is canonical, and its signature
// verifies for the source it was signed for and no other.
func TestBuildIsWhatTheDispatcherVerifies(t *testing.T) {
	k := testKey(t)
	b, err := Build("acme/billing", "mailer", "send", "0F8FAD5B-D9CB-469F-A165-70867728950E", []byte(`{"b": 2, "a": [1, 2]}`), k, t0)
	if err != nil {
		t.Fatal(err)
	}
	env, _, err := envelope.NewParser(envelope.Limits{}).Parse(b.Detail, nil)
	if err != nil {
		t.Fatalf("dispatcher parser: %v\n%s", err, b.Detail)
	}
	if env.Metadata.ID != "0f8fad5b-d9cb-469f-a165-70867728950e" || env.Metadata.VersionID != "hmac-v1" || env.Metadata.Timestamp != envelope.FormatTimestamp(t0) {
		t.Fatalf("metadata = %+v", env.Metadata)
	}
	if string(env.Command.Payload) != `{"a":[1,2],"b":2}` {
		t.Fatalf("payload %s is not canonical", env.Command.Payload)
	}
	if err := k.VerifyEnvelope(&env, "acme/billing"); err != nil {
		t.Fatalf("verify: %v", err)
	}
	if err := k.VerifyEnvelope(&env, "acme/other"); err == nil {
		t.Fatal("the signature verified for another source")
	}
	if strings.Contains(string(b.Detail), `"source"`) {
		t.Fatalf("the detail carries a command.source: %s", b.Detail)
	}
}

func TestBuildNewIDs(t *testing.T) {
	seen := map[string]bool{}
	for range 100 {
		b, err := Build("acme/billing", "mailer", "send", "", []byte(`{}`), testKey(t), t0)
		if err != nil {
			t.Fatal(err)
		}
		id := b.Envelope.Metadata.ID
		if !envelope.ValidID(id) || id[14] != '4' || seen[id] {
			t.Fatalf("id %q: invalid, not v4, or repeated", id)
		}
		seen[id] = true
	}
}

func TestBuildRefuses(t *testing.T) {
	for _, payload := range []string{``, `{`, `{"a":1,}`, `nul`, `{"a":1} {}`} {
		_, err := Build("acme/billing", "mailer", "send", "", []byte(payload), testKey(t), t0)
		if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--payload is not valid JSON") {
			t.Errorf("payload %q: %v", payload, err)
		}
	}
	deep := strings.Repeat("[", 200) + strings.Repeat("]", 200)
	if _, err := Build("acme/billing", "mailer", "send", "", []byte(deep), testKey(t), t0); cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "would reject") {
		t.Errorf("too deep: %v", err)
	}
}

func TestReadPayload(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "p.json")
	if err := os.WriteFile(p, []byte(`{"x":1}`), 0o600); err != nil {
		t.Fatal(err)
	}
	big := filepath.Join(dir, "big.json")
	if err := os.WriteFile(big, []byte(`"`+strings.Repeat("x", maxPayloadBytes)+`"`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		arg, stdin, want, err string
	}{
		{arg: `{"a":1}`, want: `{"a":1}`},
		{arg: "@" + p, want: `{"x":1}`},
		{arg: "@-", stdin: `[1]`, want: `[1]`},
		{arg: "-", stdin: `[2]`, want: `[2]`},
		{arg: "@", err: "names no file"},
		{arg: "@" + dir, err: "is a directory"},
		{arg: "@" + filepath.Join(dir, "none"), err: "no such file"},
		{arg: "@" + big, err: "is over 256 KiB"},
		{arg: "@-", stdin: strings.Repeat(" ", maxPayloadBytes+1), err: "over 256 KiB"},
	} {
		got, err := ReadPayload(tc.arg, strings.NewReader(tc.stdin))
		switch {
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%.40q: err %v, want %q", tc.arg, err, tc.err)
		case tc.err == "" && (err != nil || string(got) != tc.want):
			t.Errorf("%.40q: %q %v, want %q", tc.arg, got, err, tc.want)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

func tenantConfig(t *testing.T) []byte {
	t.Helper()
	ring, err := keys.NewKeyring(keys.Policy{}, map[string][]keys.Version{
		"acme/billing": {
			{ID: "hmac-v1", Secret: secret, ActivatedAt: t0.Add(-48 * time.Hour)},
			{ID: "hmac-v2", Secret: []byte("abcdefghijklmnopqrstuvwxyz012345"), ActivatedAt: t0.Add(-time.Hour)},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	tc, err := ring.TenantConfig("acme", t0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := tc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestKeyFromFile(t *testing.T) {
	dir := t.TempDir()
	b64 := base64.StdEncoding.EncodeToString(secret)
	key := writeFile(t, dir, "k.json", `{"source":"acme/billing","version_id":"hmac-v1","secret":"`+b64+`"}`, 0o600)
	tc := writeFile(t, dir, "tc.json", string(tenantConfig(t)), 0o600)
	open := writeFile(t, dir, "open.json", `{"source":"acme/billing","version_id":"hmac-v1","secret":"`+b64+`"}`, 0o640)
	// What `snavio key create -o json` prints, every field of it.
	created, err := json.Marshal(keycmd.Secret{Source: "acme/billing", VersionID: "hmac-v1", ActivatedAt: t0, Secret: secret, Notice: keycmd.Notice})
	if err != nil {
		t.Fatal(err)
	}
	printed := writeFile(t, dir, "created.json", string(created), 0o600)
	for _, c := range []struct {
		path, source, version, wantVersion, err string
	}{
		{path: key, source: "acme/billing", wantVersion: "hmac-v1"},
		{path: printed, source: "acme/billing", wantVersion: "hmac-v1"},
		{path: writeFile(t, dir, "extra.json", `{"version_id":"hmac-v1","secret":"`+b64+`","colour":"red"}`, 0o600), source: "acme/billing", err: "want a key"},
		{path: key, source: "acme/other", err: "holds the key of acme/billing"},
		{path: key, source: "acme/billing", version: "hmac-v2", err: "holds key version hmac-v1"},
		{path: tc, source: "acme/billing", wantVersion: "hmac-v2"},
		{path: tc, source: "acme/billing", version: "hmac-v1", wantVersion: "hmac-v1"},
		{path: tc, source: "acme/billing", version: "hmac-v7", err: "has no key version hmac-v7 for acme/billing (it has hmac-v2, hmac-v1)"},
		{path: tc, source: "acme/other", err: "no service acme/other"},
		{path: open, source: "acme/billing", err: "readable by others"},
		{path: writeFile(t, dir, "x.json", `[1]`, 0o600), source: "acme/billing", err: "is not a JSON object"},
		{path: writeFile(t, dir, "y.json", `{"version_id":"hmac-v1"}`, 0o600), source: "acme/billing", err: "want a key"},
		{path: writeFile(t, dir, "z.json", `{"version_id":"hmac-v1","secret":"c2hvcnQ="}`, 0o600), source: "acme/billing", err: "signing key hmac-v1"},
		{path: filepath.Join(dir, "none"), source: "acme/billing", err: "no such file"},
	} {
		k, err := KeyFromFile(c.path, c.source, c.version, t0)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %s %s: err %v, want %q", filepath.Base(c.path), c.source, c.version, err, c.err)
		case c.err == "" && (err != nil || k.VersionID() != c.wantVersion):
			t.Errorf("%s %s %s: %v, want %s", filepath.Base(c.path), c.source, c.version, err, c.wantVersion)
		}
		if err != nil && strings.Contains(err.Error(), b64) {
			t.Errorf("the error shows the secret: %v", err)
		}
	}
}

func TestKeyFromEnv(t *testing.T) {
	b64 := base64.StdEncoding.EncodeToString(secret)
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	if _, ok, err := KeyFromEnv(env(nil), ""); ok || err != nil {
		t.Fatalf("unset: ok %v err %v", ok, err)
	}
	k, ok, err := KeyFromEnv(env(map[string]string{SecretEnv: b64, KeyVersionEnv: "hmac-v3"}), "")
	if !ok || err != nil || k.VersionID() != "hmac-v3" {
		t.Fatalf("env: %v %v", ok, err)
	}
	if k, _, err := KeyFromEnv(env(map[string]string{SecretEnv: b64, KeyVersionEnv: "hmac-v3"}), "hmac-v4"); err != nil || k.VersionID() != "hmac-v4" {
		t.Fatalf("--key-version wins: %v", err)
	}
	for _, m := range []map[string]string{
		{SecretEnv: b64},
		{SecretEnv: "***", KeyVersionEnv: "hmac-v1"},
		{SecretEnv: "c2hvcnQ=", KeyVersionEnv: "hmac-v1"},
	} {
		if _, ok, err := KeyFromEnv(env(m), ""); !ok || cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%v: ok %v err %v", m, ok, err)
		}
	}
}

// fakeAPI serves GET /v1/telemetry from a script of pages and advances a
// fake clock by the wait of each read, as a long poll would.
type fakeAPI struct {
	pages   []wire.TelemetryPage
	queries []url.Values
	now     time.Time
	err     error
}

func (f *fakeAPI) ReadTelemetry(_ context.Context, tq wire.TelemetryQuery) (wire.TelemetryPage, error) {
	q := tq.Values()
	f.queries = append(f.queries, q)
	if f.err != nil {
		return wire.TelemetryPage{}, f.err
	}
	p := wire.TelemetryPage{NextAfter: 0, ServerTime: f.now}
	if len(f.pages) > 0 {
		p, f.pages = f.pages[0], f.pages[1:]
	} else if w, err := time.ParseDuration(q.Get("wait")); err == nil {
		f.now = f.now.Add(w) // a heartbeat after the wait
	}
	if len(f.queries) > 1 && len(p.Records) > 0 {
		f.now = f.now.Add(10 * time.Millisecond)
	}
	return p, nil
}

func page(next uint64, events ...string) wire.TelemetryPage {
	var p wire.TelemetryPage
	for i, e := range events {
		p.Records = append(p.Records, wire.TelemetryRecord{Seq: next - uint64(len(events)-1-i), Tenant: "acme", At: t0, Event: json.RawMessage(e)})
	}
	p.NextAfter = next
	return p
}

const id = "0f8fad5b-d9cb-469f-a165-70867728950e"

func TestWaitOutcomes(t *testing.T) {
	other := `{"event":"snavio.command.delivered","command_id":"11111111-d9cb-469f-a165-70867728950e","source":"acme/billing","target":"mailer","command_name":"send","timestamp":"t","path":"fast","dispatch_latency_ms":1}`
	esc := `{"event":"snavio.dispatch.escalated","command_id":"` + id + `","source":"acme/billing","target":"mailer","command_name":"send","reason":"cache_miss"}`
	for _, c := range []struct {
		name   string
		event  string
		want   string
		code   int
		reason string
		msg    []string
	}{
		{"delivered", `{"event":"snavio.command.delivered","command_id":"` + id + `","source":"acme/billing","target":"mailer","command_name":"send","timestamp":"t","path":"slow","dispatch_latency_ms":3}`, OutcomeDelivered, cmdutil.ExitOK, "", nil},
		{"invalid", `{"event":"snavio.command.invalid","command_id":"` + id + `","reason":"bad_signature"}`, OutcomeInvalid, cmdutil.ExitInvalid, "bad_signature", []string{"signature does not match"}},
		{"rate limited", `{"event":"snavio.command.failed","command_id":"` + id + `","reason":"rate-limit-exceeded","quota":"source-quota","retry_after_ms":1500,"throttle_until":"2026-11-21T12:00:02Z"}`, OutcomeFailed, cmdutil.ExitFailed, "rate-limit-exceeded: source-quota", []string{"retry after 1.5s (retry_after_ms 1500)", "throttle_until 2026-11-21T12:00:02Z"}},
		{"acl", `{"event":"snavio.command.failed","command_id":"` + id + `","reason":"acl-deny"}`, OutcomeFailed, cmdutil.ExitFailed, "acl-deny", []string{"snavio acl grant"}},
		{"duplicate", `{"event":"snavio.command.duplicate","command_id":"` + id + `","source":"acme/billing","target":"mailer","command_name":"send","timestamp":"t","dedupe_mode":"strict"}`, OutcomeDuplicate, cmdutil.ExitDuplicate, "", []string{"duplicate"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			api := &fakeAPI{now: t0, pages: []wire.TelemetryPage{page(4, other, esc), page(4), page(5, c.event)}}
			var notes []string
			o, err := Wait(context.Background(), api, "acme", id, Cursor{Since: t0}, 30*time.Second, func() time.Time { return api.now }, func(n string, _ json.RawMessage) { notes = append(notes, n) })
			if err != nil {
				t.Fatal(err)
			}
			if o.Outcome != c.want || o.Reason != c.reason {
				t.Fatalf("outcome %+v, want %s %q", o, c.want, c.reason)
			}
			if len(notes) != 1 || notes[0] != "snavio.dispatch.escalated" {
				t.Errorf("notes = %v", notes)
			}
			if q := api.queries[0]; q.Get("since") != t0.Format(time.RFC3339Nano) || q.Get("tenant") != "acme" || q.Has("after") {
				t.Errorf("first read %v", q)
			}
			if q := api.queries[1]; q.Get("after") != "4" || q.Has("since") {
				t.Errorf("second read %v", q)
			}
			err = OutcomeError(id, o)
			if got := cmdutil.ExitCode(err); got != c.code {
				t.Fatalf("exit %d, want %d (%v)", got, c.code, err)
			}
			for _, m := range c.msg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("%q lacks %q", err, m)
				}
			}
		})
	}
}

func TestWaitTimesOut(t *testing.T) {
	api := &fakeAPI{now: t0}
	o, err := Wait(context.Background(), api, "acme", id, Cursor{Since: t0}, 12*time.Second, func() time.Time { return api.now }, nil)
	if err != nil || o.Outcome != OutcomeTimeout {
		t.Fatalf("%+v %v", o, err)
	}
	// 5s + 5s + 2s: each long poll bounded by what is left.
	if len(api.queries) != 3 || api.queries[2].Get("wait") != "2s" {
		t.Fatalf("reads %v", api.queries)
	}
	err = OutcomeError(id, Outcome{Outcome: OutcomeTimeout, Waited: "12s"})
	if cmdutil.ExitCode(err) != cmdutil.ExitTimeout || !strings.Contains(err.Error(), "within 12s") {
		t.Fatalf("%v", err)
	}
}

func TestWaitErrors(t *testing.T) {
	api := &fakeAPI{now: t0, err: &platform.APIError{Status: 403, Message: "no"}}
	if _, err := Wait(context.Background(), api, "acme", id, Cursor{Since: t0}, time.Second, func() time.Time { return api.now }, nil); platform.StatusOf(err) != 403 {
		t.Fatalf("err = %v", err)
	}
	api = &fakeAPI{now: t0, pages: []wire.TelemetryPage{page(1, `[1]`)}}
	if _, err := Wait(context.Background(), api, "acme", id, Cursor{Since: t0}, time.Second, func() time.Time { return api.now }, nil); err == nil || !strings.Contains(err.Error(), "record 1 of tenant acme") {
		t.Fatalf("err = %v", err)
	}
	if _, err := StartCursor(context.Background(), &fakeAPI{}, "acme"); err == nil || !strings.Contains(err.Error(), "server_time") {
		t.Fatalf("zero server time: %v", err)
	}
	c, err := StartCursor(context.Background(), &fakeAPI{now: t0}, "acme")
	if err != nil || !c.Since.Equal(t0) {
		t.Fatalf("cursor %v %v", c, err)
	}
}

func TestExitCodesAreDistinct(t *testing.T) {
	codes := map[int]string{}
	for name, c := range map[string]int{"ok": cmdutil.ExitOK, "error": cmdutil.ExitError, "usage": cmdutil.ExitUsage, "changes": cmdutil.ExitChanges,
		"invalid": cmdutil.ExitInvalid, "failed": cmdutil.ExitFailed, "duplicate": cmdutil.ExitDuplicate, "timeout": cmdutil.ExitTimeout, "not accepted": cmdutil.ExitNotAccepted} {
		if other, dup := codes[c]; dup {
			t.Errorf("exit %d is both %s and %s", c, name, other)
		}
		codes[c] = name
	}
	if err := OutcomeError(id, Outcome{Outcome: "weird"}); cmdutil.ExitCode(err) != cmdutil.ExitError {
		t.Errorf("unknown outcome: %v", err)
	}
	if !errors.Is(OutcomeError(id, Outcome{Outcome: OutcomeDelivered}), nil) {
		t.Error("delivered is an error")
	}
}
