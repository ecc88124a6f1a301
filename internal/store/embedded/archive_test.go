package embedded

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/storecodec"
)

func detail(target, name string) []byte {
	return []byte(fmt.Sprintf(`{"metadata":{"id":"x"},"command":{"target":%q,"name":%q,"payload":{}}}`, target, name))
}

func TestArchiveAppendQuery(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	// Ten events, one second apart, over two sources, two targets and two
	// commands, appended out of time order.
	for _, i := range []int{3, 1, 0, 2, 4, 5, 9, 8, 7, 6} {
		src := []string{"acme/billing", "zeta/shop"}[i%2]
		tgt := []string{"mailer", "ledger"}[i/5]
		cmd := []string{"send", "charge"}[i%3/2]
		e := ArchivedEvent{EventID: fmt.Sprintf("e%d", i), Source: src, DetailType: "snavio.command-sent", Detail: detail(tgt, cmd), ReceivedAt: t0.Add(time.Duration(i) * time.Second)}
		if err := s.ArchiveAppend(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	// Idempotent per event id.
	if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: "e0", Source: "other", ReceivedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	ids := func(es []ArchivedEvent) string {
		var b []string
		for _, e := range es {
			b = append(b, e.EventID)
		}
		return strings.Join(b, " ")
	}
	tests := []struct {
		name string
		q    ArchiveQuery
		want string
	}{
		{"all", ArchiveQuery{}, "e0 e1 e2 e3 e4 e5 e6 e7 e8 e9"},
		{"range", ArchiveQuery{From: t0.Add(2 * time.Second), To: t0.Add(5 * time.Second)}, "e2 e3 e4"},
		{"source", ArchiveQuery{Source: "acme/billing"}, "e0 e2 e4 e6 e8"},
		{"target", ArchiveQuery{Target: "ledger"}, "e5 e6 e7 e8 e9"},
		{"command", ArchiveQuery{Command: "charge"}, "e2 e5 e8"},
		{"all filters", ArchiveQuery{Source: "acme/billing", Target: "ledger", Command: "charge", From: t0}, "e8"},
		{"nothing", ArchiveQuery{Source: "nobody"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, next, err := s.ArchiveQuery(ctx, tc.q)
			if err != nil || next != "" || ids(got) != tc.want {
				t.Fatalf("got %q next %q err %v, want %q", ids(got), next, err, tc.want)
			}
		})
	}
	// Paging: pages of 3 over the source filter.
	var pages []string
	q := ArchiveQuery{Source: "zeta/shop", Limit: 2}
	for range 10 {
		got, next, err := s.ArchiveQuery(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		pages = append(pages, ids(got))
		if next == "" {
			break
		}
		q.PageToken = next
	}
	if got := strings.Join(pages, "|"); got != "e1 e3|e5 e7|e9" {
		t.Fatalf("pages %q", got)
	}
	e, ok, err := s.ArchiveGet(ctx, "e8")
	if err != nil || !ok || e.Target != "ledger" || e.Command != "charge" || string(e.Detail) != string(detail("ledger", "charge")) || !e.ReceivedAt.Equal(t0.Add(8*time.Second)) {
		t.Fatalf("ArchiveGet = %+v %v %v", e, ok, err)
	}
	if _, ok, _ := s.ArchiveGet(ctx, "nope"); ok {
		t.Fatal("unknown id found")
	}
	// Retention.
	if n, err := s.ArchivePurge(ctx, t0.Add(3*time.Second), 2); n != 2 || err != nil {
		t.Fatalf("purge = %d %v", n, err)
	}
	if n, _ := s.ArchivePurge(ctx, t0.Add(3*time.Second), 100); n != 1 {
		t.Fatalf("second purge = %d, want 1", n)
	}
	if got, _, _ := s.ArchiveQuery(ctx, ArchiveQuery{Limit: 3}); ids(got) != "e3 e4 e5" {
		t.Fatalf("after purge %q", ids(got))
	}
	if _, ok, _ := s.ArchiveGet(ctx, "e0"); ok {
		t.Fatal("purged event still found by id")
	}
	// A purged id may be archived again.
	if err := s.ArchiveAppend(ctx, ArchivedEvent{EventID: "e0", Source: "acme/billing", ReceivedAt: t0.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
}

func TestArchiveErrors(t *testing.T) {
	ctx := context.Background()
	s, _ := fakeStore(t)
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"no id", s.ArchiveAppend(ctx, ArchivedEvent{ReceivedAt: t0}), "empty"},
		{"no time", s.ArchiveAppend(ctx, ArchivedEvent{EventID: "e"}), "set ReceivedAt"},
		{"big detail", s.ArchiveAppend(ctx, ArchivedEvent{EventID: "e", ReceivedAt: t0, Detail: make([]byte, MaxArchiveDetail+1)}), "over the limit"},
		{"limit", func() error { _, _, err := s.ArchiveQuery(ctx, ArchiveQuery{Limit: 1001}); return err }(), "outside 1..1000"},
		{"range", func() error { _, _, err := s.ArchiveQuery(ctx, ArchiveQuery{From: t0, To: t0}); return err }(), "not after"},
		{"token", func() error { _, _, err := s.ArchiveQuery(ctx, ArchiveQuery{PageToken: "x"}); return err }(), "pass NextToken unchanged"},
		{"purge limit", func() error { _, err := s.ArchivePurge(ctx, t0, 0); return err }(), "outside 1..100000"},
	} {
		if tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: err = %v, want %q", tc.name, tc.err, tc.want)
		}
	}
}

func TestCommandOf(t *testing.T) {
	for _, tc := range []struct {
		detail, target, name string
	}{
		{string(detail("mailer", "send")), "mailer", "send"},
		{`{"command":{"target":1,"name":"x"}}`, "", "x"},
		{`not json`, "", ""},
		{`{"command":"x"}`, "", ""},
		{`[]`, "", ""},
	} {
		tg, n := commandOf([]byte(tc.detail))
		if tg != tc.target || n != tc.name {
			t.Errorf("commandOf(%s) = %q %q", tc.detail, tg, n)
		}
	}
}

// FuzzCommandOf: any detail, however malformed, never panics and never
// yields a field over the key limit.
func FuzzCommandOf(f *testing.F) {
	f.Add(detail("mailer", "send"))
	f.Add([]byte(`{"command":{"target":"a","target":"b"}}`))
	f.Add([]byte(`{"command":{"target":"\ud800"}}`))
	f.Fuzz(func(t *testing.T, d []byte) {
		tg, n := commandOf(d)
		if len(tg) > maxKeyLen || len(n) > maxKeyLen {
			t.Fatalf("oversized fields from %q", d)
		}
	})
}

// FuzzParsePageToken: never panics; an accepted token re-encodes to
// itself.
func FuzzParsePageToken(f *testing.F) {
	f.Add(encodePageToken(timeKey(1, 2)))
	f.Add("a1.")
	f.Add("a1.!!!!")
	f.Fuzz(func(t *testing.T, tok string) {
		k, err := parsePageToken(tok)
		if err != nil {
			return
		}
		if len(k) != 16 || encodePageToken(k) != tok {
			t.Fatalf("parsePageToken(%q) = %x", tok, k)
		}
	})
}

// commandOfV1 is commandOf as it was, with encoding/json: the reference
// FuzzCommandOfMatchesV1 holds the streaming version to.
func commandOfV1(detail []byte) (target, name string) {
	var d struct {
		Command struct {
			Target json.RawMessage `json:"target"`
			Name   json.RawMessage `json:"name"`
		} `json:"command"`
	}
	if json.Unmarshal(detail, &d) != nil {
		return "", ""
	}
	str := func(raw json.RawMessage, max int) string {
		var s string
		if json.Unmarshal(raw, &s) != nil || len(s) > max {
			return ""
		}
		return s
	}
	return str(d.Command.Target, maxKeyLen), str(d.Command.Name, maxKeyLen)
}

// FuzzCommandOfMatchesV1: the streaming commandOf reads what the
// encoding/json version read, on any detail.
func FuzzCommandOfMatchesV1(f *testing.F) {
	f.Add(detail("mailer", "send"))
	f.Add([]byte(`{"command":{"target":"a","target":"b"}}`))
	f.Add([]byte(`{"command":{"target":"\ud800","name":"x\u00e9"}}`))
	f.Add([]byte(`{"command":{"target":1,"name":"x"},"b":[1,{"c":null}]}`))
	f.Add([]byte(`{"command":null}`))
	f.Add([]byte(`{"command":"x"}`))
	f.Add([]byte(`{"command":{"name":"a"}} x`))
	f.Fuzz(func(t *testing.T, d []byte) {
		tg, n := commandOf(d)
		wt, wn := commandOfV1(d)
		if tg != wt || n != wn {
			t.Fatalf("commandOf(%q) = %q %q; encoding/json read %q %q", d, tg, n, wt, wn)
		}
	})
}

func TestArchivedVerdictRoundTrip(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	for _, e := range []ArchivedEvent{
		{EventID: "a", Source: "acme/x", DetailType: "snavio.command-sent", Detail: []byte(`{}`), ReceivedAt: at, Target: "t", Command: "c", Verdict: VerdictAccepted, KeyVersion: "hmac-v2"},
		{EventID: "r", Source: "acme/x", DetailType: "snavio.command-sent", Detail: []byte(`{}`), ReceivedAt: at, Target: "t", Command: "c", Verdict: VerdictRejected, Reason: "bad_signature"},
		{EventID: "n", Source: "acme/x", DetailType: "other", Detail: []byte(`x`), ReceivedAt: at, Target: "t", Command: "c", Verdict: VerdictNotCommand},
		{EventID: "u", Source: "acme/x", DetailType: "other", Detail: []byte(`x`), ReceivedAt: at, Target: "t", Command: "c"},
	} {
		got, err := decodeArchived(encodeArchived(&e))
		if err != nil || !reflect.DeepEqual(got, e) {
			t.Fatalf("%s: %+v %v", e.EventID, got, err)
		}
		if n := len(encodeArchived(&e)); int64(n) != archivedSize(&e) {
			t.Fatalf("%s: archivedSize %d, record %d bytes", e.EventID, archivedSize(&e), n)
		}
		if h, err := archivedHead(encodeArchived(&e)); h.id != e.EventID || h.source != e.Source || h.verdict != e.Verdict || err != nil {
			t.Fatalf("%s: head %+v %v", e.EventID, h, err)
		}
	}
	if err := checkArchived(&ArchivedEvent{EventID: "x", ReceivedAt: at, Verdict: "maybe"}); err == nil || !strings.Contains(err.Error(), "unknown verdict") {
		t.Fatalf("an unknown verdict: %v", err)
	}
}

// A record written before verdicts existed (version 1) still reads, with
// no verdict: a replay re-verifies it.
func TestArchivedV1StillReads(t *testing.T) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	v1 := archivedV1("e1", "acme/x", "snavio.command-sent", `{"command":{"target":"t","name":"c"}}`, at)
	got, err := decodeArchived(v1)
	want := ArchivedEvent{EventID: "e1", Source: "acme/x", DetailType: "snavio.command-sent", Detail: []byte(`{"command":{"target":"t","name":"c"}}`), ReceivedAt: at, Target: "t", Command: "c"}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("v1: %+v %v", got, err)
	}
	if h, err := archivedHead(v1); h.id != "e1" || h.source != "acme/x" || h.verdict != "" || err != nil {
		t.Fatalf("v1 head: %+v %v", h, err)
	}
}

// archivedV1 is a record as snavio wrote it before verdicts (format 1).
func archivedV1(id, source, detailType, detail string, at time.Time) []byte {
	b := []byte{storecodec.V1}
	b = binary.BigEndian.AppendUint64(b, uint64(at.UnixNano()))
	for _, s := range []string{id, source, detailType, "", ""} {
		b = storecodec.AppendStr(b, s)
	}
	return append(b, detail...)
}

// FuzzDecodeArchived: the archive record decoder never panics, and what it
// accepts re-encodes (as version 2) to a record that decodes the same.
func FuzzDecodeArchived(f *testing.F) {
	at := time.Date(2026, 11, 25, 12, 0, 0, 0, time.UTC)
	f.Add(encodeArchived(&ArchivedEvent{EventID: "e", Source: "acme/x", DetailType: "snavio.command-sent", Detail: []byte(`{"command":{"target":"t","name":"c"}}`), ReceivedAt: at, Verdict: VerdictAccepted, KeyVersion: "hmac-v1"}))
	f.Add(encodeArchived(&ArchivedEvent{EventID: "e", Source: "acme/x", Detail: []byte("junk"), ReceivedAt: at, Verdict: VerdictRejected, Reason: "bad_signature"}))
	f.Add(archivedV1("e", "acme/x", "snavio.command-sent", `{}`, at))
	f.Add([]byte{recArchV2, 0, 0, 0, 0, 0, 0, 0, 1, 9, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := decodeArchived(b)
		h, herr := archivedHead(b)
		if err != nil {
			return
		}
		if herr != nil || h.id != e.EventID || h.source != e.Source || h.verdict != e.Verdict {
			t.Fatalf("head %+v %v disagrees with the record %+v", h, herr, e)
		}
		if e.ReceivedAt.Before(time.Unix(0, 0)) {
			return // not a time snavio writes; nanos clamps it
		}
		again, err := decodeArchived(encodeArchived(&e))
		if err != nil || !reflect.DeepEqual(again, e) {
			t.Fatalf("re-encoded %+v: %+v %v", e, again, err)
		}
	})
}
