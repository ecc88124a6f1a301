package dashboard

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/snavio/snavio/internal/alerts"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/server"
)

// apiError is a control-API refusal seen in-process.
type apiError struct {
	status int
	body   string
}

func (e *apiError) Error() string {
	return fmt.Sprintf("control API answered %d: %s", e.status, e.body)
}

// recorder is the in-process ResponseWriter of an API call.
type recorder struct {
	h      http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.h }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }
func (r *recorder) WriteHeader(code int)        { r.status = code }

// call runs GET target on the control API in-process as p and decodes
// the JSON answer into out.
func (d *Dashboard) call(ctx context.Context, p server.Principal, target string, out any) error {
	req, err := http.NewRequestWithContext(server.WithPrincipal(ctx, p), http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	rec := &recorder{h: http.Header{}, status: http.StatusOK}
	d.o.API.ServeHTTP(rec, req)
	if rec.status != http.StatusOK {
		return &apiError{status: rec.status, body: rec.body.String()}
	}
	return json.Unmarshal(rec.body.Bytes(), out)
}

// alertsAnswer is GET /v1/alerts.
type alertsAnswer struct {
	Alerts []alerts.Alert `json:"alerts"`
}

// Alert is an inbox row.
type Alert struct {
	Key      string
	Tenant   string
	Event    string
	Summary  string
	Critical bool
	Read     bool
	At       time.Time
	Payload  string
}

// alertKey names an alert (the dashboard log gives alerts no id): a
// digest of what it says and when.
func alertKey(a alerts.Alert) string {
	h := sha256.New()
	fmt.Fprintf(h, "%s\x00%s\x00%d\x00%s\x00", a.Tenant, a.Event, a.At.UnixNano(), a.Summary)
	h.Write(a.Payload)
	return hex.EncodeToString(h.Sum(nil)[:12])
}

// validKey reports whether s has an alert key's shape.
func validKey(s string) bool {
	if len(s) != 24 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

// inbox reads p's alerts through GET /v1/alerts: critical first, then
// newest first; unread counts the alerts p has not acknowledged.
func (d *Dashboard) inbox(ctx context.Context, p server.Principal) ([]Alert, int, error) {
	var ans alertsAnswer
	if err := d.call(ctx, p, "/v1/alerts", &ans); err != nil {
		return nil, 0, err
	}
	out := make([]Alert, 0, len(ans.Alerts))
	unread := 0
	for _, a := range ans.Alerts {
		k := alertKey(a)
		row := Alert{Key: k, Tenant: a.Tenant, Event: a.Event, Summary: a.Summary, Critical: a.Critical, At: a.At,
			Read: d.acks.has(p.String(), k), Payload: string(a.Payload)}
		if !row.Read {
			unread++
		}
		out = append(out, row)
	}
	slices.SortStableFunc(out, func(a, b Alert) int {
		if a.Critical != b.Critical {
			if a.Critical {
				return -1
			}
			return 1
		}
		return b.At.Compare(a.At)
	})
	return out, unread, nil
}

// acks remembers which alerts each principal acknowledged, in memory,
// at most max per principal (the oldest acknowledgement goes first).
type acks struct {
	max int
	mu  sync.Mutex
	m   map[string]*ackSet
}

type ackSet struct {
	keys  map[string]bool
	order []string
}

func newAcks(max int) *acks { return &acks{max: max, m: map[string]*ackSet{}} }

func (a *acks) add(who, key string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.m[who]
	if s == nil {
		s = &ackSet{keys: map[string]bool{}}
		a.m[who] = s
	}
	if s.keys[key] {
		return
	}
	if len(s.order) >= a.max {
		delete(s.keys, s.order[0])
		s.order = s.order[1:]
	}
	s.keys[key] = true
	s.order = append(s.order, key)
}

func (a *acks) has(who, key string) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.m[who]
	return s != nil && s.keys[key]
}

// Outcomes are the throughput chart's series, in drawing order.
var Outcomes = []struct{ Event, Label, Color string }{
	{"snavio.command.delivered", "delivered", "#2e7d32"},
	{"snavio.command.duplicate", "duplicate", "#1565c0"},
	{"snavio.command.failed", "failed", "#ef6c00"},
	{"snavio.command.invalid", "invalid", "#c62828"},
}

// maxChartPages bounds the telemetry the chart reads (pages of
// wire.TelemetryMaxLimit records); past it the chart says it is partial.
const maxChartPages = 100

// Throughput is commands per minute by outcome over the last hour.
type Throughput struct {
	// Start is the first minute; Counts[o][i] the outcome o's count in
	// minute i.
	Start   time.Time
	Counts  [][]int
	Totals  []int
	Partial bool
}

// readHour reads p's telemetry of the hour before now through GET
// /v1/telemetry (every tenant's for the operator) in one pass: the
// outcomes per minute, per route, the failures, skews and fairness events.
func (d *Dashboard) readHour(ctx context.Context, p server.Principal, now time.Time) (*hour, error) {
	h := newHour(now.Truncate(time.Minute).Add(-59 * time.Minute))
	q := url.Values{"since": {h.all.Start.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(wire.TelemetryMaxLimit)}}
	for range maxChartPages {
		var page wire.TelemetryPage
		if err := d.call(ctx, p, "/v1/telemetry?"+q.Encode(), &page); err != nil {
			return h, err
		}
		for _, r := range page.Records {
			h.add(r.At, r.Event)
		}
		if len(page.Records) < wire.TelemetryMaxLimit {
			return h, nil
		}
		q = url.Values{"after": {strconv.FormatUint(page.NextAfter, 10)}, "limit": {strconv.Itoa(wire.TelemetryMaxLimit)}}
	}
	h.all.Partial = true
	return h, nil
}

// Page is what page.html renders.
type Page struct {
	Principal string
	Operator  bool
	CSRF      string
	Alerts    []Alert
	Unread    int
	// AlertsSince is the newest alert's time: the live stream sends the
	// alerts after it.
	AlertsSince string
	Chart       template.HTML
	Outcomes    []OutcomeTotal
	Partial     bool
	Failures    []Failure
	// Tenant panels.
	Grants []Grant
	Keys   []ServiceKey
	Skews  []Skew
	// Operator panels.
	Routes          []RouteHealth
	RouteThroughput []RouteThroughput
	Bans            []Ban
	Fairness        []FairnessEvent
	Snapshots       []Snapshot
	Replays         []wire.ReplayAudit
	// Errors names the panels that could not be read, and why.
	Errors map[string]string
}

// OutcomeTotal is a chart legend entry.
type OutcomeTotal struct {
	Label, Color string
	Total        int
}

func (d *Dashboard) page(ctx context.Context, si signedIn) (Page, error) {
	p := Page{Principal: si.p.String(), Operator: si.p.Operator, CSRF: si.sess.CSRF, Errors: map[string]string{}}
	var err error
	if p.Alerts, p.Unread, err = d.inbox(ctx, si.p); err != nil {
		return p, err
	}
	var newest time.Time
	for _, a := range p.Alerts {
		if a.At.After(newest) {
			newest = a.At
		}
	}
	p.AlertsSince = newest.UTC().Format(time.RFC3339Nano)
	now := d.o.Clock.Now()
	h, err := d.readHour(ctx, si.p, now)
	if err != nil {
		return p, err
	}
	p.Chart, p.Partial = chartSVG(h.all, "throughput", bigW, bigH), h.all.Partial
	for i, o := range Outcomes {
		p.Outcomes = append(p.Outcomes, OutcomeTotal{Label: o.Label, Color: o.Color, Total: h.all.Totals[i]})
	}
	p.Failures, p.Skews = h.failureRows(), h.skewRows()
	// A panel that cannot be read says so on the page; the rest shows.
	note := func(panel string, err error) {
		if err != nil {
			p.Errors[panel] = "reading it failed: " + err.Error()
		}
	}
	if !si.p.Operator {
		p.Grants, err = d.grants(ctx, si.p)
		note("grants", err)
		p.Keys, err = d.serviceKeys(ctx, si.p, now)
		note("keys", err)
		return p, nil
	}
	p.RouteThroughput, p.Fairness = h.routeRows(), h.fairnessRows()
	if d.o.Routes != nil {
		p.Routes, err = d.o.Routes(ctx)
		note("routes", err)
	}
	p.Bans, err = d.bans(ctx, si.p)
	note("bans", err)
	p.Snapshots, err = d.snapshots(ctx, si.p, now)
	note("snapshots", err)
	p.Replays, err = d.replays(ctx, si.p)
	note("replays", err)
	return p, nil
}
