package platform

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestLocalDo(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"no token"}`))
			return
		}
		switch r.URL.Path {
		case "/v1/echo":
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"q":"` + r.URL.Query().Get("q") + `"}`))
		case "/v1/busy":
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(`{"error":"saturated","fix":"retry later"}`))
		case "/v1/garbage":
			_, _ = w.Write([]byte(`not json`))
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte("plain text 404"))
		}
	}))
	defer srv.Close()
	ctx := context.Background()
	api := NewLocal(srv.URL+"/", func() (string, error) { return "tok", nil }, nil)

	var out struct{ Q string }
	if err := api.do(ctx, "GET", "/v1/echo", map[string][]string{"q": {"a b"}}, nil, &out); err != nil || out.Q != "a b" {
		t.Fatalf("echo: %v %+v", err, out)
	}
	err := api.do(ctx, "GET", "/v1/busy", nil, nil, nil)
	var ae *APIError
	if !errors.As(err, &ae) || ae.Status != 503 || ae.Fix != "retry later" || ae.RetryAfter.Seconds() != 3 {
		t.Fatalf("busy: %#v", err)
	}
	if StatusOf(api.do(ctx, "GET", "/v1/none", nil, nil, nil)) != 404 {
		t.Fatal("404 not mapped")
	}
	if err := api.do(ctx, "GET", "/v1/garbage", nil, nil, &out); err == nil || !strings.Contains(err.Error(), "not the JSON") {
		t.Fatalf("garbage: %v", err)
	}
	noTok := NewLocal(srv.URL, nil, nil)
	if err := noTok.do(ctx, "GET", "/v1/echo", nil, nil, nil); StatusOf(err) != 401 || !strings.Contains(err.Error(), TokenEnv) {
		t.Fatalf("401: %v", err)
	}
	down := NewLocal("http://127.0.0.1:1", nil, nil)
	var ue *UnreachableError
	if err := down.do(ctx, "GET", "/v1/echo", nil, nil, nil); !errors.As(err, &ue) {
		t.Fatalf("unreachable: %v", err)
	}
}

func TestLocalToken(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{}
	look := func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	tok := LocalToken(look, dir)
	if _, err := tok(); err == nil || !strings.Contains(err.Error(), "dispatch serve") {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, OperatorTokenFile), []byte("op-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if v, err := tok(); err != nil || v != "op-token" {
		t.Fatalf("file token: %q %v", v, err)
	}
	env[TokenEnv] = " tenant-token "
	if v, err := tok(); err != nil || v != "tenant-token" {
		t.Fatalf("env token: %q %v", v, err)
	}
	if _, err := LocalToken(nil, "")(); err == nil {
		t.Fatal("no dir and no env must fail")
	}
}

// Any error answer decodes to an *APIError with its status (a 501 to a
// *NotAvailableError wrapping one) and a message; a 401 or 403 always
// carries a fix, on either host.
func FuzzDecodeError(f *testing.F) {
	for _, s := range []struct {
		status int
		body   string
	}{
		{400, `{"error":"bad","fix":"fix it"}`},
		{403, `{"Message":"Forbidden"}`},
		{403, `{"message":"The request signature we calculated does not match"}`},
		{501, `{"error":"not here","fix":"use x","code":"not_served_on_aws"}`},
		{500, "plain \xff text"},
		{429, `{"error":""}`},
	} {
		f.Add(s.status, []byte(s.body), "7")
	}
	hosts := []*Local{NewLocal("http://127.0.0.1:1", nil, nil), newControlClient("http://127.0.0.1:1", &sigV4{}, awsHost(Target{Env: "prod"}), nil)}
	f.Fuzz(func(t *testing.T, status int, body []byte, retryAfter string) {
		if status < 300 || status > 599 {
			return
		}
		for _, a := range hosts {
			resp := &http.Response{StatusCode: status, Header: http.Header{"Retry-After": {retryAfter}}}
			err := a.decodeError(resp, body)
			var ae *APIError
			if !errors.As(err, &ae) || ae.Status != status || ae.RetryAfter < 0 {
				t.Fatalf("%d %q: %#v", status, body, err)
			}
			var na *NotAvailableError
			if errors.As(err, &na) != (status == http.StatusNotImplemented) {
				t.Fatalf("%d: %#v", status, err)
			}
			if (status == 401 || status == 403) && ae.Fix == "" {
				t.Fatalf("%d without a fix: %#v", status, ae)
			}
			if err.Error() == "" {
				t.Fatal("empty message")
			}
		}
	})
}
