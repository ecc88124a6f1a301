package dashboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// keepAlive is the longest a live stream stays silent: a comment line
// then tells proxies and the browser that it is alive.
const keepAlive = 15 * time.Second

// liveRecord is one telemetry record on the live stream.
type liveRecord struct {
	Seq    uint64          `json:"seq"`
	Tenant string          `json:"tenant"`
	At     time.Time       `json:"at"`
	Name   string          `json:"name"`
	Event  json.RawMessage `json:"event"`
}

// liveAlert is one new alert on the live stream, with the unread count
// after it.
type liveAlert struct {
	Key      string    `json:"key"`
	Tenant   string    `json:"tenant"`
	Event    string    `json:"event"`
	Summary  string    `json:"summary"`
	Critical bool      `json:"critical"`
	At       time.Time `json:"at"`
	Unread   int       `json:"unread"`
}

// events is GET /ui/events?alerts_since=RFC3339: server-sent events of the
// principal's telemetry from now on (event "telemetry", id its position,
// so a reconnecting EventSource resumes with Last-Event-ID) and its alerts
// newer than alerts_since (event "alert"). It reads through the control
// API's long poll in-process, so it sees what that API lets the principal
// see.
func (d *Dashboard) events(w http.ResponseWriter, r *http.Request, si signedIn) {
	var alertsSince time.Time
	if s := r.URL.Query().Get("alerts_since"); s != "" {
		t, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			http.Error(w, "query parameter alerts_since: not an RFC 3339 time; reload the dashboard", http.StatusBadRequest)
			return
		}
		alertsSince = t
	}
	var after uint64
	resume := r.Header.Get("Last-Event-ID") != ""
	if resume {
		n, err := strconv.ParseUint(r.Header.Get("Last-Event-ID"), 10, 64)
		if err != nil {
			http.Error(w, "header Last-Event-ID: not a stream position; reload the dashboard", http.StatusBadRequest)
			return
		}
		after = n
	}
	select {
	case d.streams <- struct{}{}:
		defer func() { <-d.streams }()
	default:
		w.Header().Set("Retry-After", "5")
		http.Error(w, "too many live dashboard streams are open on this server; close some dashboard tabs", http.StatusServiceUnavailable)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Time{}) // a stream outlives the server's read timeout
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	ctx := r.Context()
	send := func(id, event string, v any) error {
		b, err := json.Marshal(v)
		if err != nil {
			return err
		}
		if id != "" {
			if _, err := fmt.Fprintf(w, "id: %s\n", id); err != nil {
				return err
			}
		}
		_, err = fmt.Fprintf(w, "event: %s\ndata: %s\n\n", event, b)
		return err
	}
	if _, err := fmt.Fprint(w, "retry: 2000\n: live\n\n"); err != nil || rc.Flush() != nil {
		return
	}
	wait := strconv.FormatInt(d.o.LiveWait.Milliseconds(), 10) + "ms"
	q := url.Values{"since": {d.o.Clock.Now().UTC().Format(time.RFC3339Nano)}, "wait": {wait}, "limit": {"200"}}
	if resume {
		q = url.Values{"after": {strconv.FormatUint(after, 10)}, "wait": {wait}, "limit": {"200"}}
	}
	lastWrite := d.o.Clock.Now()
	for ctx.Err() == nil {
		if _, ok := d.current(r); !ok { // signed out, expired or revoked meanwhile
			_ = send("", "signedout", map[string]string{"signin": "/ui/signin"})
			_ = rc.Flush()
			return
		}
		var page wire.TelemetryPage
		err := d.call(ctx, si.p, "/v1/telemetry?"+q.Encode(), &page)
		var ae *apiError
		switch {
		case ctx.Err() != nil:
			return
		case errors.As(err, &ae) && ae.status == http.StatusConflict:
			q = url.Values{"after": {"0"}, "wait": {wait}, "limit": {"200"}} // the stream was reset
			continue
		case err != nil:
			_ = send("", "failure", map[string]string{"error": err.Error()})
			_ = rc.Flush()
			return
		}
		for _, rec := range page.Records {
			var ev struct {
				Event string `json:"event"`
			}
			_ = json.Unmarshal(rec.Event, &ev)
			pos := rec.Seq
			if si.p.Operator {
				pos = rec.Global
			}
			if err := send(strconv.FormatUint(pos, 10), "telemetry", liveRecord{Seq: rec.Seq, Tenant: rec.Tenant, At: rec.At, Name: ev.Event, Event: rec.Event}); err != nil {
				return
			}
		}
		q = url.Values{"after": {strconv.FormatUint(page.NextAfter, 10)}, "wait": {wait}, "limit": {"200"}}
		inbox, unread, err := d.inbox(ctx, si.p)
		if err != nil {
			if ctx.Err() == nil {
				_ = send("", "failure", map[string]string{"error": err.Error()})
				_ = rc.Flush()
			}
			return
		}
		var fresh []Alert
		for _, a := range inbox {
			if a.At.After(alertsSince) && !a.Read {
				fresh = append(fresh, a)
			}
		}
		slices.SortFunc(fresh, func(a, b Alert) int { return a.At.Compare(b.At) }) // oldest first: the page prepends
		newest := alertsSince
		for _, a := range fresh {
			newest = maxTime(newest, a.At)
			if err := send("", "alert", liveAlert{Key: a.Key, Tenant: a.Tenant, Event: a.Event, Summary: a.Summary, Critical: a.Critical, At: a.At, Unread: unread}); err != nil {
				return
			}
		}
		alertsSince = newest
		wrote := len(page.Records) > 0 || len(fresh) > 0
		if !wrote && d.o.Clock.Now().Sub(lastWrite) >= keepAlive {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			wrote = true
		}
		if wrote {
			lastWrite = d.o.Clock.Now()
			if rc.Flush() != nil {
				return
			}
		}
	}
}

func maxTime(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
