package keys

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/reason"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

var t0 = time.Date(2025, 4, 1, 0, 0, 0, 0, time.UTC)

const day = 24 * time.Hour

func secret(b byte) []byte { return bytes.Repeat([]byte{b}, 32) }

// ring: v1 active from t0, v2 from t0+30d, v3 scheduled at t0+60d; a second
// service with a revoked key.
func ring(t *testing.T) *Keyring {
	t.Helper()
	k, err := NewKeyring(Policy{}, map[string][]Version{
		"tenant-a/billing": {
			{ID: "hmac-v2", Secret: secret(2), ActivatedAt: t0.Add(30 * day)},
			{ID: "hmac-v1", Secret: secret(1), ActivatedAt: t0},
			{ID: "hmac-v3", Secret: secret(3), ActivatedAt: t0.Add(60 * day)},
		},
		"tenant-a/revoked": {{ID: "hmac-v1", Secret: secret(9), ActivatedAt: t0, NotAfter: t0.Add(10 * day)}},
		"tenant-b/other":   {{ID: "hmac-v1", Secret: secret(8), ActivatedAt: t0}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func TestResolve(t *testing.T) {
	k := ring(t)
	for _, tc := range []struct {
		name, source, version string
		at                    time.Time
		code                  reason.Code
		legacy, soon          bool
		expires               time.Time
	}{
		{"current, no successor active", "tenant-a/billing", "hmac-v1", t0.Add(day), "", false, false, t0.Add(37 * day)},
		{"current v2", "tenant-a/billing", "hmac-v2", t0.Add(31 * day), "", false, false, t0.Add(67 * day)},
		{"previous inside overlap", "tenant-a/billing", "hmac-v1", t0.Add(31 * day), "", true, false, t0.Add(37 * day)},
		{"previous, soon to expire", "tenant-a/billing", "hmac-v1", t0.Add(35 * day), "", true, true, t0.Add(37 * day)},
		{"previous at the last instant", "tenant-a/billing", "hmac-v1", t0.Add(37*day - time.Nanosecond), "", true, true, t0.Add(37 * day)},
		{"previous outside overlap", "tenant-a/billing", "hmac-v1", t0.Add(37 * day), reason.KeyExpired, false, false, time.Time{}},
		{"two versions back", "tenant-a/billing", "hmac-v1", t0.Add(61 * day), reason.KeyExpired, false, false, time.Time{}},
		{"previous once v3 is current", "tenant-a/billing", "hmac-v2", t0.Add(61 * day), "", true, false, t0.Add(67 * day)},
		{"not yet active", "tenant-a/billing", "hmac-v3", t0.Add(59 * day), reason.KeyNotYetValid, false, false, time.Time{}},
		{"unknown version", "tenant-a/billing", "hmac-v9", t0.Add(day), reason.UnknownKeyVersion, false, false, time.Time{}},
		{"other service's version", "tenant-b/other", "hmac-v2", t0.Add(31 * day), reason.UnknownKeyVersion, false, false, time.Time{}},
		{"unknown source", "tenant-c/x", "hmac-v1", t0.Add(day), reason.UnknownSource, false, false, time.Time{}},
		{"revoked before", "tenant-a/revoked", "hmac-v1", t0.Add(9 * day), "", false, true, t0.Add(10 * day)},
		{"revoked after", "tenant-a/revoked", "hmac-v1", t0.Add(10 * day), reason.KeyExpired, false, false, time.Time{}},
		{"open-ended current", "tenant-b/other", "hmac-v1", t0.Add(400 * day), "", false, false, time.Time{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := k.Resolve(tc.source, tc.version, tc.at)
			if reason.Of(err) != tc.code {
				t.Fatalf("err = %v, want %q", err, tc.code)
			}
			if err != nil {
				if m != (Match{}) {
					t.Fatalf("match on error: %+v", m)
				}
				return
			}
			if m.Key == nil || m.Key.VersionID() != tc.version || m.Legacy != tc.legacy || m.ExpiringSoon != tc.soon || !m.ExpiresAt.Equal(tc.expires) {
				t.Fatalf("got %+v (key %v), want legacy=%v soon=%v expires=%v", m, m.Key.VersionID(), tc.legacy, tc.soon, tc.expires)
			}
		})
	}
}

func TestResolveKeyMatchesSecret(t *testing.T) {
	k := ring(t)
	m, err := k.Resolve("tenant-a/billing", "hmac-v2", t0.Add(31*day))
	if err != nil {
		t.Fatal(err)
	}
	msg := signing.Message{ID: "x", Payload: []byte(`{}`)}
	want, _ := signing.NewKey("hmac-v2", secret(2))
	sig, _ := want.Sign(&msg)
	if err := m.Key.Verify(&msg, sig); err != nil {
		t.Fatal("resolved key does not verify the version's signatures")
	}
}

func TestNewKeyringRejects(t *testing.T) {
	for name, vs := range map[string]map[string][]Version{
		"bad source":     {"billing": {{ID: "hmac-v1", Secret: secret(1), ActivatedAt: t0}}},
		"short secret":   {"t/a": {{ID: "hmac-v1", Secret: secret(1)[:8], ActivatedAt: t0}}},
		"no activation":  {"t/a": {{ID: "hmac-v1", Secret: secret(1)}}},
		"bad version id": {"t/a": {{ID: "v1", Secret: secret(1), ActivatedAt: t0}}},
		"numbers out of order": {"t/a": {
			{ID: "hmac-v2", Secret: secret(1), ActivatedAt: t0},
			{ID: "hmac-v1", Secret: secret(2), ActivatedAt: t0.Add(day)}}},
		"duplicate id": {"t/a": {
			{ID: "hmac-v1", Secret: secret(1), ActivatedAt: t0},
			{ID: "hmac-v1", Secret: secret(2), ActivatedAt: t0.Add(day)}}},
	} {
		if _, err := NewKeyring(Policy{}, vs); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestPolicy(t *testing.T) {
	p := Policy{}.WithDefaults()
	if p.Overlap != 7*day || p.Rotation != 30*day || p.PollInterval != 12*time.Hour || p.ExpiryWarning != 72*time.Hour {
		t.Fatalf("defaults: %+v", p)
	}
	k, _ := NewKeyring(Policy{Overlap: day, ExpiryWarning: time.Hour}, map[string][]Version{"t/a": {
		{ID: "hmac-v1", Secret: secret(1), ActivatedAt: t0}, {ID: "hmac-v2", Secret: secret(2), ActivatedAt: t0.Add(day)}}})
	if m, err := k.Resolve("t/a", "hmac-v1", t0.Add(day+22*time.Hour)); err != nil || m.ExpiringSoon {
		t.Fatalf("custom policy, 2h before end: %+v %v", m, err)
	}
	if m, err := k.Resolve("t/a", "hmac-v1", t0.Add(day+23*time.Hour)); err != nil || !m.ExpiringSoon {
		t.Fatalf("custom policy, 1h before end: %+v %v", m, err)
	}
	if _, err := k.Resolve("t/a", "hmac-v1", t0.Add(2*day)); reason.Of(err) != reason.KeyExpired {
		t.Fatalf("custom overlap: %v", err)
	}
}

func TestRotationDue(t *testing.T) {
	k := ring(t)
	if k.RotationDue("tenant-a/billing", t0.Add(40*day)) {
		t.Error("v3 is scheduled: not due")
	}
	if k.RotationDue("tenant-a/billing", t0.Add(89*day)) {
		t.Error("v3 active 29 days: not due")
	}
	if !k.RotationDue("tenant-a/billing", t0.Add(90*day)) {
		t.Error("v3 active 30 days: due")
	}
	if !k.RotationDue("tenant-a/revoked", t0.Add(11*day)) {
		t.Error("revoked current: due")
	}
	if !k.RotationDue("tenant-z/none", t0) {
		t.Error("no keys: due")
	}
	if v, ok := k.Current("tenant-a/billing", t0.Add(45*day)); !ok || v.ID != "hmac-v2" {
		t.Errorf("Current = %v %v", v.ID, ok)
	}
}

func TestTenantConfig(t *testing.T) {
	k := ring(t)
	now := t0.Add(31 * day)
	cfg, err := k.TenantConfig("tenant-a", now)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cfg.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	want := `{"tenant":"tenant-a","generated_at":"2025-05-02T00:00:00Z","poll_interval_seconds":43200,"overlap_seconds":604800,"services":[` +
		`{"source":"tenant-a/billing",` +
		`"current":{"version_id":"hmac-v2","secret":"AgICAgICAgICAgICAgICAgICAgICAgICAgICAgICAgI=","activated_at":"2025-05-01T00:00:00Z","expires_at":"2025-06-07T00:00:00Z"},` +
		`"previous":{"version_id":"hmac-v1","secret":"AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=","activated_at":"2025-04-01T00:00:00Z","expires_at":"2025-05-08T00:00:00Z"},` +
		`"next":{"version_id":"hmac-v3","secret":"AwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwMDAwM=","activated_at":"2025-05-31T00:00:00Z"},` +
		`"next_rotation_at":"2025-05-31T00:00:00Z"},` +
		`{"source":"tenant-a/revoked"}]}`
	if string(b) != want {
		t.Fatalf("document\n got %s\nwant %s", b, want)
	}
	// tenant-a/revoked was revoked at t0+10d: listed, with no key to use.
	if _, err := cfg.SigningKey("tenant-a/revoked", now); err == nil {
		t.Fatal("revoked service got a signing key")
	}
	back, err := ParseTenantConfig(b)
	if err != nil {
		t.Fatal(err)
	}
	key, err := back.SigningKey("tenant-a/billing", now)
	if err != nil || key.VersionID() != "hmac-v2" {
		t.Fatalf("SigningKey now: %v %v", key, err)
	}
	key, err = back.SigningKey("tenant-a/billing", t0.Add(60*day))
	if err != nil || key.VersionID() != "hmac-v3" {
		t.Fatalf("SigningKey after next activates: %v %v", key, err)
	}
	if _, err := back.SigningKey("tenant-a/nope", now); err == nil {
		t.Fatal("unknown source")
	}
	if _, err := k.TenantConfig("tenant-zzz", now); err == nil {
		t.Fatal("tenant without keys")
	}
	if _, err := ParseTenantConfig([]byte(`{"tenant":"a","tenant":"b"}`)); err == nil {
		t.Fatal("duplicate names accepted")
	}
	if c, err := ParseTenantConfig([]byte(`{"tenant":"a","future_field":1}`)); err != nil || c.Tenant != "a" {
		t.Fatalf("unknown member must be tolerated: %v", err)
	}
	if !strings.Contains(string(b), `"poll_interval_seconds":43200`) {
		t.Fatal("poll interval")
	}
}

func TestPolls(t *testing.T) {
	var p Polls
	if _, ok := p.LastPoll("t/a"); ok {
		t.Fatal("empty tracker knows a poll")
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() { p.Record("t/a", t0.Add(time.Duration(i)*time.Hour)) })
	}
	wg.Wait()
	if last, ok := p.LastPoll("t/a"); !ok || !last.Equal(t0.Add(7*time.Hour)) {
		t.Fatalf("LastPoll = %v %v", last, ok)
	}
	pol := Policy{}
	if !PollOverdue(pol, time.Time{}, false, t0) {
		t.Error("never polled must be overdue")
	}
	if PollOverdue(pol, t0, true, t0.Add(12*time.Hour)) {
		t.Error("exactly 12h: not overdue")
	}
	if !PollOverdue(pol, t0, true, t0.Add(12*time.Hour+time.Second)) {
		t.Error("over 12h: overdue")
	}
}
