package controlapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/server/servertest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

type tokenFixture struct {
	store *server.FileTokenStore
	clk   *clock.Fake
	srv   *httptest.Server
}

// newTokenFixture serves the API over a real FileTokenStore. A stand-in for the
// server's authentication: X-Test-Tenant names a tenant principal,
// X-Test-None sends none, else the operator.
func newTokenFixture(t *testing.T, tweak func(*TokenOptions)) *tokenFixture {
	t.Helper()
	fx := &tokenFixture{clk: clock.NewFake(t0)}
	var err error
	fx.store, err = server.OpenFileTokenStore(filepath.Join(t.TempDir(), server.TenantTokensFile), fx.clk)
	if err != nil {
		t.Fatal(err)
	}
	o := TokenOptions{Tokens: fx.store}
	if tweak != nil {
		tweak(&o)
	}
	api, err := NewTokenAPI(o)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	api.Register(mux)
	fx.srv = httptest.NewServer(servertest.Authenticated(mux, servertest.Headers))
	t.Cleanup(fx.srv.Close)
	return fx
}

type tokenAnswer struct {
	status int
	header http.Header
	body   string
}

func (fx *tokenFixture) do(t *testing.T, who, method, path, body string) tokenAnswer {
	t.Helper()
	req, err := http.NewRequest(method, fx.srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	switch who {
	case "":
	case "none":
		req.Header.Set("X-Test-None", "1")
	default:
		req.Header.Set("X-Test-Tenant", who)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return tokenAnswer{res.StatusCode, res.Header, string(b)}
}

func decodeAnswer[T any](t *testing.T, a tokenAnswer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("%s: %v", a.body, err)
	}
	return v
}

func tokenWantError(t *testing.T, a tokenAnswer, status int, contains ...string) {
	t.Helper()
	if a.status != status {
		t.Fatalf("status %d, want %d: %s", a.status, status, a.body)
	}
	e := decodeAnswer[server.APIError](t, a)
	if e.Error == "" || e.Fix == "" {
		t.Errorf("error body lacks error or fix: %s", a.body)
	}
	for _, c := range contains {
		if !strings.Contains(e.Error+" "+e.Fix, c) {
			t.Errorf("%s lacks %q", a.body, c)
		}
	}
}

func TestIssueListRevoke(t *testing.T) {
	fx := newTokenFixture(t, nil)
	a := fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"acme"}`)
	if a.status != http.StatusCreated {
		t.Fatalf("issue: %d %s", a.status, a.body)
	}
	if a.header.Get("Cache-Control") != "no-store" {
		t.Errorf("an answer carrying a secret is cacheable: %v", a.header)
	}
	iss := decodeAnswer[wire.TokenIssued](t, a)
	if iss.Tenant != "acme" || !iss.Created.Equal(t0) || wire.CheckTokenID("id", iss.ID) != nil || iss.Notice == "" {
		t.Fatalf("issued %+v", iss)
	}
	// The token is the server's: it authenticates as the tenant.
	p, err := fx.store.Authenticate(t.Context(), iss.Secret)
	if err != nil || p != server.TenantPrincipal("acme") {
		t.Fatalf("the issued token authenticates as %v, %v", p, err)
	}
	fx.clk.Advance(time.Minute)
	other := decodeAnswer[wire.TokenIssued](t, fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"globex"}`))

	// The operator lists all, oldest first, or one tenant's; never a secret.
	a = fx.do(t, "", "GET", "/v1/tokens", "")
	l := decodeAnswer[wire.TokenList](t, a)
	if len(l.Tokens) != 2 || l.Tokens[0].ID != iss.ID || l.Tokens[1].ID != other.ID {
		t.Fatalf("list %+v", l)
	}
	if strings.Contains(a.body, iss.Secret) || strings.Contains(a.body, other.Secret) || strings.Contains(a.body, "sha256") {
		t.Fatalf("the list shows a secret or a digest: %s", a.body)
	}
	if l := decodeAnswer[wire.TokenList](t, fx.do(t, "", "GET", "/v1/tokens?tenant=globex", "")); len(l.Tokens) != 1 || l.Tokens[0].Tenant != "globex" {
		t.Fatalf("filtered list %+v", l)
	}
	if l := decodeAnswer[wire.TokenList](t, fx.do(t, "", "GET", "/v1/tokens?tenant=nobody", "")); l.Tokens == nil || len(l.Tokens) != 0 {
		t.Fatalf("empty list must be [], got %+v", l)
	}

	// A tenant lists its own tenant's tokens only.
	if l := decodeAnswer[wire.TokenList](t, fx.do(t, "acme", "GET", "/v1/tokens", "")); len(l.Tokens) != 1 || l.Tokens[0].ID != iss.ID {
		t.Fatalf("acme's list %+v", l)
	}
	if l := decodeAnswer[wire.TokenList](t, fx.do(t, "acme", "GET", "/v1/tokens?tenant=acme", "")); len(l.Tokens) != 1 {
		t.Fatalf("acme's list of acme %+v", l)
	}
	tokenWantError(t, fx.do(t, "acme", "GET", "/v1/tokens?tenant=globex", ""), http.StatusForbidden, "tenant:acme", "own tenant", "operator token")

	// Revoke: the token stops working at once; a second revoke is 404.
	a = fx.do(t, "", "DELETE", "/v1/tokens/"+iss.ID, "")
	if a.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", a.status, a.body)
	}
	if r := decodeAnswer[wire.TokenRevoked](t, a); !r.Revoked || r.ID != iss.ID || r.Tenant != "acme" {
		t.Fatalf("revoked %+v", r)
	}
	if _, err := fx.store.Authenticate(t.Context(), iss.Secret); !errors.Is(err, server.ErrUnknownToken) {
		t.Fatalf("a revoked token still authenticates: %v", err)
	}
	tokenWantError(t, fx.do(t, "", "DELETE", "/v1/tokens/"+iss.ID, ""), http.StatusNotFound, "revoked already", "snavio token create")
	if l := decodeAnswer[wire.TokenList](t, fx.do(t, "", "GET", "/v1/tokens", "")); len(l.Tokens) != 1 || l.Tokens[0].ID != other.ID {
		t.Fatalf("list after revoke %+v", l)
	}
}

func TestTokenRefusals(t *testing.T) {
	fx := newTokenFixture(t, func(o *TokenOptions) { o.MaxBody = 64 })
	tok := decodeAnswer[wire.TokenIssued](t, fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"acme"}`))
	tests := []struct {
		name, who, method, path, body string
		status                        int
		contains                      []string
	}{
		{"tenant issues", "acme", "POST", "/v1/tokens", `{"tenant":"acme"}`, 403, []string{"tenant:acme may not issue tokens", "operator.token"}},
		{"tenant revokes", "acme", "DELETE", "/v1/tokens/" + tok.ID, "", 403, []string{"may not revoke tokens"}},
		{"no principal issues", "none", "POST", "/v1/tokens", `{"tenant":"acme"}`, 401, []string{"Bearer"}},
		{"no principal lists", "none", "GET", "/v1/tokens", "", 401, nil},
		{"no principal revokes", "none", "DELETE", "/v1/tokens/" + tok.ID, "", 401, nil},
		{"empty body", "", "POST", "/v1/tokens", "", 400, []string{"empty", `{"tenant":"<tenant>"}`}},
		{"not json", "", "POST", "/v1/tokens", "tenant=acme", 400, []string{"request body"}},
		{"unknown field", "", "POST", "/v1/tokens", `{"tenant":"acme","admin":true}`, 400, []string{"admin"}},
		{"two values", "", "POST", "/v1/tokens", `{"tenant":"acme"}{"tenant":"b"}`, 400, []string{"more than one"}},
		{"empty tenant", "", "POST", "/v1/tokens", `{"tenant":""}`, 400, []string{"tenant is empty"}},
		{"source as tenant", "", "POST", "/v1/tokens", `{"tenant":"acme/billing"}`, 400, []string{"not a tenant id", "before '/'"}},
		{"dash first", "", "POST", "/v1/tokens", `{"tenant":"-acme"}`, 400, []string{"starting with a letter or digit"}},
		{"too large", "", "POST", "/v1/tokens", `{"tenant":"` + strings.Repeat("a", 100) + `"}`, 413, []string{"over 64 bytes"}},
		{"bad list filter", "", "GET", "/v1/tokens?tenant=a%2Fb", "", 400, []string{"not a tenant id"}},
		{"bad id", "", "DELETE", "/v1/tokens/abc", "", 400, []string{"not a token id", "snavio token list"}},
		{"uppercase id", "", "DELETE", "/v1/tokens/tok_ABCDEF012345", "", 400, []string{"lowercase hex"}},
		{"unknown id", "", "DELETE", "/v1/tokens/tok_000000000000", "", 404, []string{"no tenant token has id tok_000000000000"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tokenWantError(t, fx.do(t, tc.who, tc.method, tc.path, tc.body), tc.status, tc.contains...)
		})
	}
	if n := len(fx.store.List()); n != 1 {
		t.Fatalf("a refused request changed the store: %d tokens", n)
	}
}

func TestMaxTokens(t *testing.T) {
	fx := newTokenFixture(t, func(o *TokenOptions) { o.MaxTokens = 2 })
	for _, tenant := range []string{"a", "b"} {
		if a := fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"`+tenant+`"}`); a.status != http.StatusCreated {
			t.Fatalf("%s: %d %s", tenant, a.status, a.body)
		}
	}
	tokenWantError(t, fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"c"}`), http.StatusConflict, "2 tenant tokens, its limit", "snavio token revoke")
	// Revoking one makes room again.
	id := fx.store.List()[0].ID
	if a := fx.do(t, "", "DELETE", "/v1/tokens/"+id, ""); a.status != http.StatusOK {
		t.Fatalf("revoke: %d %s", a.status, a.body)
	}
	if a := fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"c"}`); a.status != http.StatusCreated {
		t.Fatalf("after revoke: %d %s", a.status, a.body)
	}
}

// failing is a store whose writes fail.
type failing struct{ server.TokenInfo }

func (failing) Issue(string) (string, server.TokenInfo, error) {
	return "", server.TokenInfo{}, errors.New("disk full")
}
func (failing) Revoke(string) error { return errors.New("disk full") }
func (f failing) List() []server.TokenInfo {
	return []server.TokenInfo{f.TokenInfo}
}

func TestStorageFailure(t *testing.T) {
	var logs bytes.Buffer
	fx := newTokenFixture(t, func(o *TokenOptions) {
		o.Tokens = failing{server.TokenInfo{ID: "tok_0123456789ab", Tenant: "acme"}}
		o.Logger = slogTo(&logs)
	})
	tokenWantError(t, fx.do(t, "", "POST", "/v1/tokens", `{"tenant":"acme"}`), http.StatusInternalServerError, "disk full", "data directory")
	tokenWantError(t, fx.do(t, "", "DELETE", "/v1/tokens/tok_0123456789ab", ""), http.StatusInternalServerError, "disk full")
	if !strings.Contains(logs.String(), "disk full") {
		t.Errorf("the failure is not logged: %s", logs.String())
	}
}

func TestNewNeedsTokens(t *testing.T) {
	if _, err := NewTokenAPI(TokenOptions{}); err == nil || !strings.Contains(err.Error(), "Options.Tokens") {
		t.Fatalf("New without a store: %v", err)
	}
}

func TestCheckID(t *testing.T) {
	for _, ok := range []string{"tok_000000000000", "tok_0123456789ab"} {
		if err := wire.CheckTokenID("id", ok); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "tok_", "tok_0123456789a", "tok_0123456789abc", "TOK_0123456789ab", "tok_0123456789aG", "snvt_0123456789ab"} {
		if err := wire.CheckTokenID("id", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
