// Package servertest stands in for the server's bearer-token
// authentication in tests of the handlers behind it: the real middleware
// needs the operator token and the token files of a data directory; these
// fakes put a principal in the request's context as it does.
package servertest

import (
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/server"
)

// Who says which principal a request acts as; false sends it on with none.
type Who func(r *http.Request) (server.Principal, bool)

// Authenticated returns next behind a fake of the server's authentication
// middleware: a request reaches next with the principal who gives it, or
// with none.
func Authenticated(next http.Handler, who Who) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := who(r); ok {
			r = r.WithContext(server.WithPrincipal(r.Context(), p))
		}
		next.ServeHTTP(w, r)
	})
}

// Tokens is a static bearer-token table: a request with "Authorization:
// Bearer <token>" acts as the token's principal; an unknown or missing
// token acts as none.
type Tokens map[string]server.Principal

// OperatorAndAcme is the table most tests use: "op" is the operator,
// "acme" the tenant acme.
func OperatorAndAcme() Tokens {
	return Tokens{"op": server.OperatorPrincipal(), "acme": server.TenantPrincipal("acme")}
}

// Who looks up r's bearer token.
func (t Tokens) Who(r *http.Request) (server.Principal, bool) {
	token, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok {
		return server.Principal{}, false
	}
	p, ok := t[token]
	return p, ok
}

// Handler returns next behind the table.
func (t Tokens) Handler(next http.Handler) http.Handler { return Authenticated(next, t.Who) }

// Headers are the test headers of the API packages' fixtures:
// X-Test-Tenant names a tenant principal, X-Test-None sends none, anything
// else is the operator.
func Headers(r *http.Request) (server.Principal, bool) {
	switch {
	case r.Header.Get("X-Test-None") != "":
		return server.Principal{}, false
	case r.Header.Get("X-Test-Tenant") != "":
		return server.TenantPrincipal(r.Header.Get("X-Test-Tenant")), true
	}
	return server.OperatorPrincipal(), true
}

// Tenant is a principal a test switches by setting *id: the tenant *id
// names, or the operator while *id is empty.
func Tenant(id *string) Who {
	return func(*http.Request) (server.Principal, bool) {
		if *id != "" {
			return server.TenantPrincipal(*id), true
		}
		return server.OperatorPrincipal(), true
	}
}

// Operator acts as the operator on every request.
func Operator(*http.Request) (server.Principal, bool) { return server.OperatorPrincipal(), true }
