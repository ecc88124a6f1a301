package lambda

import (
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// FuzzFromEnv: any environment gives a config that New's checks accept
// or an error, never a panic; an accepted one names a known function, a
// key long enough and a receive bound in range.
func FuzzFromEnv(f *testing.F) {
	f.Add("ingest", "prod", "", "https://sqs.eu-west-1.amazonaws.com/123456789012/esc", "BwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwcHBwc=", "5")
	f.Add("slow", "x", "p.", "http://127.0.0.1:1/q", "", "")
	f.Add("", "", "", "", "====", "-1")
	f.Fuzz(func(t *testing.T, function, env, prefix, queue, key, receives string) {
		vars := map[string]string{EnvFunction: function, EnvEnv: env, EnvTablePrefix: prefix, EnvEscalationQueue: queue, EnvDeliveryKey: key, EnvMaxReceives: receives}
		c, err := FromEnv(func(k string) string { return vars[k] }, aws.Config{Region: "eu-west-1"})
		if err != nil {
			return
		}
		if (c.Function != FunctionIngest && c.Function != FunctionSlow) || len(c.DeliveryKey) < 32 || c.MaxReceives < 1 || c.MaxReceives > 100 {
			t.Fatalf("accepted %+v", c)
		}
		if err := c.validate(); err != nil {
			t.Fatalf("FromEnv accepted what validate refuses: %v", err)
		}
	})
}

// FuzzSnapshotEnv: the cold start's variables give trusted keys of 32
// bytes each and a positive maximum age, or errors; never a panic, and
// a bucket is never accepted without keys.
func FuzzSnapshotEnv(f *testing.F) {
	f.Add("snavio-snapshots", "gen-1=A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg=", "30m")
	f.Add("snavio-snapshots", "a=b,=c,d=", "0")
	f.Add("", "", "")
	f.Fuzz(func(t *testing.T, bucket, keys, maxAge string) {
		vars := map[string]string{EnvSnapshotBucket: bucket, EnvSnapshotKeys: keys, EnvSnapshotMaxAge: maxAge}
		var c Config
		errs := snapshotFromEnv(func(k string) string { return vars[k] }, &c)
		if err := c.validateSnapshot(); err != nil {
			errs = append(errs, err)
		}
		if len(errs) > 0 {
			return
		}
		for id, k := range c.SnapshotKeys {
			if id == "" || len(k) != 32 {
				t.Fatalf("accepted key %q of %d bytes", id, len(k))
			}
		}
		if c.SnapshotMaxAge <= 0 || (c.Store.SnapshotBucket != "" && len(c.SnapshotKeys) == 0) {
			t.Fatalf("accepted %+v", c)
		}
	})
}
