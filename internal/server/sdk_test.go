package server

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/smithy-go"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// recordingPipeline accepts every entry with an id derived from its index,
// except entries whose DetailType is "refuse-me", which it refuses.
type recordingPipeline struct {
	mu   sync.Mutex
	seen []Entry
}

func (p *recordingPipeline) Ingest(_ context.Context, entries []Entry) []EntryResult {
	p.mu.Lock()
	p.seen = append(p.seen, entries...)
	p.mu.Unlock()
	out := make([]EntryResult, len(entries))
	for i, e := range entries {
		if e.DetailType == "refuse-me" {
			out[i] = Refused(EntryErrAccessDenied, "no ACL lets this source call that target")
			continue
		}
		out[i] = Accepted("evt-" + string(rune('a'+e.Index)))
	}
	return out
}

func (p *recordingPipeline) entries() []Entry {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Entry(nil), p.seen...)
}

// The ingress credential of tenant acme the tests sign with.
const (
	testAccessKeyID = "SNVKTESTKEYACMEAAAAA"
	testSecret      = "YWNtZS1pbmdyZXNzLXRlc3Qtc2VjcmV0LTAxMjM0"
	testTenant      = "acme"
)

// staticCredentials is a CredentialLookup of fixed credentials.
type staticCredentials map[string][2]string // access key id -> tenant, secret

func (s staticCredentials) Lookup(id string) (string, string, bool) {
	c, ok := s[id]
	return c[0], c[1], ok
}

func testCredentials() staticCredentials {
	return staticCredentials{testAccessKeyID: {testTenant, testSecret}}
}

// writeTestCredentials stores acme's test credential in dir's credentials
// file, as the credential API would.
func writeTestCredentials(t *testing.T, dir string) {
	t.Helper()
	c := IngressCredential{AccessKeyID: testAccessKeyID, Tenant: testTenant, Created: time.Unix(0, 0).UTC(), Secret: testSecret}
	b, err := credentialKind.encode([]IngressCredential{c})
	if err != nil {
		t.Fatal(err)
	}
	if err := atomicfile.Write(filepath.Join(dir, IngressCredentialsFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// sdkClient returns an EventBridge client of the real AWS SDK pointed at
// url, signing with acme's test credential, and no retries.
func sdkClient(url string) *eventbridge.Client {
	return sdkClientWith(url, testAccessKeyID, testSecret)
}

func sdkClientWith(url, id, secret string) *eventbridge.Client {
	cfg := aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider(id, secret, ""),
	}
	return eventbridge.NewFromConfig(cfg, func(o *eventbridge.Options) {
		o.BaseEndpoint = aws.String(url)
		o.RetryMaxAttempts = 1
	})
}

func startIngress(t *testing.T, p Pipeline, l Limits) (*httptest.Server, *Ingress, *Metrics) {
	t.Helper()
	m := NewMetrics()
	auth, err := NewSigV4Verifier(testCredentials(), clock.System(), 0)
	if err != nil {
		t.Fatal(err)
	}
	in, err := NewIngress(IngressOptions{Pipeline: p, Limits: l, Metrics: m, Auth: auth})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(in)
	t.Cleanup(srv.Close)
	return srv, in, m
}

func TestSDKPutEventsAccepted(t *testing.T) {
	p := &recordingPipeline{}
	srv, _, _ := startIngress(t, p, Limits{})
	when := time.Date(2026, 11, 21, 12, 30, 15, 250e6, time.UTC)
	out, err := sdkClient(srv.URL).PutEvents(t.Context(), &eventbridge.PutEventsInput{
		Entries: []types.PutEventsRequestEntry{
			{Source: aws.String("acme/billing"), DetailType: aws.String("snavio.command-sent"), Detail: aws.String(`{"a":"\"quoted\" é"}`),
				EventBusName: aws.String("snavio"), Resources: []string{"arn:aws:sqs:eu-west-1:1:q"}, Time: aws.Time(when)},
			{Source: aws.String("acme/billing"), DetailType: aws.String("snavio.command-sent"), Detail: aws.String(`{}`)},
		},
	})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if out.FailedEntryCount != 0 || len(out.Entries) != 2 ||
		aws.ToString(out.Entries[0].EventId) != "evt-a" || aws.ToString(out.Entries[1].EventId) != "evt-b" {
		t.Fatalf("output = %+v", out)
	}
	seen := p.entries()
	if len(seen) != 2 {
		t.Fatalf("pipeline saw %d entries", len(seen))
	}
	e := seen[0]
	if e.Source != "acme/billing" || e.DetailType != "snavio.command-sent" || string(e.Detail) != `{"a":"\"quoted\" é"}` ||
		e.EventBusName != "snavio" || len(e.Resources) != 1 || e.Resources[0] != "arn:aws:sqs:eu-west-1:1:q" || !e.Time.Equal(when) {
		t.Fatalf("entry 0 = %+v", e)
	}
	if seen[1].EventBusName != "default" || !seen[1].Time.IsZero() || seen[1].Index != 1 {
		t.Fatalf("entry 1 = %+v", seen[1])
	}
}

func TestSDKPerEntryFailuresInRequestOrder(t *testing.T) {
	p := &recordingPipeline{}
	srv, _, _ := startIngress(t, p, Limits{})
	out, err := sdkClient(srv.URL).PutEvents(t.Context(), &eventbridge.PutEventsInput{
		Entries: []types.PutEventsRequestEntry{
			{Source: aws.String("acme/a"), DetailType: aws.String("ok"), Detail: aws.String(`{}`)},
			{Source: aws.String("acme/a"), Detail: aws.String(`{}`)},                                      // no DetailType: the ingress refuses
			{Source: aws.String("acme/a"), DetailType: aws.String("refuse-me"), Detail: aws.String(`{}`)}, // the pipeline refuses
			{Source: aws.String("acme/a"), DetailType: aws.String("ok"), Detail: aws.String(`[1]`)},       // not an object
			{Source: aws.String("acme/a"), DetailType: aws.String("ok"), Detail: aws.String(`{}`)},
		},
	})
	if err != nil {
		t.Fatalf("PutEvents: %v", err)
	}
	if out.FailedEntryCount != 3 || len(out.Entries) != 5 {
		t.Fatalf("FailedEntryCount=%d entries=%d", out.FailedEntryCount, len(out.Entries))
	}
	want := []struct{ id, code string }{
		{"evt-a", ""}, {"", EntryErrInvalidArgument}, {"", EntryErrAccessDenied}, {"", EntryErrMalformedDetail}, {"evt-e", ""},
	}
	for i, w := range want {
		got := out.Entries[i]
		if aws.ToString(got.EventId) != w.id || aws.ToString(got.ErrorCode) != w.code {
			t.Errorf("entry %d = {%q %q %q}, want {%q %q}", i, aws.ToString(got.EventId), aws.ToString(got.ErrorCode), aws.ToString(got.ErrorMessage), w.id, w.code)
		}
		if w.code != "" && aws.ToString(got.ErrorMessage) == "" {
			t.Errorf("entry %d has no ErrorMessage", i)
		}
	}
	if n := len(p.entries()); n != 3 {
		t.Fatalf("pipeline saw %d entries, want the 3 valid ones", n)
	}
}

// apiError unpacks an SDK error into its code and HTTP status.
func apiError(t *testing.T, err error) (string, int) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v (%T) is not a smithy.APIError", err, err)
	}
	var re *awshttp.ResponseError
	if !errors.As(err, &re) {
		t.Fatalf("error %v has no HTTP response", err)
	}
	return ae.ErrorCode(), re.HTTPStatusCode()
}

func TestSDKWholeRequestErrors(t *testing.T) {
	srv, _, _ := startIngress(t, &recordingPipeline{}, Limits{})
	entry := func(detail string) types.PutEventsRequestEntry {
		return types.PutEventsRequestEntry{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(detail)}
	}
	eleven := make([]types.PutEventsRequestEntry, 11)
	for i := range eleven {
		eleven[i] = entry(`{}`)
	}
	huge := `{"p":"` + strings.Repeat("x", DefaultMaxEntriesBytes) + `"}`
	tests := []struct {
		name    string
		entries []types.PutEventsRequestEntry
		msg     string
	}{
		{"eleven entries", eleven, "less than or equal to 10"},
		{"no entries", []types.PutEventsRequestEntry{}, "greater than or equal to 1"},
		{"over 256 KiB", []types.PutEventsRequestEntry{entry(huge)}, "Total size of the entries in the request is over the limit"},
		{"source too long", []types.PutEventsRequestEntry{{Source: aws.String(strings.Repeat("s", 257)), DetailType: aws.String("t"), Detail: aws.String(`{}`)}}, "entries.1.member.source"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := sdkClient(srv.URL).PutEvents(t.Context(), &eventbridge.PutEventsInput{Entries: tt.entries})
			if err == nil {
				t.Fatal("PutEvents succeeded")
			}
			code, status := apiError(t, err)
			if code != ErrCodeValidation || status != 400 {
				t.Fatalf("code=%s status=%d, want ValidationException 400", code, status)
			}
			if !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("error %q does not say %q", err, tt.msg)
			}
		})
	}
}

// blockingPipeline holds every Ingest call until release is closed,
// telling entered each time one starts.
type blockingPipeline struct {
	entered chan int
	release chan struct{}
}

func newBlockingPipeline() *blockingPipeline {
	return &blockingPipeline{entered: make(chan int, 16), release: make(chan struct{})}
}

func (p *blockingPipeline) Ingest(_ context.Context, entries []Entry) []EntryResult {
	p.entered <- len(entries)
	<-p.release
	out := make([]EntryResult, len(entries))
	for i := range out {
		out[i] = Accepted("id")
	}
	return out
}

func TestSDKSeesThrottlingWhenSaturated(t *testing.T) {
	p := newBlockingPipeline()
	srv, _, _ := startIngress(t, p, Limits{MaxInFlightRequests: 1})
	in := &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
		{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
	}}
	done := make(chan error, 1)
	go func() {
		_, err := sdkClient(srv.URL).PutEvents(context.Background(), in)
		done <- err
	}()
	<-p.entered
	_, err := sdkClient(srv.URL).PutEvents(t.Context(), in)
	if err == nil {
		t.Fatal("second PutEvents succeeded while the only slot was held")
	}
	code, status := apiError(t, err)
	if code != ErrCodeThrottling || status != http.StatusServiceUnavailable {
		t.Fatalf("code=%s status=%d, want ThrottlingException 503", code, status)
	}
	close(p.release)
	if err := <-done; err != nil {
		t.Fatalf("held request: %v", err)
	}
}

// releaseOn503 is an HTTP transport that, on the first 503 it sees, lets
// the held request finish (so the slot is free) before handing the 503 to
// the SDK.
type releaseOn503 struct {
	once    sync.Once
	release func()
	base    http.RoundTripper
	seen503 int
	mu      sync.Mutex
}

func (t *releaseOn503) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := t.base.RoundTrip(r)
	if err == nil && resp.StatusCode == http.StatusServiceUnavailable {
		t.mu.Lock()
		t.seen503++
		t.mu.Unlock()
		if resp.Header.Get("Retry-After") == "" {
			return nil, errors.New("503 without Retry-After")
		}
		t.once.Do(t.release)
	}
	return resp, err
}

func TestSDKRetriesThrottlingOnItsOwn(t *testing.T) {
	p := newBlockingPipeline()
	srv, _, _ := startIngress(t, p, Limits{MaxInFlightRequests: 1})
	in := &eventbridge.PutEventsInput{Entries: []types.PutEventsRequestEntry{
		{Source: aws.String("acme/a"), DetailType: aws.String("t"), Detail: aws.String(`{}`)},
	}}
	held := make(chan error, 1)
	go func() {
		_, err := sdkClient(srv.URL).PutEvents(context.Background(), in)
		held <- err
	}()
	<-p.entered

	tr := &releaseOn503{base: http.DefaultTransport, release: func() {
		close(p.release)
		if err := <-held; err != nil {
			t.Errorf("held request: %v", err)
		}
	}}
	client := eventbridge.NewFromConfig(aws.Config{
		Region:      "eu-west-1",
		Credentials: credentials.NewStaticCredentialsProvider(testAccessKeyID, testSecret, ""),
		HTTPClient:  &http.Client{Transport: tr},
	}, func(o *eventbridge.Options) {
		o.BaseEndpoint = aws.String(srv.URL)
		o.Retryer = retry.NewStandard(func(so *retry.StandardOptions) {
			so.MaxAttempts = 3
			so.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return 0, nil })
		})
	})
	// The blocking pipeline answers "id" once released.
	out, err := client.PutEvents(t.Context(), in)
	if err != nil {
		t.Fatalf("PutEvents after throttling: %v", err)
	}
	if aws.ToString(out.Entries[0].EventId) != "id" || tr.seen503 != 1 {
		t.Fatalf("out %+v after %d throttled attempts", out, tr.seen503)
	}
}
