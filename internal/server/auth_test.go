package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

func TestOperatorTokenCreatedOnceAndReused(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "data")
	tok, path, created, err := LoadOrCreateOperatorToken(dir)
	if err != nil || !created {
		t.Fatalf("first start: created=%v err=%v", created, err)
	}
	if !wellFormedToken(tok, operatorTokenPrefix) {
		t.Fatalf("token %q is not well formed", tok)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v err %v", fi.Mode(), err)
	}
	if di, _ := os.Stat(dir); di.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v", di.Mode())
	}
	tok2, _, created2, err := LoadOrCreateOperatorToken(dir)
	if err != nil || created2 || tok2 != tok {
		t.Fatalf("restart: token changed=%v created=%v err=%v", tok2 != tok, created2, err)
	}
	// No temp files are left behind.
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("data dir holds %d entries", len(ents))
	}
}

func TestOperatorTokenConcurrentFirstStartsAgree(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	toks := make([]string, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tok, _, _, err := LoadOrCreateOperatorToken(dir)
			if err != nil {
				t.Error(err)
			}
			toks[i] = tok
		}()
	}
	wg.Wait()
	for _, tok := range toks {
		if tok != toks[0] {
			t.Fatalf("concurrent starts disagree: %q vs %q", tok, toks[0])
		}
	}
}

func TestOperatorTokenRefusesOpenPermissionsAndGarbage(t *testing.T) {
	dir := t.TempDir()
	_, path, _, err := LoadOrCreateOperatorToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	_, _, _, err = LoadOrCreateOperatorToken(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+path) || !strings.Contains(err.Error(), "0644") {
		t.Fatalf("open permissions: %v", err)
	}
	if err := os.WriteFile(path, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Chmod(path, 0o600)
	_, _, _, err = LoadOrCreateOperatorToken(dir)
	if err == nil || !strings.Contains(err.Error(), "remove it") {
		t.Fatalf("garbage token: %v", err)
	}
	os.Remove(path)
	os.Symlink("/etc/hostname", path)
	if _, _, _, err = LoadOrCreateOperatorToken(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("symlink: %v", err)
	}
}

func TestFileTokenStoreIssueAuthenticateRevokeReopen(t *testing.T) {
	clk := clock.NewFake(time.Date(2026, 11, 22, 1, 0, 0, 0, time.UTC))
	path := filepath.Join(t.TempDir(), TenantTokensFile)
	s, err := OpenFileTokenStore(path, clk)
	if err != nil {
		t.Fatal(err)
	}
	tok, info, err := s.Issue("acme")
	if err != nil {
		t.Fatal(err)
	}
	if info.Tenant != "acme" || !info.Created.Equal(clk.Now()) || !strings.HasPrefix(info.ID, "tok_") {
		t.Fatalf("info %+v", info)
	}
	raw, _ := os.ReadFile(path)
	if strings.Contains(string(raw), tok) {
		t.Fatal("the token itself is stored")
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v", fi.Mode())
	}
	ctx := context.Background()
	if p, err := s.Authenticate(ctx, tok); err != nil || p != TenantPrincipal("acme") {
		t.Fatalf("Authenticate = %v, %v", p, err)
	}
	for _, bad := range []string{"", tok + "x", tok[:len(tok)-1], "snvo_" + tok[5:]} {
		if _, err := s.Authenticate(ctx, bad); !errors.Is(err, ErrUnknownToken) {
			t.Errorf("Authenticate(%q) err %v", bad, err)
		}
	}
	// Reopened, the store still knows the token.
	s2, err := OpenFileTokenStore(path, clk)
	if err != nil {
		t.Fatal(err)
	}
	if p, err := s2.Authenticate(ctx, tok); err != nil || p.Tenant != "acme" {
		t.Fatalf("after reopen: %v %v", p, err)
	}
	if err := s2.Revoke(info.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := s2.Authenticate(ctx, tok); !errors.Is(err, ErrUnknownToken) {
		t.Fatalf("revoked token still works: %v", err)
	}
	if err := s2.Revoke(info.ID); !errors.Is(err, ErrNoSuchToken) || !strings.Contains(err.Error(), "list the tokens") {
		t.Fatalf("second revoke: %v", err)
	}
	if len(s2.List()) != 0 {
		t.Fatalf("List after revoke = %v", s2.List())
	}
	if _, _, err := s2.Issue("-bad"); err == nil || !strings.Contains(err.Error(), "not valid") {
		t.Fatalf("bad tenant: %v", err)
	}
}

func TestFileTokenStoreRefusesOpenOrDamagedFile(t *testing.T) {
	clk := clock.NewFake(time.Unix(0, 0))
	dir := t.TempDir()
	path := filepath.Join(dir, TenantTokensFile)
	os.WriteFile(path, []byte(`{"version":1,"tokens":[]}`), 0o640)
	os.Chmod(path, 0o640)
	if _, err := OpenFileTokenStore(path, clk); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("0640: %v", err)
	}
	os.Chmod(path, 0o600)
	for body, want := range map[string]string{
		`{`:                         "not a tenant token file",
		`{"version":2,"tokens":[]}`: "version 2",
		`{"version":1,"tokens":[{"id":"x","tenant":"acme","sha256":"zz"}]}`: "damaged",
	} {
		os.WriteFile(path, []byte(body), 0o600)
		if _, err := OpenFileTokenStore(path, clk); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", body, err, want)
		}
	}
}

// authStack is a control API guarded as the real one will be.
func authStack(t *testing.T) (http.Handler, string, string) {
	t.Helper()
	dir := t.TempDir()
	op, _, _, err := LoadOrCreateOperatorToken(dir)
	if err != nil {
		t.Fatal(err)
	}
	store, err := OpenFileTokenStore(filepath.Join(dir, TenantTokensFile), clock.NewFake(time.Unix(0, 0)))
	if err != nil {
		t.Fatal(err)
	}
	acme, _, err := store.Issue("acme")
	if err != nil {
		t.Fatal(err)
	}
	a, err := NewAuthenticator(op, store)
	if err != nil {
		t.Fatal(err)
	}
	whoami := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p, _ := PrincipalFrom(r.Context())
		w.Write([]byte(p.String()))
	})
	return a.Middleware(whoami), op, acme
}

func TestAuthMiddlewareAndScopes(t *testing.T) {
	h, op, acme := authStack(t)
	tests := []struct {
		name, path, auth string
		status           int
		body             string
	}{
		{"no header", "/v1/keys", "", 401, "no bearer token"},
		{"basic scheme", "/v1/keys", "Basic dXNlcjpwYXNz", 401, "no bearer token"},
		{"unknown token", "/v1/keys", "Bearer snvt_nope", 401, "not valid"},
		{"operator on operator route", "/v1/keys", "Bearer " + op, 200, "operator"},
		{"lowercase scheme", "/v1/keys", "bearer " + op, 200, "operator"},
		{"tenant token", "/v1/keys", "Bearer " + acme, 200, "tenant:acme"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, tt.path, nil)
			if tt.auth != "" {
				r.Header.Set("Authorization", tt.auth)
			}
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tt.status || !strings.Contains(w.Body.String(), tt.body) {
				t.Fatalf("%d %s, want %d containing %q", w.Code, w.Body, tt.status, tt.body)
			}
			if w.Code >= 400 {
				var e APIError
				if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == "" || e.Fix == "" {
					t.Fatalf("error body %s: %v", w.Body, err)
				}
			}
			if w.Code == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
}

type failingStore struct{}

func (failingStore) Authenticate(context.Context, string) (Principal, error) {
	return Principal{}, errors.New("disk on fire")
}

func TestAuthStoreFailureIs503(t *testing.T) {
	a, _ := NewAuthenticator("snvo_x", failingStore{})
	r := httptest.NewRequest(http.MethodGet, "/v1/keys", nil)
	r.Header.Set("Authorization", "Bearer snvt_whatever")
	w := httptest.NewRecorder()
	a.Middleware(http.NotFoundHandler()).ServeHTTP(w, r)
	if w.Code != 503 || !strings.Contains(w.Body.String(), "disk on fire") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if _, err := NewAuthenticator("", nil); err == nil {
		t.Fatal("empty operator token accepted")
	}
}
