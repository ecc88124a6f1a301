package controlapi

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/trace"
)

type fakeExplainer struct{ source, detail string }

func (f *fakeExplainer) Explain(_ context.Context, source string, detail []byte) dispatch.Trace {
	f.source, f.detail = source, string(detail)
	return dispatch.Trace{Source: source, Outcome: dispatch.Delivered, Steps: []trace.Step{{Stage: trace.Shield, Check: "hmac", Result: trace.Pass}}}
}

func serve(t *testing.T, p *server.Principal, body string) (*httptest.ResponseRecorder, *fakeExplainer) {
	t.Helper()
	fe := &fakeExplainer{}
	a, err := NewExplainAPI(ExplainOptions{Dispatcher: fe})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Register(mux)
	req := httptest.NewRequest("POST", "/v1/explain", strings.NewReader(body))
	if p != nil {
		req = req.WithContext(server.WithPrincipal(req.Context(), *p))
	}
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	return rec, fe
}

func TestExplainAccess(t *testing.T) {
	op, acme, other := server.OperatorPrincipal(), server.TenantPrincipal("acme"), server.TenantPrincipal("globex")
	const body = `{"source":"acme/billing","detail":"{\"metadata\":{}}"}`
	for _, tc := range []struct {
		name string
		p    *server.Principal
		want int
	}{
		{"operator", &op, 200},
		{"own tenant", &acme, 200},
		{"other tenant", &other, 403},
		{"unauthenticated", nil, 401},
	} {
		rec, fe := serve(t, tc.p, body)
		if rec.Code != tc.want {
			t.Errorf("%s: status %d, want %d: %s", tc.name, rec.Code, tc.want, rec.Body)
			continue
		}
		if tc.want != 200 {
			if fe.source != "" {
				t.Errorf("%s: explained although refused", tc.name)
			}
			continue
		}
		var tr dispatch.Trace
		if err := json.Unmarshal(rec.Body.Bytes(), &tr); err != nil || tr.Outcome != dispatch.Delivered || len(tr.Steps) != 1 {
			t.Errorf("%s: trace %s (%v)", tc.name, rec.Body, err)
		}
		if fe.source != "acme/billing" || fe.detail != `{"metadata":{}}` {
			t.Errorf("%s: explainer got %q %q", tc.name, fe.source, fe.detail)
		}
	}
}

func TestExplainBadRequests(t *testing.T) {
	op := server.OperatorPrincipal()
	tooLarge := `{"source":"acme/billing","detail":"` + strings.Repeat("x", maxExplainBody) + `"}`
	for _, body := range []string{
		``,
		`{`,
		`{"source":"acme/billing","detail":"x","extra":1}`,
		`{"source":"nobody","detail":"x"}`,
		`{"source":"acme/billing","detail":""}`,
		`{"source":"acme/billing","detail":"x"} {}`,
		tooLarge,
	} {
		want := http.StatusBadRequest
		if body == tooLarge {
			want = http.StatusRequestEntityTooLarge // as every endpoint answers a body over its bound
		}
		rec, fe := serve(t, &op, body)
		if rec.Code != want || fe.source != "" {
			t.Errorf("%.60q: status %d (explained %v), want %d", body, rec.Code, fe.source != "", want)
		}
		var e server.APIError
		if err := json.Unmarshal(rec.Body.Bytes(), &e); err != nil || e.Error == "" || e.Fix == "" {
			t.Errorf("%.60q: error body %s", body, rec.Body)
		}
	}
}
