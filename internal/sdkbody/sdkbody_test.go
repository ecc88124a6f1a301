package sdkbody

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
)

// lateBody is a request body as the SDK gives it to net/http: after Close
// it answers io.EOF. Its last read, once every byte is read, waits for
// Close, as the SDK's Close after the response's headers races the
// transport's check that the body ends.
type lateBody struct {
	data   []byte
	off    int
	closed chan struct{}
	once   sync.Once
	// last is closed when the last read returns; viaWriteTo says whether
	// it was a WriteTo.
	last       chan struct{}
	viaWriteTo bool
}

func newLateBody(s string) *lateBody {
	return &lateBody{data: []byte(s), closed: make(chan struct{}), last: make(chan struct{})}
}

func (b *lateBody) Read(p []byte) (int, error) {
	if b.off < len(b.data) {
		n := copy(p, b.data[b.off:])
		b.off += n
		return n, nil
	}
	<-b.closed
	close(b.last)
	return 0, io.EOF
}

func (b *lateBody) WriteTo(w io.Writer) (int64, error) {
	if b.off < len(b.data) {
		n, err := w.Write(b.data[b.off:])
		b.off += n
		return int64(n), err
	}
	<-b.closed
	b.viaWriteTo = true
	close(b.last)
	return 0, io.EOF
}

func (b *lateBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// TestBodyClosedUnderTheTransport: the SDK closes the request's body once
// the response's headers are in, before net/http's last read of it; the
// call still succeeds and its response is read whole on the same
// connection.
func TestBodyClosedUnderTheTransport(t *testing.T) {
	const req, resp = `{"QueueUrl":"q"}`, `{"Messages":[]}`
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if got, err := io.ReadAll(r.Body); err != nil || string(got) != req {
			t.Errorf("server read %q, %v", got, err)
		}
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release
		_, _ = io.WriteString(w, resp)
	}))
	defer srv.Close()
	var releaseOnce sync.Once
	defer releaseOnce.Do(func() { close(release) })

	var cfg aws.Config
	Use(&cfg)
	Use(&cfg)
	if next := cfg.HTTPClient.(Client).Next; next == nil {
		t.Fatal("Use left no client to send with")
	} else if _, twice := next.(Client); twice {
		t.Fatal("Use wrapped the client twice")
	}
	body := newLateBody(req)
	r, err := http.NewRequest(http.MethodPost, srv.URL, body)
	if err != nil {
		t.Fatal(err)
	}
	r.ContentLength = int64(len(req))
	res, err := cfg.HTTPClient.Do(r)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if err := r.Body.Close(); err != nil { // as smithy-go does once Do returns
		t.Fatal(err)
	}
	<-body.last
	if body.viaWriteTo {
		t.Fatal("the transport's last read of the body went through WriteTo, whose io.EOF closes the connection")
	}
	releaseOnce.Do(func() { close(release) })
	got, err := io.ReadAll(res.Body)
	if err != nil || string(got) != resp {
		t.Fatalf("response body %q, %v; want %q", got, err, resp)
	}
}
