// This file is POST /v1/explain of the control API: the
// dispatcher's decision trace for one command (each check, its result and
// the cache state it used) without delivering it. `snavio send --explain`
// calls it.
//
// Access: the operator explains any source; a tenant token only its own
// sources (the part of the source before '/' is the tenant).

package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// maxExplainBody bounds a request: the detail (at most the bus's 256 KiB, JSON
// escaped in a string at worst 6x) and the source.
const maxExplainBody = 6*envelope.DefaultMaxBytes + 4096

// Explainer is what the API needs of the dispatcher (*dispatch.Dispatcher).
type Explainer interface {
	Explain(ctx context.Context, busSource string, detail []byte) dispatch.Trace
}

// ExplainOptions configure the API.
type ExplainOptions struct {
	// Dispatcher explains; required.
	Dispatcher Explainer
}

// ExplainAPI serves POST /v1/explain.
type ExplainAPI struct {
	o  ExplainOptions
	ep Endpoints
}

// NewExplainAPI returns the API.
func NewExplainAPI(o ExplainOptions) (*ExplainAPI, error) {
	if o.Dispatcher == nil {
		return nil, errors.New("controlapi: ExplainOptions.Dispatcher is required")
	}
	return &ExplainAPI{o: o}, nil
}

func (a *ExplainAPI) explain(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.ExplainRequest
	if err := Decode(r, maxExplainBody, &req, `send {"source":"<tenant>/<service>","detail":"<the signed envelope as a JSON string>"}`); err != nil {
		return err
	}
	if !envelope.ValidSource(req.Source) {
		return BadRequest("source "+quote(req.Source)+" is not <tenant-id>/<service>", "give the bus source the command would be sent with, e.g. acme/billing")
	}
	if req.Detail == "" {
		return BadRequest("detail is empty", "give the signed envelope, as it would be the event's Detail")
	}
	tenant, _, _ := strings.Cut(req.Source, "/")
	if !p.CanAccessTenant(tenant) {
		return Refuse(http.StatusForbidden, p.String()+" may not explain commands of tenant "+tenant,
			"use tenant "+tenant+"'s token, or the operator's")
	}
	WriteJSON(w, http.StatusOK, a.o.Dispatcher.Explain(r.Context(), req.Source, []byte(req.Detail)))
	return nil
}

func quote(s string) string {
	if len(s) > 80 {
		s = s[:80] + "..."
	}
	b, _ := json.Marshal(s)
	return string(b)
}
