// This file is the control API of tenants' ingress credentials
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
// Errors are JSON {"error","fix"} (Error): 400 bad input,
// 401/403 authentication, 404 no such credential, 409 too many, 413 body
// too large, 500 storage failure.

package controlapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
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
	DefaultMaxCredentials    = 10000
	DefaultMaxCredentialBody = 4 << 10
)

// CredentialOptions configure New.
type CredentialOptions struct {
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

// CredentialAPI serves the credential endpoints.
type CredentialAPI struct {
	o  CredentialOptions
	ep Endpoints
	// mu makes "count, then create" one step, so MaxCredentials holds.
	mu sync.Mutex
}

// NewCredentialAPI returns the API.
func NewCredentialAPI(o CredentialOptions) (*CredentialAPI, error) {
	if o.Credentials == nil {
		return nil, errors.New("controlapi: CredentialOptions.Credentials is nil; pass the server's ingress credential store")
	}
	if o.MaxCredentials <= 0 {
		o.MaxCredentials = DefaultMaxCredentials
	}
	if o.MaxBody <= 0 {
		o.MaxBody = DefaultMaxCredentialBody
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &CredentialAPI{o: o, ep: Endpoints{Logger: o.Logger}}, nil
}

// DecodeCreateRequest parses and validates the body of POST
// /v1/credentials: one JSON object, no unknown fields, a valid tenant id.
func DecodeCreateRequest(b []byte) (wire.CredentialCreateRequest, error) {
	req, err := DecodeIssueRequest(b)
	return wire.CredentialCreateRequest(req), err
}

func credentialOf(i server.CredentialInfo) wire.Credential {
	return wire.Credential{AccessKeyID: i.AccessKeyID, Tenant: i.Tenant, Created: i.Created}
}

// allowed refuses p acting for tenant unless it is the operator or that
// tenant.
func allowed(p server.Principal, tenant, what string) error {
	if !p.CanAccessTenant(tenant) {
		return Refuse(http.StatusForbidden, p.String()+" may not "+what+" of tenant "+strconv.Quote(tenant)+": a tenant token manages its own tenant's credentials only",
			"use a token of tenant "+strconv.Quote(tenant)+" or the operator token")
	}
	return nil
}

func (a *CredentialAPI) create(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	body, err := ReadBody(r, a.o.MaxBody, SendTenant)
	if err != nil {
		return err
	}
	req, err := DecodeCreateRequest(body)
	if err != nil {
		return err
	}
	if err := allowed(p, req.Tenant, "create credentials"); err != nil {
		return err
	}
	var c server.IngressCredential
	err = bounded(&a.mu, func() int { return len(a.o.Credentials.List()) }, a.o.MaxCredentials, "ingress credentials",
		"revoke credentials no longer in use (`snavio tenant credentials list`, `snavio tenant credentials revoke ID`)",
		func() (err error) { c, err = a.o.Credentials.Create(req.Tenant); return err })
	if err != nil {
		return fmt.Errorf("creating a credential for tenant %s: %w", req.Tenant, err)
	}
	a.o.Logger.Info("ingress credential created", "by", p.String(), "tenant", c.Tenant, "access_key_id", c.AccessKeyID)
	WriteJSON(w, http.StatusCreated, wire.CredentialCreated{Credential: credentialOf(c.Info()), SecretAccessKey: c.Secret, Notice: wire.CredentialNotice})
	return nil
}

func (a *CredentialAPI) list(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	tenant, err := tenantQuery(r)
	if err != nil {
		return err
	}
	if !p.Operator {
		if tenant == "" {
			tenant = p.Tenant
		}
		if err := allowed(p, tenant, "list the credentials"); err != nil {
			return err
		}
	}
	out := wire.CredentialList{Credentials: []wire.Credential{}}
	for _, c := range a.o.Credentials.List() {
		if tenant == "" || c.Tenant == tenant {
			out.Credentials = append(out.Credentials, credentialOf(c))
		}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *CredentialAPI) revoke(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	id := r.PathValue("id")
	if err := wire.CheckAccessKeyID("access key id", id); err != nil {
		return BadRequest(err.Error(), "pass an access key id from GET /v1/credentials")
	}
	notFound := Refuse(http.StatusNotFound, "no ingress credential has access key id "+id,
		"it may be revoked already; list them with `snavio tenant credentials list`")
	info, ok := a.o.Credentials.Get(id)
	if !ok {
		return notFound
	}
	if err := allowed(p, info.Tenant, "revoke credentials"); err != nil {
		return err
	}
	if _, err := a.o.Credentials.Revoke(id); err != nil {
		if errors.Is(err, server.ErrNoSuchCredential) {
			return notFound
		}
		return fmt.Errorf("revoking credential %s: %w", id, err)
	}
	a.o.Logger.Info("ingress credential revoked", "by", p.String(), "tenant", info.Tenant, "access_key_id", id)
	WriteJSON(w, http.StatusOK, wire.CredentialRevoked{Credential: credentialOf(info), Revoked: true})
	return nil
}
