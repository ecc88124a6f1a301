package registry_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

var t0 = time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)

func route() registry.Route {
	return registry.Route{
		Target: "billing", Command: "charge-card",
		QueueARN: "arn:aws:sqs:eu-west-1:123456789012:billing",
		DLQARN:   "arn:aws:sqs:eu-west-1:123456789012:billing-dlq",
	}
}

func acl() registry.ACL {
	return registry.ACL{Source: "shop/web", Target: "billing", Command: "charge-card", Allow: true}
}

func key() registry.ServiceKey {
	return registry.ServiceKey{Source: "shop/web", Versions: []registry.KeyVersion{
		{ID: "hmac-v1", Secret: make([]byte, 32), ActivatedAt: t0},
		{ID: "hmac-v2", Secret: make([]byte, 32), ActivatedAt: t0.Add(time.Hour)},
	}}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(d *registry.Data)
		field string // "" = valid
	}{
		{"valid", func(*registry.Data) {}, ""},
		{"local queue", func(d *registry.Data) {
			d.Routes[0].QueueARN = "arn:snavio:sqs:local:000000000000:billing"
			d.Routes[0].DLQARN = "arn:snavio:sqs:local:000000000000:billing-dlq"
		}, ""},
		{"fifo queue", func(d *registry.Data) { d.Routes[0].QueueARN = "arn:aws:sqs:eu-west-1:123456789012:billing.fifo" }, "queue_arn"},
		{"fifo dlq", func(d *registry.Data) { d.Routes[0].DLQARN = "arn:aws:sqs:eu-west-1:123456789012:dlq.fifo" }, "dlq_arn"},
		{"missing dlq", func(d *registry.Data) { d.Routes[0].DLQARN = "" }, "dlq_arn"},
		{"dlq is the queue", func(d *registry.Data) { d.Routes[0].DLQARN = d.Routes[0].QueueARN }, "dlq_arn"},
		{"dlq in another region", func(d *registry.Data) { d.Routes[0].DLQARN = "arn:aws:sqs:us-east-1:123456789012:dlq" }, "dlq_arn"},
		{"sns arn", func(d *registry.Data) { d.Routes[0].QueueARN = "arn:aws:sns:eu-west-1:123456789012:topic" }, "queue_arn"},
		{"short account", func(d *registry.Data) { d.Routes[0].QueueARN = "arn:aws:sqs:eu-west-1:1234:q" }, "queue_arn"},
		{"bad region", func(d *registry.Data) { d.Routes[0].QueueARN = "arn:aws:sqs:EU:123456789012:q" }, "queue_arn"},
		{"bad local", func(d *registry.Data) { d.Routes[0].QueueARN = "arn:snavio:sqs:local:123456789012:q" }, "queue_arn"},
		{"bad target", func(d *registry.Data) { d.Routes[0].Target = "Billing" }, "target"},
		{"bad command", func(d *registry.Data) { d.Routes[0].Command = "" }, "command"},
		{"unknown dedupe", func(d *registry.Data) { d.Routes[0].DedupeMode = "exactly-once" }, "dedupe_mode"},
		{"unknown route profile", func(d *registry.Data) { d.Routes[0].Profile = "paranoid" }, "sensitivity_profile"},
		{"unknown acl profile", func(d *registry.Data) { d.ACLs[0].Profile = "high" }, "sensitivity_profile"},
		{"negative drain", func(d *registry.Data) { d.Routes[0].ExpectedDrainSeconds = -1 }, "expected_drain_seconds"},
		{"rate without interval", func(d *registry.Data) { d.Routes[0].RateLimit = registry.RateLimit{Max: 10} }, "rate_limit.interval_seconds"},
		{"burst above max", func(d *registry.Data) {
			d.Routes[0].RateLimit = registry.RateLimit{Max: 10, IntervalSeconds: 1, Burst: 11}
		}, "rate_limit.burst"},
		{"dominant share", func(d *registry.Data) { d.Routes[0].Fairness.DominantShare = 1.5 }, "fairness.dominant_share"},
		{"prefetch leases", func(d *registry.Data) { d.Routes[0].PrefetchLeases = -1 }, "prefetch_leases"},
		{"duplicate route", func(d *registry.Data) { d.Routes = append(d.Routes, d.Routes[0]) }, "target,command"},
		{"duplicate acl", func(d *registry.Data) { d.ACLs = append(d.ACLs, d.ACLs[0]) }, "source,target,command"},
		{"duplicate keyset", func(d *registry.Data) { d.Keys = append(d.Keys, d.Keys[0]) }, "source"},
		{"duplicate key version", func(d *registry.Data) { d.Keys[0].Versions[1].ID = "hmac-v1" }, "versions"},
		{"short secret", func(d *registry.Data) { d.Keys[0].Versions[0].Secret = []byte("short") }, "versions"},
		{"versions out of order", func(d *registry.Data) { d.Keys[0].Versions[0].ActivatedAt = t0.Add(2 * time.Hour) }, "versions"},
		{"revoked without time", func(d *registry.Data) { d.ACLs[0].Allow = false }, "revoked_at"},
		{"allowed with revoked time", func(d *registry.Data) { d.ACLs[0].RevokedAt = t0 }, "revoked_at"},
		{"ttl override half set", func(d *registry.Data) { d.ACLs[0].FreshTTLSeconds = 5 }, "fresh_ttl_seconds,stale_ttl_seconds"},
		{"ttl override inverted", func(d *registry.Data) { d.ACLs[0].FreshTTLSeconds, d.ACLs[0].StaleTTLSeconds = 5, 4 }, "fresh_ttl_seconds,stale_ttl_seconds"},
		{"bad acl source", func(d *registry.Data) { d.ACLs[0].Source = "no-slash" }, "source"},
		{"global ban without expiry", func(d *registry.Data) {
			d.Bans = append(d.Bans, registry.Ban{Source: "shop/web", Kind: registry.BanGlobal})
		}, "expires_at"},
		{"unknown ban kind", func(d *registry.Data) { d.Bans = append(d.Bans, registry.Ban{Source: "shop/web", Kind: "forever"}) }, "kind"},
		{"quota without limit", func(d *registry.Data) {
			d.Quotas = append(d.Quotas, registry.Quota{Source: "shop/web", Target: "billing", Command: "x"})
		}, "limit.max"},
		{"negative version", func(d *registry.Data) { d.Routes[0].Version = -1 }, "version"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := registry.Data{Routes: []registry.Route{route()}, ACLs: []registry.ACL{acl()}, Keys: []registry.ServiceKey{key()}}
			tc.edit(&d)
			err := registry.Validate(&d)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("Validate = %v; want nil", err)
				}
				return
			}
			var ve *registry.ValidationError
			if !errors.As(err, &ve) || !errors.Is(err, registry.ErrInvalid) {
				t.Fatalf("Validate = %v; want a *ValidationError matching ErrInvalid", err)
			}
			if ve.Problems[0].Field != tc.field {
				t.Fatalf("first problem %q; want field %q", ve.Problems[0], tc.field)
			}
		})
	}
}

func TestValidateBoundsProblems(t *testing.T) {
	var d registry.Data
	for range 100 {
		d.Routes = append(d.Routes, registry.Route{Target: "x"})
	}
	var ve *registry.ValidationError
	if !errors.As(registry.Validate(&d), &ve) || len(ve.Problems) != registry.MaxProblems || ve.More == 0 {
		t.Fatalf("problems = %d, more %d; want %d listed and the rest counted", len(ve.Problems), ve.More, registry.MaxProblems)
	}
	if !strings.Contains(ve.Error(), "more") {
		t.Fatalf("error %q does not mention the rest", ve.Error())
	}
}

func TestValidateItem(t *testing.T) {
	if err := registry.ValidateItem(registry.Item{}); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("empty item: %v", err)
	}
	r, a := route(), acl()
	if err := registry.ValidateItem(registry.Item{Route: &r, ACL: &a}); !errors.Is(err, registry.ErrInvalid) {
		t.Fatalf("item with two records: %v", err)
	}
	if err := registry.ValidateItem(registry.Item{Route: &r}); err != nil {
		t.Fatalf("valid route: %v", err)
	}
}

func TestRevoke(t *testing.T) {
	a := registry.Revoke(acl(), t0, time.Hour)
	if a.Allow || !a.RevokedAt.Equal(t0) || a.ExpiresAt != t0.Add(time.Hour).Unix()+1 {
		t.Fatalf("Revoke = %+v", a)
	}
	if err := registry.ValidateItem(registry.Item{ACL: &a}); err != nil {
		t.Fatalf("a revocation must be valid: %v", err)
	}
	short := acl()
	short.ExpiresAt = t0.Unix() + 5
	if got := registry.Revoke(short, t0, time.Hour); got.ExpiresAt != short.ExpiresAt {
		t.Fatalf("Revoke lengthened a shorter expiry: %d", got.ExpiresAt)
	}
}

func TestItem(t *testing.T) {
	r := route()
	r.Metadata = map[string]string{"a": "b"}
	it := registry.Item{Route: &r}
	if it.Kind() != registry.KindRoute || it.ID() != registry.RouteID("billing", "charge-card") || it.ID().Kind() != registry.KindRoute {
		t.Fatalf("Kind/ID = %s %s", it.Kind(), it.ID())
	}
	c := it.Clone()
	c.Route.Metadata["a"] = "changed"
	if r.Metadata["a"] != "b" {
		t.Fatal("Clone shares the metadata map")
	}
	if v := it.WithVersion(4); v.Version() != 4 || r.Version != 0 {
		t.Fatalf("WithVersion = %d, original %d", v.Version(), r.Version)
	}
	k := key()
	kc := registry.Item{Key: &k}.Clone()
	kc.Key.Versions[0].Secret[0] = 9
	if k.Versions[0].Secret[0] != 0 {
		t.Fatal("Clone shares secrets")
	}
	if !registry.Live(0, t0) || !registry.Live(t0.Unix()+1, t0) || registry.Live(t0.Unix(), t0) {
		t.Fatal("Live")
	}
}
