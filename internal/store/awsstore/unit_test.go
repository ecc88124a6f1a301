package awsstore

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/snavio/snavio/pkg/dispatch/flow"
)

// These tests fake single DynamoDB operations (what the emulator cannot be
// made to do on demand: omit ALL_OLD, fail, or change an item under every
// write).

type fakeUpdate func(*dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error)

func (f fakeUpdate) UpdateItem(_ context.Context, in *dynamodb.UpdateItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error) {
	return f(in)
}

type fakePut func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error)

func (f fakePut) PutItem(_ context.Context, in *dynamodb.PutItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error) {
	return f(in)
}

type fakeGet func(*dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error)

func (f fakeGet) GetItem(_ context.Context, in *dynamodb.GetItemInput, _ ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error) {
	return f(in)
}

func liveCounter(count int64) map[string]types.AttributeValue {
	ttl, exact := expiry(t0.Add(time.Minute))
	return map[string]types.AttributeValue{attrPK: str(pkCounter + "k"), attrSK: str(singleton), "n": num(count), attrExpiresAt: ttl, attrExpiresAtNS: exact}
}

func TestTakeReadsTheItemWhenAFailedConditionOmitsIt(t *testing.T) {
	gets := 0
	s := &FlowStore{table: "t", maxAttempts: 4,
		update: fakeUpdate(func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			return nil, &types.ConditionalCheckFailedException{Message: aws.String("no ALL_OLD")}
		}),
		get: fakeGet(func(in *dynamodb.GetItemInput) (*dynamodb.GetItemOutput, error) {
			gets++
			if !aws.ToBool(in.ConsistentRead) {
				t.Error("the fallback read is not strongly consistent")
			}
			return &dynamodb.GetItemOutput{Item: liveCounter(10)}, nil
		}),
	}
	g, err := s.Take(context.Background(), "k", 1, 10, t0.Add(time.Minute), t0)
	if err != nil || g != 0 || gets != 1 {
		t.Fatalf("granted %d, err %v, %d reads; want 0, nil, 1", g, err, gets)
	}
}

func TestTakeGivesUpUnderEndlessContention(t *testing.T) {
	updates := 0
	s := &FlowStore{table: "t", maxAttempts: 5,
		update: fakeUpdate(func(in *dynamodb.UpdateItemInput) (*dynamodb.UpdateItemOutput, error) {
			updates++
			// Another writer always got there first, leaving room for 1.
			return nil, &types.ConditionalCheckFailedException{Item: liveCounter(9)}
		}),
	}
	_, err := s.Take(context.Background(), "k", 3, 10, t0.Add(time.Minute), t0)
	if err == nil || !strings.Contains(err.Error(), "retry") || updates != 5 {
		t.Fatalf("err %v after %d updates; want a contention error after 5", err, updates)
	}
}

func TestClaimPassesOtherErrorsOn(t *testing.T) {
	boom := errors.New("throttled")
	s := &FlowStore{table: "t", maxAttempts: 1,
		put: fakePut(func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) { return nil, boom }),
	}
	rec := flow.DedupeRecord{Tenant: "t", ID: "id", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "o", ExpiresAt: t0.Add(time.Minute)}
	ok, _, err := s.Claim(context.Background(), rec, t0)
	if ok || !errors.Is(err, boom) {
		t.Fatalf("claim = %v, %v; want the store's error", ok, err)
	}
}

func TestClaimReportsACorruptRecord(t *testing.T) {
	s := &FlowStore{table: "t", maxAttempts: 1,
		put: fakePut(func(*dynamodb.PutItemInput) (*dynamodb.PutItemOutput, error) {
			return nil, &types.ConditionalCheckFailedException{Item: map[string]types.AttributeValue{attrPK: str("x"), "hash": num(1)}}
		}),
	}
	rec := flow.DedupeRecord{Tenant: "t", ID: "id", PayloadHash: "h", State: flow.ClaimInProgress, Owner: "o", ExpiresAt: t0.Add(time.Minute)}
	if _, _, err := s.Claim(context.Background(), rec, t0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("err = %v, want ErrCorrupt", err)
	}
}

func TestConfigValidateJoinsEveryProblem(t *testing.T) {
	c := Config{Env: "Prod!", TablePrefix: "bad name ", MaxAttempts: -1}
	err := c.Validate()
	if err == nil {
		t.Fatal("a bad config validated")
	}
	for _, want := range []string{"env", "table prefix", "max attempts", "region"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
	good := Config{Env: "prod", AWSConfig: aws.Config{Region: "eu-west-1"}}
	good.SetDefaults()
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	if good.FlowTable() != "snavio-prod-flow" {
		t.Fatalf("flow table %q", good.FlowTable())
	}
}

func TestKeysMustBeUTF8(t *testing.T) {
	s := &FlowStore{table: "t", maxAttempts: 1}
	if _, err := s.Take(context.Background(), "\xff", 1, 1, t0.Add(time.Minute), t0); err == nil || !strings.Contains(err.Error(), "UTF-8") {
		t.Fatalf("err = %v", err)
	}
}

// timeKey must sort as the times it encodes, before and after 1970.
func FuzzTimeKeyOrder(f *testing.F) {
	f.Add(int64(0), int64(1))
	f.Add(int64(-1), int64(0))
	f.Add(int64(-1<<63), int64(1<<63-1))
	f.Add(t0.UnixNano(), t0.Add(time.Nanosecond).UnixNano())
	f.Fuzz(func(t *testing.T, a, b int64) {
		ka, kb := timeKey(time.Unix(0, a)), timeKey(time.Unix(0, b))
		if len(ka) != 20 || len(kb) != 20 {
			t.Fatalf("keys %q %q are not 20 digits", ka, kb)
		}
		want := 0
		if a < b {
			want = -1
		} else if a > b {
			want = 1
		}
		if got := strings.Compare(ka, kb); got != want {
			t.Fatalf("timeKey(%d)=%s vs timeKey(%d)=%s: compare %d, want %d", a, ka, b, kb, got, want)
		}
	})
}

// tuple must never map two different part lists to one key (of UTF-8
// parts: every caller validates that first).
func FuzzTupleUnambiguous(f *testing.F) {
	f.Add("a", "b", "c", "a", "b", "c")
	f.Add("a/b", "c", "", "a", "b/c", "")
	f.Add(`a","b`, "", "", "a", "b", "")
	f.Fuzz(func(t *testing.T, a, b, c, d, e, g string) {
		if !utf8.ValidString(a + b + c + d + e + g) {
			t.Skip("not UTF-8")
		}
		same := a == d && b == e && c == g
		if (tuple(a, b, c) == tuple(d, e, g)) != same {
			t.Fatalf("tuple(%q,%q,%q)=%s tuple(%q,%q,%q)=%s", a, b, c, tuple(a, b, c), d, e, g, tuple(d, e, g))
		}
	})
}
