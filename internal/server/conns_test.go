package server

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
)

func TestHostCheckRefusesForeignHosts(t *testing.T) {
	control := http.NewServeMux()
	control.HandleFunc("GET /v1/whoami", func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "ok") })
	s := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, Control: control, AllowedHosts: []string{"Dispatch.Internal."}})
	_, port, _ := net.SplitHostPort(s.Addr())
	do := func(method, path, host string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, s.URL()+path, strings.NewReader("{}"))
		req.Host = host
		req.Header.Set("Content-Type", ContentTypeAWSJSON11)
		req.Header.Set("X-Amz-Target", TargetPutEvents)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, host := range []string{"evil.example:" + port, "evil.example", "127.0.0.1.nip.io:" + port, "localhost.evil.example"} {
		if code, body := do(http.MethodPost, "/", host); code != http.StatusMisdirectedRequest || !strings.Contains(body, `"__type":"MisdirectedRequestException"`) || !strings.Contains(body, "--allowed-host") {
			t.Fatalf("PutEvents with Host %s: %d %s", host, code, body)
		}
		if code, body := do(http.MethodGet, "/v1/whoami", host); code != http.StatusMisdirectedRequest || !strings.Contains(body, `"fix"`) {
			t.Fatalf("control API with Host %s: %d %s", host, code, body)
		}
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST", "app.localhost", "[::1]:" + port, "10.1.2.3", "dispatch.internal:" + port} {
		if code, body := do(http.MethodGet, "/healthz", host); code != 200 {
			t.Fatalf("Host %s refused: %d %s", host, code, body)
		}
	}
	if _, err := Start(StartOptions{Pipeline: &recordingPipeline{}, DataDir: t.TempDir(), Listen: "127.0.0.1:0", AllowedHosts: []string{"http://x"}}); err == nil || !strings.Contains(err.Error(), "not a host name") {
		t.Fatalf("a URL as allowed host: %v", err)
	}
}

// dialFrom connects to addr from the loopback address ip (127.0.0.0/8 is
// all loopback on Linux), so a test can play several clients.
func dialFrom(t *testing.T, ip, addr string) net.Conn {
	t.Helper()
	d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)}, Timeout: 5 * time.Second}
	c, err := d.Dial("tcp", addr)
	if err != nil {
		t.Skipf("cannot dial from %s (%v): this test needs all of 127.0.0.0/8 on loopback", ip, err)
	}
	return c
}

// 500 clients that announce a body and send one byte of it hold only their
// own connections: a signed PutEvents is answered at once, because bodies
// are read before a request slot is taken (issue #20, finding 5).
func TestSlowBodiesDoNotStarveASignedRequest(t *testing.T) {
	p := &recordingPipeline{}
	s := startServer(t, StartOptions{Pipeline: p, Limits: Limits{MaxInFlightRequests: 4, BodyTimeout: time.Minute, MaxConnsPerClient: 100}})
	const slow = 500
	for i := range slow {
		c := dialFrom(t, fmt.Sprintf("127.0.0.%d", 2+i/100), s.Addr())
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "POST / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: %s\r\nX-Amz-Target: %s\r\nContent-Length: 100000\r\n\r\n{", ContentTypeAWSJSON11, TargetPutEvents)
	}
	// Wait until every slow request is in the handler, reading its body
	// (each has handed over its one byte).
	deadline := time.Now().Add(30 * time.Second)
	for s.ingress.reading.inUse() < slow {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d slow bodies arrived", s.ingress.reading.inUse(), slow)
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	out, err := sdkClient(s.URL()).PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
		{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
	}})
	if err != nil || out.FailedEntryCount != 0 {
		t.Fatalf("signed PutEvents beside %d slow bodies: %v %+v", slow, err, out)
	}
	t.Logf("signed PutEvents answered in %v beside %d slow bodies", time.Since(start), slow)
	if s.ingress.requests.inUse() != 0 {
		t.Fatalf("%d request slots held by slow bodies", s.ingress.requests.inUse())
	}
}

// One client address may hold MaxConnsPerClient connections; one more is
// answered 503 with Retry-After and closed, while other clients connect.
func TestConnectionsPerClientAreCapped(t *testing.T) {
	s := startServer(t, StartOptions{Pipeline: &recordingPipeline{}, Limits: Limits{MaxConnsPerClient: 3}})
	for range 3 {
		c := dialFrom(t, "127.0.0.9", s.Addr())
		t.Cleanup(func() { c.Close() })
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection within the cap: %v %v", resp, err)
		}
	}
	c := dialFrom(t, "127.0.0.9", s.Addr())
	defer c.Close()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" || !strings.Contains(string(b), "3 open connections") {
		t.Fatalf("over the cap: %d %v %s", resp.StatusCode, resp.Header, b)
	}
	if code, _, _ := get(t, s.URL()+"/healthz", ""); code != 200 {
		t.Fatalf("another client refused: %d", code)
	}
}
