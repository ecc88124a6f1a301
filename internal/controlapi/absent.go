package controlapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/snavio/snavio/internal/server"
)

// Resource names a resource of the control API, for a host that leaves
// it out (Config.LeftOut).
type Resource string

// The control API's resources, one per Handler field.
const (
	ResourceRegistry    Resource = "registry"
	ResourceArchive     Resource = "archive"
	ResourceCredentials Resource = "credentials"
	ResourceDelivery    Resource = "delivery"
	ResourceExplain     Resource = "explain"
	ResourceQueues      Resource = "queues"
	ResourceReplays     Resource = "replays"
	ResourceReplayer    Resource = "replayer"
	ResourceSnapshots   Resource = "snapshots"
	ResourceTelemetry   Resource = "telemetry"
	ResourceTokens      Resource = "tokens"
)

// Resources lists every resource in Handler's order.
var Resources = []Resource{ResourceRegistry, ResourceArchive, ResourceCredentials, ResourceDelivery, ResourceExplain,
	ResourceQueues, ResourceReplays, ResourceReplayer, ResourceSnapshots, ResourceTelemetry, ResourceTokens}

// CodeNotOnAWS is the error code of a resource the AWS host leaves out.
const CodeNotOnAWS = "not_on_aws"

// Absence is why a host leaves a resource out: every route of the
// resource stays mounted and answers an authenticated caller 501 with
// Code, Why as the error and Instead as the fix, so a client learns what
// to use instead rather than meeting a 404.
type Absence struct {
	Code, Why, Instead string
}

// shape returns a Handler holding only r's zero-valued API: its endpoints
// are r's routes (listed, never served).
func shape(r Resource) *Handler {
	switch r {
	case ResourceRegistry:
		return &Handler{Registry: &RegistryAPI{}}
	case ResourceArchive:
		return &Handler{Archive: &ArchiveAPI{}}
	case ResourceCredentials:
		return &Handler{Credentials: &CredentialAPI{}}
	case ResourceDelivery:
		return &Handler{Delivery: &DeliveryAPI{}}
	case ResourceExplain:
		return &Handler{Explain: &ExplainAPI{}}
	case ResourceQueues:
		return &Handler{Queues: &QueueAPI{}}
	case ResourceReplays:
		return &Handler{Replays: &ReplayAPI{}}
	case ResourceReplayer:
		return &Handler{Replayer: &ReplayerAPI{}}
	case ResourceSnapshots:
		return &Handler{Snapshots: &SnapshotAPI{}}
	case ResourceTelemetry:
		return &Handler{Telemetry: &TelemetryAPI{}}
	case ResourceTokens:
		return &Handler{Tokens: &TokenAPI{}}
	}
	return nil
}

// options returns r's options in c.
func (c *Config) options(r Resource) any {
	return map[Resource]any{ResourceRegistry: c.Registry, ResourceArchive: c.Archive, ResourceCredentials: c.Credentials,
		ResourceDelivery: c.Delivery, ResourceExplain: c.Explain, ResourceQueues: c.Queues, ResourceReplays: c.Replays,
		ResourceReplayer:  c.Replayer,
		ResourceSnapshots: c.Snapshots, ResourceTelemetry: c.Telemetry, ResourceTokens: c.Tokens}[r]
}

// checkLeftOut refuses an unknown resource, an absence without its
// words, and a resource both left out and configured (a host mistake
// that would silently drop what it configured).
func (c *Config) checkLeftOut() error {
	for r, a := range c.LeftOut {
		switch {
		case shape(r) == nil:
			return fmt.Errorf("controlapi: Config.LeftOut: unknown resource %q; give one of %v", r, Resources)
		case a.Code == "" || a.Why == "" || a.Instead == "":
			return fmt.Errorf("controlapi: Config.LeftOut[%s]: give Code, Why and Instead (what the caller reads)", r)
		case !reflect.ValueOf(c.options(r)).IsZero():
			return fmt.Errorf("controlapi: Config.LeftOut[%s]: the resource is also configured; leave its options empty or do not leave it out", r)
		}
	}
	return nil
}

// leftOutEndpoints are the routes of every left-out resource, each
// authenticated (any principal) and answering its Absence with 501.
func (h *Handler) leftOutEndpoints(e *Endpoints) []endpoint {
	var rs []endpoint
	for _, r := range Resources {
		a, ok := h.leftOut[r]
		if !ok {
			continue
		}
		refusal := &Error{Status: http.StatusNotImplemented, Code: a.Code, Msg: a.Why, Fix: a.Instead}
		answer := e.Handle(AnyPrincipal, func(http.ResponseWriter, *http.Request, server.Principal) error { return refusal })
		for _, ep := range shape(r).endpoints() {
			rs = append(rs, endpoint{ep.pattern, answer})
		}
	}
	return rs
}

// LeftOut reports the resources h leaves out, in Resources' order.
func (h *Handler) LeftOut() []Resource {
	var out []Resource
	for _, r := range Resources {
		if _, ok := h.leftOut[r]; ok {
			out = append(out, r)
		}
	}
	return slices.Clip(out)
}

// openAPI serves the description with every operation of a left-out
// resource marked x-snavio-left-out: the code, error and fix it answers.
func (h *Handler) openAPI(w http.ResponseWriter, _ *http.Request, _ server.Principal) error {
	doc, err := described()
	if err != nil {
		return err
	}
	var d map[string]any
	if err := json.Unmarshal(doc, &d); err != nil {
		return err
	}
	paths, _ := d["paths"].(map[string]any)
	for _, r := range Resources {
		a, ok := h.leftOut[r]
		if !ok {
			continue
		}
		for _, ep := range shape(r).endpoints() {
			method, path, _ := strings.Cut(ep.pattern, " ")
			ops, _ := paths[path].(map[string]any)
			if op, ok := ops[strings.ToLower(method)].(map[string]any); ok {
				op["x-snavio-left-out"] = map[string]string{"code": a.Code, "error": a.Why, "fix": a.Instead}
			}
		}
	}
	b, err := json.Marshal(d)
	if err != nil {
		return err
	}
	WriteBody(w, http.StatusOK, "application/json", b)
	return nil
}
