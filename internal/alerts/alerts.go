// Package alerts delivers high-signal telemetry out of band
// (docs/alerts.md): events marked alerting go to the channels a
// tenant configured for them, apart from the telemetry stream. Three events
// are critical and cannot be disabled: snavio.command.invalid,
// snavio.telemetry.dropped and snavio.secret.key_expiry_imminent always reach
// at least one channel; with none configured (or all failing) they go to
// the dashboard log and are counted for follow-up by the operations team.
//
// Channels here: the dashboard log (kept for the dashboard and the control
// API, and logged), signed webhooks, and email through an SMTP relay
// (STARTTLS and AUTH; email.go). A channel that fails after its retries is
// counted in the metrics and recorded on the dashboard log as a delivery
// failure (docs/alerts.md).
package alerts

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Critical reports whether an event must always reach a channel.
func Critical(event string) bool {
	switch event {
	case telemetry.NameInvalid, telemetry.NameDropped, telemetry.NameKeyExpiryImminent:
		return true
	}
	return false
}

// Alert is what a channel delivers.
type Alert struct {
	Tenant   string          `json:"tenant"`
	Event    string          `json:"event"`
	Critical bool            `json:"critical"`
	At       time.Time       `json:"at"`
	Summary  string          `json:"summary"`
	Payload  json.RawMessage `json:"payload"`
}

// Channel delivers alerts somewhere.
type Channel interface {
	// Deliver delivers a; an error wrapped with Permanent is not retried.
	Deliver(ctx context.Context, a Alert) error
}

// permanent marks errors that retrying cannot fix (a 4xx answer).
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks err as not worth retrying.
func Permanent(err error) error { return permanent{err} }

// Config is a tenant's alert routing: event name to channel names. The
// key "*" applies to alerting events without their own entry.
type Config map[string][]string

// Configs gives a tenant's configuration (nil: none).
type Configs interface {
	Alerts(tenant string) Config
}

// Router sends alerting events to channels. Safe for concurrent use.
type Router struct {
	channels  map[string]Channel
	dashboard *Dashboard
	configs   Configs
	clock     clock.Clock
	logger    *slog.Logger
	attempts  int
	backoff   time.Duration
	sleep     func(context.Context, time.Duration) error
	metrics   telemetry.Metrics
	names     map[string]channelMetrics
	mu        sync.Mutex
	unrouted  int // critical alerts with no working tenant channel
}

// channelMetrics are the metric names of one channel, made once in New.
type channelMetrics struct{ delivered, retried, failed string }

// MetricCriticalFallback counts critical alerts that reached no tenant
// channel and went to the dashboard log (Router.Unrouted).
const MetricCriticalFallback = "Snavio.Alert.CriticalFallback"

// ChannelMetrics returns the metric names of the channel called name:
// Snavio.Alert.<Name>.Delivered, .Retried (an attempt after a failure) and
// .Failed (given up: permanent or out of attempts). The name is CamelCased
// from its letters and digits ("ops-hook" -> OpsHook).
func ChannelMetrics(name string) (delivered, retried, failed string) {
	var b strings.Builder
	up := true
	for _, r := range name {
		switch {
		case b.Len() == 0 && !(r < unicode.MaxASCII && unicode.IsLetter(r)):
			up = true // a segment starts with a letter
		case r < unicode.MaxASCII && (unicode.IsLetter(r) || unicode.IsDigit(r)):
			if up {
				r = unicode.ToUpper(r)
			}
			b.WriteRune(r)
			up = false
		default:
			up = true
		}
	}
	seg := b.String()
	if seg == "" {
		seg = "Unnamed"
	}
	p := "Snavio.Alert." + seg
	return p + ".Delivered", p + ".Retried", p + ".Failed"
}

// Options configure a Router.
type Options struct {
	// Channels by name. "dashboard" is always the Dashboard.
	Channels map[string]Channel
	Configs  Configs
	Clock    clock.Clock
	Logger   *slog.Logger
	// Attempts per channel (default 3) with Backoff doubling between them
	// (default 500 ms).
	Attempts int
	Backoff  time.Duration
	// Sleep waits between attempts (default: a timer honouring ctx).
	Sleep func(context.Context, time.Duration) error
	// DashboardSize bounds the dashboard log (default 1000 alerts, and as
	// many delivery failures).
	DashboardSize int
	// Metrics receives the channel counters (ChannelMetrics) and
	// MetricCriticalFallback; nil drops them.
	Metrics telemetry.Metrics
}

// New returns a Router.
func New(o Options) *Router {
	if o.Clock == nil {
		o.Clock = clock.System()
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Attempts <= 0 {
		o.Attempts = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.Sleep == nil {
		o.Sleep = func(ctx context.Context, d time.Duration) error {
			t := time.NewTimer(d)
			defer t.Stop()
			select {
			case <-t.C:
				return nil
			case <-ctx.Done():
				return ctx.Err()
			}
		}
	}
	if o.DashboardSize <= 0 {
		o.DashboardSize = 1000
	}
	d := &Dashboard{max: o.DashboardSize, logger: o.Logger}
	ch := map[string]Channel{"dashboard": d}
	for n, c := range o.Channels {
		if n != "dashboard" {
			ch[n] = c
		}
	}
	names := make(map[string]channelMetrics, len(ch))
	for n := range ch {
		var m channelMetrics
		m.delivered, m.retried, m.failed = ChannelMetrics(n)
		names[n] = m
	}
	return &Router{channels: ch, dashboard: d, configs: o.Configs, clock: o.Clock, logger: o.Logger,
		attempts: o.Attempts, backoff: o.Backoff, sleep: o.Sleep, metrics: o.Metrics, names: names}
}

// count adds one to the counter name, if metrics are kept.
func (r *Router) count(name string) {
	if r.metrics != nil {
		r.metrics.Count(name, 1)
	}
}

// Dashboard returns the dashboard channel.
func (r *Router) Dashboard() *Dashboard { return r.dashboard }

// Unrouted counts critical alerts that reached no tenant-configured
// channel (the platform's follow-up list).
func (r *Router) Unrouted() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.unrouted
}

// Handle routes one event of tenant. Events that do not alert are ignored.
// It returns the names of the channels that delivered it.
func (r *Router) Handle(ctx context.Context, tenant string, e telemetry.Event) ([]string, error) {
	if !e.Alert() {
		return nil, nil
	}
	payload, err := telemetry.Marshal(e)
	if err != nil {
		return nil, fmt.Errorf("alerts: encode %s: %w", e.EventName(), err)
	}
	a := Alert{Tenant: tenant, Event: e.EventName(), Critical: Critical(e.EventName()), At: r.clock.Now(),
		Summary: fmt.Sprintf("%s for tenant %s", e.EventName(), tenant), Payload: payload}
	var names []string
	if r.configs != nil {
		cfg := r.configs.Alerts(tenant)
		names = cfg[a.Event]
		if _, ok := cfg[a.Event]; !ok {
			names = cfg["*"]
		}
	}
	var delivered []string
	var errs []error
	for _, n := range names {
		c, ok := r.channels[n]
		if !ok {
			errs = append(errs, fmt.Errorf("alerts: tenant %s routes %s to unknown channel %q", tenant, a.Event, n))
			continue
		}
		if err := r.deliver(ctx, n, c, a); err != nil {
			errs = append(errs, fmt.Errorf("alerts: channel %s: %w", n, err))
			continue
		}
		delivered = append(delivered, n)
	}
	if a.Critical && len(delivered) == 0 {
		// Critical alerts cannot be disabled: the dashboard always has them.
		r.mu.Lock()
		r.unrouted++
		r.mu.Unlock()
		r.count(MetricCriticalFallback)
		if err := r.dashboard.Deliver(ctx, a); err == nil {
			delivered = append(delivered, "dashboard")
		}
		r.logger.Warn("critical alert reached no tenant channel; flagged for operations follow-up", "tenant", tenant, "event", a.Event)
	}
	return delivered, errors.Join(errs...)
}

// deliver tries channel n up to r.attempts times, doubling the wait
// between attempts; a permanent error ends it at once. A failure is
// counted, logged and recorded on the dashboard log.
func (r *Router) deliver(ctx context.Context, n string, c Channel, a Alert) error {
	m := r.names[n]
	wait := r.backoff
	var err error
	var isPermanent bool
	attempts := 0
	for attempts < r.attempts {
		if attempts > 0 {
			if serr := r.sleep(ctx, wait); serr != nil {
				err = errors.Join(err, serr)
				break
			}
			wait *= 2
			r.count(m.retried)
		}
		attempts++
		if err = c.Deliver(ctx, a); err == nil {
			r.count(m.delivered)
			return nil
		}
		var p permanent
		if isPermanent = errors.As(err, &p); isPermanent {
			break
		}
	}
	r.count(m.failed)
	f := Failure{At: r.clock.Now(), Tenant: a.Tenant, Event: a.Event, Critical: a.Critical, Channel: n,
		Attempts: attempts, Permanent: isPermanent, Error: err.Error()}
	r.dashboard.recordFailure(f)
	r.logger.Warn("alert channel failed", "channel", n, "tenant", a.Tenant, "event", a.Event,
		"attempts", attempts, "permanent", isPermanent, "err", err)
	return err
}

// Dashboard is the dashboard-log channel: a bounded list of recent alerts
// (newest last) and a log line per alert.
type Dashboard struct {
	mu       sync.Mutex
	max      int
	items    []Alert
	failures []Failure
	logger   *slog.Logger
}

// Failure is a channel that gave up on an alert: it is shown on the
// dashboard log beside the alerts.
type Failure struct {
	At       time.Time `json:"at"`
	Tenant   string    `json:"tenant"`
	Event    string    `json:"event"`
	Critical bool      `json:"critical"`
	Channel  string    `json:"channel"`
	Attempts int       `json:"attempts"`
	// Permanent: the channel refused the alert (a 4xx answer, an SMTP 5xx
	// reply); retrying would not help.
	Permanent bool   `json:"permanent"`
	Error     string `json:"error,omitempty"`
}

func (d *Dashboard) recordFailure(f Failure) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.failures = appendBounded(d.failures, f, d.max)
}

// Failures returns the delivery failures of tenant ("" for all), newest
// last.
func (d *Dashboard) Failures(tenant string) []Failure {
	d.mu.Lock()
	defer d.mu.Unlock()
	return ofTenant(d.failures, tenant, func(f Failure) string { return f.Tenant })
}

// appendBounded appends v to s, dropping the oldest element past max.
func appendBounded[T any](s []T, v T, max int) []T {
	if len(s) >= max {
		copy(s, s[1:])
		s = s[:len(s)-1]
	}
	return append(s, v)
}

// ofTenant returns a copy of the items of tenant ("" for all).
func ofTenant[T any](s []T, tenant string, of func(T) string) []T {
	var out []T
	for _, v := range s {
		if tenant == "" || of(v) == tenant {
			out = append(out, v)
		}
	}
	return out
}

// Deliver implements Channel.
func (d *Dashboard) Deliver(_ context.Context, a Alert) error {
	d.mu.Lock()
	d.items = appendBounded(d.items, a, d.max)
	d.mu.Unlock()
	d.logger.Warn("alert", "tenant", a.Tenant, "event", a.Event, "critical", a.Critical)
	return nil
}

// Recent returns the alerts of tenant ("" for all), newest last.
func (d *Dashboard) Recent(tenant string) []Alert {
	d.mu.Lock()
	defer d.mu.Unlock()
	return ofTenant(d.items, tenant, func(a Alert) string { return a.Tenant })
}

// Webhook posts alerts as JSON to a URL, signed with
// X-Snavio-Signature: sha256=<hex HMAC-SHA256 of the body with Secret>.
type Webhook struct {
	URL    string
	Secret []byte
	Client *http.Client // default: 5 s timeout
}

// NewWebhook validates the URL (http or https) and returns the channel.
func NewWebhook(rawURL string, secret []byte) (*Webhook, error) {
	u, err := url.Parse(rawURL)
	if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
		return nil, fmt.Errorf("invalid webhook URL %q: use https://host/path", rawURL)
	}
	if len(secret) < 16 {
		return nil, errors.New("webhook secret is shorter than 16 bytes: use a random secret of at least 32 bytes")
	}
	return &Webhook{URL: rawURL, Secret: secret, Client: &http.Client{Timeout: 5 * time.Second}}, nil
}

// Deliver implements Channel: 2xx is success, 4xx permanent, anything
// else retried.
func (w *Webhook) Deliver(ctx context.Context, a Alert) error {
	body, err := json.Marshal(a)
	if err != nil {
		return Permanent(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return Permanent(err)
	}
	mac := hmac.New(sha256.New, w.Secret)
	mac.Write(body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Snavio-Signature", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	req.Header.Set("X-Snavio-Event", a.Event)
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("post %s: %w", w.URL, err)
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode >= 200 && resp.StatusCode < 300:
		return nil
	case resp.StatusCode >= 400 && resp.StatusCode < 500 && resp.StatusCode != http.StatusTooManyRequests:
		return Permanent(fmt.Errorf("post %s: %s", w.URL, resp.Status))
	default:
		return fmt.Errorf("post %s: %s", w.URL, resp.Status)
	}
}
