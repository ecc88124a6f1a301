package alerts

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/mail"
	"net/textproto"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	gomail "github.com/wneessen/go-mail"
	gosmtp "github.com/wneessen/go-mail/smtp"
)

// DefaultEmailTimeout bounds one email delivery, from connecting to QUIT.
const DefaultEmailTimeout = 10 * time.Second

// EmailConfig configures the email channel. Validate says what is wrong
// with it; NewEmail validates.
type EmailConfig struct {
	// Relay is the SMTP relay's HOST:PORT, such as smtp.example.com:587
	// (message submission with STARTTLS).
	Relay string
	// From is the sender address (RFC 5322, as net/mail parses it).
	From string
	// To are the recipients; each entry may be a comma-separated list.
	To []string
	// Username and Password authenticate to the relay (SMTP AUTH, after
	// STARTTLS); both or neither.
	Username, Password string
	// Insecure sends without TLS, to a loopback relay only (127.0.0.1,
	// ::1, localhost): a local MTA that relays onwards. Without it the
	// relay must offer STARTTLS, or nothing is sent.
	Insecure bool
	// RootCAs verify the relay's certificate (nil: the system's roots).
	RootCAs *x509.CertPool
	// Timeout bounds one delivery (default DefaultEmailTimeout).
	Timeout time.Duration
}

// Fields of an EmailConfig, as ConfigError names them.
const (
	FieldRelay    = "relay"
	FieldFrom     = "from"
	FieldTo       = "to"
	FieldUsername = "username"
	FieldPassword = "password"
	FieldInsecure = "insecure"
	FieldTimeout  = "timeout"
)

// ConfigError is one invalid field of an EmailConfig. Its message names
// the value and the fix; Field lets a caller name its own input (a flag).
type ConfigError struct {
	Field string
	Msg   string
}

func (e *ConfigError) Error() string { return e.Msg }

func configErr(field, format string, args ...any) error {
	return &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// emailSettings is an EmailConfig once validated.
type emailSettings struct {
	host     string
	port     int
	from     *mail.Address
	to       []*mail.Address
	username string
	password string
	insecure bool
	rootCAs  *x509.CertPool
	timeout  time.Duration
}

// Validate reports every invalid field of c, joined; each is a
// *ConfigError.
func (c EmailConfig) Validate() error {
	_, err := c.settings()
	return err
}

func (c EmailConfig) settings() (emailSettings, error) {
	s := emailSettings{username: c.Username, password: c.Password, insecure: c.Insecure, rootCAs: c.RootCAs, timeout: c.Timeout}
	var errs []error
	host, port, err := net.SplitHostPort(c.Relay)
	n, perr := strconv.Atoi(port)
	switch {
	case err != nil || host == "" || perr != nil || n < 1 || n > 65535:
		errs = append(errs, configErr(FieldRelay, "SMTP relay %q: want HOST:PORT with a port from 1 to 65535, such as smtp.example.com:587", c.Relay))
	case c.Insecure && !loopback(host):
		errs = append(errs, configErr(FieldInsecure, "SMTP relay %q is not a loopback address: plain SMTP (insecure) is allowed to 127.0.0.1, ::1 or localhost only; drop insecure to use STARTTLS", c.Relay))
	default:
		s.host, s.port = host, n
	}
	if c.From == "" {
		errs = append(errs, configErr(FieldFrom, "no sender address: give one such as alerts@example.com"))
	} else if s.from, err = mail.ParseAddress(c.From); err != nil {
		errs = append(errs, configErr(FieldFrom, "sender address %q: %v; want an address such as alerts@example.com or \"Snavio <alerts@example.com>\"", c.From, err))
	}
	for _, v := range c.To {
		list, err := mail.ParseAddressList(v)
		if err != nil {
			errs = append(errs, configErr(FieldTo, "recipient %q: %v; want an address such as ops@example.com (several separated by commas)", v, err))
			continue
		}
		s.to = append(s.to, list...)
	}
	if len(c.To) == 0 {
		errs = append(errs, configErr(FieldTo, "no recipients: give at least one address such as ops@example.com"))
	}
	switch {
	case c.Username != "" && c.Password == "":
		errs = append(errs, configErr(FieldPassword, "username %q has no password: give the password in a file or the environment", c.Username))
	case c.Username == "" && c.Password != "":
		errs = append(errs, configErr(FieldUsername, "a password without a username: give the username too, or neither"))
	case strings.ContainsAny(c.Username, "\x00\r\n"):
		errs = append(errs, configErr(FieldUsername, "the username holds a NUL or line break: give it on one line"))
	case strings.ContainsAny(c.Password, "\x00\r\n"):
		errs = append(errs, configErr(FieldPassword, "the password holds a NUL or line break: a password file holds the password alone, on its first line"))
	}
	if c.Timeout < 0 {
		errs = append(errs, configErr(FieldTimeout, "timeout %v: want a positive duration such as 10s", c.Timeout))
	}
	if s.timeout <= 0 {
		s.timeout = DefaultEmailTimeout
	}
	return s, errors.Join(errs...)
}

// loopback reports whether host is localhost or a loopback IP.
func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Email sends alerts through an SMTP relay: a summary subject, a readable
// text part, and the Alert as JSON (the webhook's body) in alert.json.
// Replies 4xx and network failures are retried by the Router; 5xx
// replies (bad credentials, refused sender or recipient) and a relay that
// cannot be trusted (no STARTTLS, a certificate that does not verify) are
// permanent. Safe for concurrent use: each delivery has its own
// connection.
type Email struct {
	s emailSettings
}

// NewEmail validates c and returns the channel.
func NewEmail(c EmailConfig) (*Email, error) {
	s, err := c.settings()
	if err != nil {
		return nil, err
	}
	return &Email{s: s}, nil
}

// Relay returns the relay's HOST:PORT.
func (e *Email) Relay() string { return net.JoinHostPort(e.s.host, strconv.Itoa(e.s.port)) }

// Deliver implements Channel.
func (e *Email) Deliver(ctx context.Context, a Alert) error {
	m, err := e.message(a)
	if err != nil {
		return Permanent(err)
	}
	// The connection is ours to close: go-mail leaves it open when the
	// exchange fails before MAIL (EHLO, STARTTLS, AUTH) or QUIT fails, and
	// ctx ending (shutdown) must interrupt an exchange in progress.
	var mu sync.Mutex
	var conn net.Conn
	closeConn := func() {
		mu.Lock()
		defer mu.Unlock()
		if conn != nil {
			_ = conn.Close()
		}
	}
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		mu.Lock()
		conn = c
		mu.Unlock()
		return c, err
	}
	defer closeConn()
	c, err := gomail.NewClient(e.s.host, append(e.options(), gomail.WithDialContextFunc(dial))...)
	if err != nil {
		return Permanent(fmt.Errorf("smtp %s: %w", e.Relay(), err))
	}
	ctx, cancel := context.WithTimeout(ctx, e.s.timeout)
	defer cancel()
	defer context.AfterFunc(ctx, closeConn)()
	client, err := c.DialToSMTPClientWithContext(ctx)
	if err == nil {
		if err = c.SendWithSMTPClient(client, m); err == nil {
			// The relay took the message: a failing QUIT changes nothing.
			_ = client.Quit()
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			err = errors.Join(err, ctx.Err())
		}
		err = fmt.Errorf("smtp %s: %w", e.Relay(), err)
		if smtpPermanent(err) {
			return Permanent(err)
		}
		return err
	}
	return nil
}

func (e *Email) options() []gomail.Option {
	o := []gomail.Option{gomail.WithPort(e.s.port), gomail.WithTimeout(e.s.timeout)}
	if e.s.insecure {
		o = append(o, gomail.WithTLSPolicy(gomail.NoTLS))
	} else {
		o = append(o, gomail.WithTLSPolicy(gomail.TLSMandatory),
			gomail.WithTLSConfig(&tls.Config{ServerName: e.s.host, RootCAs: e.s.rootCAs, MinVersion: tls.VersionTLS12}))
	}
	if e.s.username != "" {
		// Over TLS the strongest mechanism the relay offers; in the clear
		// (loopback only) PLAIN, which go-mail allows to a loopback host.
		auth := gomail.SMTPAuthAutoDiscover
		if e.s.insecure {
			auth = gomail.SMTPAuthPlain
		}
		o = append(o, gomail.WithSMTPAuth(auth), gomail.WithUsername(e.s.username), gomail.WithPassword(e.s.password))
	}
	return o
}

// message builds the email of a.
func (e *Email) message(a Alert) (*gomail.Msg, error) {
	body, err := json.Marshal(a)
	if err != nil {
		return nil, fmt.Errorf("encoding the alert: %w", err)
	}
	m := gomail.NewMsg()
	m.FromMailAddress(e.s.from)
	m.ToMailAddress(e.s.to...)
	m.Subject(subject(a))
	m.SetDateWithValue(a.At)
	m.SetMessageID()
	m.SetGenHeader("X-Snavio-Tenant", oneLine(a.Tenant))
	m.SetGenHeader("X-Snavio-Event", oneLine(a.Event))
	m.SetBodyString(gomail.TypeTextPlain, text(a))
	if err := m.AttachReader("alert.json", bytes.NewReader(body), gomail.WithFileContentType("application/json")); err != nil {
		return nil, fmt.Errorf("attaching alert.json: %w", err)
	}
	return m, nil
}

// subject is an alert email's subject: "[snavio] CRITICAL <event> for
// tenant <tenant>", without CRITICAL for other alerts.
func subject(a Alert) string {
	crit := ""
	if a.Critical {
		crit = "CRITICAL "
	}
	return "[snavio] " + crit + oneLine(a.Event) + " for tenant " + oneLine(a.Tenant)
}

// text is the readable part of an alert email.
func text(a Alert) string {
	var b strings.Builder
	if a.Critical {
		b.WriteString("CRITICAL alert (critical alerts cannot be disabled)\n\n")
	} else {
		b.WriteString("Alert\n\n")
	}
	fmt.Fprintf(&b, "Tenant:   %s\nEvent:    %s\nCritical: %t\nAt:       %s\nSummary:  %s\n\n",
		oneLine(a.Tenant), oneLine(a.Event), a.Critical, a.At.UTC().Format(time.RFC3339Nano), oneLine(a.Summary))
	var p bytes.Buffer
	if err := json.Indent(&p, a.Payload, "", "  "); err == nil {
		b.WriteString("Payload:\n")
		b.Write(p.Bytes())
		b.WriteString("\n\n")
	}
	b.WriteString("The attached alert.json holds this alert as JSON, as the webhook channel posts it.\n")
	return b.String()
}

// oneLine drops control characters, so a value cannot break a header or
// a line of the text part.
func oneLine(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
}

// smtpPermanent reports whether retrying err cannot help: a 5xx reply, a
// relay without STARTTLS or AUTH, a certificate that does not verify.
func smtpPermanent(err error) bool {
	var se *gomail.SendError
	if errors.As(err, &se) {
		return !se.IsTemp() && se.ErrorCode() >= 500
	}
	var te *textproto.Error
	if errors.As(err, &te) {
		return te.Code >= 500
	}
	var ce *tls.CertificateVerificationError
	if errors.As(err, &ce) {
		return true
	}
	for _, p := range []error{gosmtp.ErrUnencrypted, gomail.ErrNoSupportedAuthDiscovered, gomail.ErrPlainAuthNotSupported} {
		if errors.Is(err, p) {
			return true
		}
	}
	// go-mail says so in words only.
	msg := err.Error()
	return strings.Contains(msg, "does not support STARTTLS") || strings.Contains(msg, "does not support SMTP AUTH")
}
