package controlapi

import (
	_ "embed"
	"net/http"

	"github.com/snavio/snavio/internal/server"
)

// openAPI is the control API's OpenAPI 3.1 description: every route, who
// may call it, its parameters and the Go types of its bodies. A test
// checks it against the registered routes.
//
//go:embed openapi.json
var openAPI []byte

// OpenAPI serves the description (GET /v1/openapi.json).
func OpenAPI(w http.ResponseWriter, _ *http.Request, _ server.Principal) error {
	WriteBody(w, http.StatusOK, "application/json", openAPI)
	return nil
}
