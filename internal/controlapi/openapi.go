package controlapi

import (
	_ "embed"
	"encoding"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"strings"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// openAPI is the control API's OpenAPI 3.1 description, as written: every
// route, who may call it, its parameters and the Go types of its bodies
// (x-go-type). Tests check it against Handler.endpoints.
//
//go:embed openapi.json
var openAPI []byte

// goTypes are the types openapi.json names in x-go-type. The served
// description gets each one's JSON Schema from the type itself, so the
// schemas follow the code.
// Made on first use: nothing runs at package init (the start-up guard).
var goTypes = sync.OnceValue(func() map[string]reflect.Type {
	m := map[string]reflect.Type{}
	for _, t := range []reflect.Type{
		reflect.TypeFor[wire.Whoami](), reflect.TypeFor[wire.RegistryItems](), reflect.TypeFor[wire.RegistryPutRequest](),
		reflect.TypeFor[wire.RegistryHistory](), reflect.TypeFor[wire.ApplyRequest](), reflect.TypeFor[wire.ApplyResult](),
		reflect.TypeFor[wire.ACLRevokeRequest](), reflect.TypeFor[wire.KeyRequest](), reflect.TypeFor[wire.KeyResult](),
		reflect.TypeFor[wire.TokenIssueRequest](), reflect.TypeFor[wire.TokenIssued](), reflect.TypeFor[wire.TokenList](),
		reflect.TypeFor[wire.TokenRevoked](), reflect.TypeFor[wire.CredentialCreateRequest](), reflect.TypeFor[wire.CredentialCreated](),
		reflect.TypeFor[wire.CredentialList](), reflect.TypeFor[wire.CredentialRevoked](), reflect.TypeFor[wire.TelemetryPage](),
		reflect.TypeFor[wire.TelemetryStreams](), reflect.TypeFor[wire.TelemetryAck](), reflect.TypeFor[wire.QueueList](),
		reflect.TypeFor[wire.QueueCreateRequest](), reflect.TypeFor[wire.QueueCreateResult](), reflect.TypeFor[wire.QueueInfo](),
		reflect.TypeFor[wire.QueueReceiveRequest](), reflect.TypeFor[wire.QueueReceived](), reflect.TypeFor[wire.QueueDeleteRequest](),
		reflect.TypeFor[wire.QueueDeleteResult](), reflect.TypeFor[wire.QueuePurgeResult](), reflect.TypeFor[wire.SnapshotGenerated](),
		reflect.TypeFor[wire.SnapshotList](), reflect.TypeFor[wire.SnapshotPublicKey](), reflect.TypeFor[wire.ReplayRequest](),
		reflect.TypeFor[wire.ReplayPlanResponse](), reflect.TypeFor[wire.ReplayUpdate](), reflect.TypeFor[wire.ReplayResumeRequest](),
		reflect.TypeFor[wire.ReplayList](), reflect.TypeFor[wire.ReplayAudit](), reflect.TypeFor[wire.DeliveryKey](),
		reflect.TypeFor[wire.ReplayAuditWrite](), reflect.TypeFor[wire.ReplayClaim](), reflect.TypeFor[wire.ReplayVerifyRequest](),
		reflect.TypeFor[wire.ReplayVerifyResponse](), reflect.TypeFor[wire.ReplaySignRequest](), reflect.TypeFor[wire.ReplaySignResponse](),
		reflect.TypeFor[wire.ExplainRequest](), reflect.TypeFor[dispatch.Trace](), reflect.TypeFor[ArchivePage](),
		reflect.TypeFor[registry.Item](), reflect.TypeFor[registry.Change](), reflect.TypeFor[keys.TenantConfig](),
	} {
		m[goName(t)] = t
	}
	return m
})

// goName is how openapi.json names t: "wire.QueueList", "registry.Item",
// "controlapi.ArchivePage".
func goName(t reflect.Type) string {
	return t.PkgPath()[strings.LastIndexByte(t.PkgPath(), '/')+1:] + "." + t.Name()
}

// described is the served description: openapi.json with a JSON Schema
// for every x-go-type.
var described = sync.OnceValues(func() ([]byte, error) { return describe(openAPI) })

// OpenAPI serves the description (GET /v1/openapi.json).
func OpenAPI(w http.ResponseWriter, _ *http.Request, _ server.Principal) error {
	doc, err := described()
	if err != nil {
		return err
	}
	WriteBody(w, http.StatusOK, "application/json", doc)
	return nil
}

// describe returns doc with each body's schema built from its x-go-type.
func describe(doc []byte) ([]byte, error) {
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	s := schemas{defs: map[string]any{}, named: map[reflect.Type]string{}}
	var problems []string
	content := func(where string, m any) {
		mm, _ := m.(map[string]any)
		for _, media := range mm {
			media, _ := media.(map[string]any)
			name, ok := media["x-go-type"].(string)
			if !ok {
				continue
			}
			t, ok := goTypes()[name]
			if !ok {
				problems = append(problems, where+": x-go-type "+name+" is not in goTypes")
				continue
			}
			media["schema"] = s.of(t)
		}
	}
	paths, _ := d["paths"].(map[string]any)
	for path, ops := range paths {
		ops, _ := ops.(map[string]any)
		for method, op := range ops {
			op, _ := op.(map[string]any)
			where := strings.ToUpper(method) + " " + path
			if rb, ok := op["requestBody"].(map[string]any); ok {
				content(where, rb["content"])
			}
			rs, _ := op["responses"].(map[string]any)
			for _, r := range rs {
				if r, ok := r.(map[string]any); ok {
					content(where, r["content"])
				}
			}
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("openapi.json: %s", strings.Join(problems, "; "))
	}
	comp, _ := d["components"].(map[string]any)
	defs, _ := comp["schemas"].(map[string]any)
	for k, v := range s.defs {
		if _, dup := defs[k]; dup {
			return nil, fmt.Errorf("openapi.json: schema %s is written in openapi.json and built from a Go type", k)
		}
		defs[k] = v
	}
	return json.MarshalIndent(d, "", "  ")
}

// schemas builds JSON Schemas of Go types as encoding/json writes them;
// named structs become components, referenced by name.
type schemas struct {
	defs  map[string]any
	named map[reflect.Type]string
}

var (
	timeType      = reflect.TypeFor[time.Time]()
	rawType       = reflect.TypeFor[json.RawMessage]()
	marshalerType = reflect.TypeFor[json.Marshaler]()
	textType      = reflect.TypeFor[encoding.TextMarshaler]()
)

func (s *schemas) of(t reflect.Type) map[string]any {
	switch {
	case t == timeType:
		return map[string]any{"type": "string", "format": "date-time"}
	case t == rawType:
		return map[string]any{"description": "any JSON value"}
	case t.Implements(marshalerType) || reflect.PointerTo(t).Implements(marshalerType):
		return map[string]any{"description": "JSON of " + t.String()}
	case t.Implements(textType) || reflect.PointerTo(t).Implements(textType):
		return map[string]any{"type": "string"}
	}
	switch t.Kind() {
	case reflect.Pointer:
		return s.of(t.Elem())
	case reflect.Bool:
		return map[string]any{"type": "boolean"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return map[string]any{"type": "integer"}
	case reflect.Float32, reflect.Float64:
		return map[string]any{"type": "number"}
	case reflect.String:
		return map[string]any{"type": "string"}
	case reflect.Slice, reflect.Array:
		if t.Elem().Kind() == reflect.Uint8 {
			return map[string]any{"type": "string", "contentEncoding": "base64"}
		}
		return map[string]any{"type": "array", "items": s.of(t.Elem())}
	case reflect.Map:
		return map[string]any{"type": "object", "additionalProperties": s.of(t.Elem())}
	case reflect.Struct:
		if t.Name() == "" {
			return s.object(t)
		}
		name, ok := s.named[t]
		if !ok {
			name = componentName(t)
			s.named[t] = name
			s.defs[name] = nil // placeholder: a recursive type refers to itself
			s.defs[name] = s.object(t)
		}
		return map[string]any{"$ref": "#/components/schemas/" + name}
	}
	return map[string]any{"description": "any JSON value"}
}

// componentName names t's schema: its Go name, with its package's in front
// outside wire and this package (RegistryItem, KeysTenantConfig).
func componentName(t reflect.Type) string {
	pkg, name, _ := strings.Cut(goName(t), ".")
	if pkg == "wire" || pkg == "controlapi" {
		return name
	}
	return strings.ToUpper(pkg[:1]) + pkg[1:] + name
}

// object is the schema of struct t: its JSON fields, required unless
// omitempty or omitzero; embedded structs' fields are inlined.
func (s *schemas) object(t reflect.Type) map[string]any {
	props := map[string]any{}
	required := []string{}
	var fields func(t reflect.Type)
	fields = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			tag := f.Tag.Get("json")
			if tag == "-" || (!f.IsExported() && !f.Anonymous) {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if f.Anonymous && name == "" {
				ft := f.Type
				if ft.Kind() == reflect.Pointer {
					ft = ft.Elem()
				}
				if ft.Kind() == reflect.Struct {
					fields(ft)
					continue
				}
			}
			if !f.IsExported() {
				continue
			}
			if name == "" {
				name = f.Name
			}
			p := s.of(f.Type)
			if strings.Contains(","+opts+",", ",string,") {
				p = map[string]any{"type": "string"}
			}
			props[name] = p
			if !strings.Contains(opts, "omitempty") && !strings.Contains(opts, "omitzero") {
				required = append(required, name)
			}
		}
	}
	fields(t)
	out := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		out["required"] = required
	}
	return out
}
