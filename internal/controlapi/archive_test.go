package controlapi

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

func archiveSetup(t *testing.T, n int) *http.ServeMux {
	t.Helper()
	st, err := embedded.Open(embedded.Options{Ephemeral: true, Clock: clock.NewFake(t0)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	for i := range n {
		target := "mailer"
		if i%2 == 1 {
			target = "accounts"
		}
		detail := fmt.Sprintf(`{"metadata":{"id":"x%d"},"command":{"target":%q,"name":"send","payload":{}}}`, i, target)
		if err := st.ArchiveAppend(context.Background(), embedded.ArchivedEvent{
			EventID: fmt.Sprintf("ev-%03d", i), Source: "acme/billing", DetailType: "snavio.command-sent",
			Detail: []byte(detail), ReceivedAt: t0.Add(time.Duration(i) * time.Minute),
		}); err != nil {
			t.Fatal(err)
		}
	}
	a, err := NewArchiveAPI(ArchiveOptions{Archive: st})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Register(mux)
	return mux
}

func archiveGet(t *testing.T, mux *http.ServeMux, p server.Principal, query string) (*httptest.ResponseRecorder, ArchivePage) {
	t.Helper()
	req := httptest.NewRequest("GET", "/v1/archive?"+query, nil)
	req = req.WithContext(server.WithPrincipal(req.Context(), p))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, req)
	var pg ArchivePage
	if w.Code == http.StatusOK {
		if err := json.Unmarshal(w.Body.Bytes(), &pg); err != nil {
			t.Fatalf("answer %s: %v", w.Body, err)
		}
	}
	return w, pg
}

func TestQueryPagesAndFilters(t *testing.T) {
	mux := archiveSetup(t, 10)
	op := server.OperatorPrincipal()
	q := url.Values{"from": {t0.Add(2 * time.Minute).Format(time.RFC3339)}, "to": {t0.Add(8 * time.Minute).Format(time.RFC3339)}, "limit": {"4"}}
	w, pg := archiveGet(t, mux, op, q.Encode())
	if w.Code != 200 || len(pg.Events) != 4 || pg.Events[0].ID != "ev-002" || pg.NextPageToken == "" {
		t.Fatalf("page 1 = %d %s", w.Code, w.Body)
	}
	if pg.Events[0].Target != "mailer" || !strings.Contains(string(pg.Events[0].Detail), `"command"`) {
		t.Fatalf("event = %+v", pg.Events[0])
	}
	q.Set("page_token", pg.NextPageToken)
	_, pg = archiveGet(t, mux, op, q.Encode())
	if len(pg.Events) != 2 || pg.Events[1].ID != "ev-007" || pg.NextPageToken != "" {
		t.Fatalf("page 2 = %+v", pg)
	}
	_, pg = archiveGet(t, mux, op, "target=accounts")
	if len(pg.Events) != 5 {
		t.Fatalf("filtered = %+v", pg)
	}
}

func TestArchiveBadQueries(t *testing.T) {
	mux := archiveSetup(t, 1)
	op := server.OperatorPrincipal()
	for q, want := range map[string]string{
		"from=yesterday": "not an RFC 3339 time",
		"from=2026-11-21T12:00:00Z&to=2026-11-21T11:00:00Z": "is not after",
		"limit=0":                                "limit",
		"limit=1001":                             "limit",
		"limit=ten":                              "limit",
		"frm=x":                                  "unknown query parameter",
		"source=nobody":                          "source=",
		"target=Bad":                             "target=",
		"command=a%20b":                          "command=",
		"limit=1&limit=2":                        "given 2 times",
		"page_token=bogus":                       "page token",
		"from=1900-01-01T00:00:00Z":              "out of range",
		"page_token=" + strings.Repeat("a", 200): "longer than",
	} {
		w, _ := archiveGet(t, mux, op, q)
		if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), want) || !strings.Contains(w.Body.String(), `"fix"`) {
			t.Errorf("%s: %d %s, want 400 with %q", q, w.Code, w.Body, want)
		}
	}
	if w, _ := archiveGet(t, mux, server.TenantPrincipal("acme"), ""); w.Code != http.StatusForbidden {
		t.Errorf("a tenant read the archive: %d", w.Code)
	}
}

func FuzzParseArchiveQuery(f *testing.F) {
	for _, s := range []string{"from=2026-11-21T12:00:00Z&to=2026-11-21T13:00:00Z&limit=10", "source=acme/billing&target=mailer&command=send", "page_token=a1.AAAA", "limit=-1", "to=2026-11-21T12:00:00.5%2B01:00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := ParseArchiveQuery(v)
		if err != nil {
			return
		}
		if q.Limit < 0 || q.Limit > embedded.MaxArchivePage {
			t.Fatalf("limit %d accepted", q.Limit)
		}
		if !q.To.IsZero() && !q.To.After(q.From) {
			t.Fatalf("empty range accepted: %v..%v", q.From, q.To)
		}
		if len(q.PageToken) > maxTokenLen {
			t.Fatal("long token accepted")
		}
	})
}
