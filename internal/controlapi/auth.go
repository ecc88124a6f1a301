package controlapi

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/snavio/snavio/internal/server"
)

// Authenticator turns the credential a request carries into the principal
// it acts as: the operator, or one tenant. Every endpoint asks it first
// (Endpoints.Handle). The local server's is ContextAuth, behind the
// server's bearer-token middleware; a Lambda host maps the request's IAM
// identity to a principal instead.
type Authenticator interface {
	Authenticate(r *http.Request) (server.Principal, error)
}

// AuthenticatorFunc adapts a function to Authenticator.
type AuthenticatorFunc func(r *http.Request) (server.Principal, error)

// Authenticate calls f.
func (f AuthenticatorFunc) Authenticate(r *http.Request) (server.Principal, error) { return f(r) }

// ContextAuth is the Authenticator behind the server's authentication
// middleware: the principal the middleware put in the request's context.
type ContextAuth struct{}

// Authenticate returns the request's principal.
func (ContextAuth) Authenticate(r *http.Request) (server.Principal, error) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		return server.Principal{}, errors.New("the request is not authenticated")
	}
	return p, nil
}

// Access says who may call an endpoint.
type Access struct {
	operator  bool
	what, fix string
}

// AnyPrincipal lets every authenticated principal in; the endpoint scopes
// what a tenant reads to its own tenant.
var AnyPrincipal = Access{}

// OperatorOnly refuses tenants with 403: what completes "<principal> may
// not ", fix tells them what to do.
func OperatorOnly(what, fix string) Access { return Access{operator: true, what: what, fix: fix} }

// Operator is OperatorOnly with the general reason.
var Operator = OperatorOnly("do this: it needs the operator", "ask the platform operator, or use the operator token from the data directory")

// HandlerFunc serves an authenticated request: it answers, or returns the
// error Handle answers (an *Error as it is, anything else through the
// resource's Errors or as a 500).
type HandlerFunc func(w http.ResponseWriter, r *http.Request, p server.Principal) error

// Endpoints builds the handlers of one resource: how requests are
// authenticated, how its store's errors read, where failures are logged.
type Endpoints struct {
	// Auth authenticates every request; nil is ContextAuth.
	Auth Authenticator
	// Errors maps the resource's sentinel errors; nil maps none.
	Errors Errors
	// Logger logs failures (500s); nil discards.
	Logger *slog.Logger
}

// Handle is the one way into an endpoint: authenticate (401), check
// access (403), serve, and answer a returned error with the envelope.
func (e *Endpoints) Handle(access Access, h HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		auth := e.Auth
		if auth == nil {
			auth = ContextAuth{}
		}
		p, err := auth.Authenticate(r)
		var refusal *Error
		if errors.As(err, &refusal) {
			// The authenticator's own answer (IAMAuth: 403 with the role to assume).
			refusal.Write(w)
			return
		}
		if err != nil {
			Refuse(http.StatusUnauthorized, err.Error(), "send Authorization: Bearer <token>; the operator token is in the data directory (operator.token), tenant tokens come from the operator").Write(w)
			return
		}
		if access.operator && !p.Operator {
			Refuse(http.StatusForbidden, p.String()+" may not "+access.what, access.fix).Write(w)
			return
		}
		if err := h(w, r, p); err != nil {
			e.Fail(w, r, err)
		}
	}
}

// Fail answers err as Handle does, for handlers that answer themselves.
func (e *Endpoints) Fail(w http.ResponseWriter, r *http.Request, err error) {
	log := e.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	fail(w, r, log, e.Errors, err)
}
