package server

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
)

// Principal is who a control-API request acts as: the operator, or one
// tenant.
type Principal struct {
	// Operator is true for the operator, who may do everything.
	Operator bool
	// Tenant is the tenant id of a tenant principal, empty for the operator.
	Tenant string
}

// OperatorPrincipal returns the operator.
func OperatorPrincipal() Principal { return Principal{Operator: true} }

// TenantPrincipal returns the principal of tenant id.
func TenantPrincipal(id string) Principal { return Principal{Tenant: id} }

// String returns "operator" or "tenant:<id>".
func (p Principal) String() string {
	if p.Operator {
		return "operator"
	}
	return "tenant:" + p.Tenant
}

// CanAccessTenant reports whether p may read or change tenant's data: the
// operator may access every tenant, a tenant only itself.
func (p Principal) CanAccessTenant(tenant string) bool {
	return p.Operator || (p.Tenant != "" && p.Tenant == tenant)
}

type principalKey struct{}

// WithPrincipal returns a copy of ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal the authentication middleware put in
// ctx.
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok
}

// authError is a constant error, so sentinels need no package variable.
type authError string

func (e authError) Error() string { return string(e) }

// ErrUnknownToken is what a TokenStore returns for a token it does not know.
const ErrUnknownToken = authError("server: unknown token")

// TokenStore resolves tenant bearer tokens. Authenticate returns the
// tenant principal of token, ErrUnknownToken if the token is not (or no
// longer) valid, or another error if the store cannot answer. It must be
// safe for concurrent use and must not reveal through timing which part of
// a token was wrong (compare digests, not the token bytes).
type TokenStore interface {
	Authenticate(ctx context.Context, token string) (Principal, error)
}

// APIError is the JSON body of every control-API error: what went wrong and
// what to do about it.
type APIError struct {
	Error string `json:"error"`
	Fix   string `json:"fix"`
	// Code, when set, names the kind of refusal for programs (such as
	// "not_on_aws").
	Code string `json:"code,omitempty"`
}

// WriteAPIError writes a control-API error with status.
func WriteAPIError(w http.ResponseWriter, status int, msg, fix string) {
	WriteAPIErrorCode(w, status, "", msg, fix)
}

// WriteAPIErrorCode writes a control-API error with status and code.
func WriteAPIErrorCode(w http.ResponseWriter, status int, code, msg, fix string) {
	body, err := json.Marshal(APIError{Error: msg, Fix: fix, Code: code})
	if err != nil { // cannot happen: two strings
		body = []byte(`{"error":"internal error","fix":"retry"}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Authenticator checks control-API bearer tokens: the operator token, and
// tenant tokens through a TokenStore.
type Authenticator struct {
	operator [sha256.Size]byte
	tenants  TokenStore
	metrics  *Metrics
}

// NewAuthenticator returns an Authenticator accepting operatorToken as the
// operator and resolving other tokens through tenants (nil: operator only).
func NewAuthenticator(operatorToken string, tenants TokenStore) (*Authenticator, error) {
	if operatorToken == "" {
		return nil, errors.New("server: the operator token is empty; load it with LoadOrCreateOperatorToken")
	}
	return &Authenticator{operator: sha256.Sum256([]byte(operatorToken)), tenants: tenants}, nil
}

// Authenticate resolves a bearer token to its principal. The operator
// token is compared in constant time (over SHA-256 digests, so the length
// does not leak either).
func (a *Authenticator) Authenticate(ctx context.Context, token string) (Principal, error) {
	d := sha256.Sum256([]byte(token))
	if subtle.ConstantTimeCompare(d[:], a.operator[:]) == 1 {
		return OperatorPrincipal(), nil
	}
	if a.tenants == nil {
		return Principal{}, ErrUnknownToken
	}
	return a.tenants.Authenticate(ctx, token)
}

// Middleware authenticates `Authorization: Bearer <token>` and serves next
// with the principal in the request context (see PrincipalFrom). Missing or
// unknown tokens get 401 with a JSON error; a store failure gets 503.
func (a *Authenticator) Middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		token, ok := bearer(r.Header.Get("Authorization"))
		if !ok {
			a.metrics.reject("control", "unauthenticated")
			w.Header().Set("WWW-Authenticate", `Bearer realm="snavio"`)
			WriteAPIError(w, http.StatusUnauthorized, "the request has no bearer token",
				"send Authorization: Bearer <token>; the operator token is in the data directory (operator.token), tenant tokens come from the operator")
			return
		}
		p, err := a.Authenticate(r.Context(), token)
		switch {
		case errors.Is(err, ErrUnknownToken):
			a.metrics.reject("control", "unauthenticated")
			w.Header().Set("WWW-Authenticate", `Bearer realm="snavio", error="invalid_token"`)
			WriteAPIError(w, http.StatusUnauthorized, "the bearer token is not valid",
				"check the token: it may be mistyped, revoked, or from another data directory")
			return
		case err != nil:
			a.metrics.reject("control", "token_store")
			WriteAPIError(w, http.StatusServiceUnavailable, "tokens cannot be checked right now: "+err.Error(),
				"retry; if it persists, check the server log and the data directory")
			return
		}
		next.ServeHTTP(w, r.WithContext(WithPrincipal(r.Context(), p)))
	})
}

// bearer extracts the token of an `Authorization: Bearer <token>` header.
func bearer(h string) (string, bool) {
	scheme, token, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}
