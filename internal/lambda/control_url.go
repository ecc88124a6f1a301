package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"mime"
	"net/http"
	"net/textproto"
	"net/url"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"

	"github.com/snavio/snavio/internal/controlapi"
)

// maxURLResponse is the largest response Lambda returns from a
// synchronous invocation (6 MB, the encoded payload included).
const maxURLResponse = 6 << 20

// functionURLRequest decodes a Function URL event (payload format 2.0)
// into the request the control API serves: method, raw path and query,
// headers, cookies, the body (base64 when the event says so, at most
// maxBody bytes decoded) and the verified IAM caller in its context. A
// malformed event is a 400 refusal naming the field.
func functionURLRequest(ctx context.Context, ev *events.LambdaFunctionURLRequest, maxBody int64) (*http.Request, *controlapi.Error) {
	bad := func(format string, a ...any) *controlapi.Error {
		return controlapi.BadRequest("malformed Function URL event: "+fmt.Sprintf(format, a...), "call the control API through its Function URL with an HTTP client (snavio, or a SigV4-signed request)")
	}
	method := ev.RequestContext.HTTP.Method
	if method == "" || len(method) > 16 || strings.Trim(method, "ABCDEFGHIJKLMNOPQRSTUVWXYZ") != "" {
		return nil, bad("requestContext.http.method %.20q is not an HTTP method", method)
	}
	if !strings.HasPrefix(ev.RawPath, "/") || len(ev.RawPath) > 8192 || !printable(ev.RawPath) || strings.ContainsAny(ev.RawPath, "?#") {
		return nil, bad("rawPath %.80q is not an absolute path", ev.RawPath)
	}
	if len(ev.RawQueryString) > 8192 || !printable(ev.RawQueryString) || strings.Contains(ev.RawQueryString, "#") {
		return nil, bad("rawQueryString %.80q is not a query string", ev.RawQueryString)
	}
	path, err := url.PathUnescape(ev.RawPath)
	if err != nil {
		return nil, bad("rawPath %.80q: %v", ev.RawPath, err)
	}
	if _, err := url.ParseQuery(ev.RawQueryString); err != nil {
		return nil, bad("rawQueryString: %v", err)
	}
	// Built, not parsed: a raw path such as "//host/x" is a path here.
	u := &url.URL{Path: path, RawPath: ev.RawPath, RawQuery: ev.RawQueryString}
	header := make(http.Header, len(ev.Headers)+1)
	for name, value := range ev.Headers {
		if !validHeaderName(name) || !validHeaderValue(value) {
			return nil, bad("header %.40q is not a valid HTTP header", name)
		}
		header.Set(name, value)
	}
	if len(ev.Cookies) > 0 {
		for _, c := range ev.Cookies {
			if !validHeaderValue(c) {
				return nil, bad("a cookie holds characters a header cannot")
			}
		}
		header.Set("Cookie", strings.Join(ev.Cookies, "; "))
	}
	body := []byte(ev.Body)
	if ev.IsBase64Encoded {
		if int64(base64.StdEncoding.DecodedLen(len(ev.Body))) > maxBody+3 {
			return nil, tooLarge(maxBody)
		}
		if body, err = base64.StdEncoding.DecodeString(ev.Body); err != nil {
			return nil, bad("isBase64Encoded is true but body is not base64: %v", err)
		}
	}
	if int64(len(body)) > maxBody {
		return nil, tooLarge(maxBody)
	}
	if cl := header.Get("Content-Length"); cl != "" && cl != strconv.Itoa(len(body)) {
		return nil, bad("header content-length %.20q is not the body's %d bytes", cl, len(body))
	}
	header.Del("Content-Length")
	if ev.RequestContext.Authorizer != nil && ev.RequestContext.Authorizer.IAM != nil {
		iam := ev.RequestContext.Authorizer.IAM
		ctx = controlapi.WithIAMCaller(ctx, controlapi.IAMCaller{UserARN: iam.UserARN, AccountID: iam.AccountID, CallerID: iam.CallerID})
	}
	r, err := http.NewRequestWithContext(ctx, method, "/", bytes.NewReader(body))
	if err != nil {
		return nil, bad("%v", err)
	}
	r.URL = u
	r.Header = header
	r.ContentLength = int64(len(body))
	r.Host = ev.RequestContext.DomainName
	r.RemoteAddr = ev.RequestContext.HTTP.SourceIP
	r.RequestURI = u.RequestURI()
	return r, nil
}

func tooLarge(max int64) *controlapi.Error {
	return controlapi.Refuse(http.StatusRequestEntityTooLarge, fmt.Sprintf("the request body is over %d bytes", max), "send a smaller body; split a large registry file into several applies")
}

// printable reports whether s is visible ASCII (what a raw path or query
// holds: anything else arrives percent-encoded).
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return true
}

func validHeaderName(s string) bool {
	if s == "" || len(s) > 256 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || strings.IndexByte(`"(),/:;<=>?@[\]{}`, c) >= 0 {
			return false
		}
	}
	return true
}

func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < ' ' && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}

// urlResponse is the http.ResponseWriter the control API answers into,
// turned into the Function URL's response by event.
type urlResponse struct {
	status int
	header http.Header
	body   bytes.Buffer
}

func newURLResponse() *urlResponse { return &urlResponse{header: http.Header{}} }

func (w *urlResponse) Header() http.Header { return w.header }

func (w *urlResponse) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *urlResponse) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(b)
}

// event encodes the answer: text bodies as they are, anything else as
// base64; Set-Cookie as cookies, other repeated headers joined by commas.
// An answer over Lambda's response limit becomes a 500 that says so.
func (w *urlResponse) event() events.LambdaFunctionURLResponse {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	resp := events.LambdaFunctionURLResponse{StatusCode: w.status, Headers: make(map[string]string, len(w.header))}
	for name, values := range w.header {
		if textproto.CanonicalMIMEHeaderKey(name) == "Set-Cookie" {
			resp.Cookies = append(resp.Cookies, values...)
			continue
		}
		resp.Headers[strings.ToLower(name)] = strings.Join(values, ", ")
	}
	b := w.body.Bytes()
	if isText(w.header.Get("Content-Type")) && utf8.Valid(b) {
		resp.Body = string(b)
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	if len(resp.Body) > maxURLResponse-64<<10 {
		big := newURLResponse()
		controlapi.Refuse(http.StatusInternalServerError, fmt.Sprintf("the answer is %d bytes, over what a Function URL returns (6 MB)", len(b)),
			"ask for less (a narrower list filter); snapshot documents this large are read from S3 directly").Write(big)
		return big.event()
	}
	return resp
}

// isText reports whether a content type's body can travel as a string.
func isText(ctype string) bool {
	mt, _, err := mime.ParseMediaType(ctype)
	if err != nil {
		return false
	}
	return strings.HasPrefix(mt, "text/") || mt == "application/json" || strings.HasSuffix(mt, "+json") || mt == "application/yaml"
}
