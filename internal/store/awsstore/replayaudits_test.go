package awsstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/google/uuid"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
)

func newReplayAudits(t *testing.T, c *awstest.Calls) (*ReplayAudits, *clock.Fake) {
	t.Helper()
	cfg := testConfig(t, c)
	clk := clock.NewFake(t0)
	cfg.Clock = clk
	fs, err := NewFlowStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, c, fs.CreateTables(context.Background()))
	s, err := NewReplayAudits(cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	return s, clk
}

func commandIDs(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = uuid.NewString()
	}
	return out
}

// TestReplayAudits: create, writes of sent ids spanning chunks (each
// write carries the ids from the chunk it starts in), get them back, the
// claim of one replayer against another, list, unknown ids, gaps,
// expiry; and one call per progress write.
func TestReplayAudits(t *testing.T) {
	ctx := context.Background()
	var calls awstest.Calls
	s, clk := newReplayAudits(t, &calls)
	first := wire.ReplayClaim{Runner: uuid.NewString(), ClaimSeconds: int64(DefaultReplayClaim / time.Second)}
	second := wire.ReplayClaim{Runner: uuid.NewString(), ClaimSeconds: 60}
	a := wire.ReplayAudit{ID: uuid.NewString(), Origin: "dlq:mailer-dlq", Reason: "incident 7", Operator: "arn:aws:iam::123456789012:user/op",
		Dedupe: wire.DedupeKeepID, Status: wire.ReplayRunning, StartedAt: t0, Planned: 2500}
	if err := s.Create(ctx, a, first); err != nil {
		t.Fatal(err)
	}
	if got := calls.Take().Ops(); got.Total() != 1 || got["PutItem"] != 1 {
		t.Errorf("Create: %v, want 1 PutItem", got)
	}
	if err := s.Create(ctx, a, first); err == nil {
		t.Error("a second Create of the same id succeeded")
	}
	calls.Take()
	sent := commandIDs(10)
	a.Sent, a.SentCount = sent, 10
	if err := s.Write(ctx, a, 0, first); err != nil {
		t.Fatal(err)
	}
	if got := calls.Take().Ops(); got.Total() != 1 || got["TransactWriteItems"] != 1 {
		t.Errorf("Write of a batch of sent ids: %v, want 1 TransactWriteItems", got)
	}
	sent = append(sent, commandIDs(2490)...)
	a.Sent, a.SentCount, a.Status, a.Cursor = sent, 2500, wire.ReplayInterrupted, "dlq"
	if err := s.Write(ctx, a, 0, first); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(ctx, a.ID)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Sent) != 2500 || got.Sent[0] != sent[0] || got.Sent[2499] != sent[2499] || got.SentCount != 2500 || got.Status != wire.ReplayInterrupted || got.Cursor != "dlq" || got.Reason != a.Reason {
		t.Errorf("Get = %d sent, status %s, cursor %q; want 2500, interrupted, dlq", len(got.Sent), got.Status, got.Cursor)
	}
	// A second replayer cannot run it while the first holds it; once the
	// first stops writing past its claim, it can, and the first cannot.
	a.Status, a.Sent = wire.ReplayRunning, sent[2000:]
	if err := s.Write(ctx, a, 2000, first); err != nil {
		t.Fatal(err)
	}
	if err := s.Claim(ctx, a.ID, second); !errors.Is(err, replay.ErrRunning) {
		t.Fatalf("Claim of a running replay = %v, want ErrRunning", err)
	}
	if got, _ := s.Head(ctx, a.ID); got.Status != wire.ReplayRunning {
		t.Errorf("status while claimed = %s, want running", got.Status)
	}
	clk.Advance(DefaultReplayClaim)
	if got, _ := s.Head(ctx, a.ID); got.Status != wire.ReplayInterrupted || got.Error == "" {
		t.Errorf("status after the claim ran out = %s %q, want interrupted with a hint", got.Status, got.Error)
	}
	if err := s.Claim(ctx, a.ID, second); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, a, 2000, first); !errors.Is(err, replay.ErrRunning) {
		t.Errorf("Write by the replayer that lost its claim = %v, want ErrRunning", err)
	}
	if err := s.Claim(ctx, uuid.NewString(), second); !errors.Is(err, replay.ErrNotFound) {
		t.Errorf("Claim of an unknown replay = %v, want ErrNotFound", err)
	}
	// A write from the last chunk on is one call; one past the ids the
	// audit holds would leave a gap.
	calls.Take()
	a.Sent, a.SentCount = append(sent[2000:], commandIDs(1)...), 2501
	if err := s.Write(ctx, a, 2000, second); err != nil {
		t.Fatal(err)
	}
	if got := calls.Take().Ops(); got.Total() != 1 {
		t.Errorf("a write of the last chunk: %v, want 1 TransactWriteItems", got)
	}
	if err := s.Write(ctx, wire.ReplayAudit{ID: a.ID, Status: wire.ReplayRunning}, 3000, second); err == nil || !strings.Contains(err.Error(), "gap") {
		t.Errorf("a write past the held ids = %v, want a gap refused", err)
	}
	for _, bad := range []struct {
		from int
		c    wire.ReplayClaim
	}{{10, second}, {-1000, second}, {0, wire.ReplayClaim{Runner: "me", ClaimSeconds: 60}}, {0, wire.ReplayClaim{Runner: second.Runner, ClaimSeconds: 2 * wire.MaxReplayClaimSeconds}}} {
		if err := s.Write(ctx, wire.ReplayAudit{ID: a.ID}, bad.from, bad.c); err == nil {
			t.Errorf("Write from %d as %+v was accepted", bad.from, bad.c)
		}
	}

	b := wire.ReplayAudit{ID: uuid.NewString(), Origin: "archive", Reason: "later", Status: wire.ReplayDone, StartedAt: t0.Add(time.Minute)}
	if err := s.Create(ctx, b, first); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].ID != b.ID || list[1].ID != a.ID || list[1].Sent != nil {
		t.Errorf("List = %+v, want b then a, without sent ids", list)
	}

	unknown := uuid.NewString()
	if _, err := s.Get(ctx, unknown); !errors.Is(err, replay.ErrNotFound) {
		t.Errorf("Get(unknown) = %v, want ErrNotFound", err)
	}
	if err := s.Write(ctx, wire.ReplayAudit{ID: unknown}, 0, first); !errors.Is(err, replay.ErrNotFound) {
		t.Errorf("Write(unknown) = %v, want ErrNotFound", err)
	}
	if _, err := s.Get(ctx, "../x"); err == nil {
		t.Error("Get accepted an invalid id")
	}

	clk.Advance(DefaultReplayAuditRetention + time.Minute)
	if _, err := s.Get(ctx, a.ID); !errors.Is(err, replay.ErrNotFound) {
		t.Errorf("Get after the retention = %v, want ErrNotFound (expired items are absent before TTL deletes them)", err)
	}
	if list, _ := s.List(ctx); len(list) != 0 {
		t.Errorf("List after the retention = %d audits, want 0", len(list))
	}
}

func TestReplayAuditRetentionIsValidated(t *testing.T) {
	_, err := NewReplayAudits(Config{Env: "x", AWSConfig: aws.Config{Region: "us-east-1"}}, time.Second)
	if err == nil {
		t.Fatal("a 1 s retention was accepted")
	}
}

func FuzzDecodeSentChunk(f *testing.F) {
	f.Add("0f8fad5b-d9cb-469f-a165-70867728950e")
	f.Add("0f8fad5b-d9cb-469f-a165-70867728950e\n7c9e6679-7425-40de-944b-e07fc1f90ae7")
	f.Add("")
	f.Add("\n\n")
	f.Add("a b")
	f.Fuzz(func(t *testing.T, v string) {
		got, err := DecodeSentChunk(v)
		if err != nil {
			return
		}
		if len(got) == 0 || len(got) > sentChunk {
			t.Fatalf("%d ids accepted", len(got))
		}
		for _, id := range got {
			if id == "" {
				t.Fatal("an empty id was accepted")
			}
		}
	})
}

func FuzzDecodeAuditItem(f *testing.F) {
	f.Add("0f8fad5b-d9cb-469f-a165-70867728950e", `{"id":"0f8fad5b-d9cb-469f-a165-70867728950e","origin":"archive","status":"done"}`, "3")
	f.Add("x", `{"id":"y"}`, "1")
	f.Add("x", `{`, "-1")
	f.Add("x", `{"id":"x","sent":["a"]}`, "99999999999999999999")
	f.Fuzz(func(t *testing.T, sk, data, n string) {
		item := map[string]types.AttributeValue{attrSK: str(sk), attrData: str(data), attrSentN: &types.AttributeValueMemberN{Value: n}}
		a, count, err := DecodeAuditItem(item)
		if err != nil {
			return
		}
		if a.ID != sk || count < 0 || a.Sent != nil {
			t.Fatalf("accepted %q as %+v, %d", data, a, count)
		}
	})
}
