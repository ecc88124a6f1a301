package server

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// BenchmarkIngressBatchOf10 measures the ingress alone (parse, validate,
// respond) on a PutEvents batch of 10 ~1 KiB entries into DiscardPipeline,
// without the network: the ingress's share of `make bench-serve`.
func BenchmarkIngressBatchOf10(b *testing.B) {
	in, err := NewIngress(IngressOptions{Pipeline: DiscardPipeline()})
	if err != nil {
		b.Fatal(err)
	}
	entry := `{"Source":"acme/billing","DetailType":"snavio.command-sent","Detail":"{\"command\":{\"payload\":\"` + strings.Repeat("x", 1000) + `\"}}"}`
	body := `{"Entries":[` + strings.TrimSuffix(strings.Repeat(entry+",", 10), ",") + `]}`
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
		r.Header.Set("Content-Type", ContentTypeAWSJSON11)
		r.Header.Set("X-Amz-Target", TargetPutEvents)
		w := httptest.NewRecorder()
		in.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
	b.ReportMetric(float64(b.N*10)/b.Elapsed().Seconds(), "entries/s")
}
