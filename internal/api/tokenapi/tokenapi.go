// Package tokenapi is the control API of tenant tokens of `snavio dispatch
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
// Errors are JSON {"error","fix"} (server.WriteAPIError): 400 bad input,
// 401/403 authentication, 404 no such token, 409 too many tokens, 413 body
// too large, 500 storage failure.
package tokenapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
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
	// DefaultMaxBody bounds a request body.
	DefaultMaxBody = 4 << 10
)

// Options configure New.
type Options struct {
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

// API serves the token endpoints.
type API struct {
	o Options
	// mu makes "count, then issue" one step, so MaxTokens holds.
	mu sync.Mutex
}

// New returns the API.
func New(o Options) (*API, error) {
	if o.Tokens == nil {
		return nil, errors.New("tokenapi: Options.Tokens is nil; pass the server's tenant token store")
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = DefaultMaxTokens
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{o: o}, nil
}

// Register mounts the endpoints on mux. The mux must sit behind the
// server's authentication middleware.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/tokens", a.issue)
	mux.HandleFunc("GET /v1/tokens", a.list)
	mux.HandleFunc("DELETE /v1/tokens/{id}", a.revoke)
}

// DecodeIssueRequest parses and validates the body of POST /v1/tokens: one
// JSON object, no unknown fields, a valid tenant id.
func DecodeIssueRequest(b []byte) (wire.TokenIssueRequest, error) {
	if strings.TrimSpace(string(b)) == "" {
		return wire.TokenIssueRequest{}, errors.New(`request body is empty; send {"tenant":"<tenant>"}`)
	}
	var req wire.TokenIssueRequest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return wire.TokenIssueRequest{}, fmt.Errorf("request body: %v; send {\"tenant\":\"<tenant>\"}", err)
	}
	if dec.More() {
		return wire.TokenIssueRequest{}, errors.New(`request body: more than one JSON value; send one object {"tenant":"<tenant>"}`)
	}
	if err := wire.CheckTenant("tenant", req.Tenant); err != nil {
		return wire.TokenIssueRequest{}, err
	}
	return req, nil
}

func tokenOf(i server.TokenInfo) wire.Token {
	return wire.Token{ID: i.ID, Tenant: i.Tenant, Created: i.Created}
}

func principal(w http.ResponseWriter, r *http.Request) (server.Principal, bool) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		server.WriteAPIError(w, http.StatusUnauthorized, "the request is not authenticated", "send Authorization: Bearer <token>")
	}
	return p, ok
}

func operatorOnly(w http.ResponseWriter, r *http.Request, what string) (server.Principal, bool) {
	p, ok := principal(w, r)
	if ok && !p.Operator {
		server.WriteAPIError(w, http.StatusForbidden, p.String()+" may not "+what+": tenant tokens are issued and revoked by the operator",
			"use the operator token (operator.token in the server's data directory)")
		return p, false
	}
	return p, ok
}

func (a *API) issue(w http.ResponseWriter, r *http.Request) {
	p, ok := operatorOnly(w, r, "issue tokens")
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, a.o.MaxBody)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			server.WriteAPIError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", a.o.MaxBody), `send {"tenant":"<tenant>"}`)
			return
		}
		server.WriteAPIError(w, http.StatusBadRequest, "reading the request body: "+err.Error(), "resend the request")
		return
	}
	req, err := DecodeIssueRequest(body)
	if err != nil {
		server.WriteAPIError(w, http.StatusBadRequest, err.Error(), `send {"tenant":"<tenant>"} with a valid tenant id`)
		return
	}
	a.mu.Lock()
	if n := len(a.o.Tokens.List()); n >= a.o.MaxTokens {
		a.mu.Unlock()
		server.WriteAPIError(w, http.StatusConflict, fmt.Sprintf("the server holds %d tenant tokens, its limit", n),
			"revoke tokens no longer in use (`snavio token list`, `snavio token revoke ID`)")
		return
	}
	secret, info, err := a.o.Tokens.Issue(req.Tenant)
	a.mu.Unlock()
	if err != nil {
		a.o.Logger.Error("token API: issuing a token failed", "tenant", req.Tenant, "err", err)
		server.WriteAPIError(w, http.StatusInternalServerError, "issuing the token failed: "+err.Error(), "retry; if it persists, check the data directory is writable and the server log")
		return
	}
	a.o.Logger.Info("tenant token issued", "by", p.String(), "tenant", info.Tenant, "id", info.ID)
	writeJSON(w, http.StatusCreated, wire.TokenIssued{Token: tokenOf(info), Secret: secret, Notice: wire.TokenNotice})
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	p, ok := principal(w, r)
	if !ok {
		return
	}
	tenant := r.URL.Query().Get("tenant")
	if tenant != "" {
		if err := wire.CheckTenant("tenant", tenant); err != nil {
			server.WriteAPIError(w, http.StatusBadRequest, err.Error(), "pass ?tenant=<tenant> or omit it")
			return
		}
	}
	if !p.Operator {
		if tenant != "" && tenant != p.Tenant {
			server.WriteAPIError(w, http.StatusForbidden, p.String()+" may not list the tokens of tenant "+tenant+": a tenant token sees its own tenant's tokens only",
				"omit --tenant, or use the operator token")
			return
		}
		tenant = p.Tenant
	}
	out := wire.TokenList{Tokens: []wire.Token{}}
	for _, t := range a.o.Tokens.List() {
		if tenant == "" || t.Tenant == tenant {
			out.Tokens = append(out.Tokens, tokenOf(t))
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	p, ok := operatorOnly(w, r, "revoke tokens")
	if !ok {
		return
	}
	id := r.PathValue("id")
	if err := wire.CheckTokenID("token id", id); err != nil {
		server.WriteAPIError(w, http.StatusBadRequest, err.Error(), "pass an id from GET /v1/tokens")
		return
	}
	var found server.TokenInfo
	for _, t := range a.o.Tokens.List() {
		if t.ID == id {
			found = t
		}
	}
	if err := a.o.Tokens.Revoke(id); err != nil {
		if errors.Is(err, server.ErrNoSuchToken) {
			server.WriteAPIError(w, http.StatusNotFound, "no tenant token has id "+id, "it may be revoked already (a revoked token is gone); issue a new one with `snavio token create`")
			return
		}
		a.o.Logger.Error("token API: revoking a token failed", "id", id, "err", err)
		server.WriteAPIError(w, http.StatusInternalServerError, "revoking the token failed: "+err.Error(), "retry; if it persists, check the data directory is writable and the server log")
		return
	}
	a.o.Logger.Info("tenant token revoked", "by", p.String(), "tenant", found.Tenant, "id", id)
	writeJSON(w, http.StatusOK, wire.TokenRevoked{Token: tokenOf(found), Revoked: true})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // cannot happen: strings and times
		server.WriteAPIError(w, http.StatusInternalServerError, "encoding the answer: "+err.Error(), "retry")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)+1))
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}
