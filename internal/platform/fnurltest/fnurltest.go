// Package fnurltest stands in, in tests, for what cannot run here: AWS's
// IAM check in front of the control API's Lambda Function URL, and IAM's
// trust policies behind STS AssumeRole.
//
// Server is a fake Function URL that asserts the real client's requests:
// it recomputes each request's SigV4 signature with the SDK's own signer
// from the credentials the test gave it (or that STS issued through
// STSTap), checks the scope (service lambda, the region, the date), the
// body's hash against x-amz-content-sha256 and the clock skew, and passes
// the request with its verified caller to the real control API with the
// Lambda host's IAM mapping (controlapi.IAMAuth over stack.Names): the
// registry over a memory store, and whoami. The other resources are left
// out and answer 501 with the host's typed code. With Options.Function
// it hands the verified request, as a Function URL event, to a real
// control function (lambda.Control.Handle) instead.
//
// STSTap is a reverse proxy in front of an STS emulator (kumo): it
// records each AssumeRole call, refuses one whose external id does not
// match the role's (as a trust policy with sts:ExternalId would), and
// registers the credentials STS issued with the Server.
package fnurltest

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/snavio/snavio/internal/controlapi"
	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/memstore"
)

// MaxSkew is how far a request's signing time may be from the server's
// clock, as AWS allows.
const MaxSkew = 5 * time.Minute

// NotServedCode is the typed code of the 501 the fake answers for what
// it does not serve: the Lambda host's for what it leaves out.
const NotServedCode = controlapi.CodeNotOnAWS

// Account is the account whose role sessions the fake maps to principals.
const Account = "123456789012"

// Options configure a Server.
type Options struct {
	// Region is the Function URL's region (default us-east-1).
	Region string
	// Env names the deployment's roles (default test).
	Env string
	// Clock is the server's time (default the system clock).
	Clock clock.Clock
	// TLS serves https (Client trusts its certificate).
	TLS bool
	// API builds the control API the server fronts, given the host's IAM
	// authenticator (a test's own resources over the emulators); nil
	// serves the registry over Registry, and whoami.
	API func(auth controlapi.Authenticator) (http.Handler, error)
	// Function, when set, answers each verified request instead of the
	// memory registry API: the request as Lambda hands a Function URL
	// event over (payload format 2.0, the verified caller in
	// requestContext.authorizer.iam), as lambda.Control.Handle takes it.
	Function func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)
}

// Request is one request the server answered.
type Request struct {
	Method, Path string
	// Caller is the IAM identity's ARN ("" when the signature failed).
	Caller string
	Status int
	// Refused says why the fake Function URL answered 403 itself.
	Refused string
}

// Server is a fake control API Function URL.
type Server struct {
	URL    string
	Region string
	Env    string
	// Registry is the control API's store.
	Registry *memstore.Registry

	clk    clock.Clock
	srv    *httptest.Server
	api    http.Handler
	fn     func(context.Context, events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error)
	signer *v4.Signer

	seq atomic.Int64

	mu       sync.Mutex
	keys     map[string]identity
	requests []Request
	status   int // answer every request with it (0: serve)
}

type identity struct {
	arn, secret, token string
}

// New starts a server; Close stops it.
func New(o Options) (*Server, error) {
	if o.Region == "" {
		o.Region = "us-east-1"
	}
	if o.Env == "" {
		o.Env = "test"
	}
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	s := &Server{Region: o.Region, Env: o.Env, Registry: memstore.NewRegistry(), clk: o.Clock, signer: v4.NewSigner(), keys: map[string]identity{}}
	auth := controlapi.IAMAuth{Account: Account, Roles: stack.Names{Env: o.Env}}
	if o.API != nil {
		api, err := o.API(auth)
		if err != nil {
			return nil, err
		}
		s.api = api
	} else {
		leftOut := map[controlapi.Resource]controlapi.Absence{}
		for _, r := range controlapi.Resources {
			if r != controlapi.ResourceRegistry {
				leftOut[r] = controlapi.Absence{Code: NotServedCode, Why: string(r) + " is not served by this control API host", Instead: "the fake serves the registry and whoami only"}
			}
		}
		api, err := controlapi.New(controlapi.Config{
			Auth:     auth,
			Clock:    o.Clock,
			Registry: controlapi.RegistryOptions{Registry: s.Registry},
			LeftOut:  leftOut,
		})
		if err != nil {
			return nil, err
		}
		s.api = api
	}
	s.fn = o.Function
	if o.TLS {
		s.srv = httptest.NewTLSServer(http.HandlerFunc(s.serve))
	} else {
		s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	}
	s.URL = s.srv.URL
	return s, nil
}

// Close stops the server.
func (s *Server) Close() { s.srv.Close() }

// Client is an HTTP client that reaches the server whatever the URL's
// host (a Function URL's name, say), trusting its certificate.
func (s *Server) Client() *http.Client {
	c := s.srv.Client()
	tr := c.Transport.(*http.Transport).Clone()
	addr := s.srv.Listener.Addr().String()
	tr.DialContext = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	if tr.TLSClientConfig != nil {
		tr.TLSClientConfig.ServerName = "example.com" // httptest's certificate
	}
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}
}

// AddKey makes the credentials (akid, secret, session token) those of
// the IAM identity arn.
func (s *Server) AddKey(akid, secret, token, arn string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.keys[akid] = identity{arn: arn, secret: secret, token: token}
}

// AnswerAll makes the server answer every request with status (as the
// Function URL does itself, before the function runs); 0 serves again.
func (s *Server) AnswerAll(status int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.status = status
}

// Requests returns the requests answered so far, and forgets them.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	r := s.requests
	s.requests = nil
	return r
}

// OperatorRole and TenantRole are the role names the server maps to
// principals (internal/deploy/stack's names).
func (s *Server) OperatorRole() string { return stack.Names{Env: s.Env}.OperatorRole() }
func (s *Server) TenantRole(tenant string) string {
	name, _ := stack.Names{Env: s.Env}.TenantRole(tenant)
	return name
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	rec := Request{Method: r.Method, Path: r.URL.Path}
	defer func() {
		s.mu.Lock()
		s.requests = append(s.requests, rec)
		s.mu.Unlock()
	}()
	s.mu.Lock()
	status := s.status
	s.mu.Unlock()
	if status != 0 {
		rec.Status, rec.Refused = status, "AnswerAll"
		writeJSON(w, status, map[string]string{"Message": http.StatusText(status)})
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 8<<20))
	if err != nil {
		rec.Status = http.StatusBadRequest
		w.WriteHeader(rec.Status)
		return
	}
	caller, err := s.verify(r, body)
	if err != nil {
		// The Function URL's own refusal: 403 {"Message": ...}.
		rec.Status, rec.Refused = http.StatusForbidden, err.Error()
		writeJSON(w, http.StatusForbidden, map[string]string{"Message": err.Error()})
		return
	}
	rec.Caller = caller
	if s.fn != nil {
		rec.Status = s.invoke(w, r, body, caller)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	out := httptest.NewRecorder()
	s.api.ServeHTTP(out, r.WithContext(controlapi.WithIAMCaller(r.Context(), controlapi.IAMCaller{UserARN: caller})))
	for k, v := range out.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(out.Code)
	_, _ = w.Write(out.Body.Bytes())
	rec.Status = out.Code
}

// invoke passes a verified request to the Function as its Function URL
// event, writes the function's answer and returns its status.
func (s *Server) invoke(w http.ResponseWriter, r *http.Request, body []byte, caller string) int {
	ev := events.LambdaFunctionURLRequest{Version: "2.0", RawPath: r.URL.EscapedPath(), RawQueryString: r.URL.RawQuery,
		Headers: map[string]string{}, Body: base64.StdEncoding.EncodeToString(body), IsBase64Encoded: true}
	for k, v := range r.Header {
		if strings.EqualFold(k, "Cookie") {
			ev.Cookies = append(ev.Cookies, v...)
			continue
		}
		ev.Headers[strings.ToLower(k)] = strings.Join(v, ",")
	}
	ev.Headers["host"] = r.Host
	ev.Headers["content-length"] = strconv.Itoa(len(body))
	ev.RequestContext.HTTP.Method, ev.RequestContext.HTTP.Path = r.Method, r.URL.Path
	ev.RequestContext.HTTP.SourceIP, ev.RequestContext.DomainName = r.RemoteAddr, r.Host
	ev.RequestContext.RequestID = fmt.Sprintf("fnurltest-%d", s.seq.Add(1))
	account := ""
	if parts := strings.Split(caller, ":"); len(parts) > 4 {
		account = parts[4]
	}
	ev.RequestContext.Authorizer = &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{
		AccountID: account, UserARN: caller}}
	resp, err := s.fn(r.Context(), ev)
	if err != nil {
		// Lambda answers a function's error with a bare 502.
		writeJSON(w, http.StatusBadGateway, map[string]string{"Message": "Internal Server Error"})
		return http.StatusBadGateway
	}
	out := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if out, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			writeJSON(w, http.StatusBadGateway, map[string]string{"Message": "the function's body is not base64"})
			return http.StatusBadGateway
		}
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(out)
	return status
}

// verify checks r's SigV4 signature and returns the caller's ARN.
func (s *Server) verify(r *http.Request, body []byte) (string, error) {
	auth := r.Header.Get("Authorization")
	cred, signed, sig, err := parseAuthorization(auth)
	if err != nil {
		return "", err
	}
	scope := strings.Split(cred, "/") // AKID/date/region/service/aws4_request
	if len(scope) != 5 || scope[4] != "aws4_request" {
		return "", fmt.Errorf("malformed credential scope %q", cred)
	}
	if scope[3] != "lambda" {
		return "", fmt.Errorf("credential should be scoped to correct service: 'lambda', not %q", scope[3])
	}
	if scope[2] != s.Region {
		return "", fmt.Errorf("credential should be scoped to a valid region: %q, not %q", s.Region, scope[2])
	}
	at, err := time.Parse("20060102T150405Z", r.Header.Get("X-Amz-Date"))
	if err != nil {
		return "", fmt.Errorf("bad X-Amz-Date %q", r.Header.Get("X-Amz-Date"))
	}
	if scope[1] != at.Format("20060102") {
		return "", fmt.Errorf("credential scope date %s is not the X-Amz-Date's", scope[1])
	}
	if d := s.clk.Now().Sub(at); d > MaxSkew || d < -MaxSkew {
		return "", fmt.Errorf("signature expired: signed at %s, server time %s", at.Format(time.RFC3339), s.clk.Now().UTC().Format(time.RFC3339))
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	if got := r.Header.Get("X-Amz-Content-Sha256"); got != hash {
		return "", fmt.Errorf("x-amz-content-sha256 %q is not the body's hash %s", got, hash)
	}
	s.mu.Lock()
	id, ok := s.keys[scope[0]]
	s.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("the security token included in the request is invalid (unknown access key %s)", scope[0])
	}
	if id.token != "" && r.Header.Get("X-Amz-Security-Token") != id.token {
		return "", fmt.Errorf("the security token included in the request is invalid")
	}
	// Recompute the signature over the signed headers alone.
	u := &url.URL{Scheme: "http", Host: r.Host, Path: r.URL.Path, RawPath: r.URL.RawPath, RawQuery: r.URL.RawQuery}
	re, err := http.NewRequestWithContext(context.Background(), r.Method, u.String(), nil)
	if err != nil {
		return "", err
	}
	re.Host, re.ContentLength = r.Host, r.ContentLength
	for _, h := range strings.Split(signed, ";") {
		if h == "host" || h == "content-length" {
			continue
		}
		re.Header[http.CanonicalHeaderKey(h)] = r.Header.Values(h)
	}
	creds := aws.Credentials{AccessKeyID: scope[0], SecretAccessKey: id.secret, SessionToken: id.token}
	if err := s.signer.SignHTTP(context.Background(), creds, re, hash, scope[3], scope[2], at); err != nil {
		return "", err
	}
	_, wantSigned, want, _ := parseAuthorization(re.Header.Get("Authorization"))
	if wantSigned != signed || !hmac.Equal([]byte(want), []byte(sig)) {
		return "", fmt.Errorf("the request signature we calculated does not match the signature you provided")
	}
	return id.arn, nil
}

func parseAuthorization(h string) (cred, signed, sig string, err error) {
	rest, ok := strings.CutPrefix(h, "AWS4-HMAC-SHA256 ")
	if !ok {
		return "", "", "", fmt.Errorf("missing authentication token (Authorization %q)", h)
	}
	for _, part := range strings.Split(rest, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Credential":
			cred = v
		case "SignedHeaders":
			signed = v
		case "Signature":
			sig = v
		}
	}
	if cred == "" || signed == "" || sig == "" {
		return "", "", "", fmt.Errorf("malformed Authorization %q", h)
	}
	return cred, signed, sig, nil
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, _ := json.Marshal(v)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// AssumeRoleCall is one AssumeRole the tap saw.
type AssumeRoleCall struct {
	RoleARN, ExternalID string
	// Refused is the tap's reason when it answered AccessDenied.
	Refused string
}

// STSTap proxies STS requests to an emulator, recording AssumeRole.
type STSTap struct {
	URL string

	fn  *Server
	srv *httptest.Server

	mu       sync.Mutex
	external map[string]string // role ARN -> the external id its trust policy asks
	calls    []AssumeRoleCall
}

// NewSTSTap serves a proxy to the STS emulator at target that registers
// the credentials AssumeRole issues with fn; Close stops it.
func NewSTSTap(target string, fn *Server) (*STSTap, error) {
	u, err := url.Parse(target)
	if err != nil {
		return nil, err
	}
	t := &STSTap{fn: fn, external: map[string]string{}}
	proxy := httputil.NewSingleHostReverseProxy(u)
	proxy.ModifyResponse = t.capture
	t.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		form, _ := url.ParseQuery(string(body))
		if form.Get("Action") == "AssumeRole" {
			call := AssumeRoleCall{RoleARN: form.Get("RoleArn"), ExternalID: form.Get("ExternalId")}
			t.mu.Lock()
			want, asks := t.external[call.RoleARN]
			if asks && want != call.ExternalID {
				call.Refused = "external id mismatch"
			}
			t.calls = append(t.calls, call)
			t.mu.Unlock()
			if call.Refused != "" {
				w.Header().Set("Content-Type", "text/xml")
				w.WriteHeader(http.StatusForbidden)
				fmt.Fprintf(w, `<ErrorResponse><Error><Type>Sender</Type><Code>AccessDenied</Code><Message>User is not authorized to perform: sts:AssumeRole on resource: %s</Message></Error><RequestId>tap</RequestId></ErrorResponse>`, call.RoleARN)
				return
			}
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.URL = t.srv.URL
	return t, nil
}

// Close stops the tap.
func (t *STSTap) Close() { t.srv.Close() }

// RequireExternalID makes AssumeRole of role succeed only with id.
func (t *STSTap) RequireExternalID(role, id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.external[role] = id
}

// Calls returns the AssumeRole calls so far, and forgets them.
func (t *STSTap) Calls() []AssumeRoleCall {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.calls
	t.calls = nil
	return c
}

// capture registers the credentials of an AssumeRole answer.
func (t *STSTap) capture(resp *http.Response) error {
	if resp.StatusCode != http.StatusOK {
		return nil
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	resp.Body = io.NopCloser(bytes.NewReader(body))
	var out struct {
		XMLName xml.Name `xml:"AssumeRoleResponse"`
		Arn     string   `xml:"AssumeRoleResult>AssumedRoleUser>Arn"`
		Creds   struct {
			AccessKeyID     string `xml:"AccessKeyId"`
			SecretAccessKey string `xml:"SecretAccessKey"`
			SessionToken    string `xml:"SessionToken"`
		} `xml:"AssumeRoleResult>Credentials"`
	}
	if xml.Unmarshal(body, &out) == nil && out.Creds.AccessKeyID != "" {
		t.fn.AddKey(out.Creds.AccessKeyID, out.Creds.SecretAccessKey, out.Creds.SessionToken, out.Arn)
	}
	return nil
}
