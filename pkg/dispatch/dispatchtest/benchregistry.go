package dispatchtest

import (
	"bytes"
	"fmt"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// BenchRegistry returns a registry of n routes, n ACLs and k keysets
// shaped like production entries: every route has a DLQ, a profile and a
// rate limit; every ACL a profile; every keyset two versions, activated
// 40 and 10 days before now. The snapshot and cold-start benchmarks load
// it (n = 100,000, k = 10,000).
func BenchRegistry(n, k int, now time.Time) registry.Data {
	d := registry.Data{Routes: make([]registry.Route, n), ACLs: make([]registry.ACL, n), Keys: make([]registry.ServiceKey, k)}
	profiles := registry.Profiles()
	for i := range n {
		target := fmt.Sprintf("target-%05d", i/20)
		command := fmt.Sprintf("command-%07d", i)
		d.Routes[i] = registry.Route{
			Target: target, Command: command,
			QueueARN: "arn:aws:sqs:eu-west-1:123456789012:" + target + "-commands",
			DLQARN:   "arn:aws:sqs:eu-west-1:123456789012:" + target + "-dlq",
			Profile:  profiles[i%3], RateLimit: registry.RateLimit{Max: 1000, IntervalSeconds: 1},
			Version: 3,
		}
		d.ACLs[i] = registry.ACL{Source: fmt.Sprintf("tenant-%04d/service-%d", i%k, i%7), Target: target, Command: command,
			Allow: true, Profile: profiles[i%3], Version: 1}
	}
	secret := bytes.Repeat([]byte{0x5a}, 32)
	for i := range k {
		d.Keys[i] = registry.ServiceKey{Source: fmt.Sprintf("tenant-%04d/service-%d", i, i%7), Version: 2, Versions: []registry.KeyVersion{
			{ID: "hmac-v1", Secret: secret, ActivatedAt: now.Add(-40 * 24 * time.Hour)},
			{ID: "hmac-v2", Secret: secret, ActivatedAt: now.Add(-10 * 24 * time.Hour)},
		}}
	}
	return d
}
