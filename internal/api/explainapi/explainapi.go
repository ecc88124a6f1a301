// Package explainapi is POST /v1/explain of the control API: the
// dispatcher's decision trace for one command (each check, its result and
// the cache state it used) without delivering it. `snavio send --explain`
// calls it.
//
// Access: the operator explains any source; a tenant token only its own
// sources (the part of the source before '/' is the tenant).
package explainapi

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// maxBody bounds a request: the detail (at most the bus's 256 KiB, JSON
// escaped in a string at worst 6x) and the source.
const maxBody = 6*envelope.DefaultMaxBytes + 4096

// Explainer is what the API needs of the dispatcher (*dispatch.Dispatcher).
type Explainer interface {
	Explain(ctx context.Context, busSource string, detail []byte) dispatch.Trace
}

// Options configure the API.
type Options struct {
	// Dispatcher explains; required.
	Dispatcher Explainer
}

// API serves POST /v1/explain.
type API struct{ o Options }

// New returns the API.
func New(o Options) (*API, error) {
	if o.Dispatcher == nil {
		return nil, errors.New("explainapi: Dispatcher is required")
	}
	return &API{o: o}, nil
}

// Register adds POST /v1/explain to mux.
func (a *API) Register(mux *http.ServeMux) {
	mux.HandleFunc("POST /v1/explain", a.explain)
}

func (a *API) explain(w http.ResponseWriter, r *http.Request) {
	p, ok := server.PrincipalFrom(r.Context())
	if !ok {
		server.WriteAPIError(w, http.StatusUnauthorized, "the request is not authenticated", "send Authorization: Bearer <token>")
		return
	}
	var req wire.ExplainRequest
	dec := json.NewDecoder(io.LimitReader(r.Body, maxBody+1))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		server.WriteAPIError(w, http.StatusBadRequest, "request body: "+err.Error(), `send {"source":"<tenant>/<service>","detail":"<the signed envelope as a JSON string>"}`)
		return
	}
	if dec.More() {
		server.WriteAPIError(w, http.StatusBadRequest, "request body: more than one JSON value", "send one JSON object")
		return
	}
	if !envelope.ValidSource(req.Source) {
		server.WriteAPIError(w, http.StatusBadRequest, "source "+quote(req.Source)+" is not <tenant-id>/<service>", "give the bus source the command would be sent with, e.g. acme/billing")
		return
	}
	if req.Detail == "" {
		server.WriteAPIError(w, http.StatusBadRequest, "detail is empty", "give the signed envelope, as it would be the event's Detail")
		return
	}
	tenant, _, _ := strings.Cut(req.Source, "/")
	if !p.CanAccessTenant(tenant) {
		server.WriteAPIError(w, http.StatusForbidden, p.String()+" may not explain commands of tenant "+tenant,
			"use tenant "+tenant+"'s token, or the operator's")
		return
	}
	tr := a.o.Dispatcher.Explain(r.Context(), req.Source, []byte(req.Detail))
	body, err := json.Marshal(tr)
	if err != nil {
		server.WriteAPIError(w, http.StatusInternalServerError, "encoding the trace: "+err.Error(), "retry; if it persists, check the server log")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(body)
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
