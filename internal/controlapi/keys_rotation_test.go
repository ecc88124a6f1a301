package controlapi

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/pkg/dispatch/cache"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/shield"
	"github.com/snavio/snavio/pkg/dispatch/signing"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// rotationRig is the control API and the shield over one registry and one
// fake clock: keys are created and rotated through the API, as `snavio key`
// does, and judged by the shield reading them through the key cache, as
// the dispatcher does.
type rotationRig struct {
	*registryEnv
	caches *cache.Caches
	shield *shield.Shield
	tel    *telemetry.Memory
	keys   map[string]*signing.Key // by version id
	n      int
}

func newRotationRig(t *testing.T) *rotationRig {
	t.Helper()
	e := newRegistryEnv(t)
	tel := &telemetry.Memory{}
	c, err := cache.New(cache.Config{Jitter: -1}, cache.Deps{Reader: e.reg, Clock: e.clk, Telemetry: telemetry.Discard{}, Executor: func(f func()) { f() }})
	if err != nil {
		t.Fatal(err)
	}
	sh, err := shield.New(shield.Config{SampleRate: -1, NoticeInterval: -1}, shield.Deps{Clock: e.clk, Keys: c.Keys, Telemetry: tel})
	if err != nil {
		t.Fatal(err)
	}
	return &rotationRig{registryEnv: e, caches: c, shield: sh, tel: tel, keys: map[string]*signing.Key{}}
}

// key creates or rotates acme/billing's key through the API and reloads
// the cache, as the running dispatcher's refresh would.
func (r *rotationRig) key(t *testing.T, path string, activateAt time.Time) string {
	t.Helper()
	var res wire.KeyResult
	if st := r.do(t, "op", "POST", path, wire.KeyRequest{Source: "acme/billing", ActivateAt: activateAt}, &res); st != 200 {
		t.Fatalf("%s: HTTP %d", path, st)
	}
	k, err := signing.NewKey(res.VersionID, res.Secret)
	if err != nil {
		t.Fatal(err)
	}
	r.keys[res.VersionID] = k
	if err := r.caches.LoadAll(context.Background()); err != nil {
		t.Fatal(err)
	}
	return res.VersionID
}

// check signs a command with version at the fake clock's now and wants the
// shield's verdict: want "" is accepted, legacy whether it was accepted as
// the previous version (a snavio.secret.legacy_key_used event), otherwise
// the reason code.
func (r *rotationRig) check(t *testing.T, step, version string, want reason.Code, legacy bool) {
	t.Helper()
	r.n++
	env := envelope.New(uuidN(r.n), r.clk.Now(), "mailer", "send", []byte(`{}`))
	if err := r.keys[version].SignEnvelope(&env, "acme/billing"); err != nil {
		t.Fatal(err)
	}
	b, err := env.AppendJSON(nil)
	if err != nil {
		t.Fatal(err)
	}
	r.tel.Reset()
	_, err = r.shield.Check("acme/billing", b)
	if got := reason.Of(err); got != want {
		t.Fatalf("%s: %s got %q (%v), want %q", step, version, got, err, want)
	}
	gotLegacy := false
	for _, e := range r.tel.Events() {
		if l, ok := e.(telemetry.LegacyKeyUsed); ok && l.VersionID == version {
			gotLegacy = true
		}
	}
	if gotLegacy != legacy {
		t.Fatalf("%s: %s legacy_key_used %v, want %v", step, version, gotLegacy, legacy)
	}
}

func uuidN(n int) string { return fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n) }

const overlap = 7 * 24 * time.Hour // keys.DefaultOverlap, spelled out as the docs give it

// TestScheduledRotationFromOneVersion: `key rotate --activate-in 1h` on a
// service with one version, then each step of the schedule.
func TestScheduledRotationFromOneVersion(t *testing.T) {
	r := newRotationRig(t)
	v1 := r.key(t, "/v1/keys/create", time.Time{})
	at := t0.Add(time.Hour)
	v2 := r.key(t, "/v1/keys/rotate", at)

	r.check(t, "before activation", v1, "", false)
	r.check(t, "before activation", v2, reason.KeyNotYetValid, false)
	r.clk.Set(at.Add(-time.Second))
	r.check(t, "just before activation", v1, "", false)
	r.clk.Set(at)
	r.check(t, "at activation", v2, "", false)
	r.check(t, "at activation", v1, "", true)
	r.clk.Set(at.Add(overlap - time.Second))
	r.check(t, "end of the overlap", v1, "", true)
	r.clk.Set(at.Add(overlap))
	r.check(t, "after the overlap", v1, reason.KeyExpired, false)
	r.check(t, "after the overlap", v2, "", false)
}

// TestScheduledRotationKeepsThePreviousVersion: the attack run's case. v2
// replaced v1 at once (v1 is in its overlap); a rotation scheduled an hour
// ahead used to drop v1 at once (unknown_key_version). v1 stays accepted as
// the previous version until v3 activates, which ends its acceptance early.
func TestScheduledRotationKeepsThePreviousVersion(t *testing.T) {
	r := newRotationRig(t)
	v1 := r.key(t, "/v1/keys/create", time.Time{})
	r.clk.Advance(24 * time.Hour)
	v2 := r.key(t, "/v1/keys/rotate", time.Time{})
	r.check(t, "after the immediate rotation", v1, "", true)
	r.clk.Advance(time.Hour)
	at := r.clk.Now().Add(time.Hour)
	v3 := r.key(t, "/v1/keys/rotate", at)

	r.check(t, "before activation", v1, "", true)
	r.check(t, "before activation", v2, "", false)
	r.check(t, "before activation", v3, reason.KeyNotYetValid, false)
	r.clk.Set(at)
	r.check(t, "at activation", v3, "", false)
	r.check(t, "at activation", v2, "", true)
	r.check(t, "at activation", v1, reason.KeyExpired, false)
	r.clk.Set(at.Add(overlap))
	r.check(t, "after the overlap", v2, reason.KeyExpired, false)
	r.check(t, "after the overlap", v3, "", false)

	// The next rotation keeps them as key history (for replay's
	// re-verification), still refused: expired, not unknown.
	r.key(t, "/v1/keys/rotate", time.Time{})
	r.check(t, "after the next rotation", v1, reason.KeyExpired, false)
	r.check(t, "after the next rotation", v2, reason.KeyExpired, false)
}

// TestRescheduledRotationKeepsTheCurrentVersion: a second scheduled
// rotation before the first activates must not drop the current version.
func TestRescheduledRotationKeepsTheCurrentVersion(t *testing.T) {
	r := newRotationRig(t)
	v1 := r.key(t, "/v1/keys/create", time.Time{})
	v2 := r.key(t, "/v1/keys/rotate", t0.Add(time.Hour))
	v3 := r.key(t, "/v1/keys/rotate", t0.Add(2*time.Hour))
	r.check(t, "before either activates", v1, "", false)
	r.check(t, "before either activates", v2, reason.KeyNotYetValid, false)
	r.clk.Set(t0.Add(time.Hour))
	r.check(t, "v2 current", v2, "", false)
	r.check(t, "v2 current", v1, "", true)
	r.clk.Set(t0.Add(2 * time.Hour))
	r.check(t, "v3 current", v3, "", false)
	r.check(t, "v3 current", v2, "", true)
	r.check(t, "v3 current", v1, reason.KeyExpired, false)
}
