package servertest

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/snavio/snavio/internal/server"
)

// principalOf runs r through h and returns what the handler behind saw.
func principalOf(h func(http.Handler) http.Handler, r *http.Request) string {
	got := "none"
	h(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		if p, ok := server.PrincipalFrom(r.Context()); ok {
			got = p.String()
		}
	})).ServeHTTP(httptest.NewRecorder(), r)
	return got
}

func TestTokens(t *testing.T) {
	for auth, want := range map[string]string{"Bearer op": "operator", "Bearer acme": "tenant:acme", "Bearer nope": "none", "": "none", "op": "none", "Basic op": "none"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		if got := principalOf(OperatorAndAcme().Handler, r); got != want {
			t.Errorf("Authorization %q: %s, want %s", auth, got, want)
		}
	}
}

func TestHeadersAndTenant(t *testing.T) {
	for hdr, want := range map[string]string{"": "operator", "X-Test-Tenant": "tenant:acme", "X-Test-None": "none"} {
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		if hdr != "" {
			r.Header.Set(hdr, "acme")
		}
		if got := principalOf(func(h http.Handler) http.Handler { return Authenticated(h, Headers) }, r); got != want {
			t.Errorf("header %q: %s, want %s", hdr, got, want)
		}
	}
	id := ""
	wrap := func(h http.Handler) http.Handler { return Authenticated(h, Tenant(&id)) }
	if got := principalOf(wrap, httptest.NewRequest(http.MethodGet, "/", nil)); got != "operator" {
		t.Errorf("empty id: %s", got)
	}
	id = "globex"
	if got := principalOf(wrap, httptest.NewRequest(http.MethodGet, "/", nil)); got != "tenant:globex" {
		t.Errorf("id globex: %s", got)
	}
}
