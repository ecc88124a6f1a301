package platform

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// putEventsServer answers PutEvents with one result per entry: entries
// whose DetailType is "refuse" get an error code.
func putEventsServer(t *testing.T, got *[]map[string]any) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") != "AWSEvents.PutEvents" || !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256") {
			t.Errorf("request headers %v", r.Header)
		}
		b, _ := io.ReadAll(r.Body)
		var in struct{ Entries []map[string]any }
		if err := json.Unmarshal(b, &in); err != nil {
			t.Errorf("body %s: %v", b, err)
		}
		*got = append(*got, in.Entries...)
		var out struct {
			FailedEntryCount int
			Entries          []map[string]string
		}
		for i, e := range in.Entries {
			if e["DetailType"] == "refuse" {
				out.FailedEntryCount++
				out.Entries = append(out.Entries, map[string]string{"ErrorCode": "ThrottlingException", "ErrorMessage": "slow down"})
				continue
			}
			out.Entries = append(out.Entries, map[string]string{"EventId": "evt-" + string(rune('a'+i))})
		}
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		_ = json.NewEncoder(w).Encode(out)
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestBusPutsThroughTheSDK(t *testing.T) {
	var got []map[string]any
	srv := putEventsServer(t, &got)
	// The aws kind assumes the emit role first: TestAWSSend* on kumo.
	for _, kind := range []string{"local"} {
		got = nil
		target := Target{Kind: kind, Endpoint: srv.URL, Region: "eu-west-1", BusName: "my-bus"}
		bus := NewBus(target, BusOptions{MaxAttempts: 1})
		res, err := bus.PutEvents(context.Background(), []Event{
			{Source: "acme/billing", DetailType: "snavio.command-sent", Detail: []byte(`{"a":1}`)},
			{Source: "acme/billing", DetailType: "refuse", Detail: []byte(`{}`)},
		})
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		if res[0].EventID != "evt-a" || res[1].ErrorCode != "ThrottlingException" || res[1].ErrorMessage != "slow down" {
			t.Fatalf("%s: results %+v", kind, res)
		}
		if len(got) != 2 || got[0]["Source"] != "acme/billing" || got[0]["Detail"] != `{"a":1}` {
			t.Fatalf("%s: entries %v", kind, got)
		}
		busName, _ := got[0]["EventBusName"].(string)
		if (kind == "aws") != (busName == "my-bus") {
			t.Errorf("%s: EventBusName %q", kind, busName)
		}
	}
}

func TestBusErrors(t *testing.T) {
	bus := NewBus(Target{Kind: "local", Endpoint: "http://127.0.0.1:1"}, BusOptions{MaxAttempts: 1})
	_, err := bus.PutEvents(context.Background(), []Event{{Source: "a/b", DetailType: "t", Detail: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "cannot reach the dispatcher's PutEvents ingress at http://127.0.0.1:1") || !strings.Contains(err.Error(), "snavio dispatch serve") {
		t.Fatalf("unreachable: %v", err)
	}
	if _, err := bus.PutEvents(context.Background(), nil); err == nil {
		t.Fatal("no events accepted")
	}
	if _, err := bus.PutEvents(context.Background(), make([]Event, MaxEntries+1)); err == nil {
		t.Fatal("11 events accepted")
	}
	if _, err := NewBus(Target{Kind: "local"}, BusOptions{}).PutEvents(context.Background(), []Event{{}}); err == nil || !strings.Contains(err.Error(), "no endpoint") {
		t.Fatalf("no endpoint: %v", err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.1")
		w.WriteHeader(400)
		_, _ = io.WriteString(w, `{"__type":"ValidationException","message":"bad bus"}`)
	}))
	defer srv.Close()
	_, err = NewBus(Target{Kind: "local", Endpoint: srv.URL}, BusOptions{MaxAttempts: 1}).PutEvents(context.Background(), []Event{{Source: "a/b", DetailType: "t", Detail: []byte(`{}`)}})
	if err == nil || !strings.Contains(err.Error(), "refused PutEvents: ValidationException: bad bus") {
		t.Fatalf("API error: %v", err)
	}
}
