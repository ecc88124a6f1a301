package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"testing"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/internal/controlapi"
)

// FuzzFunctionURLRequest: any event JSON (as aws-lambda-go decodes the
// Function URL's payload) is either refused with 400 or 413, or decoded
// into a request that keeps the event's method, raw path and query and
// body (base64-decoded, within the bound), and carries the IAM caller
// exactly when the event has one. Never a panic.
func FuzzFunctionURLRequest(f *testing.F) {
	seed := func(ev events.LambdaFunctionURLRequest) {
		b, err := json.Marshal(ev)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	seed(urlEvent("GET", "/v1/registry", "kind=route&source=acme%2Fbilling", "", "snavio-prod-operator"))
	seed(urlEvent("PUT", "/v1/registry/item", "", `{"item":{}}`, "snavio-prod-tenant-acme"))
	b64 := urlEvent("POST", "/v1/explain", "", base64.StdEncoding.EncodeToString([]byte(`{"source":"a/b"}`)), "")
	b64.IsBase64Encoded = true
	b64.Cookies = []string{"a=1", "b=2"}
	seed(b64)
	f.Add([]byte(`{"rawPath":"/v1/x","requestContext":{"http":{"method":"get"}}}`))
	f.Add([]byte(`{"rawPath":"/v1/%zz","rawQueryString":"a=%","requestContext":{"http":{"method":"GET"}}}`))
	f.Add([]byte(`{"rawPath":"/","headers":{"bad name":"v","x":"a\r\nb"},"requestContext":{"http":{"method":"GET"}}}`))
	f.Add([]byte(`{"rawPath":"/","body":"////","isBase64Encoded":true,"headers":{"content-length":"9"},"requestContext":{"http":{"method":"POST"},"authorizer":{"iam":{}}}}`))
	f.Add([]byte(`{}`))
	const maxBody = 64
	f.Fuzz(func(t *testing.T, payload []byte) {
		var ev events.LambdaFunctionURLRequest
		if json.Unmarshal(payload, &ev) != nil {
			return
		}
		r, refusal := functionURLRequest(context.Background(), &ev, maxBody)
		if refusal != nil {
			if refusal.Status != http.StatusBadRequest && refusal.Status != http.StatusRequestEntityTooLarge {
				t.Fatalf("refused with %d: %s", refusal.Status, refusal.Msg)
			}
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil || int64(len(body)) > maxBody || r.ContentLength != int64(len(body)) {
			t.Fatalf("body of %d bytes (%v), content length %d", len(body), err, r.ContentLength)
		}
		want := []byte(ev.Body)
		if ev.IsBase64Encoded {
			want, _ = base64.StdEncoding.DecodeString(ev.Body)
		}
		if !bytes.Equal(body, want) {
			t.Fatalf("body %q, the event's %q", body, want)
		}
		path, err := url.PathUnescape(ev.RawPath)
		if err != nil || r.Method != ev.RequestContext.HTTP.Method || r.URL.RawQuery != ev.RawQueryString || r.URL.Path != path {
			t.Fatalf("request %s %s?%s from %s %s?%s", r.Method, r.URL.EscapedPath(), r.URL.RawQuery, ev.RequestContext.HTTP.Method, ev.RawPath, ev.RawQueryString)
		}
		_, hasCaller := controlapi.IAMCallerFrom(r.Context())
		if hasCaller != (ev.RequestContext.Authorizer != nil && ev.RequestContext.Authorizer.IAM != nil) {
			t.Fatalf("IAM caller in the context: %v, in the event: %+v", hasCaller, ev.RequestContext.Authorizer)
		}
	})
}

// FuzzURLResponse: whatever the handler answers, the Function URL's
// response carries the same status and body (as text, or base64).
func FuzzURLResponse(f *testing.F) {
	f.Add(200, "application/json", []byte(`{"a":1}`))
	f.Add(501, "text/plain; charset=utf-8", []byte("x\xff"))
	f.Add(0, "", []byte{0, 1, 2})
	f.Add(404, "application/octet-stream", []byte("abc"))
	f.Fuzz(func(t *testing.T, status int, ctype string, body []byte) {
		if status != 0 && (status < 100 || status > 999) {
			return
		}
		w := newURLResponse()
		w.Header().Set("Content-Type", ctype)
		w.Header().Add("Set-Cookie", "a=1")
		if status != 0 {
			w.WriteHeader(status)
		}
		_, _ = w.Write(body)
		ev := w.event()
		got := []byte(ev.Body)
		if ev.IsBase64Encoded {
			var err error
			if got, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
				t.Fatal(err)
			}
		}
		want := status
		if status == 0 {
			want = http.StatusOK
		}
		if ev.StatusCode != want {
			t.Fatalf("status %d, want %d", ev.StatusCode, want)
		}
		if !bytes.Equal(got, body) || len(ev.Cookies) != 1 || ev.Headers["set-cookie"] != "" {
			t.Fatalf("body %q (base64 %v), want %q; cookies %v", got, ev.IsBase64Encoded, body, ev.Cookies)
		}
	})
}
