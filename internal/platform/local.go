package platform

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/config"
)

// OperatorTokenFile is the operator token's file name in a local data
// directory; `snavio dispatch serve` creates it 0600 on first start.
const OperatorTokenFile = "operator.token"

// TokenEnv names the environment variable that holds a bearer token for
// the control API (a tenant token, or the operator's). It wins over the
// data directory's operator token.
const TokenEnv = "SNAVIO_TOKEN"

// maxResponse bounds a control-API response body the client reads.
const maxResponse = 64 << 20

// APIError is a non-2xx answer of the control API: the server's message
// and its fix.
type APIError struct {
	Status  int
	Message string
	Fix     string
	// RetryAfter is the server's Retry-After, when it sent one.
	RetryAfter time.Duration
	// Code is the server's typed error code, when it sent one.
	Code string
	// Credential says where the refused credential came from (401, 403),
	// for the CLI's hint.
	Credential string
}

func (e *APIError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	if e.Fix == "" {
		return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d): %s", msg, e.Status, e.Fix)
}

// StatusOf returns the HTTP status of an *APIError in err's chain, or 0.
func StatusOf(err error) int {
	var ae *APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// UnreachableError is a control-API call that got no HTTP answer: the
// server is not running, the endpoint is wrong, or the network failed.
// What and Fix name the host and what to check; empty, they are the
// local dispatcher's.
type UnreachableError struct {
	Endpoint string
	Err      error
	What     string
	Fix      string
}

func (e *UnreachableError) Error() string {
	local := localHost()
	what, fix := firstNonEmpty(e.What, local.What), firstNonEmpty(e.Fix, local.Unreachable)
	return fmt.Sprintf("cannot reach %s at %s: %v; %s", what, e.Endpoint, e.Err, fix)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Local is the control API's HTTP client (/v1/...): the platform of a
// local profile, which reaches a running `snavio dispatch serve`, and
// what the aws platform's control operations go through. It sends JSON,
// has each request authorized by its authorizer (a bearer token
// locally, SigV4 on aws), and turns error answers into *APIError.
type Local struct {
	target   Target
	endpoint string
	auth     authorizer
	host     hostMessages
	http     *http.Client
}

var _ Platform = (*Local)(nil)

// authorizer proves who a control-API request comes from.
type authorizer interface {
	// authorize adds the credential to req, whose body is body (nil:
	// none), just before it is sent.
	authorize(ctx context.Context, req *http.Request, body []byte) error
	// check resolves the credential without sending a request.
	check(ctx context.Context) error
}

// hostMessages are what errors say of the host a client calls.
type hostMessages struct {
	// What names the host and Unreachable what to check when it does
	// not answer (UnreachableError).
	What, Unreachable string
	// Credential says where the credential comes from (empty: the CLI's
	// words for a local token); Unauthorized and Forbidden are the fixes
	// of a 401 and a 403 that came without one.
	Credential, Unauthorized, Forbidden string
}

// localHost is what errors say of a local dispatcher.
func localHost() hostMessages {
	return hostMessages{
		What:         "the dispatcher",
		Unreachable:  "start it with `snavio dispatch serve`, or check --endpoint-url and the profile (`snavio profile show`)",
		Unauthorized: "set " + TokenEnv + ", or point data_dir at the server's data directory (it holds " + OperatorTokenFile + ")",
		Forbidden:    "this token may not do that; use the operator token or the owning tenant's",
	}
}

// NewLocal returns the platform of the server at endpoint
// (scheme://host:port) that authenticates with the token token returns
// (resolved once per call; nil: no Authorization header).
func NewLocal(endpoint string, token func() (string, error), hc *http.Client) *Local {
	l := newControlClient(endpoint, bearer{token: token}, localHost(), hc)
	l.target = Target{Kind: config.KindLocal, Endpoint: l.endpoint}
	return l
}

// newControlClient returns the client of the control API at endpoint
// whose requests auth authorizes; host words its errors.
func newControlClient(endpoint string, auth authorizer, host hostMessages, hc *http.Client) *Local {
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	endpoint = strings.TrimRight(endpoint, "/")
	return &Local{endpoint: endpoint, auth: auth, host: host, http: hc}
}

// Target implements Platform.
func (a *Local) Target() Target { return a.target }

// CheckCredential implements Platform: the credential resolves.
func (a *Local) CheckCredential() error {
	return a.auth.check(context.Background())
}

// bearer authorizes with a bearer token (a local dispatcher's).
type bearer struct{ token func() (string, error) }

func (b bearer) resolve() (string, error) {
	if b.token == nil {
		return "", nil
	}
	return b.token()
}

func (b bearer) authorize(_ context.Context, req *http.Request, _ []byte) error {
	tok, err := b.resolve()
	if err != nil {
		return err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return nil
}

func (b bearer) check(context.Context) error {
	_, err := b.resolve()
	return err
}

func (a *Local) unreachable(err error) *UnreachableError {
	return &UnreachableError{Endpoint: a.endpoint, Err: err, What: a.host.What, Fix: a.host.Unreachable}
}

// do calls method path (path starts with /v1/) with query, sending in as
// JSON when it is not nil (an io.Reader is sent as is), and decodes a 2xx
// JSON answer into out when out is not nil (*[]byte receives the raw
// body). A non-2xx answer is an *APIError; no answer is an
// *UnreachableError.
func (a *Local) do(ctx context.Context, method, path string, query url.Values, in, out any) error {
	req, err := a.newRequest(ctx, method, path, query, in)
	if err != nil {
		return err
	}
	resp, err := a.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return a.unreachable(err)
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return a.unreachable(fmt.Errorf("reading the answer to %s %s: %w", method, path, err))
	}
	if len(body) > maxResponse {
		return fmt.Errorf("%s %s: the answer exceeds %d MiB; narrow the request (filters, --limit)", method, path, maxResponse>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return a.decodeError(resp, body)
	}
	switch o := out.(type) {
	case nil:
		return nil
	case *[]byte:
		*o = body
		return nil
	}
	if err := json.Unmarshal(body, out); err != nil {
		return fmt.Errorf("%s %s: the server's answer is not the JSON this snavio expects (%v); check that snavio and the server are the same version (`snavio version`)", method, path, err)
	}
	return nil
}

// newRequest builds an authenticated request without sending it (for
// callers that stream the answer).
func (a *Local) newRequest(ctx context.Context, method, path string, query url.Values, in any) (*http.Request, error) {
	u := a.endpoint + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var body []byte
	switch v := in.(type) {
	case nil:
	case io.Reader:
		b, err := io.ReadAll(v)
		if err != nil {
			return nil, fmt.Errorf("reading the request to %s %s: %w", method, path, err)
		}
		body = b
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the request to %s %s: %w", method, path, err)
		}
		body = b
	}
	var rd io.Reader
	if in != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, fmt.Errorf("invalid request %s %s: %w; check the endpoint (`snavio profile show`)", method, u, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	if err := a.auth.authorize(ctx, req, body); err != nil {
		return nil, err
	}
	return req, nil
}

// decodeError reads an error answer: the control API's envelope
// {"error","fix"} (with an optional typed "code"), or AWS's own
// {"message"} (a Function URL that refused the request), or text. A 501
// is a resource the host does not serve: a *NotAvailableError wrapping
// the *APIError.
func (a *Local) decodeError(resp *http.Response, body []byte) error {
	e := &APIError{Status: resp.StatusCode}
	var b struct {
		Error   string `json:"error"`
		Fix     string `json:"fix"`
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &b) == nil && (b.Error != "" || b.Message != "") {
		e.Message, e.Fix, e.Code = firstNonEmpty(b.Error, b.Message), b.Fix, b.Code
	} else {
		e.Message = strings.TrimSpace(string(bytes.ToValidUTF8(body, nil)))
		if len(e.Message) > 200 {
			e.Message = e.Message[:200] + "..."
		}
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		var secs int
		if _, err := fmt.Sscanf(ra, "%d", &secs); err == nil && secs >= 0 {
			e.RetryAfter = time.Duration(secs) * time.Second
		}
	}
	switch e.Status {
	case http.StatusUnauthorized:
		e.Credential, e.Fix = a.host.Credential, firstNonEmpty(e.Fix, a.host.Unauthorized)
	case http.StatusForbidden:
		e.Credential, e.Fix = a.host.Credential, firstNonEmpty(e.Fix, a.host.Forbidden)
	}
	if e.Status == http.StatusNotImplemented {
		return &NotAvailableError{What: e.Message, Reason: firstNonEmpty(e.Fix, "the control API of this deployment does not serve it (HTTP 501)"), Err: e}
	}
	return e
}

// LocalToken resolves the bearer token of a local profile: env
// SNAVIO_TOKEN when set, else the operator token in dataDir.
func LocalToken(lookupEnv func(string) (string, bool), dataDir string) func() (string, error) {
	return func() (string, error) {
		if lookupEnv != nil {
			if t, ok := lookupEnv(TokenEnv); ok && strings.TrimSpace(t) != "" {
				return strings.TrimSpace(t), nil
			}
		}
		if dataDir == "" {
			return "", fmt.Errorf("no control-API token: set %s, or set the profile's data_dir to the server's data directory", TokenEnv)
		}
		p := filepath.Join(dataDir, OperatorTokenFile)
		b, err := os.ReadFile(p)
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				return "", fmt.Errorf("no control-API token: %s does not exist; start `snavio dispatch serve --data-dir %s` once (it creates the token), or set %s", p, dataDir, TokenEnv)
			}
			return "", fmt.Errorf("reading the operator token: %w; check the file's permissions, or set %s", err, TokenEnv)
		}
		t := strings.TrimSpace(string(b))
		if t == "" {
			return "", fmt.Errorf("the operator token file %s is empty; delete it and restart `snavio dispatch serve` to make a new one, or set %s", p, TokenEnv)
		}
		return t, nil
	}
}
