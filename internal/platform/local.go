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
type UnreachableError struct {
	Endpoint string
	Err      error
}

func (e *UnreachableError) Error() string {
	return fmt.Sprintf("cannot reach the dispatcher at %s: %v; start it with `snavio dispatch serve`, or check --endpoint-url and the profile (`snavio profile show`)", e.Endpoint, e.Err)
}

func (e *UnreachableError) Unwrap() error { return e.Err }

// Local is the platform of a local profile: the control API of a running
// `snavio dispatch serve` (/v1/...). It sends JSON, authenticates with a
// bearer token resolved on first use, and turns error answers into
// *APIError.
type Local struct {
	target   Target
	endpoint string
	token    func() (string, error)
	http     *http.Client
}

var _ Platform = (*Local)(nil)

// NewLocal returns the platform of the server at endpoint
// (scheme://host:port) that authenticates with the token token returns
// (resolved once per call; nil: no Authorization header).
func NewLocal(endpoint string, token func() (string, error), hc *http.Client) *Local {
	if hc == nil {
		hc = &http.Client{Timeout: 60 * time.Second}
	}
	endpoint = strings.TrimRight(endpoint, "/")
	return &Local{target: Target{Kind: config.KindLocal, Endpoint: endpoint}, endpoint: endpoint, token: token, http: hc}
}

// Target implements Platform.
func (a *Local) Target() Target { return a.target }

// CheckCredential implements Platform: the token resolves.
func (a *Local) CheckCredential() error {
	_, err := a.bearer()
	return err
}

func (a *Local) bearer() (string, error) {
	if a.token == nil {
		return "", nil
	}
	return a.token()
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
		return &UnreachableError{Endpoint: a.endpoint, Err: err}
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxResponse+1))
	if err != nil {
		return &UnreachableError{Endpoint: a.endpoint, Err: fmt.Errorf("reading the answer to %s %s: %w", method, path, err)}
	}
	if len(body) > maxResponse {
		return fmt.Errorf("%s %s: the answer exceeds %d MiB; narrow the request (filters, --limit)", method, path, maxResponse>>20)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return decodeError(resp, body)
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
	var body io.Reader
	switch v := in.(type) {
	case nil:
	case io.Reader:
		body = v
	default:
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encoding the request to %s %s: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, body)
	if err != nil {
		return nil, fmt.Errorf("invalid request %s %s: %w; check the endpoint (`snavio profile show`)", method, u, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	tok, err := a.bearer()
	if err != nil {
		return nil, err
	}
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	return req, nil
}

func decodeError(resp *http.Response, body []byte) error {
	e := &APIError{Status: resp.StatusCode}
	var b struct {
		Error string `json:"error"`
		Fix   string `json:"fix"`
	}
	if json.Unmarshal(body, &b) == nil && b.Error != "" {
		e.Message, e.Fix = b.Error, b.Fix
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
	if e.Fix == "" {
		switch e.Status {
		case http.StatusUnauthorized:
			e.Fix = "set " + TokenEnv + ", or point data_dir at the server's data directory (it holds " + OperatorTokenFile + ")"
		case http.StatusForbidden:
			e.Fix = "this token may not do that; use the operator token or the owning tenant's"
		}
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
