package route_test

import (
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/cli/route"
	"github.com/snavio/snavio/internal/spec"
	"github.com/snavio/snavio/pkg/dispatch/registry"
)

// FuzzSeconds: any flag value gives whole positive seconds or a usage
// error naming the flag; never a panic.
func FuzzSeconds(f *testing.F) {
	for _, s := range []string{"", "30s", "5m", "1h30m", "300", "1500ms", "-1s", "0s", "9999999999h", "1e3s", "s"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := route.Seconds("--ttl", s)
		if err != nil {
			if cmdutil.ExitCode(err) != cmdutil.ExitUsage || !strings.Contains(err.Error(), "--ttl") {
				t.Fatalf("%q: %v is not a usage error naming the flag", s, err)
			}
			return
		}
		if s == "" {
			if n != 0 {
				t.Fatalf("empty gave %d", n)
			}
			return
		}
		d, perr := time.ParseDuration(s)
		if perr != nil || n <= 0 || time.Duration(n)*time.Second != d {
			t.Fatalf("%q: %d seconds (parse %v %v)", s, n, d, perr)
		}
	})
}

// FuzzRateRoundTrip: what the table prints as a rate, --rate reads back.
func FuzzRateRoundTrip(f *testing.F) {
	f.Add(int64(100), int64(1))
	f.Add(int64(6000), int64(60))
	f.Add(int64(1), int64(3600))
	f.Add(int64(10), int64(5))
	f.Add(int64(7), int64(86400))
	f.Fuzz(func(t *testing.T, max, iv int64) {
		if max <= 0 || iv <= 0 || iv > registry.MaxTTLSeconds*365 {
			return
		}
		s := route.Rate(registry.RateLimit{Max: max, IntervalSeconds: iv})
		m, i, err := spec.ParseRate(s)
		if err != nil || m != max || i != iv {
			t.Fatalf("%d/%ds printed %q read back %d/%d %v", max, iv, s, m, i, err)
		}
	})
}
