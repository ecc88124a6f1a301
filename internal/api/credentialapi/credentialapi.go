// Package credentialapi is the control API of tenants' ingress credentials
// on `snavio dispatch serve`: the access key id and secret a tenant's
// producers sign PutEvents with (SigV4, as with IAM keys on AWS). The
// ingress accepts an entry only when its Source is <that tenant>/<service>.
//
// # Endpoints
//
//	POST   /v1/credentials        create (CreateRequest): 201 Created, the secret shown once
//	GET    /v1/credentials        list ?tenant=T: List, oldest first, no secrets
//	DELETE /v1/credentials/{id}   revoke: 200 Revoked; requests signed with it fail at once
//
// Rotation is create, switch the producers, revoke the old one.
//
// # Who may do what
//
// The operator, for every tenant. A tenant token, for its own tenant only:
// it may create, list and revoke its own credentials; naming another
// tenant is refused with 403.
//
// # Bounds
//
// Request bodies are at most Options.MaxBody (4 KiB); the store holds at
// most Options.MaxCredentials (default 10000), beyond which creating is
// refused with 409 until some are revoked.
//
// Errors are JSON {"error","fix"} (server.WriteAPIError): 400 bad input,
// 401/403 authentication, 404 no such credential, 409 too many, 413 body
// too large, 500 storage failure.
package credentialapi

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

// Credentials is the port the API serves: *server.FileCredentialStore,
// the same store the ingress verifies with, so a revoked credential stops
// working at once.
type Credentials interface {
	Create(tenant string) (server.IngressCredential, error)
	Revoke(accessKeyID string) (server.CredentialInfo, error)
	Get(accessKeyID string) (server.CredentialInfo, bool)
	List() []server.CredentialInfo
}

var _ Credentials = (*server.FileCredentialStore)(nil)

// Limits and defaults of the API.
const (
	DefaultMaxCredentials = 10000
	DefaultMaxBody        = 4 << 10
)

// Options configure New.
type Options struct {
	// Credentials is the server's ingress credential store. Required.
	Credentials Credentials
	// MaxCredentials bounds the stored credentials (default DefaultMaxCredentials).
	MaxCredentials int
	// MaxBody bounds request bodies (default DefaultMaxBody).
	MaxBody int64
	// Logger records every create and revoke (who, tenant, access key id;
	// never the secret); nil discards.
	Logger *slog.Logger
}

// API serves the credential endpoints.
type API struct {
	o Options
	// mu makes "count, then create" one step, so MaxCredentials holds.
	mu sync.Mutex
}

// New returns the API.
func New(o Options) (*API, error) {
	if o.Credentials == nil {
		return nil, errors.New("credentialapi: Options.Credentials is nil; pass the server's ingress credential store")
	}
	if o.MaxCredentials <= 0 {
		o.MaxCredentials = DefaultMaxCredentials
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &API{o: o}, nil
}

// Register mounts the endpoints on mux, behind the server's authentication.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/credentials", a.create)
	mux.HandleFunc("GET /v1/credentials", a.list)
	mux.HandleFunc("DELETE /v1/credentials/{id}", a.revoke)
}

// DecodeCreateRequest parses and validates the body of POST
// /v1/credentials: one JSON object, no unknown fields, a valid tenant id.
func DecodeCreateRequest(b []byte) (wire.CredentialCreateRequest, error) {
	if strings.TrimSpace(string(b)) == "" {
		return wire.CredentialCreateRequest{}, errors.New(`request body is empty; send {"tenant":"<tenant>"}`)
	}
	var req wire.CredentialCreateRequest
	dec := json.NewDecoder(strings.NewReader(string(b)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return wire.CredentialCreateRequest{}, fmt.Errorf("request body: %v; send {\"tenant\":\"<tenant>\"}", err)
	}
	if dec.More() {
		return wire.CredentialCreateRequest{}, errors.New(`request body: more than one JSON value; send one object {"tenant":"<tenant>"}`)
	}
	if err := wire.CheckTenant("tenant", req.Tenant); err != nil {
		return wire.CredentialCreateRequest{}, err
	}
	return req, nil
}

func credentialOf(i server.CredentialInfo) wire.Credential {
	return wire.Credential{AccessKeyID: i.AccessKeyID, Tenant: i.Tenant, Created: i.Created}
}

// allowed checks that the caller may act for tenant; it answers and
// returns false if not.
func allowed(w http.ResponseWriter, r *http.Request, tenant, what string) (server.Principal, bool) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		server.WriteAPIError(w, http.StatusUnauthorized, "the request is not authenticated", "send Authorization: Bearer <token>")
		return p, false
	}
	if !p.CanAccessTenant(tenant) {
		server.WriteAPIError(w, http.StatusForbidden, p.String()+" may not "+what+" of tenant "+strconv.Quote(tenant)+": a tenant token manages its own tenant's credentials only",
			"use a token of tenant "+strconv.Quote(tenant)+" or the operator token")
		return p, false
	}
	return p, true
}

func (a *API) create(w http.ResponseWriter, r *http.Request) {
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
	req, err := DecodeCreateRequest(body)
	if err != nil {
		server.WriteAPIError(w, http.StatusBadRequest, err.Error(), `send {"tenant":"<tenant>"} with a valid tenant id`)
		return
	}
	p, ok := allowed(w, r, req.Tenant, "create credentials")
	if !ok {
		return
	}
	a.mu.Lock()
	if n := len(a.o.Credentials.List()); n >= a.o.MaxCredentials {
		a.mu.Unlock()
		server.WriteAPIError(w, http.StatusConflict, fmt.Sprintf("the server holds %d ingress credentials, its limit", n),
			"revoke credentials no longer in use (`snavio tenant credentials list`, `snavio tenant credentials revoke ID`)")
		return
	}
	c, err := a.o.Credentials.Create(req.Tenant)
	a.mu.Unlock()
	if err != nil {
		a.o.Logger.Error("credential API: creating a credential failed", "tenant", req.Tenant, "err", err)
		server.WriteAPIError(w, http.StatusInternalServerError, "creating the credential failed: "+err.Error(), "retry; if it persists, check the data directory is writable and the server log")
		return
	}
	a.o.Logger.Info("ingress credential created", "by", p.String(), "tenant", c.Tenant, "access_key_id", c.AccessKeyID)
	server.WriteJSON(w, http.StatusCreated, wire.CredentialCreated{Credential: credentialOf(c.Info()), SecretAccessKey: c.Secret, Notice: wire.CredentialNotice})
}

func (a *API) list(w http.ResponseWriter, r *http.Request) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		server.WriteAPIError(w, http.StatusUnauthorized, "the request is not authenticated", "send Authorization: Bearer <token>")
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
		if tenant == "" {
			tenant = p.Tenant
		}
		if _, ok := allowed(w, r, tenant, "list the credentials"); !ok {
			return
		}
	}
	out := wire.CredentialList{Credentials: []wire.Credential{}}
	for _, c := range a.o.Credentials.List() {
		if tenant == "" || c.Tenant == tenant {
			out.Credentials = append(out.Credentials, credentialOf(c))
		}
	}
	server.WriteJSON(w, http.StatusOK, out)
}

func (a *API) revoke(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := wire.CheckAccessKeyID("access key id", id); err != nil {
		server.WriteAPIError(w, http.StatusBadRequest, err.Error(), "pass an access key id from GET /v1/credentials")
		return
	}
	notFound := func() {
		server.WriteAPIError(w, http.StatusNotFound, "no ingress credential has access key id "+id,
			"it may be revoked already; list them with `snavio tenant credentials list`")
	}
	info, ok := a.o.Credentials.Get(id)
	if !ok {
		notFound()
		return
	}
	p, ok := allowed(w, r, info.Tenant, "revoke credentials")
	if !ok {
		return
	}
	if _, err := a.o.Credentials.Revoke(id); err != nil {
		if errors.Is(err, server.ErrNoSuchCredential) {
			notFound()
			return
		}
		a.o.Logger.Error("credential API: revoking a credential failed", "access_key_id", id, "err", err)
		server.WriteAPIError(w, http.StatusInternalServerError, "revoking the credential failed: "+err.Error(), "retry; if it persists, check the data directory is writable and the server log")
		return
	}
	a.o.Logger.Info("ingress credential revoked", "by", p.String(), "tenant", info.Tenant, "access_key_id", id)
	server.WriteJSON(w, http.StatusOK, wire.CredentialRevoked{Credential: credentialOf(info), Revoked: true})
}
