package controlapi_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/devserver"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// The security suite of issue 19, part 1, against a real `dispatch serve`
// (shield, node, archive, replay API over HTTP): the six archive-laundering
// variants put as victim/svc are listed as refused by a replay's plan,
// with their reasons, and a real run delivers none of them; a legitimate
// command put before two key rotations still replays after them.
//
// Entries go to the node's Ingest, the pipeline behind the ingress'
// authentication, so this holds whoever is allowed to put as victim/svc.

const (
	victim = "victim/svc"
	other  = "other/svc"
)

type serveEnv struct {
	t     *testing.T
	s     *devserver.Serve
	url   string
	token string
}

func startServe(t *testing.T) *serveEnv {
	t.Helper()
	dir := t.TempDir()
	s, err := devserver.Start(context.Background(), devserver.Options{DataDir: dir, Ephemeral: true, Listen: "127.0.0.1:0", Demo: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Shutdown(context.Background()) })
	tok, err := os.ReadFile(s.Info().OperatorToken)
	if err != nil {
		t.Fatal(err)
	}
	return &serveEnv{t: t, s: s, url: s.Info().URL, token: strings.TrimSpace(string(tok))}
}

func (e *serveEnv) post(path string, body any) *http.Response {
	e.t.Helper()
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest(http.MethodPost, e.url+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+e.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK {
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(resp.Body)
		e.t.Fatalf("POST %s: %d %s", path, resp.StatusCode, buf.String())
	}
	return resp
}

func newSecret(t *testing.T) []byte {
	b := make([]byte, signing.MinSecretLen)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func signedBy(t *testing.T, k *signing.Key, n int, at time.Time) envelope.Envelope {
	t.Helper()
	env := envelope.New(fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), at, devserver.DemoTarget, devserver.DemoCommand, []byte(fmt.Sprintf(`{"n":%d}`, n)))
	if err := k.SignEnvelope(&env, victim); err != nil {
		t.Fatal(err)
	}
	return env
}

func entry(t *testing.T, env envelope.Envelope, detailType string) server.Entry {
	t.Helper()
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	return server.Entry{Source: victim, DetailType: detailType, Detail: b, EventBusName: "default"}
}

func TestArchiveReplayRefusesForgeries(t *testing.T) {
	e := startServe(t)
	ctx := context.Background()
	now := time.Now()
	victimSecret := newSecret(t)
	by := registry.Actor{Who: "test", At: now}
	acl := registry.ACL{Source: victim, Target: devserver.DemoTarget, Command: devserver.DemoCommand, Allow: true, Profile: registry.ProfileModerate}
	for _, it := range []registry.Item{
		{Key: &registry.ServiceKey{Source: victim, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: victimSecret, ActivatedAt: now.Add(-time.Hour)}}}},
		{Key: &registry.ServiceKey{Source: other, Versions: []registry.KeyVersion{{ID: "hmac-v1", Secret: newSecret(t), ActivatedAt: now.Add(-time.Hour)}}}},
		{ACL: &acl},
	} {
		if _, err := e.s.Registry().Put(ctx, by, it); err != nil {
			t.Fatal(err)
		}
	}
	victimKey, _ := signing.NewKey("hmac-v1", victimSecret)
	it, err := e.s.Registry().Get(ctx, registry.KeyID(other), now)
	if err != nil {
		t.Fatal(err)
	}
	otherKey, _ := signing.NewKey("hmac-v1", it.Key.Versions[0].Secret)
	unknownVersion, _ := signing.NewKey("hmac-v9", victimSecret)

	legit := signedBy(t, victimKey, 1, now)
	randomHMAC := signedBy(t, victimKey, 2, now)
	sig := make([]byte, 32)
	_, _ = rand.Read(sig)
	randomHMAC.Metadata.HMAC = hex.EncodeToString(sig) // well-formed, random
	smuggled := signedBy(t, victimKey, 6, now)
	smuggled.Command.Source = victim
	entries := []server.Entry{
		entry(t, legit, envelope.EventType),
		entry(t, randomHMAC, envelope.EventType),
		entry(t, signedBy(t, otherKey, 3, now), envelope.EventType),
		entry(t, signedBy(t, victimKey, 4, now.Add(-time.Hour)), envelope.EventType),
		entry(t, signedBy(t, unknownVersion, 5, now), envelope.EventType),
		entry(t, smuggled, envelope.EventType),
		entry(t, signedBy(t, victimKey, 7, now), "snavio.command-other"),
	}
	for i, r := range e.s.Node().Ingest(ctx, entries) {
		if r.EventID == "" {
			t.Fatalf("entry %d: %+v (the bus accepts it; the dispatcher refuses it)", i, r)
		}
	}

	// Two rotations: the legitimate command's hmac-v1 is no longer
	// accepted live, but stays in the key history.
	rotated := time.Now()
	for i := range 2 {
		resp := e.post("/v1/keys/rotate", wire.KeyRequest{Source: victim, ActivateAt: rotated.Add(time.Duration(i) * time.Microsecond)})
		var kr wire.KeyResult
		if err := json.NewDecoder(resp.Body).Decode(&kr); err != nil {
			t.Fatal(err)
		}
	}

	req := wire.ReplayRequest{From: "archive", Start: now.Add(-10 * time.Minute), Source: victim, Reason: "issue 19 forgery suite"}
	var pr wire.ReplayPlanResponse
	if err := json.NewDecoder(e.post("/v1/replays/plan", req).Body).Decode(&pr); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{
		"shield:bad_signature":          2, // random HMAC; another tenant's key
		"shield:timestamp_too_old":      1,
		"shield:unknown_key_version":    1,
		"shield:command_source_present": 1,
		replay.RefuseNotCommand:         1,
	}
	if pr.Plan.Total != 1 || pr.Plan.Refused != 6 || fmt.Sprint(pr.Plan.RefusedBy) != fmt.Sprint(want) {
		t.Fatalf("plan: total %d, refused %d %v; want 1, 6 %v", pr.Plan.Total, pr.Plan.Refused, pr.Plan.RefusedBy, want)
	}

	var fin wire.ReplayUpdate
	sc := bufio.NewScanner(e.post("/v1/replays", req).Body)
	for sc.Scan() {
		if err := json.Unmarshal(sc.Bytes(), &fin); err != nil {
			t.Fatalf("update %q: %v", sc.Text(), err)
		}
	}
	a := fin.Replay
	if fin.Event != wire.ReplayEventFinished || a.Status != wire.ReplayDone || a.SentCount != 1 || a.Refused != 6 || fmt.Sprint(a.RefusedBy) != fmt.Sprint(want) {
		t.Fatalf("run: %+v", fin)
	}

	// The queue holds the legitimate command twice (its delivery and its
	// replay, re-signed with the current key) and nothing else.
	got, err := e.s.Store().Receive(ctx, devserver.DemoQueue, 10, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	replayed := 0
	for _, m := range got {
		var d envelope.Envelope
		if err := json.Unmarshal(m.Body, &d); err != nil {
			t.Fatalf("delivered body %s: %v", m.Body, err)
		}
		if d.Metadata.ID != legit.Metadata.ID {
			t.Fatalf("a forgery was delivered: %s", m.Body)
		}
		if d.Metadata.Replay {
			replayed++
			if d.Metadata.VersionID != "hmac-v3" {
				t.Fatalf("the replay was signed with %s, want the current hmac-v3", d.Metadata.VersionID)
			}
		}
	}
	if len(got) != 2 || replayed != 1 {
		t.Fatalf("queue holds %d message(s), %d replayed; want the command and its replay", len(got), replayed)
	}
}
