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

// TestOpenAPIServedAndEveryOperationMounted: `dispatch serve` serves
// GET /v1/openapi.json, and every operation it describes reaches a
// control-API handler (a JSON answer), never the mux's own 404 or 405.
// A tenant token is used, so operator operations stop at their 403 and
// the rest change nothing (their empty bodies are refused).
func TestOpenAPIServedAndEveryOperationMounted(t *testing.T) {
	dir := t.TempDir()
	s := startDemo(t, dir, true)
	defer s.Shutdown(context.Background())
	op, err := os.ReadFile(filepath.Join(dir, server.OperatorTokenFile))
	if err != nil {
		t.Fatal(err)
	}
	call := func(token, method, path, body string) (*http.Response, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.Info().URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return res, string(b)
	}
	res, body := call(strings.TrimSpace(string(op)), "POST", "/v1/tokens", `{"tenant":"demo"}`)
	var iss wire.TokenIssued
	if res.StatusCode != http.StatusCreated || json.Unmarshal([]byte(body), &iss) != nil {
		t.Fatalf("issue a tenant token: %d %s", res.StatusCode, body)
	}
	res, body = call(iss.Secret, "GET", "/v1/openapi.json", "")
	var doc struct {
		OpenAPI string                                `json:"openapi"`
		Paths   map[string]map[string]json.RawMessage `json:"paths"`
	}
	if res.StatusCode != http.StatusOK || json.Unmarshal([]byte(body), &doc) != nil || doc.OpenAPI != "3.1.0" {
		t.Fatalf("GET /v1/openapi.json: %d %.200s", res.StatusCode, body)
	}
	if res, _ := call("", "GET", "/v1/openapi.json", ""); res.StatusCode != http.StatusUnauthorized {
		t.Errorf("GET /v1/openapi.json without a token: %d, want 401", res.StatusCode)
	}
	n := 0
	for path, ops := range doc.Paths {
		for method := range ops {
			n++
			m := strings.ToUpper(method)
			p := strings.NewReplacer("{", "x", "}", "").Replace(path)
			res, body := call(iss.Secret, m, p, "")
			ct := res.Header.Get("Content-Type")
			if res.StatusCode == http.StatusMethodNotAllowed || !strings.HasPrefix(ct, "application/") {
				t.Errorf("%s %s: %d %s %.120q: not answered by the control API", m, path, res.StatusCode, ct, body)
			}
		}
	}
	if n < 40 {
		t.Errorf("%d operations described", n)
	}
}
