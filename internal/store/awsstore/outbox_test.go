package awsstore

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodbstreams"
	streamtypes "github.com/aws/aws-sdk-go-v2/service/dynamodbstreams/types"

	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// newOutboxStore makes an outbox on a table of its own (no TTL, as every
// test table: see newFlowStore), with a fake clock at t0.
func newOutboxStore(t *testing.T, c *awstest.Calls) (*OutboxStore, *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(t0)
	cfg := testConfig(t, c)
	cfg.Clock = clk
	s, err := NewOutboxStore(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ready(t, c, createTable(context.Background(), s.tables, OutboxTableInput(s.table), false))
	return s, clk
}

// sibling is another store on s's table, with its own cache, as another
// Lambda instance would be.
func sibling(t *testing.T, s *OutboxStore, clk clock.Clock) *OutboxStore {
	t.Helper()
	d := emu.DynamoDB(t)
	c := dynamodb.NewFromConfig(d.Config(), d.ClientOptions()...)
	return &OutboxStore{table: s.table, maxAttempts: 1000, retention: s.retention, clock: clk, tx: c, get: c, query: c, tables: c, last: newBounded[uint64](10)}
}

func delivered(tenant string, n int) telemetry.Event {
	return telemetry.Delivered{CommandID: fmt.Sprintf("0f8fad5b-d9cb-469f-a165-%012d", n), Source: tenant + "/web", Target: "billing",
		CommandName: "charge-card", Timestamp: t0.Format(time.RFC3339Nano), Path: telemetry.PathFast}
}

func entries(tenant string, from, n int) []OutboxEntry {
	var out []OutboxEntry
	for i := range n {
		out = append(out, OutboxEntry{Tenant: tenant, Event: delivered(tenant, from+i)})
	}
	return out
}

// readAll reads tenant's whole stream after after.
func readAll(t *testing.T, s *OutboxStore, tenant string, after uint64) []OutboxRecord {
	t.Helper()
	var out []OutboxRecord
	for {
		page, err := s.Read(context.Background(), tenant, after, MaxOutboxRead)
		if err != nil {
			t.Fatal(err)
		}
		if len(page) == 0 {
			return out
		}
		out = append(out, page...)
		after = page[len(page)-1].Seq
	}
}

// checkStream holds a tenant's records to seqs 1..n, each event the
// command id numbered like its position in want.
func checkStream(t *testing.T, recs []OutboxRecord, wantIDs []string) {
	t.Helper()
	if len(recs) != len(wantIDs) {
		t.Fatalf("%d records, want %d", len(recs), len(wantIDs))
	}
	for i, r := range recs {
		if r.Seq != uint64(i+1) {
			t.Fatalf("record %d has seq %d: the stream has a gap or is out of order", i, r.Seq)
		}
		e, err := telemetry.Unmarshal(r.Event)
		if err != nil {
			t.Fatal(err)
		}
		if id := e.(telemetry.Delivered).CommandID; id != wantIDs[i] || r.Name != e.EventName() {
			t.Fatalf("record %d: %s %s, want %s", r.Seq, r.Name, id, wantIDs[i])
		}
	}
}

func ids(es []OutboxEntry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Event.(telemetry.Delivered).CommandID)
	}
	return out
}

// TestOutboxContract is the outbox's behaviour, on DynamoDB Local. No
// dispatchtest suite exists for the outbox (pkg/dispatch has no outbox
// port), so it lives here; it holds the embedded store's rules: per-tenant
// streams numbered from 1 without gaps, in append order, durable reads in
// order after a cursor.
func TestOutboxContract(t *testing.T) {
	ctx := context.Background()
	t.Run("GaplessPerTenant", func(t *testing.T) {
		s, clk := newOutboxStore(t, nil)
		in := []OutboxEntry{
			{Tenant: "acme", Event: delivered("acme", 1)}, {Tenant: "globex", Event: delivered("globex", 1)},
			{Tenant: "acme", Event: delivered("acme", 2)}, {Tenant: "acme", Event: delivered("acme", 3)},
			{Tenant: "globex", Event: delivered("globex", 2)},
		}
		seqs, err := s.Append(ctx, in)
		if err != nil || !slices.Equal(seqs, []uint64{1, 1, 2, 3, 2}) {
			t.Fatalf("seqs %v %v, want [1 1 2 3 2]", seqs, err)
		}
		clk.Advance(time.Second)
		if seqs, err := s.Append(ctx, entries("acme", 4, 1)); err != nil || !slices.Equal(seqs, []uint64{4}) {
			t.Fatalf("next append %v %v, want [4]", seqs, err)
		}
		recs := readAll(t, s, "acme", 0)
		checkStream(t, recs, ids(entries("acme", 1, 4)))
		if !recs[0].AppendedAt.Equal(t0) || !recs[3].AppendedAt.Equal(t0.Add(time.Second)) {
			t.Errorf("appended at %v and %v, want the store clock's", recs[0].AppendedAt, recs[3].AppendedAt)
		}
		checkStream(t, readAll(t, s, "globex", 0), ids(entries("globex", 1, 2)))
		if recs, _ := s.Read(ctx, "acme", 2, 1); len(recs) != 1 || recs[0].Seq != 3 {
			t.Fatalf("Read after 2, limit 1: %+v", recs)
		}
		if recs := readAll(t, s, "initech", 0); len(recs) != 0 {
			t.Fatalf("a tenant with no events has %d", len(recs))
		}
	})
	t.Run("LargeAppend", func(t *testing.T) {
		// More than one transaction's worth: 99 events per transaction.
		s, _ := newOutboxStore(t, nil)
		in := entries("acme", 1, 250)
		seqs, err := s.Append(ctx, in)
		if err != nil || len(seqs) != 250 || seqs[0] != 1 || seqs[249] != 250 {
			t.Fatalf("seqs %v... %v", seqs[:min(3, len(seqs))], err)
		}
		checkStream(t, readAll(t, s, "acme", 0), ids(in))
	})
	t.Run("ConcurrentWritersNeverShareOrSkipANumber", func(t *testing.T) {
		s, clk := newOutboxStore(t, nil)
		const writers, appends, per = 6, 5, 3
		var mu sync.Mutex
		got := map[uint64]string{}
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for w := range writers {
			st := sibling(t, s, clk)
			wg.Add(1)
			go func() {
				defer wg.Done()
				for a := range appends {
					in := entries("hot", (w*appends+a)*per, per)
					seqs, err := st.Append(ctx, in)
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					for i, q := range seqs {
						if prev, dup := got[q]; dup {
							errs <- fmt.Errorf("seq %d given twice (%s and %s)", q, prev, ids(in)[i])
						}
						got[q] = ids(in)[i]
					}
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		want := make([]string, writers*appends*per)
		for q := range want {
			want[q] = got[uint64(q+1)]
			if want[q] == "" {
				t.Fatalf("seq %d was never given", q+1)
			}
		}
		checkStream(t, readAll(t, s, "hot", 0), want)
	})
	t.Run("ReadSkipsRecordsPastRetention", func(t *testing.T) {
		s, clk := newOutboxStore(t, nil)
		if _, err := s.Append(ctx, entries("acme", 1, 2)); err != nil {
			t.Fatal(err)
		}
		clk.Advance(s.retention - time.Nanosecond)
		if _, err := s.Append(ctx, entries("acme", 3, 1)); err != nil {
			t.Fatal(err)
		}
		if n := len(readAll(t, s, "acme", 0)); n != 3 {
			t.Fatalf("%d records before the retention, want 3", n)
		}
		clk.Advance(time.Nanosecond)
		recs := readAll(t, s, "acme", 0)
		if len(recs) != 1 || recs[0].Seq != 3 {
			t.Fatalf("after the first two expired: %+v, want seq 3 only", recs)
		}
		if seqs, err := s.Append(ctx, entries("acme", 4, 1)); err != nil || seqs[0] != 4 {
			t.Fatalf("numbering after expiry: %v %v, want 4 (numbers never restart)", seqs, err)
		}
	})
	t.Run("BadInput", func(t *testing.T) {
		s, _ := newOutboxStore(t, nil)
		huge := telemetry.Delivered{CommandID: strings.Repeat("x", MaxOutboxEventBytes), Source: "acme/web"}
		for _, tc := range []struct {
			name string
			in   []OutboxEntry
			want string
		}{
			{"none", nil, "give 1 to 1000"},
			{"too many", entries("acme", 0, MaxOutboxAppend+1), "give 1 to 1000"},
			{"no tenant", []OutboxEntry{{Event: delivered("acme", 1)}}, "outbox tenant"},
			{"no event", []OutboxEntry{{Tenant: "acme"}}, "no event"},
			{"over the size limit", []OutboxEntry{{Tenant: "acme", Event: huge}}, "over the limit"},
		} {
			if _, err := s.Append(ctx, tc.in); err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: %v; want an error saying %q", tc.name, err, tc.want)
			}
		}
		if recs := readAll(t, s, "acme", 0); len(recs) != 0 {
			t.Fatalf("a refused append wrote %d records", len(recs))
		}
		for _, limit := range []int{0, MaxOutboxRead + 1} {
			if _, err := s.Read(ctx, "acme", 0, limit); err == nil || !strings.Contains(err.Error(), "limit") {
				t.Errorf("limit %d: %v", limit, err)
			}
		}
		if recs, err := s.Read(ctx, "acme", ^uint64(0), 1); err != nil || len(recs) != 0 {
			t.Errorf("Read after the last number: %v %v", recs, err)
		}
	})
}

// TestOutboxCallsPerAppend counts DynamoDB calls per append.
func TestOutboxCallsPerAppend(t *testing.T) {
	ctx := context.Background()
	var c awstest.Calls
	s, clk := newOutboxStore(t, &c)
	app := func(st *OutboxStore, n int) func() error {
		return func() error { _, err := st.Append(ctx, entries("acme", 0, n)); return err }
	}
	other := sibling(t, s, clk)
	other.tx = s.tx // the same client, so its calls are counted too
	checkCalls(t, &c, []callCase{
		{"first append of a tenant", app(s, 3), map[string]int{"TransactWriteItems": 1}},
		{"next append, same store", app(s, 10), map[string]int{"TransactWriteItems": 1}},
		{"250 events (99 a transaction)", app(s, 250), map[string]int{"TransactWriteItems": 3}},
		{"append by a store that has not seen the tenant", app(other, 1), map[string]int{"TransactWriteItems": 2}},
		{"append by the first store, now behind", app(s, 1), map[string]int{"TransactWriteItems": 2}},
		{"read (one page)", func() error { _, err := s.Read(ctx, "acme", 0, 100); return err }, map[string]int{"Query": 1}},
	})
}

// TestOutboxStream reads the table's stream as the outbox drain's event
// source does: one INSERT per event with its new image, in sequence
// order, beside the tenant's sequence item, which the drain skips by its
// sort key.
func TestOutboxStream(t *testing.T) {
	ctx := context.Background()
	s, _ := newOutboxStore(t, nil)
	if err := s.CreateTables(ctx); err != nil { // turns TTL on too
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, entries("acme", 1, 5)); err != nil {
		t.Fatal(err)
	}
	d := emu.DynamoDB(t)
	st := dynamodbstreams.NewFromConfig(d.Config(), func(o *dynamodbstreams.Options) { o.BaseEndpoint = aws.String(d.Endpoint) })
	streams, err := st.ListStreams(ctx, &dynamodbstreams.ListStreamsInput{TableName: aws.String(s.table)})
	if err != nil || len(streams.Streams) != 1 {
		t.Fatalf("streams of %s: %v %v", s.table, streams, err)
	}
	desc, err := st.DescribeStream(ctx, &dynamodbstreams.DescribeStreamInput{StreamArn: streams.Streams[0].StreamArn})
	if err != nil {
		t.Fatal(err)
	}
	if desc.StreamDescription.StreamViewType != streamtypes.StreamViewTypeNewImage {
		t.Fatalf("stream view %s, want NEW_IMAGE", desc.StreamDescription.StreamViewType)
	}
	var sks []string
	for _, sh := range desc.StreamDescription.Shards {
		it, err := st.GetShardIterator(ctx, &dynamodbstreams.GetShardIteratorInput{StreamArn: streams.Streams[0].StreamArn, ShardId: sh.ShardId, ShardIteratorType: streamtypes.ShardIteratorTypeTrimHorizon})
		if err != nil {
			t.Fatal(err)
		}
		recs, err := st.GetRecords(ctx, &dynamodbstreams.GetRecordsInput{ShardIterator: it.ShardIterator})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range recs.Records {
			img := r.Dynamodb.NewImage
			sk, _ := img[attrSK].(*streamtypes.AttributeValueMemberS)
			pk, _ := img[attrPK].(*streamtypes.AttributeValueMemberS)
			if sk == nil || pk == nil || pk.Value != "acme" {
				t.Fatalf("stream record without the tenant's keys: %+v", img)
			}
			if sk.Value == skSeqItem {
				continue
			}
			if r.EventName != streamtypes.OperationTypeInsert {
				t.Fatalf("record %s is a %s, want INSERT", sk.Value, r.EventName)
			}
			if _, ok := img["event"].(*streamtypes.AttributeValueMemberS); !ok {
				t.Fatalf("record %s has no event in its new image", sk.Value)
			}
			sks = append(sks, sk.Value)
		}
	}
	want := []string{seqKey(1), seqKey(2), seqKey(3), seqKey(4), seqKey(5)}
	if !slices.Equal(sks, want) {
		t.Fatalf("stream records %v, want %v", sks, want)
	}
}

type fakeTx func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error)

func (f fakeTx) TransactWriteItems(_ context.Context, in *dynamodb.TransactWriteItemsInput, _ ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error) {
	return f(in)
}

// TestOutboxAppendAfterAConflictWithoutItem: a transaction cancelled by a
// conflict carries no item, so the store reads the sequence with one
// consistent GetItem and tries again from there.
func TestOutboxAppendAfterAConflictWithoutItem(t *testing.T) {
	var olds []string
	gets := 0
	s := &OutboxStore{table: "t", maxAttempts: 4, retention: time.Hour, clock: clock.NewFake(t0), last: newBounded[uint64](10),
		tx: fakeTx(func(in *dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
			u := in.TransactItems[0].Update
			old, _ := u.ExpressionAttributeValues[":old"].(*types.AttributeValueMemberN)
			if old == nil {
				olds = append(olds, "none")
				return nil, &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}}}
			}
			olds = append(olds, old.Value)
			if sk := in.TransactItems[1].Put.Item[attrSK].(*types.AttributeValueMemberS).Value; sk != seqKey(6) {
				t.Errorf("first put at %s, want %s", sk, seqKey(6))
			}
			return &dynamodb.TransactWriteItemsOutput{}, nil
		}),
		get: fakeGet(func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			gets++
			if !aws.ToBool(in.ConsistentRead) {
				t.Error("the sequence read is not strongly consistent")
			}
			return &dynamodb.GetItemOutput{Item: map[string]types.AttributeValue{"last": num(5)}}, nil
		}),
	}
	seqs, err := s.Append(context.Background(), entries("acme", 1, 2))
	if err != nil || !slices.Equal(seqs, []uint64{6, 7}) || gets != 1 || !slices.Equal(olds, []string{"none", "5"}) {
		t.Fatalf("seqs %v err %v gets %d conditions %v", seqs, err, gets, olds)
	}
	// Writers that keep winning: an error after maxAttempts, saying so.
	s.tx = fakeTx(func(*dynamodb.TransactWriteItemsInput) (*dynamodb.TransactWriteItemsOutput, error) {
		return nil, &types.TransactionCanceledException{CancellationReasons: []types.CancellationReason{{Code: aws.String("TransactionConflict")}}}
	})
	if _, err := s.Append(context.Background(), entries("acme", 1, 1)); err == nil || !strings.Contains(err.Error(), "try again") {
		t.Fatalf("endless conflicts: %v", err)
	}
}
