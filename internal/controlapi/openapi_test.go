package controlapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
)

// openAPIDoc is the part of the description the tests read.
type openAPIDoc struct {
	OpenAPI string                                 `json:"openapi"`
	Paths   map[string]map[string]openAPIOperation `json:"paths"`
}

type openAPIOperation struct {
	OperationID string `json:"operationId"`
	Access      string `json:"x-snavio-access"`
	Parameters  []struct {
		Name     string `json:"name"`
		In       string `json:"in"`
		Required bool   `json:"required"`
	} `json:"parameters"`
	Responses map[string]struct {
		Ref string `json:"$ref"`
	} `json:"responses"`
}

func loadOpenAPI(t *testing.T) openAPIDoc {
	t.Helper()
	var d openAPIDoc
	dec := json.NewDecoder(strings.NewReader(string(openAPI)))
	if err := dec.Decode(&d); err != nil {
		t.Fatalf("openapi.json: %v", err)
	}
	return d
}

// described returns the described routes as ServeMux patterns,
// "METHOD /path/{param}".
func (d openAPIDoc) described() []string {
	var out []string
	for path, ops := range d.Paths {
		for method := range ops {
			out = append(out, strings.ToUpper(method)+" "+path)
		}
	}
	slices.Sort(out)
	return out
}

var pathParam = regexp.MustCompile(`\{([a-z_]+)\}`)

func TestOpenAPIDescribesEachOperationFully(t *testing.T) {
	d := loadOpenAPI(t)
	if d.OpenAPI != "3.1.0" {
		t.Fatalf("openapi %q, want 3.1.0", d.OpenAPI)
	}
	ids := map[string]string{}
	for path, ops := range d.Paths {
		if !strings.HasPrefix(path, "/v1/") {
			t.Errorf("%s: the control API is under /v1/", path)
		}
		for method, op := range ops {
			where := strings.ToUpper(method) + " " + path
			if !slices.Contains([]string{"get", "put", "post", "delete"}, method) {
				t.Errorf("%s: method %q", where, method)
			}
			if op.OperationID == "" || ids[op.OperationID] != "" {
				t.Errorf("%s: operationId %q missing or also used by %s", where, op.OperationID, ids[op.OperationID])
			}
			ids[op.OperationID] = where
			if op.Access != "operator" && op.Access != "any" {
				t.Errorf("%s: x-snavio-access %q, want operator or any", where, op.Access)
			}
			if op.Responses["default"].Ref != "#/components/responses/Error" {
				t.Errorf("%s: no default response with the error envelope", where)
			}
			var inPath []string
			for _, m := range pathParam.FindAllStringSubmatch(path, -1) {
				inPath = append(inPath, m[1])
			}
			var declared []string
			for _, p := range op.Parameters {
				if p.In == "path" {
					declared = append(declared, p.Name)
					if !p.Required {
						t.Errorf("%s: path parameter %s not required", where, p.Name)
					}
				}
			}
			if !slices.Equal(inPath, declared) {
				t.Errorf("%s: path parameters %v, declared %v", where, inPath, declared)
			}
		}
	}
}

func TestOpenAPIServed(t *testing.T) {
	e := Endpoints{}
	r := httptest.NewRequest(http.MethodGet, "/v1/openapi.json", nil)
	r = r.WithContext(server.WithPrincipal(r.Context(), server.TenantPrincipal("acme")))
	w := httptest.NewRecorder()
	e.Handle(AnyPrincipal, OpenAPI).ServeHTTP(w, r)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" || w.Body.String() != string(openAPI) {
		t.Fatalf("%d %s: %.80s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
}
