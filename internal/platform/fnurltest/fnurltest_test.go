package fnurltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// The fake refuses every way a request can be wrongly signed, so a
// client that passes it signs as AWS checks.
func TestServerVerifiesSignatures(t *testing.T) {
	now := time.Date(2026, 11, 26, 2, 0, 0, 0, time.UTC)
	fn, err := New(Options{Region: "eu-west-1", Env: "test", Clock: clock.NewFake(now)})
	if err != nil {
		t.Fatal(err)
	}
	defer fn.Close()
	fn.AddKey("AKOP", "secret", "tok", "arn:aws:sts::123456789012:assumed-role/snavio-test-operator/s")
	fn.AddKey("AKUSER", "secret", "", "arn:aws:iam::123456789012:user/alice")

	type req struct {
		key, secret, token, service, region string
		at                                  time.Time
		body, sent                          string // sent: the body on the wire, when not body
		hashHeader                          string // "-": none
	}
	good := req{key: "AKOP", secret: "secret", token: "tok", service: "lambda", region: "eu-west-1", at: now, body: `{"source":"acme/billing"}`}
	send := func(r req) (int, string) {
		sum := sha256.Sum256([]byte(r.body))
		hash := hex.EncodeToString(sum[:])
		wire := r.body
		if r.sent != "" {
			wire = r.sent
		}
		hr, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, fn.URL+"/v1/keys/create", strings.NewReader(r.body))
		hr.Header.Set("Content-Type", "application/json")
		switch r.hashHeader {
		case "":
			hr.Header.Set("X-Amz-Content-Sha256", hash)
		case "-":
		default:
			hr.Header.Set("X-Amz-Content-Sha256", r.hashHeader)
		}
		c := aws.Credentials{AccessKeyID: r.key, SecretAccessKey: r.secret, SessionToken: r.token}
		if err := v4.NewSigner().SignHTTP(context.Background(), c, hr, hash, r.service, r.region, r.at); err != nil {
			t.Fatal(err)
		}
		hr.Body = io.NopCloser(bytes.NewReader([]byte(wire)))
		hr.ContentLength = int64(len(wire))
		resp, err := http.DefaultClient.Do(hr)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := send(good); code != http.StatusOK {
		t.Fatalf("a good request: %d %s", code, body)
	}
	for name, c := range map[string]struct {
		mod  func(*req)
		want string
	}{
		"wrong secret":       {func(r *req) { r.secret = "guess" }, "signature we calculated does not match"},
		"unknown key":        {func(r *req) { r.key = "AKNONE" }, "unknown access key"},
		"wrong service":      {func(r *req) { r.service = "execute-api" }, "correct service"},
		"wrong region":       {func(r *req) { r.region = "us-east-1" }, "valid region"},
		"old signature":      {func(r *req) { r.at = now.Add(-6 * time.Minute) }, "signature expired"},
		"body changed":       {func(r *req) { r.sent = `{"source":"evil/other"}` }, "not the body's hash"},
		"no hash header":     {func(r *req) { r.hashHeader = "-" }, "not the body's hash"},
		"lying hash header":  {func(r *req) { r.hashHeader = strings.Repeat("0", 64) }, "not the body's hash"},
		"no session token":   {func(r *req) { r.token = "" }, "security token"},
		"not a role session": {func(r *req) { r.key, r.token = "AKUSER", "" }, "not a role session"},
	} {
		r := good
		c.mod(&r)
		code, body := send(r)
		if code != http.StatusForbidden || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %s, want 403 with %q", name, code, body, c.want)
		}
	}
}
