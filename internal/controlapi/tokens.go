// This file is the control API of tenant tokens of `snavio dispatch
// serve`: the operator issues a bearer token for one tenant (shown once,
// only its SHA-256 digest is kept), lists the issued tokens (never a
// secret), and revokes them. A tenant token reads only its own tenant's
// telemetry, tenant configuration and key material; the operator token
// (operator.token in the data directory) does everything.
//
// # Endpoints
//
//	POST   /v1/tokens        issue (IssueRequest): 201 Issued, the token shown once
//	GET    /v1/tokens        list ?tenant=T: List, oldest first, no secrets
//	DELETE /v1/tokens/{id}   revoke: 200 Revoked; the token stops working at once
//
// # Who may do what
//
// Issuing and revoking need the operator. A tenant may list its own
// tenant's tokens (ids and dates, to see what to ask the operator to
// revoke); ?tenant= naming another tenant is refused with 403.
//
// # Bounds
//
// Request bodies are at most Options.MaxBody (4 KiB); the store holds at
// most Options.MaxTokens tokens (default 10000), beyond which issuing is
// refused with 409 until some are revoked.
//
// Errors are JSON {"error","fix"} (Error): 400 bad input,
// 401/403 authentication, 404 no such token, 409 too many tokens, 413 body
// too large, 500 storage failure.

package controlapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
)

// Tokens is the port the API serves: *server.FileTokenStore implements it,
// and must be the same store the server authenticates with, so that a
// revoked token stops working at once. Implementations must be safe for
// concurrent use; Revoke wraps server.ErrNoSuchToken for an unknown id.
type Tokens interface {
	Issue(tenant string) (string, server.TokenInfo, error)
	Revoke(id string) error
	List() []server.TokenInfo
}

var _ Tokens = (*server.FileTokenStore)(nil)

// Limits and defaults of the API.
const (
	// DefaultMaxTokens bounds the issued tokens of one server.
	DefaultMaxTokens = 10000
	// DefaultMaxTokenBody bounds a request body.
	DefaultMaxTokenBody = 4 << 10
)

// TokenOptions configure New.
type TokenOptions struct {
	// Tokens is the server's tenant token store. Required.
	Tokens Tokens
	// MaxTokens bounds the issued tokens (default DefaultMaxTokens).
	MaxTokens int
	// MaxBody bounds request bodies (default DefaultMaxBody).
	MaxBody int64
	// Logger records every issue and revoke (who, which tenant, which id;
	// never the token); nil discards.
	Logger *slog.Logger
}

// TokenAPI serves the token endpoints.
type TokenAPI struct {
	o  TokenOptions
	ep Endpoints
	// mu makes "count, then issue" one step, so MaxTokens holds.
	mu sync.Mutex
}

// NewTokenAPI returns the API.
func NewTokenAPI(o TokenOptions) (*TokenAPI, error) {
	if o.Tokens == nil {
		return nil, errors.New("controlapi: TokenOptions.Tokens is nil; pass the server's tenant token store")
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxTokenBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &TokenAPI{o: o, ep: Endpoints{Logger: o.Logger}}, nil
}

// SendTenant is the fix of a bad body of POST /v1/tokens and
// /v1/credentials.
const SendTenant = `send {"tenant":"<tenant>"} with a valid tenant id`

// DecodeIssueRequest parses and validates the body of POST /v1/tokens
// (and, as DecodeCreateRequest, of /v1/credentials): one JSON object, no
// unknown fields, a valid tenant id.
func DecodeIssueRequest(b []byte) (wire.TokenIssueRequest, error) {
	var req wire.TokenIssueRequest
	if err := DecodeJSON(b, &req, SendTenant); err != nil {
		return wire.TokenIssueRequest{}, err
	}
	if err := wire.CheckTenant("tenant", req.Tenant); err != nil {
		return wire.TokenIssueRequest{}, BadRequest(err.Error(), SendTenant)
	}
	return req, nil
}

// tenantQuery returns the ?tenant= of a list request, "" for every
// tenant.
func tenantQuery(r *http.Request) (string, error) {
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" {
		if err := wire.CheckTenant("tenant", tenant); err != nil {
			return "", BadRequest(err.Error(), "pass ?tenant=<tenant> or omit it")
		}
	}
	return tenant, nil
}

// bounded runs add as one step under mu unless the store already holds
// limit secrets (held, counted under mu); then it refuses with 409 naming
// what is held and the fix.
func bounded(mu *sync.Mutex, held func() int, limit int, what, fix string, add func() error) error {
	mu.Lock()
	defer mu.Unlock()
	if n := held(); n >= limit {
		return Refuse(http.StatusConflict, fmt.Sprintf("the server holds %d %s, its limit", n, what), fix)
	}
	return add()
}

func tokenOf(i server.TokenInfo) wire.Token {
	return wire.Token{ID: i.ID, Tenant: i.Tenant, Created: i.Created}
}

// The access of issuing and revoking.
var (
	issuer  = OperatorOnly("issue tokens: "+operatorIssues, useOperator)
	revoker = OperatorOnly("revoke tokens: "+operatorIssues, useOperator)
)

const (
	operatorIssues = "tenant tokens are issued and revoked by the operator"
	useOperator    = "use the operator token (operator.token in the server's data directory)"
)

func (a *TokenAPI) issue(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	body, err := ReadBody(r, a.o.MaxBody, SendTenant)
	if err != nil {
		return err
	}
	req, err := DecodeIssueRequest(body)
	if err != nil {
		return err
	}
	var secret string
	var info server.TokenInfo
	err = bounded(&a.mu, func() int { return len(a.o.Tokens.List()) }, a.o.MaxTokens, "tenant tokens",
		"revoke tokens no longer in use (`snavio token list`, `snavio token revoke ID`)",
		func() (err error) { secret, info, err = a.o.Tokens.Issue(req.Tenant); return err })
	if err != nil {
		return fmt.Errorf("issuing a token for tenant %s: %w", req.Tenant, err)
	}
	a.o.Logger.Info("tenant token issued", "by", p.String(), "tenant", info.Tenant, "id", info.ID)
	WriteJSON(w, http.StatusCreated, wire.TokenIssued{Token: tokenOf(info), Secret: secret, Notice: wire.TokenNotice})
	return nil
}

func (a *TokenAPI) list(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	tenant, err := tenantQuery(r)
	if err != nil {
		return err
	}
	if !p.Operator {
		if tenant != "" && tenant != p.Tenant {
			return Refuse(http.StatusForbidden, p.String()+" may not list the tokens of tenant "+tenant+": a tenant token sees its own tenant's tokens only",
				"omit --tenant, or use the operator token")
		}
		tenant = p.Tenant
	}
	out := wire.TokenList{Tokens: []wire.Token{}}
	for _, t := range a.o.Tokens.List() {
		if tenant == "" || t.Tenant == tenant {
			out.Tokens = append(out.Tokens, tokenOf(t))
		}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *TokenAPI) revoke(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	id := r.PathValue("id")
	if err := wire.CheckTokenID("token id", id); err != nil {
		return BadRequest(err.Error(), "pass an id from GET /v1/tokens")
	}
	var found server.TokenInfo
	for _, t := range a.o.Tokens.List() {
		if t.ID == id {
			found = t
		}
	}
	if err := a.o.Tokens.Revoke(id); err != nil {
		if errors.Is(err, server.ErrNoSuchToken) {
			return Refuse(http.StatusNotFound, "no tenant token has id "+id, "it may be revoked already (a revoked token is gone); issue a new one with `snavio token create`")
		}
		return fmt.Errorf("revoking token %s: %w", id, err)
	}
	a.o.Logger.Info("tenant token revoked", "by", p.String(), "tenant", found.Tenant, "id", id)
	WriteJSON(w, http.StatusOK, wire.TokenRevoked{Token: tokenOf(found), Revoked: true})
	return nil
}
