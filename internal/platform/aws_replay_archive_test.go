package platform

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/signing"
)

// fakeArchive stands in for EventBridge's archives and replays, which no
// emulator here has (kumo v0.33 has buses, rules and PutEvents, not
// CreateArchive or StartReplay). It answers the real SDK client's JSON
// requests, checks each one as EventBridge would need it for a capture
// (the rule matches only its replay, the replay goes to that rule only,
// the target is the capture queue), and on StartReplay sends the archived
// events of the range to the rule's target queue on kumo, as EventBridge
// delivers to an SQS target, with replay-name set.
type fakeArchive struct {
	t       *testing.T
	sqs     *sqs.Client
	bus     string
	archive string
	events  []archivedEvent

	mu      sync.Mutex
	ops     []string
	rule    string // the capture rule's name
	pattern string
	target  string // the rule's target ARN
	replay  string
	deleted bool
}

type archivedEvent struct {
	id, source, detailType string
	detail                 []byte
	at                     time.Time
}

const (
	fakeAccount = "000000000000"
	fakeRegion  = "us-east-1"
)

func (f *fakeArchive) arn(kind, name string) string {
	return "arn:aws:events:" + fakeRegion + ":" + fakeAccount + ":" + kind + "/" + name
}

func (f *fakeArchive) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	op := strings.TrimPrefix(r.Header.Get("X-Amz-Target"), "AWSEvents.")
	body, _ := io.ReadAll(r.Body)
	var in map[string]any
	if err := json.Unmarshal(body, &in); err != nil {
		f.t.Errorf("%s: body %s: %v", op, body, err)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.ops = append(f.ops, op)
	fail := func(code, msg string) {
		w.Header().Set("X-Amzn-Errortype", code)
		w.WriteHeader(http.StatusBadRequest)
		_ = json.NewEncoder(w).Encode(map[string]string{"__type": code, "message": msg})
	}
	out := map[string]any{}
	s := func(k string) string { v, _ := in[k].(string); return v }
	switch op {
	case "DescribeEventBus":
		if s("Name") != f.bus {
			fail("ResourceNotFoundException", "no bus "+s("Name"))
			return
		}
		out = map[string]any{"Name": f.bus, "Arn": f.arn("event-bus", f.bus)}
	case "DescribeArchive":
		if s("ArchiveName") != f.archive {
			fail("ResourceNotFoundException", "no archive "+s("ArchiveName"))
			return
		}
		out = map[string]any{"ArchiveName": f.archive, "ArchiveArn": f.arn("archive", f.archive), "State": "ENABLED"}
	case "PutRule":
		f.rule, f.pattern = s("Name"), s("EventPattern")
		if s("EventBusName") != f.bus || f.pattern != `{"replay-name":["`+f.rule+`"]}` || len(in["Tags"].([]any)) == 0 {
			f.t.Errorf("PutRule %s: the capture rule must be on the bus, match only its replay and be tagged", body)
		}
		out = map[string]any{"RuleArn": f.arn("rule", f.bus+"/"+f.rule)}
	case "PutTargets":
		ts := in["Targets"].([]any)
		if s("Rule") != f.rule || len(ts) != 1 {
			f.t.Errorf("PutTargets %s: want one target on the capture rule", body)
		}
		f.target = ts[0].(map[string]any)["Arn"].(string)
		out = map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}
	case "StartReplay":
		dest := in["Destination"].(map[string]any)
		filters, _ := dest["FilterArns"].([]any)
		if s("EventSourceArn") != f.arn("archive", f.archive) || dest["Arn"] != f.arn("event-bus", f.bus) ||
			len(filters) != 1 || filters[0] != f.arn("rule", f.bus+"/"+f.rule) || s("ReplayName") != f.rule {
			f.t.Errorf("StartReplay %s: want the archive replayed to the bus, to the capture rule only", body)
		}
		start, end := time.Unix(int64(in["EventStartTime"].(float64)), 0), time.Unix(int64(in["EventEndTime"].(float64)), 0)
		f.replay = s("ReplayName")
		f.deliver(start, end)
		out = map[string]any{"ReplayArn": f.arn("replay", f.replay), "State": "STARTING"}
	case "DescribeReplay":
		out = map[string]any{"ReplayName": s("ReplayName"), "State": "COMPLETED"}
	case "CancelReplay":
		out = map[string]any{"State": "CANCELLING"}
	case "RemoveTargets":
		out = map[string]any{"FailedEntryCount": 0, "FailedEntries": []any{}}
	case "DeleteRule":
		f.deleted = s("Name") == f.rule
	default:
		fail("UnknownOperationException", op)
		return
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	_ = json.NewEncoder(w).Encode(out)
}

// deliver sends the archived events in [start, end] to the capture
// queue, as EventBridge delivers to an SQS target.
func (f *fakeArchive) deliver(start, end time.Time) {
	name := f.target[strings.LastIndex(f.target, ":")+1:]
	u, err := f.sqs.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)})
	if err != nil {
		f.t.Errorf("the capture target %s: %v", f.target, err)
		return
	}
	for _, e := range f.events {
		if e.at.Before(start) || e.at.After(end) {
			continue
		}
		b, _ := json.Marshal(map[string]any{"version": "0", "id": e.id, "detail-type": e.detailType, "source": e.source,
			"account": fakeAccount, "time": e.at.UTC().Format(time.RFC3339), "region": fakeRegion, "resources": []string{},
			"detail": json.RawMessage(e.detail), "replay-name": f.replay})
		if _, err := f.sqs.SendMessage(context.Background(), &sqs.SendMessageInput{QueueUrl: u.QueueUrl, MessageBody: awssdk.String(string(b))}); err != nil {
			f.t.Errorf("deliver %s: %v", e.id, err)
		}
	}
}

// signedAt is command n signed with the source's key at at, as sent.
func (f *replayFixture) signedAt(n int, at time.Time, secret []byte) (string, []byte) {
	f.t.Helper()
	id := fmt.Sprintf("7c9e6679-7425-40de-944b-%012d", n)
	e := envelope.New(id, at, replayTarget, "send", []byte(`{"n":`+strconv.Itoa(n)+`}`))
	e.Metadata.VersionID = "hmac-v1"
	k, _ := signing.NewKey("hmac-v1", secret)
	if err := k.SignEnvelope(&e, replaySrc); err != nil {
		f.t.Fatal(err)
	}
	b, err := e.AppendJSON(nil)
	if err != nil {
		f.t.Fatal(err)
	}
	return id, b
}

// TestAWSArchiveReplay: the archive read through an EventBridge replay
// into a capture queue: only what the shield accepts now, as of each
// event's time, is re-signed and sent; forgeries, stale commands and
// other events are refused; the capture rule and queue are deleted.
func TestAWSArchiveReplay(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	at := f.clk.Now().Add(-30 * time.Minute).Truncate(time.Second)
	good, goodB := f.signedAt(1, at, replaySecret)
	_, forged := f.signedAt(2, at, []byte(strings.Repeat("x", 32)))
	_, stale := f.signedAt(3, at.Add(-time.Hour), replaySecret)
	fa := &fakeArchive{t: t, sqs: f.sqs, bus: f.r.bus, archive: f.r.names.Archive(), events: []archivedEvent{
		{id: "ev-1", source: replaySrc, detailType: envelope.EventType, detail: goodB, at: at},
		{id: "ev-2", source: replaySrc, detailType: envelope.EventType, detail: forged, at: at},
		{id: "ev-3", source: replaySrc, detailType: envelope.EventType, detail: stale, at: at},
		{id: "ev-4", source: replaySrc, detailType: "something.else", detail: []byte(`{"a":1}`), at: at},
		{id: "ev-5", source: replaySrc, detailType: envelope.EventType, detail: goodB, at: at.Add(-2 * time.Hour)},
	}}
	srv := httptest.NewServer(fa)
	defer srv.Close()
	f.r.events = eventbridge.NewFromConfig(emu.Kumo().Config(), func(o *eventbridge.Options) {
		o.BaseEndpoint = awssdk.String(srv.URL)
		o.APIOptions = append(o.APIOptions, f.calls.Count)
	})
	req := wire.ReplayRequest{From: "archive", Reason: "incident 9", Start: at.Add(-time.Minute)}

	f.calls.Take()
	fin := f.follow(f.r.start(ctx, req))
	t.Logf("AWS calls of `replay --from archive` (plan and run, 4 events in range, 1 sent): %v", f.calls.Take().Ops())
	a := fin.Replay
	want := map[string]int{"bad_signature": 1, "timestamp_too_old": 1, replay.RefuseNotCommand: 1}
	if a.Status != wire.ReplayDone || a.SentCount != 1 || a.Planned != 1 || a.Refused != 3 || fmt.Sprint(a.RefusedBy) != fmt.Sprint(want) {
		t.Fatalf("finished = %+v (%s), want done, 1 sent, refused %v", a, fin.Error, want)
	}
	got := f.bus.take()
	if len(got) != 1 || got[0].Metadata.ID != good || !got[0].Metadata.Replay || got[0].Metadata.ReplayID != a.ID {
		t.Fatalf("the bus got %+v, want %s replayed once", got, good)
	}
	fa.mu.Lock()
	defer fa.mu.Unlock()
	if !fa.deleted {
		t.Error("the capture rule was not deleted")
	}
	name := fa.target[strings.LastIndex(fa.target, ":")+1:]
	if _, err := f.sqs.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(name)}); err == nil {
		t.Errorf("the capture queue %s was not deleted", name)
	}
	if !strings.HasPrefix(name, "snavio-"+f.r.names.Env+"-replay-") {
		t.Errorf("capture queue %q is not named for the env's replays", name)
	}
}

// TestSweepCaptures: a capture queue a crashed run left is deleted with
// its rule once it is a day old, and not before; other queues stay.
func TestSweepCaptures(t *testing.T) {
	f := newReplayFixture(t)
	ctx := context.Background()
	prefix := f.r.names.Queue("replay-")
	left, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(prefix + "deadbeef")})
	if err != nil {
		t.Fatal(err)
	}
	other, err := f.sqs.CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: awssdk.String(f.r.names.Queue("orders"))})
	if err != nil {
		t.Fatal(err)
	}
	fa := &fakeArchive{t: t, sqs: f.sqs, bus: f.r.bus, archive: f.r.names.Archive()}
	srv := httptest.NewServer(fa)
	defer srv.Close()
	eb := eventbridge.NewFromConfig(emu.Kumo().Config(), func(o *eventbridge.Options) { o.BaseEndpoint = awssdk.String(srv.URL) })
	if got, err := replay.SweepCaptures(ctx, f.sqs, eb, f.r.bus, prefix, time.Now()); err != nil || len(got) != 0 {
		t.Fatalf("sweep of a fresh capture queue = %v, %v; want nothing deleted", got, err)
	}
	got, err := replay.SweepCaptures(ctx, f.sqs, eb, f.r.bus, prefix, time.Now().Add(replay.CaptureMaxAge+time.Minute))
	if err != nil || len(got) != 1 || got[0] != prefix+"deadbeef" {
		t.Fatalf("sweep a day later = %v, %v; want the leftover deleted", got, err)
	}
	fa.mu.Lock()
	ops := strings.Join(fa.ops, " ")
	fa.mu.Unlock()
	if ops != "RemoveTargets DeleteRule" {
		t.Errorf("EventBridge calls %q, want the leftover rule's target removed and the rule deleted", ops)
	}
	if _, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: left.QueueUrl}); err == nil {
		t.Error("the leftover capture queue still exists")
	}
	if _, err := f.sqs.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: other.QueueUrl}); err != nil {
		t.Errorf("another queue was touched: %v", err)
	}
}
