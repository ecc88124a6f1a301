package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
)

var errGone = errors.New("gone")

func gone(err error) *Error {
	if errors.Is(err, errGone) {
		return Refuse(http.StatusGone, err.Error(), "look elsewhere")
	}
	return nil
}

// call serves one request through Handle as principal p (nil: none).
func call(t *testing.T, access Access, p *server.Principal, body string, h HandlerFunc) *httptest.ResponseRecorder {
	t.Helper()
	e := Endpoints{Errors: gone}
	r := httptest.NewRequest(http.MethodPost, "/v1/x", strings.NewReader(body))
	if p != nil {
		r = r.WithContext(server.WithPrincipal(r.Context(), *p))
	}
	w := httptest.NewRecorder()
	e.Handle(access, h).ServeHTTP(w, r)
	if w.Code >= 400 {
		var env server.APIError
		if err := json.Unmarshal(w.Body.Bytes(), &env); err != nil || env.Error == "" || env.Fix == "" {
			t.Errorf("status %d: body %s is not the error envelope (%v)", w.Code, w.Body, err)
		}
	}
	return w
}

func TestHandle(t *testing.T) {
	op, acme := server.OperatorPrincipal(), server.TenantPrincipal("acme")
	ok := func(w http.ResponseWriter, _ *http.Request, p server.Principal) error {
		WriteJSON(w, http.StatusOK, map[string]string{"who": p.String()})
		return nil
	}
	failing := func(err error) HandlerFunc {
		return func(http.ResponseWriter, *http.Request, server.Principal) error { return err }
	}
	for _, c := range []struct {
		name   string
		access Access
		p      *server.Principal
		h      HandlerFunc
		status int
		body   string
	}{
		{"no principal", AnyPrincipal, nil, ok, 401, "not authenticated"},
		{"tenant on an operator endpoint", OperatorOnly("purge: it needs the operator", "use the operator token"), &acme, ok, 403, "tenant:acme may not purge"},
		{"operator", Operator, &op, ok, 200, `"who":"operator"`},
		{"tenant", AnyPrincipal, &acme, ok, 200, `"who":"tenant:acme"`},
		{"refusal", AnyPrincipal, &acme, failing(BadRequest("bad x", "fix x")), 400, "bad x"},
		{"wrapped refusal", AnyPrincipal, &acme, failing(fmt.Errorf("ctx: %w", Refuse(409, "taken", "retry"))), 409, "taken"},
		{"resource sentinel", AnyPrincipal, &acme, failing(fmt.Errorf("queue q: %w", errGone)), 410, "look elsewhere"},
		{"cancelled", AnyPrincipal, &acme, failing(context.Canceled), 503, "cancelled"},
		{"anything else", AnyPrincipal, &acme, failing(errors.New("disk on fire")), 500, "internal error: disk on fire"},
	} {
		w := call(t, c.access, c.p, "", c.h)
		if w.Code != c.status || !strings.Contains(w.Body.String(), c.body) {
			t.Errorf("%s: %d %s, want %d containing %q", c.name, w.Code, w.Body, c.status, c.body)
		}
		if got := w.Header().Get("Cache-Control"); got != "no-store" {
			t.Errorf("%s: Cache-Control %q", c.name, got)
		}
	}
	w := call(t, AnyPrincipal, &op, "", failing(&Error{Status: 429, Msg: "busy", Fix: "wait", RetryAfter: 1500e6}))
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Errorf("retry after 1.5 s: %d, Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
}

func TestDecode(t *testing.T) {
	type req struct {
		Tenant string `json:"tenant"`
	}
	op := server.OperatorPrincipal()
	for body, want := range map[string]int{
		`{"tenant":"acme"}`:       200,
		``:                        400,
		`   `:                     400,
		`{`:                       400,
		`{"tenant":"acme","x":1}`: 400,
		`{"tenant":"acme"} {}`:    400,
		`{"tenant":"acme"}}`:      400,
		`[1]`:                     400,
		`{"tenant":"` + strings.Repeat("a", 64) + `"}`: 413,
	} {
		w := call(t, AnyPrincipal, &op, body, func(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
			var v req
			if err := Decode(r, 32, &v, `send {"tenant":"T"}`); err != nil {
				return err
			}
			WriteJSON(w, http.StatusOK, v)
			return nil
		})
		if w.Code != want {
			t.Errorf("%.40q: %d %s, want %d", body, w.Code, w.Body, want)
		}
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"tenant":"acme"}`, ``, `{`, `{"a":1} 2`, `null`, `"x"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		var v struct {
			Tenant string `json:"tenant"`
		}
		err := DecodeJSON(b, &v, "send an object")
		var ae *Error
		if err != nil && (!errors.As(err, &ae) || ae.Status != http.StatusBadRequest || ae.Fix == "") {
			t.Fatalf("DecodeJSON(%q) = %v: want a 400 refusal with a fix", b, err)
		}
	})
}
