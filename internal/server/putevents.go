package server

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// PutEvents limits, as EventBridge documents them.
const (
	// MaxEntries is the most entries one PutEvents request may carry.
	MaxEntries = 10
	// DefaultMaxEntriesBytes is the most the entries of one request may
	// weigh together, computed as EventBridge computes it (see EntrySize).
	DefaultMaxEntriesBytes = 256 << 10

	maxSourceLen       = 256
	maxDetailTypeLen   = 128
	maxEventBusNameLen = 1600
	maxTraceHeaderLen  = 500
	maxEndpointIDLen   = 50
	maxResourceLen     = 2048
	maxResources       = 100
	// timeFieldSize is what a present Time field weighs in EntrySize.
	timeFieldSize = 14
	// maxEpochSeconds is the first second of year 10000.
	maxEpochSeconds = 253402300800
)

// Entry is one valid PutEvents entry, as the ingress hands it to the
// Pipeline. The ingress has already checked what EventBridge checks (the
// required fields, lengths, Detail being a JSON object, the reserved
// "aws." source prefix); everything about the command inside Detail is the
// pipeline's to judge.
type Entry struct {
	// Index is the entry's position in the request, from 0.
	Index int
	// Source is the bus source, <tenant>/<service> for snavio producers.
	Source string
	// DetailType is the event's detail-type.
	DetailType string
	// Detail is the event payload, a JSON object (the string's content,
	// already unescaped). The slice is the pipeline's to keep.
	Detail []byte
	// EventBusName is the bus name or ARN as sent; "default" when absent.
	EventBusName string
	// Resources are the ARNs the event concerns, possibly none.
	Resources []string
	// Time is the event's time if the entry set one, else the zero Time.
	Time time.Time
	// TraceHeader is the X-Ray trace header if the entry set one.
	TraceHeader string
}

// EntrySize is the size of e as EventBridge computes a PutEventsRequestEntry
// size: 14 bytes if Time is set, plus the UTF-8 bytes of Source,
// DetailType, Detail and each Resource.
func EntrySize(e *Entry) int {
	n := len(e.Source) + len(e.DetailType) + len(e.Detail)
	if !e.Time.IsZero() {
		n += timeFieldSize
	}
	for _, r := range e.Resources {
		n += len(r)
	}
	return n
}

// EntryResult is the fate of one entry: accepted with an event id, or
// refused with an error code and message. Exactly one of EventID and
// ErrorCode is set.
type EntryResult struct {
	EventID      string
	ErrorCode    string
	ErrorMessage string
}

// Accepted returns the result of an accepted entry.
func Accepted(eventID string) EntryResult { return EntryResult{EventID: eventID} }

// Refused returns the result of a refused entry. code should be one of the
// EntryErr* codes EventBridge uses (SDKs and producers key on them); message
// says what was wrong and what to do.
func Refused(code, message string) EntryResult {
	return EntryResult{ErrorCode: code, ErrorMessage: message}
}

// Pipeline takes the valid entries of one PutEvents request.
//
// Ingest returns exactly one result per entry, in the order given. An
// accepted entry must be durable (or delivered) before Ingest returns: the
// producer treats its event id as an acknowledgement. Ingest is called
// concurrently from many requests, at most Limits.MaxInFlightRequests at a
// time and with at most Limits.MaxInFlightEntries entries in flight
// altogether; it must not start work that outlives the call without its
// own bound. ctx is the request's context: it is cancelled when the client
// goes away, not when the server begins a graceful shutdown.
type Pipeline interface {
	Ingest(ctx context.Context, entries []Entry) []EntryResult
}

// PipelineFunc adapts a function to Pipeline.
type PipelineFunc func(ctx context.Context, entries []Entry) []EntryResult

// Ingest calls f.
func (f PipelineFunc) Ingest(ctx context.Context, entries []Entry) []EntryResult {
	return f(ctx, entries)
}

// DiscardPipeline returns a Pipeline that accepts every entry with a fresh
// random event id and keeps nothing: the floor `make bench-serve` measures
// the full pipeline against (the same server, the dispatcher replaced).
func DiscardPipeline() Pipeline {
	return PipelineFunc(func(_ context.Context, entries []Entry) []EntryResult {
		out := make([]EntryResult, len(entries))
		for i := range out {
			out[i] = Accepted(uuid.NewString())
		}
		return out
	})
}

// wire types: the JSON shapes of PutEvents, member names as AWS spells them.
type wireRequest struct {
	Entries    *[]wireEntry `json:"Entries"`
	EndpointID *string      `json:"EndpointId"`
}

type wireEntry struct {
	Source       *string  `json:"Source"`
	DetailType   *string  `json:"DetailType"`
	Detail       *string  `json:"Detail"`
	EventBusName *string  `json:"EventBusName"`
	Resources    []string `json:"Resources"`
	Time         *float64 `json:"Time"`
	TraceHeader  *string  `json:"TraceHeader"`
}

type wireResultEntry struct {
	EventID      string `json:"EventId,omitempty"`
	ErrorCode    string `json:"ErrorCode,omitempty"`
	ErrorMessage string `json:"ErrorMessage,omitempty"`
}

type wireResponse struct {
	FailedEntryCount int               `json:"FailedEntryCount"`
	Entries          []wireResultEntry `json:"Entries"`
}

// putEventsRequest is a parsed request: every entry in order, with the
// ingress's own refusal for those that failed per-entry validation.
type putEventsRequest struct {
	entries    []Entry
	refusals   []EntryResult // refusals[i].ErrorCode != "" when entry i is refused
	endpointID string
}

// valid returns the entries that passed per-entry validation.
func (p *putEventsRequest) valid() []Entry {
	out := make([]Entry, 0, len(p.entries))
	for i := range p.entries {
		if p.refusals[i].ErrorCode == "" {
			out = append(out, p.entries[i])
		}
	}
	return out
}

func validationError(msg string) *awsError {
	return &awsError{Status: 400, Type: ErrCodeValidation, Message: msg, Reason: "validation"}
}

// parsePutEvents parses and validates a PutEvents request body. A
// whole-request problem is an *awsError; per-entry problems are refusals.
func parsePutEvents(body []byte, maxEntriesBytes int) (*putEventsRequest, *awsError) {
	var in wireRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return nil, &awsError{
			Status: 400, Type: ErrCodeSerialization, Reason: "malformed",
			Message: "the request body is not a PutEvents JSON object (" + err.Error() +
				`); send {"Entries":[{"Source":...,"DetailType":...,"Detail":...}]}`,
		}
	}
	if in.Entries == nil {
		return nil, validationError("1 validation error detected: Value null at 'entries' failed to satisfy constraint: Member must not be null; send 1 to 10 entries in Entries")
	}
	wes := *in.Entries
	switch {
	case len(wes) == 0:
		return nil, validationError("1 validation error detected: Value '[]' at 'entries' failed to satisfy constraint: Member must have length greater than or equal to 1; send 1 to 10 entries")
	case len(wes) > MaxEntries:
		return nil, validationError(fmt.Sprintf("1 validation error detected: Value at 'entries' failed to satisfy constraint: Member must have length less than or equal to %d; this request has %d entries, split it into batches of at most %d", MaxEntries, len(wes), MaxEntries))
	}

	var problems []string
	tooLong := func(path string, s string, max int) {
		if n := utf8.RuneCountInString(s); n > max {
			problems = append(problems, fmt.Sprintf("Value at '%s' failed to satisfy constraint: Member must have length less than or equal to %d (it has %d)", path, max, n))
		}
	}
	req := &putEventsRequest{
		entries:  make([]Entry, len(wes)),
		refusals: make([]EntryResult, len(wes)),
	}
	if in.EndpointID != nil {
		req.endpointID = *in.EndpointID
		if !validEndpointID(req.endpointID) {
			problems = append(problems, fmt.Sprintf("Value at 'endpointId' failed to satisfy constraint: Member must have length between 1 and %d and match the pattern [A-Za-z0-9-]+.[A-Za-z0-9-]+", maxEndpointIDLen))
		}
	}
	total := 0
	for i := range wes {
		we, e := &wes[i], &req.entries[i]
		path := "entries." + strconv.Itoa(i+1) + ".member."
		e.Index = i
		if we.Source != nil {
			e.Source = *we.Source
			tooLong(path+"source", e.Source, maxSourceLen)
		}
		if we.DetailType != nil {
			e.DetailType = *we.DetailType
			tooLong(path+"detailType", e.DetailType, maxDetailTypeLen)
		}
		if we.Detail != nil {
			e.Detail = []byte(*we.Detail)
		}
		e.EventBusName = "default"
		if we.EventBusName != nil {
			e.EventBusName = *we.EventBusName
			if e.EventBusName == "" {
				problems = append(problems, "Value at '"+path+"eventBusName' failed to satisfy constraint: Member must have length greater than or equal to 1; omit EventBusName for the default bus")
			}
			tooLong(path+"eventBusName", e.EventBusName, maxEventBusNameLen)
		}
		if len(we.Resources) > maxResources {
			problems = append(problems, fmt.Sprintf("Value at '%sresources' failed to satisfy constraint: Member must have length less than or equal to %d (it has %d)", path, maxResources, len(we.Resources)))
		}
		for j, r := range we.Resources {
			tooLong(path+"resources."+strconv.Itoa(j+1)+".member", r, maxResourceLen)
		}
		e.Resources = we.Resources
		if we.TraceHeader != nil {
			e.TraceHeader = *we.TraceHeader
			tooLong(path+"traceHeader", e.TraceHeader, maxTraceHeaderLen)
		}
		if we.Time != nil {
			t := *we.Time
			if !(t >= 0 && t < maxEpochSeconds) {
				problems = append(problems, fmt.Sprintf("Value at '%stime' failed to satisfy constraint: Member must be epoch seconds between 0 and %d", path, int64(maxEpochSeconds)))
			} else {
				sec := math.Floor(t)
				e.Time = time.Unix(int64(sec), int64(math.Round((t-sec)*1e9))).UTC()
			}
		}
		total += EntrySize(e)
		req.refusals[i] = validateEntry(e)
	}
	if len(problems) > 0 {
		n := len(problems)
		word := "errors"
		if n == 1 {
			word = "error"
		}
		return nil, validationError(fmt.Sprintf("%d validation %s detected: %s", n, word, strings.Join(problems, "; ")))
	}
	if total > maxEntriesBytes {
		return nil, &awsError{
			Status: 400, Type: ErrCodeValidation, Reason: "too_large",
			Message: fmt.Sprintf("Total size of the entries in the request is over the limit: %d bytes, the most is %d (Time counts 14 bytes, Source, DetailType, Detail and each Resource their UTF-8 bytes); send fewer or smaller entries", total, maxEntriesBytes),
		}
	}
	return req, nil
}

// validateEntry applies EventBridge's per-entry checks; a zero result means
// the entry is valid.
func validateEntry(e *Entry) EntryResult {
	switch {
	case e.Source == "":
		return Refused(EntryErrInvalidArgument, "Parameter Source is not valid. Reason: Source is a required argument; set it to <tenant>/<service>")
	case e.DetailType == "":
		return Refused(EntryErrInvalidArgument, "Parameter DetailType is not valid. Reason: DetailType is a required argument; set it to snavio.command-sent")
	case len(e.Detail) == 0:
		return Refused(EntryErrInvalidArgument, "Parameter Detail is not valid. Reason: Detail is a required argument; set it to the signed command envelope (a JSON object)")
	case strings.HasPrefix(e.Source, "aws."):
		return Refused(EntryErrNotAuthorizedForSrc, "Not authorized for the source: the aws. prefix is reserved for AWS services; use <tenant>/<service>")
	case !isJSONObject(e.Detail):
		return Refused(EntryErrMalformedDetail, "Detail is malformed: it must be one valid JSON object, such as the signed command envelope")
	}
	return EntryResult{}
}

// isJSONObject reports whether b is exactly one syntactically valid JSON
// object. Duplicate member names pass, as they do on EventBridge: whether a
// command may carry them is the shield's to decide, with its telemetry.
func isJSONObject(b []byte) bool {
	t := bytes.TrimLeft(b, " \t\r\n")
	return len(t) > 0 && t[0] == '{' && jsontext.Value(b).IsValid(jsontext.AllowDuplicateNames(true))
}

// validEndpointID reports whether s matches EventBridge's EndpointId
// constraint: 1-50 characters, [A-Za-z0-9-]+ "." [A-Za-z0-9-]+.
func validEndpointID(s string) bool {
	if s == "" || len(s) > maxEndpointIDLen {
		return false
	}
	dot := strings.IndexByte(s, '.')
	if dot <= 0 || dot == len(s)-1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == dot {
			continue
		}
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// encodePutEventsResponse renders results in request order.
func encodePutEventsResponse(results []EntryResult) ([]byte, int) {
	out := wireResponse{Entries: make([]wireResultEntry, len(results))}
	for i, r := range results {
		if r.ErrorCode != "" {
			out.FailedEntryCount++
			out.Entries[i] = wireResultEntry{ErrorCode: r.ErrorCode, ErrorMessage: r.ErrorMessage}
		} else {
			out.Entries[i] = wireResultEntry{EventID: r.EventID}
		}
	}
	b, err := json.Marshal(&out)
	if err != nil { // cannot happen: strings and an int
		panic("server: encoding a PutEvents response: " + err.Error())
	}
	return b, out.FailedEntryCount
}
