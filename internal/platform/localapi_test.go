package platform

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// A replay's NDJSON answer: updates in order, then io.EOF; a line that is
// not an update is an error of its own (not a lost connection); a refusal
// is an *APIError before any update.
func TestReplayStream(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case pathReplays:
			_, _ = io.WriteString(w, `{"event":"started","replay":{"id":"r1","status":"running"}}`+"\n"+`{"event":"finished","replay":{"id":"r1","status":"done"}}`+"\n")
		case pathReplays + "/bad/resume":
			_, _ = io.WriteString(w, "not json\n")
		default:
			w.WriteHeader(http.StatusConflict)
			_, _ = io.WriteString(w, `{"error":"replay r2 is running","fix":"wait for it"}`)
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	p := NewLocal(srv.URL, nil, nil)

	st, err := p.StartReplay(ctx, wire.ReplayRequest{From: "archive", Reason: "r"})
	if err != nil {
		t.Fatal(err)
	}
	var events []string
	for {
		u, err := st.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		events = append(events, u.Event+":"+string(u.Replay.Status))
	}
	_ = st.Close()
	if len(events) != 2 || events[0] != "started:running" || events[1] != "finished:done" {
		t.Fatalf("events %v", events)
	}

	st, err = p.ResumeReplay(ctx, "bad", wire.ReplayResumeRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var ue *UnreachableError
	if _, err := st.Next(); err == nil || errors.Is(err, io.EOF) || errors.As(err, &ue) {
		t.Fatalf("bad line: %v", err)
	}
	_ = st.Close()

	if _, err := p.ResumeReplay(ctx, "r2", wire.ReplayResumeRequest{}); StatusOf(err) != http.StatusConflict {
		t.Fatalf("refusal: %v", err)
	}
}
