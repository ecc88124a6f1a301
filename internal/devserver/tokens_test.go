package devserver

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
)

// TestTenantTokenIssuedOverTheAPIWorksAtOnceAndRevokedStops: the token API
// and the server's authentication share one store, so an issued token is
// accepted by the very next request and a revoked one refused by it.
func TestTenantTokenIssuedOverTheAPIWorksAtOnceAndRevokedStops(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	op, err := os.ReadFile(filepath.Join(dir, server.OperatorTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	call := func(token, method, path, body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.Info().URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res.StatusCode, string(b)
	}
	status, body := call(strings.TrimSpace(string(op)), "POST", "/v1/tokens", `{"tenant":"demo"}`)
	if status != http.StatusCreated {
		t.Fatalf("issue: %d %s", status, body)
	}
	var iss wire.TokenIssued
	if err := json.Unmarshal([]byte(body), &iss); err != nil {
		t.Fatal(err)
	}
	if status, body := call(iss.Secret, "GET", "/v1/whoami", ""); status != http.StatusOK || !strings.Contains(body, `"tenant":"demo"`) {
		t.Fatalf("whoami with the new token: %d %s", status, body)
	}
	if status, body := call(iss.Secret, "POST", "/v1/tokens", `{"tenant":"demo"}`); status != http.StatusForbidden {
		t.Fatalf("a tenant issued a token: %d %s", status, body)
	}
	if status, body := call(strings.TrimSpace(string(op)), "DELETE", "/v1/tokens/"+iss.ID, ""); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, body)
	}
	if status, body := call(iss.Secret, "GET", "/v1/whoami", ""); status != http.StatusUnauthorized {
		t.Fatalf("whoami with the revoked token: %d %s", status, body)
	}
}
