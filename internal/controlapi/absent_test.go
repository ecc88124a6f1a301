package controlapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
)

func everyAbsent() map[Resource]Absence {
	out := map[Resource]Absence{}
	for _, r := range Resources {
		out[r] = Absence{Code: CodeNotOnAWS, Why: string(r) + " is not served here", Instead: "use " + string(r) + " elsewhere"}
	}
	return out
}

// TestLeftOutResourcesAnswer501: a handler with every resource left out
// still routes every endpoint of every resource (the same patterns as a
// full handler), each answering an authenticated caller 501 with the
// resource's code and words, and an unauthenticated one 401.
func TestLeftOutResourcesAnswer501(t *testing.T) {
	h, err := New(Config{LeftOut: everyAbsent()})
	if err != nil {
		t.Fatal(err)
	}
	if got := h.LeftOut(); !slices.Equal(got, Resources) {
		t.Errorf("LeftOut() = %v, want %v", got, Resources)
	}
	var full, routed []string
	for _, e := range allEndpoints(t) {
		if e.pattern != "GET /v1/alerts" && e.pattern != "GET /v1/serve/stats" {
			full = append(full, e.pattern)
		}
	}
	eps := h.endpoints()
	for _, e := range eps {
		routed = append(routed, e.pattern)
	}
	slices.Sort(full)
	slices.Sort(routed)
	if !slices.Equal(full, routed) {
		t.Fatalf("routes with every resource left out:\n%v\nwant every route:\n%v", routed, full)
	}
	for _, e := range eps {
		method, path, _ := strings.Cut(e.pattern, " ")
		path = strings.NewReplacer("{", "", "}", "").Replace(path)
		if path == "/v1/openapi.json" || path == "/v1/whoami" {
			continue
		}
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, httptest.NewRequest(method, path, nil))
		if w.Code != http.StatusUnauthorized {
			t.Errorf("%s without a principal: %d, want 401 first", e.pattern, w.Code)
		}
		r := httptest.NewRequest(method, path, nil)
		r = r.WithContext(server.WithPrincipal(r.Context(), server.TenantPrincipal("acme")))
		w = httptest.NewRecorder()
		h.ServeHTTP(w, r)
		var env server.APIError
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || w.Code != http.StatusNotImplemented || env.Code != CodeNotOnAWS ||
			!strings.HasSuffix(env.Error, "is not served here") || !strings.HasPrefix(env.Fix, "use ") {
			t.Errorf("%s: %d %s; want 501 with code %s", e.pattern, w.Code, w.Body, CodeNotOnAWS)
		}
	}
}

// TestLeftOutIsDescribed: the served description marks each operation of
// a left-out resource with what it answers, and no other.
func TestLeftOutIsDescribed(t *testing.T) {
	h := &Handler{leftOut: map[Resource]Absence{ResourceTokens: everyAbsent()[ResourceTokens]}}
	w := httptest.NewRecorder()
	if err := h.openAPI(w, nil, server.OperatorPrincipal()); err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &d); err != nil {
		t.Fatal(err)
	}
	marked := 0
	for path, ops := range d.Paths {
		for method, op := range ops {
			lo, ok := op["x-snavio-left-out"].(map[string]any)
			if ok != strings.HasPrefix(path, "/v1/tokens") {
				t.Errorf("%s %s: x-snavio-left-out %v", method, path, op["x-snavio-left-out"])
			}
			if ok {
				marked++
				if lo["code"] != CodeNotOnAWS || lo["fix"] != "use tokens elsewhere" {
					t.Errorf("%s %s: %v", method, path, lo)
				}
			}
		}
	}
	if marked != 3 {
		t.Errorf("%d operations marked, want the 3 of tokens", marked)
	}
}

// TestLeftOutIsChecked: a host cannot leave out an unknown resource, give
// an absence without words, or leave out a resource it also configured.
func TestLeftOutIsChecked(t *testing.T) {
	for name, c := range map[string]Config{
		"unknown":    {LeftOut: map[Resource]Absence{"bogus": {Code: "x", Why: "y", Instead: "z"}}},
		"no words":   {LeftOut: map[Resource]Absence{ResourceTokens: {Code: CodeNotOnAWS}}},
		"configured": {LeftOut: map[Resource]Absence{ResourceExplain: everyAbsent()[ResourceExplain]}, Explain: ExplainOptions{Dispatcher: &fakeExplainer{}}},
	} {
		if _, err := New(c); err == nil || !strings.Contains(err.Error(), "LeftOut") {
			t.Errorf("%s: New = %v, want a LeftOut error", name, err)
		}
	}
}
