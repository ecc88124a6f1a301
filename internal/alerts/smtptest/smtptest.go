// Package smtptest runs a real SMTP relay (github.com/emersion/go-smtp) on
// 127.0.0.1 for tests of the email alert channel: STARTTLS with a
// certificate made for the test, AUTH PLAIN, and DATA replies a test
// queues. It keeps what it accepted in memory.
package smtptest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"log"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-sasl"
	smtpd "github.com/emersion/go-smtp"
)

// Options configure a Relay.
type Options struct {
	// User and Password are the one login AUTH PLAIN accepts; every
	// message needs it.
	User, Password string
	// NoTLS offers no STARTTLS.
	NoTLS bool
	// InsecureAuth offers AUTH without TLS.
	InsecureAuth bool
	// NoAuth offers no AUTH, and takes mail without it.
	NoAuth bool
}

// Delivery is one message the relay accepted.
type Delivery struct {
	From string
	To   []string
	Data []byte
	// TLS and Auth say whether the session had STARTTLS and AUTH when
	// the message was sent.
	TLS, Auth bool
}

// Relay is a running SMTP server on 127.0.0.1, closed with the test.
type Relay struct {
	// Addr is its HOST:PORT.
	Addr string
	// RootCAs trust its certificate (nil with NoTLS).
	RootCAs *x509.CertPool

	o       Options
	mu      sync.Mutex
	replies []error
	got     []Delivery
	auths   int
}

// Start starts a Relay; it stops when the test ends.
func Start(t testing.TB, o Options) *Relay {
	t.Helper()
	r := &Relay{o: o}
	s := smtpd.NewServer(smtpd.BackendFunc(func(c *smtpd.Conn) (smtpd.Session, error) {
		if o.NoAuth {
			return &session{r: r, c: c}, nil
		}
		return &authSession{session{r: r, c: c}}, nil
	}))
	s.Domain = "127.0.0.1"
	s.AllowInsecureAuth = o.InsecureAuth
	s.ErrorLog = log.New(io.Discard, "", 0)
	if !o.NoTLS {
		cert, pool := selfSigned(t)
		s.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}}
		r.RootCAs = pool
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.Addr = l.Addr().String()
	go func() { _ = s.Serve(l) }()
	t.Cleanup(func() { _ = s.Close() })
	return r
}

// ReplyToData queues the answers to the next DATA commands (nil accepts).
// An *smtpd.SMTPError chooses the code, such as 451 or 554.
func (r *Relay) ReplyToData(replies ...error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.replies = append(r.replies, replies...)
}

// Deliveries returns the messages accepted so far.
func (r *Relay) Deliveries() []Delivery {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Delivery(nil), r.got...)
}

// Auths counts AUTH attempts, good or bad.
func (r *Relay) Auths() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.auths
}

type session struct {
	r    *Relay
	c    *smtpd.Conn
	auth bool
	cur  Delivery
}

// authSession is a session that offers AUTH PLAIN.
type authSession struct{ session }

func (s *authSession) AuthMechanisms() []string { return []string{sasl.Plain} }

func (s *authSession) Auth(string) (sasl.Server, error) {
	return sasl.NewPlainServer(func(_, user, pass string) error {
		s.r.mu.Lock()
		s.r.auths++
		s.r.mu.Unlock()
		if user != s.r.o.User || pass != s.r.o.Password {
			return smtpd.ErrAuthFailed
		}
		s.auth = true
		return nil
	}), nil
}

func (s *session) Mail(from string, _ *smtpd.MailOptions) error {
	if !s.auth && !s.r.o.NoAuth {
		return &smtpd.SMTPError{Code: 530, EnhancedCode: smtpd.EnhancedCode{5, 7, 0}, Message: "Authentication required"}
	}
	_, tlsOn := s.c.TLSConnectionState()
	s.cur = Delivery{From: from, TLS: tlsOn, Auth: s.auth}
	return nil
}

func (s *session) Rcpt(to string, _ *smtpd.RcptOptions) error {
	s.cur.To = append(s.cur.To, to)
	return nil
}

func (s *session) Data(rd io.Reader) error {
	b, err := io.ReadAll(rd)
	if err != nil {
		return err
	}
	s.r.mu.Lock()
	defer s.r.mu.Unlock()
	if len(s.r.replies) > 0 {
		reply := s.r.replies[0]
		s.r.replies = s.r.replies[1:]
		if reply != nil {
			return reply
		}
	}
	s.cur.Data = b
	s.r.got = append(s.r.got, s.cur)
	return nil
}

func (s *session) Reset()        { s.cur = Delivery{} }
func (s *session) Logout() error { return nil }

// selfSigned makes a certificate for 127.0.0.1 and the pool that trusts
// it. Its validity is around the real time, which the handshake checks.
func selfSigned(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "snavio test relay"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}
