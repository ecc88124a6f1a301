// This file is a tenant's configuration, the key material its producers
// poll.

package controlapi

import (
	"errors"
	"net/http"
	"strings"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/keys"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func (a *RegistryAPI) tenantConfig(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	tenant := r.PathValue("tenant")
	if !p.Operator && p.Tenant != tenant {
		return Refuse(http.StatusForbidden, "a tenant reads only its own configuration", "use tenant "+p.Tenant+"'s token, or the operator's")
	}
	return a.writeTenantConfig(w, r, tenant)
}

func (a *RegistryAPI) writeTenantConfig(w http.ResponseWriter, r *http.Request, tenant string) error {
	now := a.o.Clock.Now()
	d, err := a.o.Registry.Load(r.Context(), now, registry.KindKey)
	if err != nil {
		return err
	}
	versions := map[string][]keys.Version{}
	for _, k := range d.Keys {
		if t, _, _ := strings.Cut(k.Source, "/"); t != tenant {
			continue
		}
		for _, v := range k.Versions {
			versions[k.Source] = append(versions[k.Source], keys.Version{ID: v.ID, Secret: v.Secret, ActivatedAt: v.ActivatedAt, NotAfter: v.NotAfter})
		}
	}
	ring, err := keys.NewKeyring(a.o.KeyPolicy, versions)
	if err != nil {
		return err
	}
	tc, err := ring.TenantConfig(tenant, now)
	if errors.Is(err, keys.ErrNoKeys) {
		return Refuse(http.StatusNotFound, "tenant "+tenant+" has no service with an HMAC key",
			"create one: POST /v1/keys/create (snavio key create --service "+tenant+"/<service>)")
	}
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, tc)
	return nil
}
