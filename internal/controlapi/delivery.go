// This file is the delivery-key API of `snavio dispatch serve`:
// a target's key for verifying that the messages in its queues were
// delivered by the dispatcher (docs/security/delivery-signature.md).
//
//	GET /v1/delivery-keys/{target}   the target's verification key (operator only)
//
// The key verifies that target's messages only, and cannot sign another
// target's. It is derived from the platform's master secret, so it is
// the same on every call until the master is replaced.

package controlapi

import (
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// DeliveryOptions configure the API. Signer and Registry are required.
type DeliveryOptions struct {
	// Signer is the dispatcher's delivery signer.
	Signer *provenance.Signer
	// Registry says which targets routes deliver to.
	Registry registry.Reader
	Clock    clock.Clock
	Logger   *slog.Logger
}

// DeliveryAPI serves GET /v1/delivery-keys/{target}.
type DeliveryAPI struct {
	o  DeliveryOptions
	ep Endpoints
}

// NewDeliveryAPI returns the API.
func NewDeliveryAPI(o DeliveryOptions) (*DeliveryAPI, error) {
	if o.Signer == nil || o.Registry == nil {
		return nil, errors.New("controlapi: DeliveryOptions: Signer and Registry are required")
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &DeliveryAPI{o: o, ep: Endpoints{Logger: o.Logger}}, nil
}

// MountDelivery builds the API from o and registers it on mux.
func MountDelivery(mux *http.ServeMux, o DeliveryOptions) error {
	a, err := NewDeliveryAPI(o)
	if err != nil {
		return err
	}
	a.Register(mux)
	return nil
}

func (a *DeliveryAPI) get(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	target := r.PathValue("target")
	if !envelope.ValidTarget(target) {
		return BadRequest(fmt.Sprintf("invalid target %.80q", target),
			"name a target as routes do: 1-64 of [a-z0-9._-], starting with a letter or digit, e.g. orders")
	}
	d, err := a.o.Registry.Load(r.Context(), a.o.Clock.Now(), registry.KindRoute)
	if err != nil {
		return fmt.Errorf("reading the routes: %w", err)
	}
	routes := 0
	for i := range d.Routes {
		if d.Routes[i].Target == target {
			routes++
		}
	}
	if routes == 0 {
		return Refuse(http.StatusNotFound, "no route delivers to target "+target,
			"check the name with `snavio route list`; a target's key does not change when routes are added, so fetch it once a route names the target")
	}
	k, err := a.o.Signer.Key(target)
	if err != nil { // cannot happen: the target is valid
		return BadRequest(err.Error(), "name a valid target")
	}
	WriteJSON(w, http.StatusOK, wire.DeliveryKey{Target: k.Target, KeyID: k.ID, Key: base64.RawURLEncoding.EncodeToString(k.Secret), Scheme: provenance.Scheme, Routes: routes})
	return nil
}
