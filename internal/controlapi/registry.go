// This file is the control API of `snavio dispatch serve`: the
// registry (routes, ACLs, keys, bans, quotas) with its changelog, declarative
// apply, ACL revocation, HMAC key creation and rotation, and the tenant
// configuration producers poll.
//
// Access: every request is authenticated (an Authenticator, e.g. the
// server's bearer tokens). Writes are for operators. A tenant reads the
// routes (shared by every tenant) and its own tenant's ACLs, keys (never a
// secret), bans, quotas and their history, and its own tenant configuration
// (its key material); naming another tenant's records is refused with 403.
// The operator reads everything. Errors are JSON {"error","fix"} with
// 400 (bad input), 401, 403, 404, 409 (version conflict), 422 (a route
// that fails test routing: see Options.Queues) or 500.
//
// Registration has one code path: `snavio route register` and `snavio acl
// grant` send one record to POST /v1/registry/apply, as `route apply`
// sends a file's records, so every registration is planned (idempotent),
// validated, test-routed and logged the same way, dry run included.

package controlapi

import (
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// RegistryOptions configure the API.
type RegistryOptions struct {
	Registry registry.Store
	// Auth authenticates requests (ContextAuth behind the
	// server's bearer-token middleware).
	Auth   Authenticator
	Clock  clock.Clock
	Logger *slog.Logger
	// KeyPolicy is the rotation policy (overlap, cadence).
	KeyPolicy keys.Policy
	// KeyHistory is how long a rotation keeps a version after it stopped
	// being accepted, so that an archived command signed with it can be
	// verified again before a replay (default 7 days, the archive's
	// retention; docs/replay.md).
	KeyHistory time.Duration
	// RevokeRetain keeps a revoked ACL record this long so every cache
	// sees the revocation (default 10 min; must exceed the largest ACL
	// stale TTL).
	RevokeRetain time.Duration
	// MaxBody bounds request bodies (default 4 MiB).
	MaxBody int64
	// Queues, when set, lets registration test-route each route it
	// creates or changes (the spec's "dry-run test routing"): the queue
	// must exist, be a Standard queue and redrive to the route's DLQ,
	// which must exist too. A route that fails is refused with 422 and
	// nothing is written. Nil skips the check (a store that cannot see
	// the queues, e.g. tests of the registry alone).
	Queues RouteQueues
}

// RegistryAPI serves the control endpoints.
type RegistryAPI struct {
	o   RegistryOptions
	ep  Endpoints
	mux *http.ServeMux
}

// NewRegistryAPI returns the API.
func NewRegistryAPI(o RegistryOptions) (*RegistryAPI, error) {
	if o.Registry == nil || o.Auth == nil {
		return nil, errors.New("controlapi: RegistryOptions: Registry and Auth are required")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.RevokeRetain <= 0 {
		o.RevokeRetain = 10 * time.Minute
	}
	if o.KeyHistory <= 0 {
		o.KeyHistory = DefaultKeyHistory
	}
	if o.MaxBody <= 0 {
		o.MaxBody = spec.MaxFileBytes
	}
	a := &RegistryAPI{o: o, ep: Endpoints{Auth: o.Auth, Errors: registryErrors, Logger: o.Logger}, mux: http.NewServeMux()}
	a.Register(a.mux)
	return a, nil
}

// Handler returns the API's HTTP handler (its own mux, with every
// endpoint Register adds).
func (a *RegistryAPI) Handler() http.Handler { return a.mux }

// registryWriter is the access of registry and key changes.
var registryWriter = OperatorOnly("change the registry or keys: registry and key changes need the operator token", "run the command with the operator profile")

// registryErrors maps the registry's errors to refusals.
func registryErrors(err error) *Error {
	switch {
	case errors.Is(err, registry.ErrNotFound):
		return Refuse(http.StatusNotFound, err.Error(), "list what exists with GET /v1/registry")
	case errors.Is(err, registry.ErrConflict):
		return Refuse(http.StatusConflict, err.Error(), "read the record again and retry with its current version")
	case errors.Is(err, registry.ErrInvalid):
		return BadRequest(err.Error(), "fix the fields named; see docs/registry")
	}
	return nil
}

func (a *RegistryAPI) decode(r *http.Request, v any) error {
	return Decode(r, a.o.MaxBody, v, "send the JSON documented for this endpoint")
}

func (a *RegistryAPI) actor(p server.Principal) registry.Actor {
	return registry.Actor{Who: p.String(), At: a.o.Clock.Now()}
}

func (a *RegistryAPI) list(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var kinds []registry.Kind
	if k := r.URL.Query().Get("kind"); k != "" {
		kind := registry.Kind(k)
		if !kind.Valid() {
			return BadRequest(fmt.Sprintf("unknown kind %q", k), "use route, acl, key, ban or quota")
		}
		kinds = append(kinds, kind)
	}
	f, err := parseFilter(r.URL.Query())
	if err != nil {
		return err
	}
	if !p.Operator {
		if tenant, _, _ := strings.Cut(f.source, "/"); f.source != "" && tenant != p.Tenant {
			return otherTenant(p, tenant)
		}
		if f.tenant != "" && f.tenant != p.Tenant {
			return otherTenant(p, f.tenant)
		}
	}
	d, err := a.o.Registry.Load(r.Context(), a.o.Clock.Now(), kinds...)
	if err != nil {
		return err
	}
	out := wire.RegistryItems{Items: []registry.Item{}}
	for _, it := range items(&d) {
		if f.match(it) && canRead(p, itemTenant(it)) {
			out.Items = append(out.Items, it)
		}
	}
	if len(kinds) == 0 || kinds[0] == registry.KindKey {
		for i := range out.Items {
			out.Items[i] = redactKey(out.Items[i]) // secrets only via tenant config
		}
	}
	WriteJSON(w, http.StatusOK, out)
	return nil
}

// A tenant reads the shared records (routes) and its own tenant's: the
// ACLs, keys, bans and quotas of sources <tenant>/... . Other tenants'
// records are left out of lists, and asking for one by id or by filter is
// refused (before any lookup, so the answer does not tell whether it
// exists).

// canRead reports whether p may read a record owned by tenant ("" for a
// shared record).
func canRead(p server.Principal, tenant string) bool {
	return p.Operator || tenant == "" || tenant == p.Tenant
}

func otherTenant(p server.Principal, tenant string) error {
	return Refuse(http.StatusForbidden, fmt.Sprintf("%s may not read the records of tenant %q: a tenant token reads routes and its own tenant's ACLs, keys, bans and quotas", p, tenant),
		"name your own tenant's sources, or use the operator token")
}

// itemTenant returns the tenant owning it: the part of its source before
// '/', or "" for a route.
func itemTenant(it registry.Item) string {
	var source string
	switch {
	case it.ACL != nil:
		source = it.ACL.Source
	case it.Key != nil:
		source = it.Key.Source
	case it.Ban != nil:
		source = it.Ban.Source
	case it.Quota != nil:
		source = it.Quota.Source
	default:
		return ""
	}
	tenant, _, _ := strings.Cut(source, "/")
	return tenant
}

// idTenant returns the tenant owning the record id names: every kind but
// route has the source as its first key part.
func idTenant(id registry.ID) string {
	if id.Kind() == registry.KindRoute {
		return ""
	}
	parts := strings.Split(string(id), " ")
	if len(parts) < 2 {
		return ""
	}
	tenant, _, _ := strings.Cut(parts[1], "/")
	return tenant
}

func items(d *registry.Data) []registry.Item {
	var out []registry.Item
	for i := range d.Routes {
		out = append(out, registry.Item{Route: &d.Routes[i]})
	}
	for i := range d.ACLs {
		out = append(out, registry.Item{ACL: &d.ACLs[i]})
	}
	for i := range d.Keys {
		out = append(out, registry.Item{Key: &d.Keys[i]})
	}
	for i := range d.Bans {
		out = append(out, registry.Item{Ban: &d.Bans[i]})
	}
	for i := range d.Quotas {
		out = append(out, registry.Item{Quota: &d.Quotas[i]})
	}
	return out
}

func redactKey(it registry.Item) registry.Item {
	if it.Key == nil {
		return it
	}
	k := *it.Key
	k.Versions = append([]registry.KeyVersion(nil), k.Versions...)
	for i := range k.Versions {
		k.Versions[i].Secret = nil
	}
	it.Key = &k
	return it
}

func idParam(r *http.Request) (registry.ID, error) {
	id := registry.ID(r.URL.Query().Get("id"))
	if id == "" || !id.Kind().Valid() {
		return "", BadRequest(fmt.Sprintf("invalid id %q", id), "use an id such as \"route mailer send\" or \"acl acme/billing mailer send\"")
	}
	return id, nil
}

func (a *RegistryAPI) get(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	id, err := idParam(r)
	if err != nil {
		return err
	}
	if t := idTenant(id); !canRead(p, t) {
		return otherTenant(p, t)
	}
	it, err := a.o.Registry.Get(r.Context(), id, a.o.Clock.Now())
	if err != nil {
		return err
	}
	if t := itemTenant(it); !canRead(p, t) { // an id spelled oddly
		return otherTenant(p, t)
	}
	WriteJSON(w, http.StatusOK, redactKey(it))
	return nil
}

func (a *RegistryAPI) put(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.RegistryPutRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	if req.Item.Kind() == registry.KindKey {
		return BadRequest("keys are not written directly", "use POST /v1/keys/create or /v1/keys/rotate")
	}
	if rt := req.Item.Route; rt != nil {
		if err := registry.ValidateItem(req.Item); err != nil {
			return err
		}
		if err := a.testRouting(r.Context(), []*registry.Route{rt}); err != nil {
			return err
		}
	}
	ch, err := a.o.Registry.Put(r.Context(), a.actor(p), req.Item)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, redactChange(ch))
	return nil
}

func redactChange(c registry.Change) registry.Change {
	if c.Before != nil {
		b := redactKey(*c.Before)
		c.Before = &b
	}
	if c.After != nil {
		af := redactKey(*c.After)
		c.After = &af
	}
	return c
}

func (a *RegistryAPI) delete(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	id, err := idParam(r)
	if err != nil {
		return err
	}
	v, err := strconv.ParseInt(r.URL.Query().Get("version"), 10, 64)
	if err != nil || v <= 0 {
		return BadRequest("missing or invalid version", "pass the stored version you delete, e.g. ?version=3 (see GET /v1/registry/item)")
	}
	ch, err := a.o.Registry.Delete(r.Context(), a.actor(p), id, v)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, redactChange(ch))
	return nil
}

func (a *RegistryAPI) history(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	id, err := idParam(r)
	if err != nil {
		return err
	}
	if t := idTenant(id); !canRead(p, t) {
		return otherTenant(p, t)
	}
	limit := 50
	if l := r.URL.Query().Get("limit"); l != "" {
		if limit, err = strconv.Atoi(l); err != nil || limit <= 0 || limit > 1000 {
			return BadRequest("invalid limit "+strconv.Quote(l), "use 1 to 1000")
		}
	}
	cs, err := a.o.Registry.History(r.Context(), id, limit)
	if err != nil {
		return err
	}
	for i := range cs {
		for _, it := range []*registry.Item{cs[i].Before, cs[i].After} {
			if it != nil && !canRead(p, itemTenant(*it)) { // an id spelled oddly
				return otherTenant(p, itemTenant(*it))
			}
		}
		cs[i] = redactChange(cs[i])
	}
	WriteJSON(w, http.StatusOK, wire.RegistryHistory{Changes: cs})
	return nil
}

func (a *RegistryAPI) apply(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.ApplyRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	var d registry.Data
	for i, it := range req.Items {
		if k := it.Kind(); k != registry.KindRoute && k != registry.KindACL {
			return BadRequest(fmt.Sprintf("item %d is a %q: apply takes routes and ACLs", i, k), "manage keys, bans and quotas with their own commands")
		}
		d.Add(it)
	}
	if err := registry.Validate(&d); err != nil {
		return err
	}
	now := a.o.Clock.Now()
	cur, err := a.o.Registry.Load(r.Context(), now, registry.KindRoute, registry.KindACL)
	if err != nil {
		return err
	}
	inheritProfiles(req.Items, cur.Routes)
	plan := spec.MakePlan(req.Items, items(&cur), req.Prune)
	var touched []*registry.Route
	for _, c := range plan.Changes {
		if (c.Action == spec.Create || c.Action == spec.Update) && c.After.Route != nil {
			touched = append(touched, c.After.Route)
		}
	}
	if err := a.testRouting(r.Context(), touched); err != nil {
		return err
	}
	res := wire.ApplyResult{Plan: plan, Applied: []registry.Change{}}
	if req.DryRun {
		WriteJSON(w, http.StatusOK, res)
		return nil
	}
	by := a.actor(p)
	for _, c := range plan.Changes {
		var ch registry.Change
		switch c.Action {
		case spec.Create:
			ch, err = a.o.Registry.Put(r.Context(), by, c.After.WithVersion(0))
		case spec.Update:
			ch, err = a.o.Registry.Put(r.Context(), by, c.After.WithVersion(c.Before.Version()))
		case spec.Delete:
			ch, err = a.o.Registry.Delete(r.Context(), by, c.ID, c.Before.Version())
		default:
			continue
		}
		if err != nil {
			// What was applied stays applied and is reported; a re-run
			// plans only the rest.
			status := http.StatusInternalServerError
			if ae := registryErrors(err); ae != nil {
				status = ae.Status
			}
			WriteJSON(w, status, map[string]any{"error": fmt.Sprintf("applying %s: %v", c.ID, err),
				"fix": "run apply again: it plans only what is still different", "applied": res.Applied})
			return nil
		}
		res.Applied = append(res.Applied, ch)
	}
	WriteJSON(w, http.StatusOK, res)
	return nil
}
