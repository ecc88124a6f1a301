package server

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// hostCheck refuses requests whose Host header names a host this server
// was not configured for, so that a web page cannot reach it through DNS
// rebinding (the browser sends the attacker's name as Host). IP literals
// and loopback names are always allowed: rebinding needs a domain name.
type hostCheck struct {
	allowed map[string]bool
}

func newHostCheck(names []string) (*hostCheck, error) {
	h := &hostCheck{allowed: make(map[string]bool, len(names))}
	for _, n := range names {
		n = strings.ToLower(strings.TrimSuffix(strings.TrimSpace(n), "."))
		if n == "" || strings.ContainsAny(n, ":/ ") {
			return nil, fmt.Errorf("server: allowed host %q is not a host name; give a name such as dispatch.internal, without port or scheme", n)
		}
		h.allowed[n] = true
	}
	return h, nil
}

// Allowed reports whether host (a Host header, with or without port) may
// be served.
func (h *hostCheck) Allowed(host string) bool {
	name := host
	if hn, _, err := net.SplitHostPort(host); err == nil {
		name = hn
	}
	name = strings.ToLower(strings.TrimSuffix(strings.Trim(name, "[]"), "."))
	switch {
	case name == "":
		return false
	case net.ParseIP(name) != nil:
		return true
	case name == "localhost" || strings.HasSuffix(name, ".localhost"):
		return true
	}
	return h.allowed[name]
}

func (h *hostCheck) wrap(m *Metrics, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if h.Allowed(r.Host) {
			next.ServeHTTP(w, r)
			return
		}
		m.reject("host", "foreign_host")
		msg := fmt.Sprintf("the Host header %q names a host this server does not answer to", truncate(r.Host, 100))
		fix := "use http://127.0.0.1:PORT or http://localhost:PORT, or start the server with --allowed-host NAME for the name clients use"
		if r.URL.Path == "/" {
			writeAWSError(w, uuid.NewString(), &awsError{Status: http.StatusMisdirectedRequest, Type: ErrCodeMisdirected, Message: msg + "; " + fix})
			return
		}
		WriteAPIError(w, http.StatusMisdirectedRequest, msg, fix)
	})
}

// ErrCodeMisdirected answers a PutEvents whose Host is not allowed.
const ErrCodeMisdirected = "MisdirectedRequestException"

// clientCapListener closes connections beyond a per-IP cap at once, after
// a short 503, so one client cannot hold every connection the server can
// keep.
type clientCapListener struct {
	net.Listener
	max   int
	retry time.Duration
	m     *Metrics

	mu    sync.Mutex
	count map[string]int
}

func newClientCapListener(ln net.Listener, max int, retry time.Duration, m *Metrics) net.Listener {
	return &clientCapListener{Listener: ln, max: max, retry: retry, m: m, count: map[string]int{}}
}

func (l *clientCapListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c.RemoteAddr())
		l.mu.Lock()
		over := l.count[ip] >= l.max
		if !over {
			l.count[ip]++
		}
		l.mu.Unlock()
		if !over {
			return &cappedConn{Conn: c, l: l, ip: ip}, nil
		}
		l.m.reject("connection", "too_many_connections")
		go l.refuse(c)
	}
}

// refuse answers a connection over the cap with 503 and closes it, off the
// accept loop and with a short write deadline.
func (l *clientCapListener) refuse(c net.Conn) {
	body := fmt.Sprintf(`{"error":"this client already has %d open connections, the most the server keeps for one address","fix":"reuse connections (keep-alive) or close idle ones, and retry after the Retry-After delay"}`, l.max)
	_ = c.SetWriteDeadline(time.Now().Add(time.Second))
	_, _ = fmt.Fprintf(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\nRetry-After: %s\r\nConnection: close\r\nContent-Length: %d\r\n\r\n%s",
		retryAfterSeconds(l.retry), len(body), body)
	_ = c.Close()
}

func (l *clientCapListener) release(ip string) {
	l.mu.Lock()
	if l.count[ip]--; l.count[ip] <= 0 {
		delete(l.count, ip)
	}
	l.mu.Unlock()
}

func remoteIP(a net.Addr) string {
	if t, ok := a.(*net.TCPAddr); ok {
		return t.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

type cappedConn struct {
	net.Conn
	l    *clientCapListener
	ip   string
	once sync.Once
}

func (c *cappedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
