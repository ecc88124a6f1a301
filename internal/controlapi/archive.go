// This file is the archive API of `snavio dispatch serve`: the
// events the ingress accepted, like the EventBridge archive, queryable by
// time range with filters (operator only).
//
//	GET /v1/archive?from=RFC3339&to=RFC3339&source=&target=&command=&limit=&page_token=
//
// from (inclusive) and to (exclusive) bound the received time; both are
// optional. limit is 1 to 1000 (default 100). A page may be short, even
// empty, with a next_page_token when filters skip many events: keep paging
// until next_page_token is absent.

package controlapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/snavio/snavio/internal/server"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// ArchiveStore is the embedded store's archive query.
type ArchiveStore interface {
	ArchiveQuery(ctx context.Context, q embedded.ArchiveQuery) ([]embedded.ArchivedEvent, string, error)
}

// ArchiveOptions configure the API. Archive is required.
type ArchiveOptions struct {
	Archive ArchiveStore
	Logger  *slog.Logger
}

// ArchiveAPI serves GET /v1/archive.
type ArchiveAPI struct {
	o  ArchiveOptions
	ep Endpoints
}

// NewArchiveAPI returns the API.
func NewArchiveAPI(o ArchiveOptions) (*ArchiveAPI, error) {
	if o.Archive == nil {
		return nil, errors.New("controlapi: ArchiveOptions.Archive is required")
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return &ArchiveAPI{o: o, ep: Endpoints{Logger: o.Logger}}, nil
}

// ArchiveEvent is one archived event as the API returns it. Detail is the JSON
// object the producer put.
type ArchiveEvent struct {
	ID         string          `json:"id"`
	Source     string          `json:"source"`
	DetailType string          `json:"detail_type"`
	ReceivedAt time.Time       `json:"received_at"`
	Target     string          `json:"target,omitempty"`
	Command    string          `json:"command,omitempty"`
	Detail     json.RawMessage `json:"detail"`
}

// ArchivePage is the answer: events in received order, and the token of the next
// page (absent at the end).
type ArchivePage struct {
	Events        []ArchiveEvent `json:"events"`
	NextPageToken string         `json:"next_page_token,omitempty"`
}

// maxTokenLen bounds a page token (the store's are 25 bytes).
const maxTokenLen = 128

var archiveParams = map[string]bool{"from": true, "to": true, "source": true, "target": true, "command": true, "limit": true, "page_token": true}

// ParseArchiveQuery validates the query string of GET /v1/archive; its error
// names the parameter and the fix.
func ParseArchiveQuery(v url.Values) (embedded.ArchiveQuery, error) {
	var q embedded.ArchiveQuery
	for k, vs := range v {
		if !archiveParams[k] {
			return q, fmt.Errorf("unknown query parameter %.40q: use from, to, source, target, command, limit and page_token", k)
		}
		if len(vs) != 1 {
			return q, fmt.Errorf("query parameter %s given %d times: give it once", k, len(vs))
		}
	}
	var err error
	parseTime := func(name string) time.Time {
		s := v.Get(name)
		if s == "" || err != nil {
			return time.Time{}
		}
		t, perr := time.Parse(time.RFC3339Nano, s)
		if perr != nil {
			err = fmt.Errorf("%s=%.40q is not an RFC 3339 time: use a time such as 2026-11-21T12:00:00Z", name, s)
		} else if t.Year() < 1970 || t.Year() > 2200 {
			err = fmt.Errorf("%s=%.40q is out of range: use a time between 1970 and 2200", name, s)
		}
		return t.UTC()
	}
	q.From, q.To = parseTime("from"), parseTime("to")
	if err != nil {
		return q, err
	}
	if !q.To.IsZero() && !q.To.After(q.From) {
		return q, fmt.Errorf("to=%s is not after from=%s: give a range whose end is after its start", q.To.Format(time.RFC3339Nano), q.From.Format(time.RFC3339Nano))
	}
	q.Source, q.Target, q.Command = v.Get("source"), v.Get("target"), v.Get("command")
	switch {
	case q.Source != "" && !envelope.ValidSource(q.Source):
		return q, fmt.Errorf("source=%.40q is not a bus source: use <tenant>/<service>, such as acme/billing", q.Source)
	case q.Target != "" && !envelope.ValidTarget(q.Target):
		return q, fmt.Errorf("target=%.40q is not a target name: use 1-64 characters of a-z 0-9 . _ -", q.Target)
	case q.Command != "" && !envelope.ValidName(q.Command):
		return q, fmt.Errorf("command=%.40q is not a command name: use 1-128 characters of A-Z a-z 0-9 . _ : -", q.Command)
	}
	if s := v.Get("limit"); s != "" {
		n, perr := strconv.Atoi(s)
		if perr != nil || n < 1 || n > embedded.MaxArchivePage {
			return q, fmt.Errorf("limit=%.20q: use a whole number from 1 to %d", s, embedded.MaxArchivePage)
		}
		q.Limit = n
	}
	q.PageToken = v.Get("page_token")
	if len(q.PageToken) > maxTokenLen {
		return q, fmt.Errorf("page_token is %d bytes, longer than any this server issues: pass next_page_token unchanged", len(q.PageToken))
	}
	return q, nil
}

func (a *ArchiveAPI) list(w http.ResponseWriter, r *http.Request, _ server.Principal) error {
	q, err := ParseArchiveQuery(r.URL.Query())
	if err != nil {
		return BadRequest(err.Error(), "fix the query parameter named; see GET /v1/archive in docs/replay.md")
	}
	evs, next, err := a.o.Archive.ArchiveQuery(r.Context(), q)
	if err != nil {
		if q.PageToken != "" && strings.Contains(err.Error(), "page token") {
			return BadRequest(err.Error(), "pass next_page_token from the previous page unchanged, with the same other parameters")
		}
		return fmt.Errorf("archive query: %w", err)
	}
	p := ArchivePage{Events: make([]ArchiveEvent, len(evs)), NextPageToken: next}
	for i, e := range evs {
		detail := json.RawMessage(e.Detail)
		if !json.Valid(detail) {
			// The ingress accepts only JSON objects; keep the answer valid
			// whatever the store holds.
			b, _ := json.Marshal(string(e.Detail))
			detail = b
		}
		p.Events[i] = ArchiveEvent{ID: e.EventID, Source: e.Source, DetailType: e.DetailType, ReceivedAt: e.ReceivedAt.UTC(), Target: e.Target, Command: e.Command, Detail: detail}
	}
	WriteJSON(w, http.StatusOK, p)
	return nil
}
