package sqsapi

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/snavio/snavio/internal/controlapi/wire"
)

// AttributesMD5 matches the checksums SQS publishes and other SQS
// implementations test against.
func TestAttributesMD5(t *testing.T) {
	str := func(s string) *string { return &s }
	for _, tc := range []struct {
		attrs map[string]MessageAttributeValue
		want  string
	}{
		{map[string]MessageAttributeValue{"SellerName": {DataType: "String", StringValue: str("Example Store")}}, "cd28f3b68aeee4b2eac9c66f2f694b58"},
		{map[string]MessageAttributeValue{"timestamp": {DataType: "Number", StringValue: str("1493147359900")}}, "235c5c510d26fb653d073faed50ae77c"},
	} {
		if got := AttributesMD5(tc.attrs); got != tc.want {
			t.Errorf("AttributesMD5(%v) = %s, want %s", tc.attrs, got, tc.want)
		}
	}
}

func TestParseQueueURL(t *testing.T) {
	for _, tc := range []struct{ url, name, code string }{
		{"http://127.0.0.1:8787/000000000000/demo-orders", "demo-orders", ""},
		{"https://localhost/000000000000/a_b-c", "a_b-c", ""},
		{"http://h/123456789012/demo-orders", "", "InvalidAddress"},
		{"demo-orders", "", "InvalidAddress"},
		{"http://h/000000000000/demo-orders/x", "", "InvalidAddress"},
		{"http:///000000000000/q", "", "InvalidAddress"},
		{"http://h/000000000000/q.fifo", "", "InvalidParameterValue"},
		{"http://h/000000000000/", "", "InvalidParameterValue"},
		{"http://h/000000000000/sp ace", "", "InvalidParameterValue"},
	} {
		name, err := ParseQueueURL(tc.url)
		var e *Error
		switch {
		case tc.code == "" && (err != nil || name != tc.name):
			t.Errorf("ParseQueueURL(%q) = %q, %v; want %q", tc.url, name, err, tc.name)
		case tc.code != "" && (!errors.As(err, &e) || e.Type != tc.code):
			t.Errorf("ParseQueueURL(%q) = %q, %v; want %s", tc.url, name, err, tc.code)
		}
	}
}

func TestCheckAttrAndBody(t *testing.T) {
	s := func(v string) *string { return &v }
	good := []struct {
		name string
		v    MessageAttributeValue
	}{
		{"a.b-c_d", MessageAttributeValue{DataType: "String", StringValue: s("x")}},
		{"n", MessageAttributeValue{DataType: "Number.int", StringValue: s("-1.5e3")}},
	}
	for _, g := range good {
		if err := checkAttr(g.name, g.v); err != nil {
			t.Errorf("checkAttr(%q) = %v", g.name, err)
		}
	}
	bad := []struct {
		name string
		v    MessageAttributeValue
		want string
	}{
		{"AWS.x", MessageAttributeValue{DataType: "String", StringValue: s("x")}, "reserved"},
		{"a..b", MessageAttributeValue{DataType: "String", StringValue: s("x")}, "doubled"},
		{"a b", MessageAttributeValue{DataType: "String", StringValue: s("x")}, "not allowed"},
		{"b", MessageAttributeValue{DataType: "Binary", BinaryValue: []byte{1}}, "Binary"},
		{"n", MessageAttributeValue{DataType: "Number", StringValue: s("ten")}, "not a number"},
		{"s", MessageAttributeValue{DataType: "String"}, "StringValue"},
		{"s", MessageAttributeValue{StringValue: s("x")}, "DataType"},
	}
	for _, b := range bad {
		if err := checkAttr(b.name, b.v); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("checkAttr(%q, %+v) = %v; want an error naming %q", b.name, b.v, err, b.want)
		}
	}
	if err := checkBody("tab\tnewline\n\u00e9\U0001F600"); err != nil {
		t.Errorf("checkBody of valid characters: %v", err)
	}
	for _, b := range []string{"\x00", "a\x1fb", "\uFFFE", string([]byte{0xff})} {
		if err := checkBody(b); err == nil {
			t.Errorf("checkBody(%q) accepted", b)
		}
	}
}

func TestCheckBatch(t *testing.T) {
	h := "r"
	e := func(ids ...string) []BatchEntry {
		out := make([]BatchEntry, len(ids))
		for i, id := range ids {
			out[i] = BatchEntry{Id: id, ReceiptHandle: &h}
		}
		return out
	}
	eleven := make([]string, 11)
	for i := range eleven {
		eleven[i] = "e" + string(rune('a'+i))
	}
	for _, tc := range []struct {
		entries []BatchEntry
		want    string
	}{
		{e("a", "b"), ""},
		{nil, "EmptyBatchRequest"},
		{e(eleven...), "TooManyEntriesInBatchRequest"},
		{e("a", "a"), "BatchEntryIdsNotDistinct"},
		{e("a b"), "InvalidBatchEntryId"},
		{e(strings.Repeat("x", 81)), "InvalidBatchEntryId"},
	} {
		err := checkBatch(tc.entries)
		var se *Error
		if tc.want == "" && err != nil || tc.want != "" && (!errors.As(err, &se) || se.Type != tc.want) {
			t.Errorf("checkBatch(%d entries) = %v, want %q", len(tc.entries), err, tc.want)
		}
	}
}

func TestWanted(t *testing.T) {
	for _, tc := range []struct {
		names []string
		name  string
		want  bool
	}{
		{[]string{"All"}, "x", true},
		{[]string{".*"}, "x", true},
		{[]string{"snavio.*"}, "snavio.tenant", true},
		{[]string{"snavio.*"}, "snaviox", false},
		{[]string{"a"}, "a", true},
		{nil, "a", false},
	} {
		if got := wanted(tc.names, tc.name); got != tc.want {
			t.Errorf("wanted(%v, %q) = %v", tc.names, tc.name, got)
		}
	}
}

// FuzzDecode: no request body makes the decoder or the URL parser panic;
// what they accept is well-formed.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{}`, ``, `[1]`, `{"QueueUrl":"http://h/000000000000/q","MaxNumberOfMessages":10,"WaitTimeSeconds":20}`,
		`{"QueueUrl":"http://h/000000000000/q","Entries":[{"Id":"a","ReceiptHandle":"r1.x.00","VisibilityTimeout":5}]}`,
		`{"QueueUrl":"http://h/000000000000/q","MessageBody":"b","MessageAttributes":{"k":{"DataType":"String","StringValue":"v"}}}`,
		`{"MaxNumberOfMessages":1e99}`, `{"Entries":null}`, `{} {}`, `{"QueueUrl":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		check := func(v any, err error) {
			if err != nil {
				var se *Error
				if !errors.As(err, &se) || se.Type != "InvalidParameterValue" {
					t.Fatalf("Decode(%q) = %v, want an InvalidParameterValue", b, err)
				}
				return
			}
			if _, err := json.Marshal(v); err != nil {
				t.Fatalf("a decoded request does not encode: %v", err)
			}
		}
		r, err := Decode[ReceiveMessageInput](b)
		check(r, err)
		if err == nil && r.QueueUrl != nil {
			if name, err := ParseQueueURL(*r.QueueUrl); err == nil {
				if cerr := wire.CheckQueueName("queue", name); cerr != nil {
					t.Fatalf("ParseQueueURL(%q) = %q, not a queue name: %v", *r.QueueUrl, name, cerr)
				}
			}
		}
		bi, err := Decode[BatchInput](b)
		check(bi, err)
		if err == nil && len(bi.Entries) > 0 {
			_ = checkBatch(bi.Entries)
		}
		sm, err := Decode[SendMessageInput](b)
		check(sm, err)
		if err == nil {
			for k, v := range sm.MessageAttributes {
				_ = checkAttr(k, v)
			}
			if sm.MessageBody != nil {
				_ = checkBody(*sm.MessageBody)
			}
		}
	})
}

// A queue belongs to the tenant its name starts with; of two tenants
// whose names both prefix it, the longer; never a reserved queue.
func TestOwns(t *testing.T) {
	a := &API{o: Options{
		Reserved: func(q string) bool { return q == "acme-internal" },
		Tenants:  func() []string { return []string{"acme", "acme-corp", "globex"} },
	}}
	for _, tc := range []struct {
		tenant, queue string
		want          bool
	}{
		{"acme", "acme-jobs", true},
		{"acme", "acme-corp-jobs", false},
		{"acme-corp", "acme-corp-jobs", true},
		{"acme", "acmejobs", false},
		{"acme", "acme-", true},
		{"globex", "acme-jobs", false},
		{"acme", "acme-internal", false},
		{"", "-jobs", false},
	} {
		if got := a.Owns(tc.tenant, tc.queue); got != tc.want {
			t.Errorf("Owns(%q, %q) = %v, want %v", tc.tenant, tc.queue, got, tc.want)
		}
	}
}
