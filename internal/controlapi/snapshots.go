// This file is the control API of the registry snapshots of
// `snavio dispatch serve`: run the generator now, list the latest versions
// of each document, fetch a latest signed document, and fetch the public
// key that verifies them.
//
// # Endpoints
//
//	POST /v1/snapshots/generate        run the generator now (operator); answers Generated
//	GET  /v1/snapshots                 the latest version of each document kind, with recent versions (List)
//	GET  /v1/snapshots/{kind}/latest   the raw signed file of kind acl, hmac or full (operator)
//	GET  /v1/snapshots/public-key      the Ed25519 public key and key id that verify them (PublicKey)
//
// # Who may do what
//
// The hmac and full documents hold every tenant's HMAC secrets and the acl
// document every tenant's grants, so fetching a document, like generating
// one, is for the operator alone (the spec: only dispatchers and platform
// operators read the snapshot path). Any authenticated principal may list
// versions and fetch the public key: neither reveals registry content,
// and anyone holding a snapshot file should be able to check it.
//
// Errors are JSON {"error","fix"} (Error): 400 bad kind,
// 401/403, 404 nothing published yet, 422 the registry cannot be
// snapshotted (invalid, or above the size cap), 500 storage failure.

package controlapi

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/snapshot"
)

// Generator publishes a snapshot now; *snapshot.Generator implements it.
type Generator interface {
	Generate(ctx context.Context) (snapshot.Published, error)
}

var _ Generator = (*snapshot.Generator)(nil)

// RecentVersions is how many versions of each document List names.
const RecentVersions = 10

// SnapshotOptions configure New.
type SnapshotOptions struct {
	// Store holds the published snapshots. Required.
	Store snapshot.Store
	// Generator is the snapshot-generation job's generator. Required.
	Generator Generator
	// Paths are the documents' paths (default snapshot.DefaultPaths).
	Paths snapshot.Paths
	// KeyID and PublicKey verify the snapshots the generator signs.
	// Required.
	KeyID     string
	PublicKey ed25519.PublicKey
	// MaxBytes caps a document read from the store (default
	// snapshot.DefaultMaxBytes).
	MaxBytes int64
	// Logger logs failures; nil discards.
	Logger *slog.Logger
}

// SnapshotAPI serves the snapshot endpoints.
type SnapshotAPI struct {
	o  SnapshotOptions
	ep Endpoints
}

// NewSnapshotAPI returns the API.
func NewSnapshotAPI(o SnapshotOptions) (*SnapshotAPI, error) {
	switch {
	case o.Store == nil:
		return nil, errors.New("controlapi: SnapshotOptions.Store is nil; pass the embedded store's Snapshots()")
	case o.Generator == nil:
		return nil, errors.New("controlapi: SnapshotOptions.Generator is nil; pass the snapshot-generation job's generator")
	case len(o.PublicKey) != ed25519.PublicKeySize:
		return nil, fmt.Errorf("controlapi: SnapshotOptions.PublicKey has %d bytes; pass the signer's Ed25519 public key", len(o.PublicKey))
	case o.KeyID == "":
		return nil, errors.New("controlapi: SnapshotOptions.KeyID is empty; pass the signer's key id")
	}
	if o.MaxBytes <= 0 {
		o.MaxBytes = snapshot.DefaultMaxBytes
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &SnapshotAPI{o: o, ep: Endpoints{Errors: snapshotErrors, Logger: o.Logger}}, nil
}

// snapshotOperator is the access of generating and fetching documents.
var snapshotOperator = OperatorOnly("do this: snapshot documents hold every tenant's keys and grants, so generating and reading them needs the operator",
	"use the operator token (operator.token in the server's data directory); tenants may list versions and fetch the public key")

// snapshotErrors maps the snapshot store's and generator's errors.
func snapshotErrors(err error) *Error {
	switch {
	case errors.Is(err, snapshot.ErrNotFound):
		return Refuse(http.StatusNotFound, "no snapshot has been published yet: "+err.Error(), "run `snavio snapshot generate`, or wait for the generation job")
	case errors.Is(err, snapshot.ErrTooLargeToPublish):
		return Refuse(http.StatusUnprocessableEntity, err.Error(), "the previous snapshot stays published; remove unused routes and ACLs, or raise the platform's snapshot size cap")
	case errors.Is(err, registry.ErrInvalid):
		return Refuse(http.StatusUnprocessableEntity, err.Error(), "the previous snapshot stays published; fix or delete the records named (`snavio route get`, `snavio route delete`)")
	case errors.Is(err, snapshot.ErrTooLarge):
		return Refuse(http.StatusUnprocessableEntity, err.Error(), "the stored document is above this server's read cap; regenerate a smaller one")
	}
	return nil
}

func (a *SnapshotAPI) generate(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	pub, err := a.o.Generator.Generate(r.Context())
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wire.SnapshotGenerated{VersionID: pub.VersionID, GeneratedAt: pub.GeneratedAt, Bytes: pub.Bytes})
	return nil
}

func (a *SnapshotAPI) list(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	out := wire.SnapshotList{KeyID: a.o.KeyID, Documents: make([]wire.SnapshotDocument, 0, len(wire.SnapshotKinds()))}
	for _, k := range wire.SnapshotKinds() {
		d := wire.SnapshotDocument{Kind: k, Path: a.o.Paths.Of(k), Recent: []string{}}
		version, body, err := a.o.Store.Latest(r.Context(), d.Path, a.o.MaxBytes)
		switch {
		case errors.Is(err, snapshot.ErrNotFound):
		case err != nil:
			return err
		default:
			d.Latest, d.Bytes = version, len(body)
		}
		versions, err := a.o.Store.Versions(r.Context(), d.Path)
		if err != nil {
			return err
		}
		d.Versions = len(versions)
		for i := len(versions) - 1; i >= 0 && len(d.Recent) < RecentVersions; i-- {
			d.Recent = append(d.Recent, versions[i])
		}
		out.Documents = append(out.Documents, d)
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

func (a *SnapshotAPI) latest(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	k, err := wire.ParseSnapshotKind(r.PathValue("kind"))
	if err != nil {
		return BadRequest(err.Error(), "ask for /v1/snapshots/full/latest, acl/latest or hmac/latest")
	}
	version, body, err := a.o.Store.Latest(r.Context(), a.o.Paths.Of(k), a.o.MaxBytes)
	if err != nil {
		return err
	}
	w.Header().Set(wire.SnapshotVersionHeader, version)
	WriteBody(w, http.StatusOK, "application/json", body)
	return nil
}

// NewPublicKey describes pub under id.
func NewPublicKey(id string, pub ed25519.PublicKey) (wire.SnapshotPublicKey, error) {
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return wire.SnapshotPublicKey{}, fmt.Errorf("encode the public key: %w", err)
	}
	return wire.SnapshotPublicKey{
		KeyID: id, Algorithm: snapshot.Algorithm,
		PublicKey: base64.StdEncoding.EncodeToString(pub),
		PEM:       string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})),
	}, nil
}

func (a *SnapshotAPI) publicKey(w http.ResponseWriter, _ *http.Request, _ server.Principal) error {
	pk, err := NewPublicKey(a.o.KeyID, a.o.PublicKey)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, pk)
	return nil
}
