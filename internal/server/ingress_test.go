package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-json-experiment/json"
)

// post sends body to h as a PutEvents request, with the given headers
// overriding the defaults, and returns the recorder.
func post(h http.Handler, body string, hdr map[string]string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	r.Header.Set("Content-Type", ContentTypeAWSJSON11)
	r.Header.Set("X-Amz-Target", TargetPutEvents)
	for k, v := range hdr {
		if v == "" {
			r.Header.Del(k)
		} else {
			r.Header.Set(k, v)
		}
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

type awsErrBody struct {
	Type    string `json:"__type"`
	Message string `json:"message"`
}

func decodeAWSError(t *testing.T, w *httptest.ResponseRecorder) awsErrBody {
	t.Helper()
	var b awsErrBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	if got := w.Header().Get("X-Amzn-ErrorType"); got != b.Type {
		t.Fatalf("X-Amzn-ErrorType %q, body __type %q", got, b.Type)
	}
	if w.Header().Get("Content-Type") != ContentTypeAWSJSON11 || w.Header().Get("X-Amzn-RequestId") == "" {
		t.Fatalf("headers %v", w.Header())
	}
	return b
}

func TestIngressWholeRequestErrors(t *testing.T) {
	in, err := NewIngress(IngressOptions{Pipeline: &recordingPipeline{}, Limits: Limits{MaxBodyBytes: 300 << 10}})
	if err != nil {
		t.Fatal(err)
	}
	ok := `{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{}"}]}`
	tests := []struct {
		name   string
		method string
		body   string
		hdr    map[string]string
		status int
		typ    string
		msg    string
	}{
		{"GET", http.MethodGet, "", nil, 405, ErrCodeUnknownOperation, "POST /"},
		{"no target", "", ok, map[string]string{"X-Amz-Target": ""}, 400, ErrCodeUnknownOperation, "X-Amz-Target header is missing"},
		{"other target", "", ok, map[string]string{"X-Amz-Target": "AWSEvents.PutRule"}, 400, ErrCodeUnknownOperation, "AWSEvents.PutRule is not supported"},
		{"json content type", "", ok, map[string]string{"Content-Type": "application/json"}, 400, ErrCodeSerialization, ContentTypeAWSJSON11},
		{"no content type", "", ok, map[string]string{"Content-Type": ""}, 400, ErrCodeSerialization, "missing"},
		{"not json", "", `{"Entries":`, nil, 400, ErrCodeSerialization, "not a PutEvents JSON object"},
		{"array body", "", `[]`, nil, 400, ErrCodeSerialization, "not a PutEvents JSON object"},
		{"time as string", "", `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}","Time":"2026-01-01"}]}`, nil, 400, ErrCodeSerialization, "Time"},
		{"duplicate member", "", `{"Entries":[{"Source":"a/b","Source":"c/d","DetailType":"t","Detail":"{}"}]}`, nil, 400, ErrCodeSerialization, "duplicate"},
		{"no entries member", "", `{}`, nil, 400, ErrCodeValidation, "must not be null"},
		{"null entries", "", `{"Entries":null}`, nil, 400, ErrCodeValidation, "must not be null"},
		{"empty entries", "", `{"Entries":[]}`, nil, 400, ErrCodeValidation, "greater than or equal to 1"},
		{"detail type too long", "", `{"Entries":[{"Source":"a/b","DetailType":"` + strings.Repeat("d", 129) + `","Detail":"{}"}]}`, nil, 400, ErrCodeValidation, "entries.1.member.detailType"},
		{"empty bus", "", `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}","EventBusName":""}]}`, nil, 400, ErrCodeValidation, "eventBusName"},
		{"negative time", "", `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}","Time":-1}]}`, nil, 400, ErrCodeValidation, "entries.1.member.time"},
		{"bad endpoint", "", `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}"}],"EndpointId":"nodot"}`, nil, 400, ErrCodeValidation, "endpointId"},
		{"two problems", "", `{"Entries":[{"Source":"` + strings.Repeat("s", 257) + `","DetailType":"` + strings.Repeat("d", 129) + `","Detail":"{}"}]}`, nil, 400, ErrCodeValidation, "2 validation errors detected"},
		{"body over cap", "", `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"` + strings.Repeat(`\"`, 160<<10) + `"}]}`, nil, 413, ErrCodeValidation, "over the limit"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var w *httptest.ResponseRecorder
			if tt.method == http.MethodGet {
				w = httptest.NewRecorder()
				in.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/", nil))
			} else {
				w = post(in, tt.body, tt.hdr)
			}
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d; body %s", w.Code, tt.status, w.Body)
			}
			b := decodeAWSError(t, w)
			if b.Type != tt.typ || !strings.Contains(b.Message, tt.msg) {
				t.Fatalf("got %s %q, want %s containing %q", b.Type, b.Message, tt.typ, tt.msg)
			}
		})
	}
}

func TestIngressIgnoresSigV4AndUnknownMembers(t *testing.T) {
	in, _ := NewIngress(IngressOptions{Pipeline: &recordingPipeline{}})
	w := post(in, `{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{}","SystemMetadata":{"x":1}}],"Future":true}`, map[string]string{
		"Authorization":        "AWS4-HMAC-SHA256 Credential=AKID/20261121/eu-west-1/events/aws4_request, SignedHeaders=host;x-amz-date, Signature=00",
		"X-Amz-Date":           "20261121T120000Z",
		"X-Amz-Security-Token": "token",
		"Content-Type":         ContentTypeAWSJSON11 + "; charset=utf-8",
	})
	if w.Code != 200 {
		t.Fatalf("status %d: %s", w.Code, w.Body)
	}
	if got := w.Body.String(); got != `{"FailedEntryCount":0,"Entries":[{"EventId":"evt-a"}]}` {
		t.Fatalf("body %s", got)
	}
}

func TestParsePerEntryRefusals(t *testing.T) {
	tests := []struct {
		name  string
		entry string
		code  string
		msg   string
	}{
		{"valid", `{"Source":"acme/a","DetailType":"t","Detail":" {\"k\":[1]} "}`, "", ""},
		{"no source", `{"DetailType":"t","Detail":"{}"}`, EntryErrInvalidArgument, "Source is a required argument"},
		{"empty source", `{"Source":"","DetailType":"t","Detail":"{}"}`, EntryErrInvalidArgument, "Source is a required argument"},
		{"no detail type", `{"Source":"acme/a","Detail":"{}"}`, EntryErrInvalidArgument, "DetailType is a required argument"},
		{"no detail", `{"Source":"acme/a","DetailType":"t"}`, EntryErrInvalidArgument, "Detail is a required argument"},
		{"aws source", `{"Source":"aws.s3","DetailType":"t","Detail":"{}"}`, EntryErrNotAuthorizedForSrc, "reserved"},
		{"detail array", `{"Source":"acme/a","DetailType":"t","Detail":"[]"}`, EntryErrMalformedDetail, "JSON object"},
		{"detail invalid", `{"Source":"acme/a","DetailType":"t","Detail":"{\"a\":}"}`, EntryErrMalformedDetail, "JSON object"},
		{"detail two objects", `{"Source":"acme/a","DetailType":"t","Detail":"{}{}"}`, EntryErrMalformedDetail, "JSON object"},
		{"null entry", `null`, EntryErrInvalidArgument, "Source is a required argument"},
		{"detail duplicate names pass, as on EventBridge", `{"Source":"acme/a","DetailType":"t","Detail":"{\"a\":1,\"a\":2}"}`, "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, aerr := parsePutEvents([]byte(`{"Entries":[`+tt.entry+`]}`), DefaultMaxEntriesBytes)
			if aerr != nil {
				t.Fatalf("whole-request error %v", aerr)
			}
			r := req.refusals[0]
			if r.ErrorCode != tt.code || !strings.Contains(r.ErrorMessage, tt.msg) {
				t.Fatalf("refusal %+v, want %s %q", r, tt.code, tt.msg)
			}
		})
	}
}

func TestEntrySizeAsEventBridgeComputesIt(t *testing.T) {
	e := Entry{Source: "acme/a", DetailType: "dt", Detail: []byte(`{"é":1}`), Resources: []string{"r1", "ré"}}
	// 6 + 2 + 8 (é is 2 bytes) + 2 + 3
	if got := EntrySize(&e); got != 21 {
		t.Fatalf("EntrySize = %d, want 21", got)
	}
	e.Time = time.Unix(0, 0)
	if got := EntrySize(&e); got != 35 {
		t.Fatalf("EntrySize with Time = %d, want 35", got)
	}
}

// bodyOfSize builds a one-entry request whose entries weigh exactly n bytes.
func bodyOfSize(n int) string {
	const src, dt = "acme/a", "t"
	pad := n - len(src) - len(dt) - len(`{"p":""}`) - timeFieldSize
	return `{"Entries":[{"Source":"` + src + `","DetailType":"` + dt + `","Time":1.5,"Detail":"{\"p\":\"` + strings.Repeat("x", pad) + `\"}"}]}`
}

func TestSizeLimitBoundary(t *testing.T) {
	if _, aerr := parsePutEvents([]byte(bodyOfSize(DefaultMaxEntriesBytes)), DefaultMaxEntriesBytes); aerr != nil {
		t.Fatalf("exactly 256 KiB refused: %v", aerr)
	}
	_, aerr := parsePutEvents([]byte(bodyOfSize(DefaultMaxEntriesBytes+1)), DefaultMaxEntriesBytes)
	if aerr == nil || aerr.Type != ErrCodeValidation || !strings.Contains(aerr.Message, strconv.Itoa(DefaultMaxEntriesBytes+1)+" bytes") {
		t.Fatalf("256 KiB + 1 gave %v", aerr)
	}
}

func TestBrokenPipelineContractBecomesInternalErrors(t *testing.T) {
	short := PipelineFunc(func(_ context.Context, entries []Entry) []EntryResult {
		return []EntryResult{Accepted("only-one"), {}}[:1]
	})
	in, _ := NewIngress(IngressOptions{Pipeline: short})
	w := post(in, `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}"},{"Source":"a/b","DetailType":"t","Detail":"{}"}]}`, nil)
	var out wireResponse
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.FailedEntryCount != 1 || out.Entries[0].EventID != "only-one" || out.Entries[1].ErrorCode != EntryErrInternal {
		t.Fatalf("response %s", w.Body)
	}
}

func TestBackpressureRequests(t *testing.T) {
	p := newBlockingPipeline()
	m := NewMetrics()
	in, err := NewIngress(IngressOptions{Pipeline: p, Limits: Limits{MaxInFlightRequests: 2, RetryAfter: 1500 * time.Millisecond}, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}"}]}`
	held := make(chan *httptest.ResponseRecorder, 2)
	for range 2 {
		go func() { held <- post(in, body, nil) }()
		<-p.entered
	}
	if got := gatheredValue(t, m, "snavio_ingress_saturation"); got != 1 {
		t.Fatalf("saturation %v, want 1", got)
	}
	w := post(in, body, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "2" {
		t.Fatalf("saturated: status %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if b := decodeAWSError(t, w); b.Type != ErrCodeThrottling || !strings.Contains(b.Message, "2 requests") {
		t.Fatalf("saturated body %+v", b)
	}
	close(p.release)
	for range 2 {
		if w := <-held; w.Code != 200 {
			t.Fatalf("held request: %d %s", w.Code, w.Body)
		}
	}
	if w := post(in, body, nil); w.Code != 200 {
		t.Fatalf("after release: %d %s", w.Code, w.Body)
	}
	if got := m.rejected.with("putevents", "saturated_requests").value(); got != 1 {
		t.Fatalf("rejected_total{saturated_requests} = %v", got)
	}
	if got := m.entriesVec.with("accepted").value(); got != 3 {
		t.Fatalf("entries accepted = %v", got)
	}
}

func TestBackpressureEntries(t *testing.T) {
	p := newBlockingPipeline()
	in, _ := NewIngress(IngressOptions{Pipeline: p, Limits: Limits{MaxInFlightRequests: 4, MaxInFlightEntries: 10}})
	ten := `{"Entries":[` + strings.TrimSuffix(strings.Repeat(`{"Source":"a/b","DetailType":"t","Detail":"{}"},`, 10), ",") + `]}`
	held := make(chan *httptest.ResponseRecorder, 1)
	go func() { held <- post(in, ten, nil) }()
	if n := <-p.entered; n != 10 {
		t.Fatalf("pipeline got %d entries", n)
	}
	w := post(in, `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}"}]}`, nil)
	if w.Code != http.StatusServiceUnavailable || w.Header().Get("Retry-After") != "1" {
		t.Fatalf("status %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	if b := decodeAWSError(t, w); !strings.Contains(b.Message, "10 entries") {
		t.Fatalf("body %+v", b)
	}
	// Refused entries never take an entry slot: a request whose only entry
	// is invalid is still answered.
	if w := post(in, `{"Entries":[{"Source":"a/b","DetailType":"t"}]}`, nil); w.Code != 200 {
		t.Fatalf("invalid-only request: %d", w.Code)
	}
	close(p.release)
	if w := <-held; w.Code != 200 {
		t.Fatalf("held: %d", w.Code)
	}
}

func TestLimitsValidation(t *testing.T) {
	for _, l := range []Limits{
		{MaxInFlightRequests: -1},
		{MaxInFlightEntries: 9},
		{MaxEntriesBytes: -5},
		{MaxEntriesBytes: 1000, MaxBodyBytes: 999},
		{MaxInFlightControl: -1},
		{RetryAfter: -time.Second},
	} {
		if _, err := NewIngress(IngressOptions{Pipeline: &recordingPipeline{}, Limits: l}); err == nil || !strings.Contains(err.Error(), "Limits.") {
			t.Errorf("%+v: err %v", l, err)
		}
	}
	if _, err := NewIngress(IngressOptions{}); err == nil || !strings.Contains(err.Error(), "Pipeline is nil") {
		t.Errorf("nil pipeline: %v", err)
	}
}

func TestDiscardPipelineAcceptsWithDistinctIDs(t *testing.T) {
	in, _ := NewIngress(IngressOptions{Pipeline: DiscardPipeline()})
	w := post(in, `{"Entries":[{"Source":"a/b","DetailType":"t","Detail":"{}"},{"Source":"a/b","DetailType":"t","Detail":"{}"}]}`, nil)
	var out wireResponse
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.FailedEntryCount != 0 || len(out.Entries) != 2 || out.Entries[0].EventID == "" || out.Entries[0].EventID == out.Entries[1].EventID {
		t.Fatalf("response %s", w.Body)
	}
}
