package server

import (
	"testing"

	"github.com/go-json-experiment/json"
)

// FuzzParsePutEvents feeds arbitrary bodies to the PutEvents parser. It
// must never panic, and whatever it accepts must satisfy what the ingress
// promises the pipeline: 1 to 10 entries, within the size limit, each
// either refused with a code and message or carrying a Source, a
// DetailType and a Detail that is one JSON object. The response encoding
// must round-trip.
func FuzzParsePutEvents(f *testing.F) {
	f.Add([]byte(`{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{}"}]}`))
	f.Add([]byte(`{"Entries":[{"Source":"acme/a","DetailType":"t","Detail":"{\"k\":1}","Time":1763726400.5,"Resources":["arn:x"],"EventBusName":"b"}],"EndpointId":"abc.xyz"}`))
	f.Add([]byte(`{"Entries":[null,{},{"Source":"aws.s3"}]}`))
	f.Add([]byte(`{"Entries":[]}`))
	f.Add([]byte(`[]`))
	const max = 1 << 10 // small, so the fuzzer reaches the size limit
	f.Fuzz(func(t *testing.T, body []byte) {
		req, aerr := parsePutEvents(body, max)
		if aerr != nil {
			if aerr.Type == "" || aerr.Message == "" || aerr.Status < 400 {
				t.Fatalf("incomplete error %+v", aerr)
			}
			return
		}
		n := len(req.entries)
		if n < 1 || n > MaxEntries || len(req.refusals) != n {
			t.Fatalf("%d entries, %d refusals", n, len(req.refusals))
		}
		total := 0
		for i := range req.entries {
			e := &req.entries[i]
			total += EntrySize(e)
			if e.Index != i {
				t.Fatalf("entry %d has Index %d", i, e.Index)
			}
			r := req.refusals[i]
			if r.ErrorCode != "" {
				if r.ErrorMessage == "" || r.EventID != "" {
					t.Fatalf("refusal %+v", r)
				}
				continue
			}
			if e.Source == "" || e.DetailType == "" || !isJSONObject(e.Detail) || e.EventBusName == "" {
				t.Fatalf("entry %d passed but is %+v", i, e)
			}
		}
		if total > max {
			t.Fatalf("accepted %d bytes over the %d limit", total, max)
		}
		results := append([]EntryResult(nil), req.refusals...)
		for i := range results {
			if results[i].ErrorCode == "" {
				results[i] = Accepted("id")
			}
		}
		b, failed := encodePutEventsResponse(results)
		var out wireResponse
		if err := json.Unmarshal(b, &out); err != nil {
			t.Fatalf("response %s does not decode: %v", b, err)
		}
		if out.FailedEntryCount != failed || len(out.Entries) != n {
			t.Fatalf("response %s", b)
		}
	})
}
