package server

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

var sigv4Now = time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)

const sigv4Body = `{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{}"}]}`

// signedRequest builds a PutEvents request signed at `at` by the SDK's
// signer, as a client would send it.
func signedRequest(t testing.TB, body string, id, secret string, at time.Time) *http.Request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8787/", strings.NewReader(body))
	r.Header.Set("Content-Type", ContentTypeAWSJSON11)
	r.Header.Set("X-Amz-Target", TargetPutEvents)
	if err := ingresscred.Sign(r, []byte(body), ingresscred.Key{AccessKeyID: id, SecretAccessKey: secret}, "eu-west-1", at); err != nil {
		t.Fatal(err)
	}
	return r
}

func newTestVerifier(t testing.TB, clk clock.Clock) *SigV4Verifier {
	t.Helper()
	v, err := NewSigV4Verifier(testCredentials(), clk, 0)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestSigV4VerifierAcceptsTheSDKsSignature(t *testing.T) {
	v := newTestVerifier(t, clock.NewFake(sigv4Now))
	r := signedRequest(t, sigv4Body, testAccessKeyID, testSecret, sigv4Now)
	c, aerr := v.Verify(r, []byte(sigv4Body))
	if aerr != nil {
		t.Fatalf("Verify: %v", aerr)
	}
	if c.Tenant != testTenant || c.AccessKeyID != testAccessKeyID {
		t.Fatalf("caller = %+v", c)
	}
}

func TestSigV4VerifierRefusals(t *testing.T) {
	fake := clock.NewFake(sigv4Now)
	v := newTestVerifier(t, fake)
	good := func() *http.Request { return signedRequest(t, sigv4Body, testAccessKeyID, testSecret, sigv4Now) }
	tests := []struct {
		name   string
		req    func() *http.Request
		body   string
		code   string
		status int
		msg    string
	}{
		{"unsigned", func() *http.Request {
			r := good()
			r.Header.Del("Authorization")
			return r
		}, sigv4Body, ErrCodeMissingAuthToken, 403, "Missing Authentication Token"},
		{"presigned", func() *http.Request {
			r := good()
			r.Header.Del("Authorization")
			r.URL.RawQuery = "X-Amz-Signature=00"
			return r
		}, sigv4Body, ErrCodeIncompleteSignature, 400, "presigned URLs are not accepted"},
		{"other algorithm", func() *http.Request {
			r := good()
			r.Header.Set("Authorization", "AWS AKID:sig")
			return r
		}, sigv4Body, ErrCodeIncompleteSignature, 400, "requires the AWS4-HMAC-SHA256 algorithm"},
		{"no signature part", func() *http.Request {
			r := good()
			h := r.Header.Get("Authorization")
			r.Header.Set("Authorization", h[:strings.Index(h, ", Signature=")])
			return r
		}, sigv4Body, ErrCodeIncompleteSignature, 400, "requires 'Signature' parameter"},
		{"unknown key", func() *http.Request {
			return signedRequest(t, sigv4Body, "SNVKAAAAAAAAAAAAAAAA", testSecret, sigv4Now)
		}, sigv4Body, ErrCodeUnrecognizedClient, 400, "The security token included in the request is invalid"},
		{"wrong secret", func() *http.Request {
			return signedRequest(t, sigv4Body, testAccessKeyID, strings.Repeat("A", 40), sigv4Now)
		}, sigv4Body, ErrCodeInvalidSignature, 400, "The request signature we calculated does not match"},
		{"body changed after signing", good, strings.Replace(sigv4Body, "acme/a", "evil/a", 1),
			ErrCodeInvalidSignature, 400, "does not match the signature you provided"},
		{"signed header changed", func() *http.Request {
			r := good()
			r.Header.Set("X-Amz-Target", "AWSEvents.PutRule")
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "does not match the signature you provided"},
		{"host changed", func() *http.Request {
			r := good()
			r.Host = "127.0.0.1:9999"
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "does not match"},
		{"payload hash header lies", func() *http.Request {
			r := good()
			r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("0", 64))
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "'x-amz-content-sha256' header does not match"},
		{"too old", func() *http.Request {
			return signedRequest(t, sigv4Body, testAccessKeyID, testSecret, sigv4Now.Add(-6*time.Minute))
		}, sigv4Body, ErrCodeInvalidSignature, 400, "Signature expired: 20261125T115400Z is now earlier than 20261125T115500Z (20261125T120000Z - 5 min.)"},
		{"from the future", func() *http.Request {
			return signedRequest(t, sigv4Body, testAccessKeyID, testSecret, sigv4Now.Add(6*time.Minute))
		}, sigv4Body, ErrCodeInvalidSignature, 400, "Signature not yet current"},
		{"no date", func() *http.Request {
			r := good()
			r.Header.Del("X-Amz-Date")
			return r
		}, sigv4Body, ErrCodeIncompleteSignature, 400, "'X-Amz-Date' header"},
		{"scope date differs", func() *http.Request {
			r := good()
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/20261125/", "/20261124/", 1))
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "Date in Credential scope does not match"},
		{"another service", func() *http.Request {
			r := good()
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/events/", "/sqs/", 1))
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "Credential should be scoped to correct service: 'events'."},
		{"user-agent signed", func() *http.Request {
			r := good()
			r.Header.Set("User-Agent", "x")
			r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "host;x-amz-date", "host;user-agent;x-amz-date", 1))
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "the header user-agent is signed; AWS signers never sign it"},
		{"host not signed", func() *http.Request {
			r := good()
			h := r.Header.Get("Authorization")
			r.Header.Set("Authorization", strings.Replace(h, "content-type;host;", "content-type;", 1))
			return r
		}, sigv4Body, ErrCodeInvalidSignature, 400, "'Host' must be a 'SignedHeader'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, aerr := v.Verify(tt.req(), []byte(tt.body))
			if aerr == nil {
				t.Fatal("Verify accepted")
			}
			if aerr.Type != tt.code || aerr.Status != tt.status || !strings.Contains(aerr.Message, tt.msg) || aerr.Reason == "" {
				t.Fatalf("Verify = %d %s %q (reason %s), want %d %s containing %q", aerr.Status, aerr.Type, aerr.Message, aerr.Reason, tt.status, tt.code, tt.msg)
			}
		})
	}
	// Within the skew the same request is fine on either side.
	for _, d := range []time.Duration{-5 * time.Minute, 5 * time.Minute} {
		fake.Set(sigv4Now.Add(d))
		if _, aerr := v.Verify(good(), []byte(sigv4Body)); aerr != nil {
			t.Fatalf("clock %v off: %v", d, aerr)
		}
	}
}

// The verifier reproduces signatures of a signed Content-Length and a
// query string, which some SDKs send.
func TestSigV4VerifierContentLengthAndQuery(t *testing.T) {
	v := newTestVerifier(t, clock.NewFake(sigv4Now))
	r := httptest.NewRequest(http.MethodPost, "http://localhost/?b=2&a=1", strings.NewReader(sigv4Body))
	r.Header.Set("Content-Type", ContentTypeAWSJSON11)
	r.ContentLength = int64(len(sigv4Body))
	if err := ingresscred.Sign(r, []byte(sigv4Body), ingresscred.Key{AccessKeyID: testAccessKeyID, SecretAccessKey: testSecret}, "us-east-1", sigv4Now); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(r.Header.Get("Authorization"), "content-length") {
		t.Fatalf("content-length not signed: %s", r.Header.Get("Authorization"))
	}
	if _, aerr := v.Verify(r, []byte(sigv4Body)); aerr != nil {
		t.Fatalf("Verify: %v", aerr)
	}
	r.URL.RawQuery = "b=2&a=3"
	if _, aerr := v.Verify(r, []byte(sigv4Body)); aerr == nil || aerr.Type != ErrCodeInvalidSignature {
		t.Fatalf("changed query: %v", aerr)
	}
}

// An entry whose Source is another tenant's is refused with
// AccessDeniedException and never reaches the pipeline; the signer's own
// entries in the same request go through.
func TestIngressBindsSourcesToTheSigner(t *testing.T) {
	p := &recordingPipeline{}
	m := NewMetrics()
	mem := &telemetry.Memory{}
	fake := clock.NewFake(time.Now())
	rep, err := NewRefusalReporter(mem, fake, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngress(IngressOptions{Pipeline: p, Metrics: m, Auth: newTestVerifier(t, clock.System()), Refusals: rep})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{}"},{"Source":"globex/shop","DetailType":"t","Detail":"{}"},{"Source":"acme","DetailType":"t","Detail":"{}"},{"Source":"acme/","DetailType":"t","Detail":"{}"}]}`
	for range 3 {
		w := httptest.NewRecorder()
		r := signedRequest(t, body, testAccessKeyID, testSecret, time.Now())
		r.Host = "127.0.0.1:8787"
		in.ServeHTTP(w, r)
		if w.Code != 200 || !strings.Contains(w.Body.String(), `"FailedEntryCount":3`) ||
			strings.Count(w.Body.String(), `"ErrorCode":"AccessDeniedException"`) != 3 {
			t.Fatalf("response %d %s", w.Code, w.Body)
		}
	}
	if seen := p.entries(); len(seen) != 3 || seen[0].Source != "acme/a" {
		t.Fatalf("pipeline saw %+v", seen)
	}
	if got := len(mem.Events()); got != 1 {
		t.Fatalf("%d refusal reports within the interval, want 1 (the first)", got)
	}
	fake.Advance(time.Minute)
	rep.Flush()
	evs := mem.Events()
	if len(evs) != 2 {
		t.Fatalf("reports %+v, want 2", evs)
	}
	first, second := evs[0].(IngressRefused), evs[1].(IngressRefused)
	if first.Count != 1 || second.Count != 8 || first.Reason != "access_denied" || first.Tenant != "acme" || first.ExampleSource != "globex/shop" {
		t.Fatalf("reports %+v, %+v: want 1 then the 8 since", first, second)
	}
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	if !strings.Contains(rec.Body.String(), "snavio_ingress_access_denied_total 9") {
		t.Fatalf("metrics lack the 9 refusals:\n%s", rec.Body)
	}
}

// FuzzSigV4Verify feeds arbitrary Authorization, X-Amz-Date,
// X-Amz-Content-Sha256 headers, query strings and bodies to the verifier.
// It must never panic, must refuse with a complete AWS error, and must
// accept only a request signed with the test secret over exactly that
// body (which the fuzzer cannot forge).
func FuzzSigV4Verify(f *testing.F) {
	good := signedRequest(f, sigv4Body, testAccessKeyID, testSecret, sigv4Now)
	f.Add(good.Header.Get("Authorization"), good.Header.Get("X-Amz-Date"), "", "", []byte(sigv4Body))
	f.Add(good.Header.Get("Authorization"), good.Header.Get("X-Amz-Date"), strings.Repeat("0", 64), "a=1", []byte(sigv4Body))
	f.Add("AWS4-HMAC-SHA256 Credential=SNVKTESTKEYACMEAAAAA/20261125/us-east-1/events/aws4_request, SignedHeaders=host;x-amz-date, Signature="+strings.Repeat("a", 64), "20261125T120000Z", "", "", []byte("{}"))
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e,SignedHeaders=;,Signature=", "x", "UNSIGNED-PAYLOAD", "X-Amz-Signature=1", []byte{})
	f.Add("", "", "", "", []byte(nil))
	v := newTestVerifier(f, clock.NewFake(sigv4Now))
	f.Fuzz(func(t *testing.T, auth, date, payloadHash, query string, body []byte) {
		r := httptest.NewRequest(http.MethodPost, "http://127.0.0.1:8787/", bytes.NewReader(body))
		r.Header.Set("Content-Type", ContentTypeAWSJSON11)
		r.Header.Set("X-Amz-Target", TargetPutEvents)
		r.URL.RawQuery = query
		if auth != "" {
			r.Header["Authorization"] = []string{auth}
		}
		if date != "" {
			r.Header["X-Amz-Date"] = []string{date}
		}
		if payloadHash != "" {
			r.Header["X-Amz-Content-Sha256"] = []string{payloadHash}
		}
		c, aerr := v.Verify(r, body)
		if aerr != nil {
			if aerr.Type == "" || aerr.Message == "" || aerr.Reason == "" || aerr.Status < 400 {
				t.Fatalf("incomplete error %+v", aerr)
			}
			return
		}
		if c.Tenant != testTenant || !bytes.Equal(body, []byte(sigv4Body)) || auth != good.Header.Get("Authorization") {
			t.Fatalf("accepted a request the test did not sign: %q %q", auth, body)
		}
	})
}

// BenchmarkSigV4Verify is one verification of a PutEvents request of 10
// entries of 1 KiB payload each, as bench-serve sends.
func BenchmarkSigV4Verify(b *testing.B) {
	entry := `{"Source":"acme/a","DetailType":"snavio.command-sent","Detail":"` + strings.Repeat("x", 1400) + `"}`
	body := `{"Entries":[` + strings.Repeat(entry+",", 9) + entry + `]}`
	v := newTestVerifier(b, clock.NewFake(sigv4Now))
	r := signedRequest(b, body, testAccessKeyID, testSecret, sigv4Now)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, aerr := v.Verify(r, []byte(body)); aerr != nil {
			b.Fatal(aerr)
		}
	}
}
