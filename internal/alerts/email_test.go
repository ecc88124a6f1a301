package alerts

import (
	"bufio"
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"mime/multipart"
	"net"
	"net/mail"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	smtpd "github.com/emersion/go-smtp"

	"github.com/snavio/snavio/internal/alerts/smtptest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

const (
	testUser = "alerts"
	testPass = "correct horse battery staple"
)

func startRelay(t *testing.T, o smtptest.Options) *smtptest.Relay {
	t.Helper()
	o.User, o.Password = testUser, testPass
	return smtptest.Start(t, o)
}

// counters is a telemetry.Metrics that keeps the counts.
type counters struct {
	mu sync.Mutex
	n  map[string]int64
}

func (c *counters) Count(name string, n int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int64{}
	}
	c.n[name] += n
}

func (c *counters) Observe(string, float64) {}

func (c *counters) get(name string) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[name]
}

// emailRouter routes every alert of acme to the email channel, with a
// fake clock that the backoff advances instead of sleeping.
type emailRouter struct {
	*Router
	clk     *clock.Fake
	waits   []time.Duration
	metrics *counters
}

func newEmailRouter(t *testing.T, cfg EmailConfig) *emailRouter {
	t.Helper()
	em, err := NewEmail(cfg)
	if err != nil {
		t.Fatal(err)
	}
	er := &emailRouter{clk: clock.NewFake(t0), metrics: &counters{}}
	er.Router = New(Options{Channels: map[string]Channel{"email": em}, Configs: configs{"acme": {"*": {"email"}}},
		Clock: er.clk, Metrics: er.metrics,
		Sleep: func(_ context.Context, d time.Duration) error {
			er.waits = append(er.waits, d)
			er.clk.Advance(d)
			return nil
		}})
	return er
}

func tlsConfig(r *smtptest.Relay) EmailConfig {
	return EmailConfig{Relay: r.Addr, From: "Snavio <alerts@snavio.example>", To: []string{"ops@acme.example, Oncall <oncall@acme.example>"},
		Username: testUser, Password: testPass, RootCAs: r.RootCAs}
}

var emailMetrics = func() (m struct{ delivered, retried, failed string }) {
	m.delivered, m.retried, m.failed = ChannelMetrics("email")
	return m
}()

func TestEmailDeliveredOverSTARTTLSWithAuth(t *testing.T) {
	r := startRelay(t, smtptest.Options{})
	er := newEmailRouter(t, tlsConfig(r))
	got, err := er.Handle(context.Background(), "acme", invalid)
	if err != nil || !reflect.DeepEqual(got, []string{"email"}) {
		t.Fatalf("delivered to %v, err %v", got, err)
	}
	ds := r.Deliveries()
	if len(ds) != 1 {
		t.Fatalf("relay got %d messages, want 1", len(ds))
	}
	d := ds[0]
	if !d.TLS || !d.Auth {
		t.Fatalf("delivery tls=%v auth=%v: want both (STARTTLS then AUTH PLAIN)", d.TLS, d.Auth)
	}
	if d.From != "alerts@snavio.example" || !reflect.DeepEqual(d.To, []string{"ops@acme.example", "oncall@acme.example"}) {
		t.Fatalf("envelope from %q to %v", d.From, d.To)
	}
	msg, err := mail.ReadMessage(bytes.NewReader(d.Data))
	if err != nil {
		t.Fatal(err)
	}
	if s := msg.Header.Get("Subject"); s != "[snavio] CRITICAL snavio.command.invalid for tenant acme" {
		t.Errorf("subject %q", s)
	}
	if tos, err := msg.Header.AddressList("To"); err != nil || len(tos) != 2 || tos[1].Name != "Oncall" {
		t.Errorf("To header %v (%v)", tos, err)
	}
	if msg.Header.Get("X-Snavio-Event") != telemetry.NameInvalid || msg.Header.Get("X-Snavio-Tenant") != "acme" {
		t.Errorf("headers %v", msg.Header)
	}
	if date, err := msg.Header.Date(); err != nil || !date.Equal(t0) {
		t.Errorf("Date %v (%v), want the alert's time %v", date, err, t0)
	}
	textPart, jsonPart := parts(t, msg)
	if !strings.Contains(textPart, "CRITICAL alert") || !strings.Contains(textPart, "Tenant:   acme") || !strings.Contains(textPart, `"reason": "bad_signature"`) {
		t.Errorf("text part:\n%s", textPart)
	}
	var a Alert
	if err := json.Unmarshal(jsonPart, &a); err != nil {
		t.Fatalf("alert.json %q: %v", jsonPart, err)
	}
	if a.Tenant != "acme" || a.Event != telemetry.NameInvalid || !a.Critical || !a.At.Equal(t0) {
		t.Errorf("alert.json = %+v", a)
	}
	var payload map[string]any
	if err := json.Unmarshal(a.Payload, &payload); err != nil || payload["reason"] != "bad_signature" || payload["source"] != "acme/billing" {
		t.Errorf("payload %s", a.Payload)
	}
	if er.metrics.get(emailMetrics.delivered) != 1 || er.metrics.get(emailMetrics.failed) != 0 || len(er.waits) != 0 {
		t.Errorf("metrics %v waits %v", er.metrics.n, er.waits)
	}
}

// parts returns the text/plain part and the decoded application/json part.
func parts(t *testing.T, msg *mail.Message) (string, []byte) {
	t.Helper()
	mt, params, err := mime.ParseMediaType(msg.Header.Get("Content-Type"))
	if err != nil || mt != "multipart/mixed" {
		t.Fatalf("content type %q (%v), want multipart/mixed", msg.Header.Get("Content-Type"), err)
	}
	var text string
	var js []byte
	mr := multipart.NewReader(msg.Body, params["boundary"])
	for {
		p, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(decodePart(p))
		if err != nil {
			t.Fatal(err)
		}
		ct, _, _ := mime.ParseMediaType(p.Header.Get("Content-Type"))
		switch ct {
		case "text/plain":
			text = string(b)
		case "application/json":
			if p.FileName() != "alert.json" {
				t.Errorf("JSON part named %q, want alert.json", p.FileName())
			}
			js = b
		default:
			t.Errorf("unexpected part %q", ct)
		}
	}
	if text == "" || js == nil {
		t.Fatalf("text part %q, JSON part %q: want both", text, js)
	}
	return text, js
}

func TestEmailAuthFailureIsPermanent(t *testing.T) {
	r := startRelay(t, smtptest.Options{})
	cfg := tlsConfig(r)
	cfg.Password = "wrong"
	er := newEmailRouter(t, cfg)
	got, err := er.Handle(context.Background(), "acme", invalid)
	var p permanent
	if !errors.As(err, &p) || !strings.Contains(err.Error(), "535") {
		t.Fatalf("err %v: want a permanent 535", err)
	}
	if len(er.waits) != 0 || r.Auths() != 1 {
		t.Fatalf("waits %v, AUTH attempts %d: a refused login must not be retried", er.waits, r.Auths())
	}
	// The critical alert still reaches the dashboard, and the failure is
	// on the dashboard log and in the metrics.
	if !reflect.DeepEqual(got, []string{"dashboard"}) || er.Unrouted() != 1 {
		t.Fatalf("delivered %v unrouted %d", got, er.Unrouted())
	}
	fs := er.Dashboard().Failures("acme")
	if len(fs) != 1 || fs[0].Channel != "email" || !fs[0].Permanent || fs[0].Attempts != 1 || !strings.Contains(fs[0].Error, "535") {
		t.Fatalf("failures %+v", fs)
	}
	if er.metrics.get(emailMetrics.failed) != 1 || er.metrics.get(MetricCriticalFallback) != 1 {
		t.Fatalf("metrics %v", er.metrics.n)
	}
}

func TestEmailTransientReplyRetriedThenDelivered(t *testing.T) {
	r := startRelay(t, smtptest.Options{})
	busy := &smtpd.SMTPError{Code: 451, EnhancedCode: smtpd.EnhancedCode{4, 3, 0}, Message: "try again later"}
	r.ReplyToData(busy, busy)
	er := newEmailRouter(t, tlsConfig(r))
	got, err := er.Handle(context.Background(), "acme", telemetry.ExecutedAfterACLRevoked{Source: "acme/x"})
	if err != nil || !reflect.DeepEqual(got, []string{"email"}) {
		t.Fatalf("delivered %v err %v", got, err)
	}
	if !reflect.DeepEqual(er.waits, []time.Duration{500 * time.Millisecond, time.Second}) {
		t.Fatalf("waits %v, want 500ms then 1s", er.waits)
	}
	if now := er.clk.Now(); !now.Equal(t0.Add(1500 * time.Millisecond)) {
		t.Fatalf("fake clock at %v", now)
	}
	if n := len(r.Deliveries()); n != 1 {
		t.Fatalf("relay accepted %d messages", n)
	}
	if msg, _ := mail.ReadMessage(bytes.NewReader(r.Deliveries()[0].Data)); msg.Header.Get("Subject") != "[snavio] snavio.command.executed_after_acl_revoked for tenant acme" {
		t.Fatalf("subject %q", msg.Header.Get("Subject"))
	}
	if er.metrics.get(emailMetrics.retried) != 2 || er.metrics.get(emailMetrics.delivered) != 1 || len(er.Dashboard().Failures("")) != 0 {
		t.Fatalf("metrics %v failures %v", er.metrics.n, er.Dashboard().Failures(""))
	}
}

func TestEmailRelayDownFallsBackToDashboard(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close() // nothing listens there now
	er := newEmailRouter(t, EmailConfig{Relay: addr, From: "alerts@snavio.example", To: []string{"ops@acme.example"}})
	got, err := er.Handle(context.Background(), "acme", telemetry.Dropped{Tenant: "acme", Reason: telemetry.DroppedQueueUnconsumed})
	if err == nil || !reflect.DeepEqual(got, []string{"dashboard"}) || er.Unrouted() != 1 {
		t.Fatalf("delivered %v err %v unrouted %d", got, err, er.Unrouted())
	}
	if rec := er.Dashboard().Recent("acme"); len(rec) != 1 || rec[0].Event != telemetry.NameDropped {
		t.Fatalf("dashboard %+v", rec)
	}
	// A refused connection is transient: all three attempts were made.
	if len(er.waits) != 2 || er.metrics.get(emailMetrics.retried) != 2 || er.metrics.get(emailMetrics.failed) != 1 {
		t.Fatalf("waits %v metrics %v", er.waits, er.metrics.n)
	}
	if fs := er.Dashboard().Failures("acme"); len(fs) != 1 || fs[0].Permanent || fs[0].Attempts != 3 {
		t.Fatalf("failures %+v", fs)
	}
}

func TestEmailNeedsSTARTTLS(t *testing.T) {
	r := startRelay(t, smtptest.Options{NoTLS: true, InsecureAuth: true})
	er := newEmailRouter(t, tlsConfig(r))
	_, err := er.Handle(context.Background(), "acme", invalid)
	var p permanent
	if !errors.As(err, &p) || len(er.waits) != 0 {
		t.Fatalf("err %v waits %v: a relay without STARTTLS is refused once", err, er.waits)
	}
	if r.Auths() != 0 || len(r.Deliveries()) != 0 {
		t.Fatalf("the password or the alert went out in the clear: auths %d deliveries %d", r.Auths(), len(r.Deliveries()))
	}
}

func TestEmailRelayWithoutAuthIsPermanent(t *testing.T) {
	r := startRelay(t, smtptest.Options{NoAuth: true})
	er := newEmailRouter(t, tlsConfig(r))
	_, err := er.Handle(context.Background(), "acme", invalid)
	var p permanent
	if !errors.As(err, &p) || len(er.waits) != 0 || len(r.Deliveries()) != 0 {
		t.Fatalf("err %v waits %v deliveries %d: a username is configured, the relay offers no AUTH", err, er.waits, len(r.Deliveries()))
	}
	// Without a username the same relay takes the alert.
	cfg := tlsConfig(r)
	cfg.Username, cfg.Password = "", ""
	er = newEmailRouter(t, cfg)
	if _, err := er.Handle(context.Background(), "acme", invalid); err != nil || len(r.Deliveries()) != 1 || r.Deliveries()[0].Auth {
		t.Fatalf("err %v deliveries %+v", err, r.Deliveries())
	}
}

func TestEmailUntrustedCertificateIsPermanent(t *testing.T) {
	r := startRelay(t, smtptest.Options{})
	cfg := tlsConfig(r)
	cfg.RootCAs = x509.NewCertPool() // trusts nothing
	er := newEmailRouter(t, cfg)
	_, err := er.Handle(context.Background(), "acme", invalid)
	var p permanent
	if !errors.As(err, &p) || len(er.waits) != 0 || r.Auths() != 0 {
		t.Fatalf("err %v waits %v auths %d", err, er.waits, r.Auths())
	}
}

func TestEmailInsecureToLoopbackRelay(t *testing.T) {
	r := startRelay(t, smtptest.Options{NoTLS: true, InsecureAuth: true})
	cfg := tlsConfig(r)
	cfg.Insecure = true
	er := newEmailRouter(t, cfg)
	if got, err := er.Handle(context.Background(), "acme", invalid); err != nil || !reflect.DeepEqual(got, []string{"email"}) {
		t.Fatalf("delivered %v err %v", got, err)
	}
	if ds := r.Deliveries(); len(ds) != 1 || ds[0].TLS || !ds[0].Auth {
		t.Fatalf("deliveries %+v", ds)
	}
}

func TestEmailRecipientRefusedIsPermanent(t *testing.T) {
	r := startRelay(t, smtptest.Options{})
	r.ReplyToData(&smtpd.SMTPError{Code: 554, EnhancedCode: smtpd.EnhancedCode{5, 6, 0}, Message: "content rejected"})
	er := newEmailRouter(t, tlsConfig(r))
	_, err := er.Handle(context.Background(), "acme", invalid)
	var p permanent
	if !errors.As(err, &p) || len(er.waits) != 0 {
		t.Fatalf("err %v waits %v", err, er.waits)
	}
}

// TestEmailCanceledMidExchange: a relay that greets, reads EHLO and then
// says nothing holds a delivery only until its context ends (the server
// shutting down), not for the whole timeout.
func TestEmailCanceledMidExchange(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	stalled := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "220 127.0.0.1 ESMTP\r\n")
		_, _ = bufio.NewReader(c).ReadString('\n') // EHLO: the client now waits for the answer
		stalled <- c
	}()
	em, err := NewEmail(EmailConfig{Relay: l.Addr().String(), From: "a@example.com", To: []string{"b@example.com"}, Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- em.Deliver(ctx, Alert{Tenant: "acme", Event: telemetry.NameInvalid, At: t0}) }()
	c := <-stalled
	defer c.Close()
	cancel()
	select {
	case err := <-done:
		var p permanent
		if err == nil || errors.As(err, &p) || !errors.Is(err, context.Canceled) {
			t.Fatalf("err %v: want a transient error saying the context was canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliver still waits for a silent relay after its context ended")
	}
}

func TestEmailConfigValidation(t *testing.T) {
	ok := EmailConfig{Relay: "smtp.example.com:587", From: "alerts@example.com", To: []string{"ops@example.com"}}
	if err := ok.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		edit  func(*EmailConfig)
		field string
		want  string
	}{
		{"no port", func(c *EmailConfig) { c.Relay = "smtp.example.com" }, FieldRelay, "want HOST:PORT"},
		{"bad port", func(c *EmailConfig) { c.Relay = "smtp.example.com:http" }, FieldRelay, "want HOST:PORT"},
		{"port 0", func(c *EmailConfig) { c.Relay = "smtp.example.com:0" }, FieldRelay, "want HOST:PORT"},
		{"no host", func(c *EmailConfig) { c.Relay = ":25" }, FieldRelay, "want HOST:PORT"},
		{"insecure remote", func(c *EmailConfig) { c.Insecure = true }, FieldInsecure, "127.0.0.1, ::1 or localhost only"},
		{"no from", func(c *EmailConfig) { c.From = "" }, FieldFrom, "no sender address"},
		{"bad from", func(c *EmailConfig) { c.From = "alerts at example" }, FieldFrom, `sender address "alerts at example"`},
		{"no to", func(c *EmailConfig) { c.To = nil }, FieldTo, "no recipients"},
		{"bad to", func(c *EmailConfig) { c.To = []string{"ops@example.com, nope"} }, FieldTo, `recipient "ops@example.com, nope"`},
		{"user without password", func(c *EmailConfig) { c.Username = "u" }, FieldPassword, "has no password"},
		{"password without user", func(c *EmailConfig) { c.Password = "p" }, FieldUsername, "without a username"},
		{"password with newline", func(c *EmailConfig) { c.Username, c.Password = "u", "p\nq" }, FieldPassword, "line break"},
		{"negative timeout", func(c *EmailConfig) { c.Timeout = -time.Second }, FieldTimeout, "positive duration"},
	} {
		cfg := ok
		c.edit(&cfg)
		err := cfg.Validate()
		var ce *ConfigError
		if !errors.As(err, &ce) || ce.Field != c.field || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v (field %v), want field %s saying %q", c.name, err, ce, c.field, c.want)
		}
		if _, err := NewEmail(cfg); err == nil {
			t.Errorf("%s: NewEmail accepted it", c.name)
		}
	}
	for _, host := range []string{"127.0.0.1:25", "[::1]:25", "localhost:2525", "127.0.0.2:25"} {
		cfg := ok
		cfg.Relay, cfg.Insecure = host, true
		if err := cfg.Validate(); err != nil {
			t.Errorf("insecure loopback %s: %v", host, err)
		}
	}
	// Every problem is reported at once.
	bad := EmailConfig{Relay: "x", From: "y", To: []string{"z"}}
	if n := len(bad.Validate().(interface{ Unwrap() []error }).Unwrap()); n != 3 {
		t.Errorf("%d errors for three bad fields: %v", n, bad.Validate())
	}
}

func TestChannelMetrics(t *testing.T) {
	for name, want := range map[string]string{
		"email": "Snavio.Alert.Email.Failed", "ops-hook": "Snavio.Alert.OpsHook.Failed",
		"2nd_mail": "Snavio.Alert.NdMail.Failed", "--": "Snavio.Alert.Unnamed.Failed",
	} {
		if _, _, got := ChannelMetrics(name); got != want {
			t.Errorf("ChannelMetrics(%q) failed = %q, want %q", name, got, want)
		}
	}
}

func TestSubjectAndTextStayOneLine(t *testing.T) {
	a := Alert{Tenant: "ac\r\nBcc: x@evil.example", Event: "e\nv", Summary: "s\r\nt", Payload: json.RawMessage(`{"a":1}`)}
	if s := subject(a); strings.ContainsAny(s, "\r\n") || s != "[snavio] ev for tenant acBcc: x@evil.example" {
		t.Errorf("subject %q", s)
	}
	if txt := text(a); strings.Contains(txt, "\r") || !strings.Contains(txt, "Tenant:   acBcc: x@evil.example\n") {
		t.Errorf("text %q", txt)
	}
}

// FuzzEmailConfig: Validate never panics, and a config it accepts gives
// a channel whose sender and recipients parse again.
func FuzzEmailConfig(f *testing.F) {
	f.Add("smtp.example.com:587", "alerts@example.com", "ops@example.com, B <b@example.com>", "u", "p", false)
	f.Add("127.0.0.1:25", "A <a@b>", "c@d", "", "", true)
	f.Add(":0", "", "", "u", "", true)
	f.Add("[::1]:2525", "\"x y\" <x@y>", "=?utf-8?q?=C3=A9?= <e@f>", "", "p\n", false)
	f.Fuzz(func(t *testing.T, relay, from, to, user, pass string, insecure bool) {
		cfg := EmailConfig{Relay: relay, From: from, To: []string{to}, Username: user, Password: pass, Insecure: insecure}
		em, err := NewEmail(cfg)
		if err != nil {
			var ce *ConfigError
			if !errors.As(err, &ce) || ce.Field == "" || ce.Msg == "" {
				t.Fatalf("error %v is not a ConfigError naming a field", err)
			}
			return
		}
		if _, err := mail.ParseAddress(em.s.from.String()); err != nil {
			t.Fatalf("accepted sender %q does not parse again: %v", em.s.from, err)
		}
		for _, a := range em.s.to {
			if _, err := mail.ParseAddress(a.String()); err != nil {
				t.Fatalf("accepted recipient %q does not parse again: %v", a, err)
			}
		}
		if insecure && !loopback(em.s.host) {
			t.Fatalf("insecure accepted for %q", relay)
		}
	})
}

// FuzzSubject: whatever the tenant and event, the subject is one line.
func FuzzSubject(f *testing.F) {
	f.Add("acme", "snavio.command.invalid", true)
	f.Add("a\r\nb", "\x00", false)
	f.Fuzz(func(t *testing.T, tenant, event string, critical bool) {
		s := subject(Alert{Tenant: tenant, Event: event, Critical: critical})
		if strings.ContainsAny(s, "\r\n\x00") {
			t.Fatalf("subject %q spans lines", s)
		}
	})
}

// decodePart undoes a part's Content-Transfer-Encoding (multipart.Reader
// undoes quoted-printable itself).
func decodePart(p *multipart.Part) io.Reader {
	if strings.EqualFold(p.Header.Get("Content-Transfer-Encoding"), "base64") {
		return base64.NewDecoder(base64.StdEncoding, p)
	}
	return p
}

// BenchmarkEmailDeliver: one alert email to a relay on loopback, a new
// connection each (STARTTLS handshake, AUTH PLAIN, DATA, QUIT).
func BenchmarkEmailDeliver(b *testing.B) {
	r := smtptest.Start(b, smtptest.Options{User: testUser, Password: testPass})
	em, err := NewEmail(EmailConfig{Relay: r.Addr, From: "alerts@snavio.example", To: []string{"ops@acme.example"},
		Username: testUser, Password: testPass, RootCAs: r.RootCAs})
	if err != nil {
		b.Fatal(err)
	}
	payload, _ := telemetry.Marshal(invalid)
	a := Alert{Tenant: "acme", Event: telemetry.NameInvalid, Critical: true, At: t0, Summary: "s", Payload: payload}
	for b.Loop() {
		if err := em.Deliver(context.Background(), a); err != nil {
			b.Fatal(err)
		}
	}
}
