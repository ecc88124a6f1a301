package controlapi

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
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
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("%d %s: %.200s", w.Code, w.Header().Get("Content-Type"), w.Body)
	}
	var doc map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	comps := doc["components"].(map[string]any)["schemas"].(map[string]any)
	if _, ok := comps["RegistryItem"].(map[string]any)["properties"].(map[string]any)["route"]; !ok {
		t.Errorf("RegistryItem has no route property: %v", comps["RegistryItem"])
	}
	// Every reference resolves, and every typed body has its schema.
	var walk func(where string, v any)
	walk = func(where string, v any) {
		switch v := v.(type) {
		case map[string]any:
			if ref, ok := v["$ref"].(string); ok {
				parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
				var at any = doc
				for _, p := range parts {
					m, _ := at.(map[string]any)
					at = m[p]
				}
				if at == nil {
					t.Errorf("%s: $ref %s resolves to nothing", where, ref)
				}
			}
			if _, typed := v["x-go-type"]; typed {
				if sc, _ := v["schema"].(map[string]any); sc["$ref"] == nil {
					t.Errorf("%s: %v has no schema built from its type", where, v["x-go-type"])
				}
			}
			for k, c := range v {
				walk(where+"/"+k, c)
			}
		case []any:
			for _, c := range v {
				walk(where, c)
			}
		}
	}
	walk("", doc)
}

func TestOpenAPIGoTypesAreUsed(t *testing.T) {
	for name := range goTypes() {
		if !strings.Contains(string(openAPI), `"x-go-type": "`+name+`"`) {
			t.Errorf("goTypes has %s, which openapi.json does not name: remove it", name)
		}
	}
	if _, err := describe([]byte(`{"paths":{"/v1/x":{"get":{"responses":{"200":{"content":{"application/json":{"x-go-type":"wire.Nothing"}}}}}}},"components":{"schemas":{}}}`)); err == nil {
		t.Error("an x-go-type outside goTypes was accepted")
	}
}

// allEndpoints returns the endpoints of a Handler with every resource
// present (zero values: the endpoints are only listed, never called).
func allEndpoints(t *testing.T) []endpoint {
	t.Helper()
	noop := func(http.ResponseWriter, *http.Request, server.Principal) error { return nil }
	h := &Handler{clock: clock.System(), alerts: noop, stats: noop}
	v := reflect.ValueOf(h).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); v.Type().Field(i).IsExported() && f.Kind() == reflect.Pointer && f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	return h.endpoints()
}

func TestOpenAPIMatchesEndpoints(t *testing.T) {
	var routed []string
	mux := http.NewServeMux() // panics on a conflicting pattern
	for _, e := range allEndpoints(t) {
		routed = append(routed, e.pattern)
		mux.HandleFunc(e.pattern, e.h)
	}
	described := loadOpenAPI(t).described()
	for _, r := range routed {
		if !slices.Contains(described, r) {
			t.Errorf("%s is routed but not described in openapi.json: describe it (path, method, access, parameters, body types)", r)
		}
	}
	for _, d := range described {
		if !slices.Contains(routed, d) {
			t.Errorf("openapi.json describes %s, which no endpoint serves: remove it, or add the endpoint to Handler.endpoints", d)
		}
	}
	if len(routed) != len(described) {
		t.Errorf("%d endpoints, %d described operations", len(routed), len(described))
	}
}

// TestOpenAPIAccessIsEnforced checks each described operation's
// x-snavio-access against what its endpoint does with a tenant token
// and no body: "operator" endpoints answer 403 before anything else.
func TestOpenAPIAccessIsEnforced(t *testing.T) {
	ops := loadOpenAPI(t).Paths
	for _, e := range allEndpoints(t) {
		method, path, _ := strings.Cut(e.pattern, " ")
		op := ops[path][strings.ToLower(method)]
		if op.Access != "operator" {
			continue
		}
		r := httptest.NewRequest(method, strings.NewReplacer("{", "", "}", "").Replace(path), nil)
		r = r.WithContext(server.WithPrincipal(r.Context(), server.TenantPrincipal("acme")))
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, r)
		if w.Code != http.StatusForbidden {
			t.Errorf("%s is described as operator-only, but a tenant got %d", e.pattern, w.Code)
		}
	}
}

// TestEveryEndpointAuthenticatesThroughConfig: a host's Authenticator (a
// Lambda host's IAM mapping) is asked for every endpoint, before any
// handler code runs.
func TestEveryEndpointAuthenticatesThroughConfig(t *testing.T) {
	h := &Handler{clock: clock.System()}
	calls := 0
	h.auth = AuthenticatorFunc(func(*http.Request) (server.Principal, error) {
		calls++
		return server.Principal{}, errors.New("no role maps to this IAM identity")
	})
	noop := func(http.ResponseWriter, *http.Request, server.Principal) error { return nil }
	h.alerts, h.stats = noop, noop
	v := reflect.ValueOf(h).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); v.Type().Field(i).IsExported() && f.Kind() == reflect.Pointer && f.IsNil() {
			f.Set(reflect.New(f.Type().Elem()))
		}
	}
	eps := h.endpoints()
	for _, e := range eps {
		method, path, _ := strings.Cut(e.pattern, " ")
		w := httptest.NewRecorder()
		e.h.ServeHTTP(w, httptest.NewRequest(method, strings.NewReplacer("{", "", "}", "").Replace(path), nil))
		if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "no role maps") {
			t.Errorf("%s: %d %s; want the host authenticator's 401", e.pattern, w.Code, w.Body)
		}
	}
	if calls != len(eps) {
		t.Errorf("the authenticator was asked %d times for %d endpoints", calls, len(eps))
	}
}
