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
// telemetryapi.MaxLimit records); past it the chart says it is partial.
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

// throughput counts p's command outcomes over the hour before now,
// reading its telemetry through GET /v1/telemetry (every tenant's for the
// operator).
func (d *Dashboard) throughput(ctx context.Context, p server.Principal, now time.Time) (Throughput, error) {
	start := now.Truncate(time.Minute).Add(-59 * time.Minute)
	t := Throughput{Start: start, Counts: make([][]int, len(Outcomes)), Totals: make([]int, len(Outcomes))}
	for i := range t.Counts {
		t.Counts[i] = make([]int, 60)
	}
	q := url.Values{"since": {start.UTC().Format(time.RFC3339Nano)}, "limit": {strconv.Itoa(wire.TelemetryMaxLimit)}}
	for range maxChartPages {
		var page wire.TelemetryPage
		if err := d.call(ctx, p, "/v1/telemetry?"+q.Encode(), &page); err != nil {
			return t, err
		}
		for _, r := range page.Records {
			var ev struct {
				Event string `json:"event"`
			}
			if json.Unmarshal(r.Event, &ev) != nil {
				continue
			}
			minute := int(r.At.Sub(start) / time.Minute)
			if minute < 0 || minute >= 60 {
				continue
			}
			for o, out := range Outcomes {
				if ev.Event == out.Event {
					t.Counts[o][minute]++
					t.Totals[o]++
				}
			}
		}
		if len(page.Records) < wire.TelemetryMaxLimit {
			return t, nil
		}
		q = url.Values{"after": {strconv.FormatUint(page.NextAfter, 10)}, "limit": {strconv.Itoa(wire.TelemetryMaxLimit)}}
	}
	t.Partial = true
	return t, nil
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
	Routes      []RouteHealth
	RoutesError string
	Outcomes    []OutcomeTotal
	Partial     bool
}

// OutcomeTotal is a chart legend entry.
type OutcomeTotal struct {
	Label, Color string
	Total        int
}

func (d *Dashboard) page(ctx context.Context, si signedIn) (Page, error) {
	p := Page{Principal: si.p.String(), Operator: si.p.Operator, CSRF: si.sess.CSRF}
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
	tp, err := d.throughput(ctx, si.p, d.o.Clock.Now())
	if err != nil {
		return p, err
	}
	p.Chart, p.Partial = chartSVG(tp), tp.Partial
	for i, o := range Outcomes {
		p.Outcomes = append(p.Outcomes, OutcomeTotal{Label: o.Label, Color: o.Color, Total: tp.Totals[i]})
	}
	if si.p.Operator && d.o.Routes != nil {
		if p.Routes, err = d.o.Routes(ctx); err != nil {
			p.RoutesError = "reading route health failed: " + err.Error()
		}
	}
	return p, nil
}
