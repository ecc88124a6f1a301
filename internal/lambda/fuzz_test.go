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
