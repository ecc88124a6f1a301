// This file is ACL revocation: a revoked grant is kept (RevokeRetain) so
// that every cache learns the revocation.

package controlapi

import (
	"net/http"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

func (a *RegistryAPI) revoke(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.ACLRevokeRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	now := a.o.Clock.Now()
	id := registry.ACLID(req.Source, req.Target, req.Command)
	it, err := a.o.Registry.Get(r.Context(), id, now)
	if err != nil {
		return err
	}
	if !it.ACL.Allow {
		return Refuse(http.StatusConflict, "the grant is already revoked", "nothing to do")
	}
	// The revoked record stays for RevokeRetain so that caches learn the
	// revocation time (the executed_after_acl_revoked audit).
	rev := registry.Revoke(*it.ACL, now, a.o.RevokeRetain)
	ch, err := a.o.Registry.Put(r.Context(), a.actor(p), registry.Item{ACL: &rev})
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, ch)
	return nil
}
