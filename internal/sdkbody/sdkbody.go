// Package sdkbody keeps the AWS SDK's request bodies well-behaved for
// net/http.
//
// The SDK (smithy-go) closes a request's body as soon as the response's
// headers arrive, and its body answers WriteTo after Close with io.EOF.
// net/http may still be reading that body then: once the bytes are
// written it reads once more to check the body ends. io.Copy takes an
// io.EOF from WriteTo as an error, so the transport closes the connection
// under the response being read, and the SDK retries the call, which it
// already made: a ReceiveMessage's messages stay invisible to everyone, a
// conditional write fails on its own first attempt. Hiding WriteTo makes
// that last read a plain Read, whose io.EOF ends the copy as it should.
package sdkbody

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Client is an aws.HTTPClient giving Next each request with its body
// wrapped so that it no longer implements io.WriterTo.
type Client struct {
	Next aws.HTTPClient
}

// Do implements aws.HTTPClient.
func (c Client) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		r.Body = readCloser{r.Body}
	}
	return c.Next.Do(r)
}

// readCloser forwards Read and Close only.
type readCloser struct {
	rc io.ReadCloser
}

func (b readCloser) Read(p []byte) (int, error) { return b.rc.Read(p) }
func (b readCloser) Close() error               { return b.rc.Close() }

// Use makes cfg's clients send through Client, around cfg's HTTP client
// (the SDK's default one when cfg has none). It is idempotent.
func Use(cfg *aws.Config) {
	if _, ok := cfg.HTTPClient.(Client); ok {
		return
	}
	next := cfg.HTTPClient
	if next == nil {
		next = awshttp.NewBuildableClient()
	}
	cfg.HTTPClient = Client{Next: next}
}
