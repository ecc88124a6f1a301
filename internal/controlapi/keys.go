// This file is HMAC key creation and rotation of producing services.

package controlapi

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/pkg/dispatch/registry"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

func newSecret() ([]byte, error) {
	b := make([]byte, signing.MinSecretLen)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("generate a secret: %w", err)
	}
	return b, nil
}

func (a *RegistryAPI) createKey(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.KeyRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	now := a.o.Clock.Now()
	if _, err := a.o.Registry.Get(r.Context(), registry.KeyID(req.Source), now); err == nil {
		return Refuse(http.StatusConflict, "source "+req.Source+" already has keys", "rotate them with POST /v1/keys/rotate (snavio key rotate --service "+req.Source+")")
	} else if !errors.Is(err, registry.ErrNotFound) {
		return err
	}
	secret, err := newSecret()
	if err != nil {
		return err
	}
	v := registry.KeyVersion{ID: "hmac-v1", Secret: secret, ActivatedAt: now.UTC()}
	if _, err := a.o.Registry.Put(r.Context(), a.actor(p), registry.Item{Key: &registry.ServiceKey{Source: req.Source, Versions: []registry.KeyVersion{v}}}); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wire.KeyResult{Source: req.Source, VersionID: v.ID, Secret: secret, Activated: v.ActivatedAt})
	return nil
}

func (a *RegistryAPI) rotateKey(w http.ResponseWriter, r *http.Request, p server.Principal) error {
	var req wire.KeyRequest
	if err := a.decode(r, &req); err != nil {
		return err
	}
	now := a.o.Clock.Now()
	it, err := a.o.Registry.Get(r.Context(), registry.KeyID(req.Source), now)
	if err != nil {
		return err
	}
	k := *it.Key
	vs := append([]registry.KeyVersion(nil), k.Versions...)
	sort.Slice(vs, func(i, j int) bool { return vs[i].ActivatedAt.Before(vs[j].ActivatedAt) })
	last := vs[len(vs)-1]
	n, err := strconv.Atoi(strings.TrimPrefix(last.ID, "hmac-v"))
	if err != nil {
		return fmt.Errorf("stored key version %q of %s: %w", last.ID, req.Source, err)
	}
	at := req.ActivateAt
	if at.IsZero() {
		at = now
	}
	if !at.After(last.ActivatedAt) {
		return BadRequest("activate_at is not after the latest version's activation", "give a later time, or omit it for now")
	}
	secret, err := newSecret()
	if err != nil {
		return err
	}
	v := registry.KeyVersion{ID: "hmac-v" + strconv.Itoa(n+1), Secret: secret, ActivatedAt: at.UTC()}
	// Keep every version the keyring still accepts (the current one until
	// the new one activates, the previous one through its overlap) and,
	// beyond that, the history replay needs (KeyHistory).
	k.Versions = append(keptVersions(vs, now, a.o.KeyPolicy.WithDefaults().Overlap+a.o.KeyHistory), v)
	if _, err := a.o.Registry.Put(r.Context(), a.actor(p), registry.Item{Key: &k}); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, wire.KeyResult{Source: req.Source, VersionID: v.ID, Secret: secret, Activated: v.ActivatedAt})
	return nil
}

// DefaultKeyHistory is Options.KeyHistory's default: the archive's
// default retention.
const DefaultKeyHistory = 7 * 24 * time.Hour

// keptVersions are the versions (in activation order) a rotation keeps:
// every version whose successor activated less than keep ago (so it is
// still accepted, or was within the key history), and the latest, within
// room for one more under registry.MaxKeyVersions (the oldest go first:
// a command signed with a dropped version is refused by a replay, never
// replayed unverified).
func keptVersions(vs []registry.KeyVersion, now time.Time, keep time.Duration) []registry.KeyVersion {
	cutoff := now.Add(-keep)
	from := len(vs) - 1
	for from > 0 && vs[from].ActivatedAt.After(cutoff) {
		from-- // vs[from-1]'s successor activated after the cutoff
	}
	from = max(from, len(vs)-(registry.MaxKeyVersions-1))
	return vs[from:]
}
