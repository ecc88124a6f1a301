package controlapi

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// memReplayerAudits stands in for awsstore.ReplayAudits (tested on
// DynamoDB Local in internal/store/awsstore and internal/platform): the
// audits and who holds each, without expiry.
type memReplayerAudits struct {
	mu     sync.Mutex
	audits map[string]wire.ReplayAudit
	runner map[string]string
}

func (m *memReplayerAudits) List(context.Context) ([]wire.ReplayAudit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []wire.ReplayAudit
	for _, a := range m.audits {
		out = append(out, a)
	}
	return out, nil
}

func (m *memReplayerAudits) Get(_ context.Context, id string) (wire.ReplayAudit, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a, ok := m.audits[id]
	if !ok {
		return a, replay.ErrNotFound
	}
	return a, nil
}

func (m *memReplayerAudits) Claimed(ctx context.Context, id, runner string) (wire.ReplayAudit, error) {
	a, err := m.Get(ctx, id)
	if err == nil && m.runner[id] != runner {
		err = replay.ErrNotClaimed
	}
	return a, err
}

func (m *memReplayerAudits) Create(_ context.Context, a wire.ReplayAudit, c wire.ReplayClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.audits[a.ID], m.runner[a.ID] = a, c.Runner
	return nil
}

func (m *memReplayerAudits) Write(_ context.Context, a wire.ReplayAudit, from int, c wire.ReplayClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.runner[a.ID] != c.Runner {
		return replay.ErrRunning
	}
	m.audits[a.ID] = a
	return nil
}

func (m *memReplayerAudits) Claim(_ context.Context, id string, c wire.ReplayClaim) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.runner[id] = c.Runner
	return nil
}

const testRunner = "3b241101-e2bb-4255-8caf-4136c566a962"

func replayerHandler(t testing.TB) (http.Handler, *memReplayerAudits) {
	t.Helper()
	master, err := provenance.NewSigner(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		t.Fatal(err)
	}
	audits := &memReplayerAudits{audits: map[string]wire.ReplayAudit{}, runner: map[string]string{}}
	a, err := NewReplayerAPI(ReplayerOptions{Audits: audits, Registry: memstore.NewRegistry(), Delivery: master, Clock: clock.NewFake(time.Date(2026, 11, 26, 3, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	register(mux, (&Handler{Replayer: a}).endpoints())
	return mux, audits
}

func callAs(h http.Handler, p server.Principal, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r = r.WithContext(server.WithPrincipal(r.Context(), p))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestReplayerRefusesBadInput: every malformed request is a 400 naming
// the field, a tenant gets 403, a replayer without the claim 409, and
// the local server leaves the resource out with its own code.
func TestReplayerRefusesBadInput(t *testing.T) {
	h, _ := replayerHandler(t)
	op := server.OperatorPrincipal()
	const id = "7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3a"
	audit := `{"id":"` + id + `","origin":"archive","reason":"r","dedupe":"keep-id","status":"running","started_at":"2026-11-26T03:00:00Z"}`
	good := `{"runner":"` + testRunner + `","claim_seconds":300,"audit":` + audit + `}`
	if w := callAs(h, op, "POST", "/v1/replayer/audits", good); w.Code != http.StatusNoContent {
		t.Fatalf("create: %d %s", w.Code, w.Body)
	}
	for name, c := range map[string]struct{ method, path, body, want string }{
		"runner not a UUID": {"PUT", "/v1/replayer/audits/" + id, strings.Replace(good, testRunner, "me", 1), "replayer id"},
		"no claim":          {"PUT", "/v1/replayer/audits/" + id, strings.Replace(good, `"claim_seconds":300`, `"claim_seconds":0`, 1), "claim_seconds"},
		"claim too long":    {"POST", "/v1/replayer/audits/" + id + "/claim", `{"runner":"` + testRunner + `","claim_seconds":86400}`, "claim_seconds"},
		"sent_from":         {"PUT", "/v1/replayer/audits/" + id, strings.Replace(good, `"audit"`, `"sent_from":10,"audit"`, 1), "sent_from"},
		"other id":          {"PUT", "/v1/replayer/audits/7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3b", good, "the path"},
		"bad status":        {"PUT", "/v1/replayer/audits/" + id, strings.Replace(good, `"running"`, `"gone"`, 1), "status"},
		"bad origin":        {"POST", "/v1/replayer/audits", strings.Replace(good, `"archive"`, `"s3:x"`, 1), "--from"},
		"no reason":         {"POST", "/v1/replayer/audits", strings.Replace(good, `"reason":"r"`, `"reason":""`, 1), "reason"},
		"bad path id":       {"GET", "/v1/replayer/audits/..x", "", "invalid replay id"},
		"no records":        {"POST", "/v1/replayer/sign", `{"replay_id":"` + id + `","runner":"` + testRunner + `","records":[]}`, "records"},
		"too many records":  {"POST", "/v1/replayer/archive/verify", `{"records":[` + strings.Repeat(`{"detail":"{}"},`, 10) + `{"detail":"{}"}]}`, "records"},
		"not JSON":          {"POST", "/v1/replayer/sign", `{`, ""},
		"unknown field":     {"POST", "/v1/replayer/sign", `{"replay_id":"` + id + `","signer":"x"}`, ""},
	} {
		w := callAs(h, op, c.method, c.path, c.body)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), c.want) {
			t.Errorf("%s: %d %s, want 400 naming %q", name, w.Code, w.Body, c.want)
		}
	}
	record := `{"source":"demo/app","detail_type":"Command","detail":"{}"}`
	if w := callAs(h, op, "POST", "/v1/replayer/sign", `{"replay_id":"`+id+`","runner":"0f8fad5b-d9cb-469f-a165-70867728950e","records":[`+record+`]}`); w.Code != http.StatusConflict {
		t.Errorf("sign without the claim: %d %s, want 409", w.Code, w.Body)
	}
	if w := callAs(h, server.TenantPrincipal("acme"), "GET", "/v1/replayer/audits", ""); w.Code != http.StatusForbidden {
		t.Errorf("a tenant: %d, want 403", w.Code)
	}
	left := everyAbsent()
	left[ResourceReplayer] = ReplayerInServer
	local, err := New(Config{LeftOut: left})
	if err != nil {
		t.Fatal(err)
	}
	w := callAs(local, op, "POST", "/v1/replayer/sign", "{}")
	if w.Code != http.StatusNotImplemented || !strings.Contains(w.Body.String(), "runs_in_server") {
		t.Errorf("the local server: %d %s, want 501 runs_in_server", w.Code, w.Body)
	}
}

// FuzzReplayerRequests: no body makes a replayer endpoint fail with a
// 5xx or panic; each answer is a 2xx or a 4xx.
func FuzzReplayerRequests(f *testing.F) {
	const id = "7d444840-9dc0-41d3-a8a1-6f3e4b1d2c3a"
	f.Add(0, `{"runner":"`+testRunner+`","claim_seconds":300,"audit":{"id":"`+id+`","origin":"archive","reason":"r","dedupe":"keep-id","status":"running","started_at":"2026-11-26T03:00:00Z"}}`)
	f.Add(1, `{"runner":"`+testRunner+`","claim_seconds":300,"sent_from":1000,"audit":{"id":"`+id+`","origin":"dlq:q","reason":"r","status":"done","sent_ids":["x"]}}`)
	f.Add(2, `{"records":[{"source":"demo/app","detail_type":"Command","detail":"{\"command\":{}}","received_at":"2026-11-26T03:00:00Z"}]}`)
	f.Add(3, `{"replay_id":"`+id+`","runner":"`+testRunner+`","queue_arn":"arn:aws:sqs:us-east-1:1:q","records":[{"source":"demo/app","detail":"{}","attributes":{"snavio_sig":"x"}}]}`)
	f.Add(4, `{"runner":"`+testRunner+`","claim_seconds":5}`)
	f.Fuzz(func(t *testing.T, which int, body string) {
		h, audits := replayerHandler(t)
		audits.audits[id] = wire.ReplayAudit{ID: id, Origin: "archive", Reason: "r", Status: wire.ReplayRunning}
		audits.runner[id] = testRunner
		eps := []struct{ method, path string }{
			{"POST", "/v1/replayer/audits"}, {"PUT", "/v1/replayer/audits/" + id}, {"POST", "/v1/replayer/archive/verify"},
			{"POST", "/v1/replayer/sign"}, {"POST", "/v1/replayer/audits/" + id + "/claim"},
		}
		ep := eps[(which%len(eps)+len(eps))%len(eps)]
		w := callAs(h, server.OperatorPrincipal(), ep.method, ep.path, body)
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", ep.method, ep.path, body, w.Code, w.Body)
		}
	})
}
