package controlapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

func newAPI(t *testing.T) (*http.ServeMux, *server.FileCredentialStore) {
	t.Helper()
	st, err := server.OpenFileCredentialStore(filepath.Join(t.TempDir(), server.IngressCredentialsFile), clock.System())
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewCredentialAPI(CredentialOptions{Credentials: st, MaxCredentials: 3})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	a.Register(mux)
	return mux, st
}

func credentialCall(mux *http.ServeMux, p server.Principal, method, path, body string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(method, path, strings.NewReader(body))
	r = r.WithContext(server.WithPrincipal(r.Context(), p))
	w := httptest.NewRecorder()
	mux.ServeHTTP(w, r)
	return w
}

func TestCredentialAPIWhoMayDoWhat(t *testing.T) {
	mux, st := newAPI(t)
	op, acme, globex := server.OperatorPrincipal(), server.TenantPrincipal("acme"), server.TenantPrincipal("globex")

	w := credentialCall(mux, op, "POST", "/v1/credentials", `{"tenant":"acme"}`)
	var c wire.CredentialCreated
	if w.Code != 201 || json.Unmarshal(w.Body.Bytes(), &c) != nil || c.SecretAccessKey == "" || c.Tenant != "acme" || !server.ValidAccessKeyID(c.AccessKeyID) {
		t.Fatalf("operator create: %d %s", w.Code, w.Body)
	}
	if w := credentialCall(mux, acme, "POST", "/v1/credentials", `{"tenant":"acme"}`); w.Code != 201 {
		t.Fatalf("tenant creates its own: %d %s", w.Code, w.Body)
	}
	if w := credentialCall(mux, globex, "POST", "/v1/credentials", `{"tenant":"acme"}`); w.Code != 403 {
		t.Fatalf("another tenant creates: %d %s", w.Code, w.Body)
	}
	if w := credentialCall(mux, globex, "GET", "/v1/credentials?tenant=acme", ""); w.Code != 403 {
		t.Fatalf("another tenant lists: %d %s", w.Code, w.Body)
	}
	w = credentialCall(mux, acme, "GET", "/v1/credentials", "")
	if w.Code != 200 || strings.Count(w.Body.String(), `"tenant":"acme"`) != 2 || strings.Contains(w.Body.String(), "secret") {
		t.Fatalf("tenant list: %d %s", w.Code, w.Body)
	}
	if w := credentialCall(mux, globex, "DELETE", "/v1/credentials/"+c.AccessKeyID, ""); w.Code != 403 {
		t.Fatalf("another tenant revokes: %d %s", w.Code, w.Body)
	}
	if w := credentialCall(mux, acme, "DELETE", "/v1/credentials/"+c.AccessKeyID, ""); w.Code != 200 || !strings.Contains(w.Body.String(), `"revoked":true`) {
		t.Fatalf("tenant revokes its own: %d %s", w.Code, w.Body)
	}
	if _, _, ok := st.Lookup(c.AccessKeyID); ok {
		t.Fatal("revoked credential still resolves")
	}
	if w := credentialCall(mux, op, "DELETE", "/v1/credentials/"+c.AccessKeyID, ""); w.Code != 404 {
		t.Fatalf("revoke twice: %d %s", w.Code, w.Body)
	}
	for body, want := range map[string]string{``: "empty", `{"tenant":"a/b"}`: "not a tenant id", `{"tenant":"a","x":1}`: "unknown field", `{"tenant":"a"}{}`: "more than one"} {
		if w := credentialCall(mux, op, "POST", "/v1/credentials", body); w.Code != 400 || !strings.Contains(w.Body.String(), want) {
			t.Fatalf("POST %q: %d %s", body, w.Code, w.Body)
		}
	}
	if w := credentialCall(mux, op, "DELETE", "/v1/credentials/nope", ""); w.Code != 400 {
		t.Fatalf("bad id: %d", w.Code)
	}
	credentialCall(mux, op, "POST", "/v1/credentials", `{"tenant":"b"}`)
	credentialCall(mux, op, "POST", "/v1/credentials", `{"tenant":"c"}`)
	if w := credentialCall(mux, op, "POST", "/v1/credentials", `{"tenant":"d"}`); w.Code != 409 {
		t.Fatalf("over the limit: %d %s", w.Code, w.Body)
	}
}

// FuzzDecodeCreateRequest: the create body decoder never panics and
// accepts only a valid tenant id.
func FuzzDecodeCreateRequest(f *testing.F) {
	f.Add([]byte(`{"tenant":"acme"}`))
	f.Add([]byte(`{"tenant":"acme/x"}`))
	f.Add([]byte(`{"tenant":"a"} {}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		req, err := DecodeCreateRequest(b)
		if err == nil && !envelope.ValidTenant(req.Tenant) {
			t.Fatalf("accepted tenant %q", req.Tenant)
		}
	})
}
