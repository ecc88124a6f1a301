package awsstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	jsonv2 "github.com/go-json-experiment/json"

	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/replay"
	"github.com/snavio/snavio/pkg/dispatch/clock"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
)

// Replay audits live in the flow table (docs/store/aws.md, "Replay
// audits"): one item per audit in the partition replayPK, and the ids a
// run sent in chunks of sentChunk under replaySentPK+id.
const (
	replayPK         = "replay"
	replaySentPrefix = "replaysent#"
	attrSentN        = "sent_n" // how many sent ids the chunks hold
	attrIDs          = "ids"    // a chunk's ids, one per line
	// attrRunner and attrRunnerUntil claim a running audit for one
	// replayer until a time (epoch ns): a second replayer cannot resume
	// it meanwhile, and list and show tell a crashed run from a live one.
	attrRunner      = "runner"
	attrRunnerUntil = "runner_until_ns"
	// DefaultReplayClaim is how long a claim lasts without an update.
	DefaultReplayClaim = 5 * time.Minute
	// SentChunk is how many sent ids one chunk item holds: a write's sent
	// ids start at a multiple of it.
	SentChunk = sentChunk
	// sentChunk ids per chunk item: 1000 UUIDs are about 37 KB, far
	// under DynamoDB's 400 KB item limit.
	sentChunk = 1000
	// maxTransactItems is TransactWriteItems' limit.
	maxTransactItems = 100
	// DefaultReplayAuditRetention is how long an audit is kept after its
	// last write (its TTL).
	DefaultReplayAuditRetention = 90 * 24 * time.Hour
)

// ReplayAuditsAPI is what the audit store calls of DynamoDB.
type ReplayAuditsAPI interface {
	PutItemAPI
	UpdateItemAPI
	GetItemAPI
	QueryAPI
	TransactWriteItemsAPI
}

// ReplayAudits keeps replay audits in the flow table for the control
// function, which writes them for the replayer (the CLI on an aws
// profile) that runs each: every write names the replayer's claim, so the
// store holds no state of its own between requests. Safe for concurrent
// use.
type ReplayAudits struct {
	table     string
	api       ReplayAuditsAPI
	clk       clock.Clock
	retention time.Duration
}

// NewReplayAudits returns the audit store of cfg's environment. retention
// is how long an audit outlives its last write (0: 90 days).
func NewReplayAudits(cfg Config, retention time.Duration) (*ReplayAudits, error) {
	cfg.SetDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if retention == 0 {
		retention = DefaultReplayAuditRetention
	}
	if retention < time.Hour {
		return nil, fmt.Errorf("awsstore: replay audit retention %v: give an hour or more", retention)
	}
	return &ReplayAudits{table: cfg.FlowTable(), api: dynamodb.NewFromConfig(cfg.AWSConfig, cfg.ClientOptions...), clk: cfg.Clock,
		retention: retention}, nil
}

func auditKey(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(replayPK), attrSK: str(id)}
}

func sentKey(id string, chunk int) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{attrPK: str(replaySentPrefix + id), attrSK: str(fmt.Sprintf("%08d", chunk))}
}

func checkAuditID(id string) error {
	if !envelope.ValidID(id) {
		return fmt.Errorf("invalid replay id %.60q: use the id `snavio replay list` shows", id)
	}
	return nil
}

// auditItem is a's item recording n sent ids (they are in chunks),
// claimed by c while it runs.
func (s *ReplayAudits) auditItem(a wire.ReplayAudit, n int, c wire.ReplayClaim) (map[string]types.AttributeValue, error) {
	a.Sent = nil
	b, err := jsonv2.Marshal(a)
	if err != nil {
		return nil, err
	}
	item := auditKey(a.ID)
	item[attrData] = str(string(b))
	item[attrSentN] = num(int64(n))
	now := s.clk.Now()
	item[attrExpiresAt], item[attrExpiresAtNS] = expiry(now.Add(s.retention))
	if a.Status == wire.ReplayRunning {
		item[attrRunner], item[attrRunnerUntil] = str(c.Runner), num(now.Add(c.For()).UnixNano())
	}
	return item, nil
}

// mine is the condition that no other replayer holds a live claim.
const mine = "attribute_exists(pk) AND (attribute_not_exists(runner) OR runner = :me OR runner_until_ns <= :now)"

// Claim makes c's replayer the runner of audit id, so that no other
// replayer runs it meanwhile (replay.ErrRunning when one does;
// replay.ErrNotFound when there is no such audit).
func (s *ReplayAudits) Claim(ctx context.Context, id string, c wire.ReplayClaim) error {
	if err := checkAuditID(id); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	d := c.For()
	now := s.clk.Now()
	_, err := s.api.UpdateItem(ctx, &dynamodb.UpdateItemInput{TableName: aws.String(s.table), Key: auditKey(id),
		UpdateExpression:    aws.String("SET runner = :me, runner_until_ns = :until"),
		ConditionExpression: aws.String(mine),
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(c.Runner), ":now": num(now.UnixNano()),
			":until": num(now.Add(d).UnixNano())},
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	})
	if old, failed := conditionFailed(err); failed {
		if old == nil {
			if out, gerr := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: auditKey(id), ConsistentRead: aws.Bool(true)}); gerr == nil {
				old = out.Item
			}
		}
		if old == nil {
			return fmt.Errorf("replay %s: %w: see `snavio replay list`", id, replay.ErrNotFound)
		}
		return fmt.Errorf("replay %s: %w", id, replay.ErrRunning)
	}
	if err != nil {
		return fmt.Errorf("awsstore: claim replay %s in %s: %w", id, s.table, err)
	}
	return nil
}

// chunkItems are the items of audit id's sent-id chunks holding ids,
// the sent ids from number from (a multiple of sentChunk) on.
func (s *ReplayAudits) chunkItems(id string, from int, ids []string) []map[string]types.AttributeValue {
	var out []map[string]types.AttributeValue
	ttl, exact := expiry(s.clk.Now().Add(s.retention))
	for i := 0; i < len(ids); i += sentChunk {
		item := sentKey(id, (from+i)/sentChunk)
		ids := ids[i:min(len(ids), i+sentChunk)]
		item[attrIDs] = str(strings.Join(ids, "\n"))
		item[attrExpiresAt], item[attrExpiresAtNS] = ttl, exact
		out = append(out, item)
	}
	return out
}

// Create records a new audit claimed by c: one PutItem (a new audit has
// no sent ids).
func (s *ReplayAudits) Create(ctx context.Context, a wire.ReplayAudit, c wire.ReplayClaim) error {
	if err := checkAuditID(a.ID); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if len(a.Sent) > 0 || a.SentCount > 0 {
		return fmt.Errorf("replay %s: a new audit has no sent ids", a.ID)
	}
	item, err := s.auditItem(a, 0, c)
	if err != nil {
		return err
	}
	_, err = s.api.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String("attribute_not_exists(pk)")})
	if _, failed := conditionFailed(err); failed {
		return fmt.Errorf("replay %s already exists", a.ID)
	}
	if err != nil {
		return fmt.Errorf("awsstore: record replay audit %s in %s: %w", a.ID, s.table, err)
	}
	return nil
}

// Write records a progress of audit a by c's replayer, whose claim it
// renews: a.Sent holds the sent ids from number from (a multiple of
// SentChunk) on, which the audit must already hold up to. The chunks
// holding them and the audit item go in one TransactWriteItems (more
// chunks than fit in one go first, the audit last: readers read only
// sent_n ids). replay.ErrRunning when another replayer holds the audit.
func (s *ReplayAudits) Write(ctx context.Context, a wire.ReplayAudit, from int, c wire.ReplayClaim) error {
	if err := checkAuditID(a.ID); err != nil {
		return err
	}
	if err := c.Validate(); err != nil {
		return err
	}
	if from < 0 || from%sentChunk != 0 {
		return fmt.Errorf("replay %s: sent ids written from %d: start at a multiple of %d", a.ID, from, sentChunk)
	}
	n := from + len(a.Sent)
	if a.SentCount > n {
		return fmt.Errorf("replay %s: %d sent, and %d sent ids", a.ID, a.SentCount, n)
	}
	item, err := s.auditItem(a, n, c)
	if err != nil {
		return err
	}
	var puts []types.TransactWriteItem
	for _, ch := range s.chunkItems(a.ID, from, a.Sent) {
		puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: ch}})
	}
	puts = append(puts, types.TransactWriteItem{Put: &types.Put{TableName: aws.String(s.table), Item: item,
		ConditionExpression: aws.String(mine + " AND sent_n >= :from"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":me": str(c.Runner), ":now": num(s.clk.Now().UnixNano()),
			":from": num(int64(from))}}})
	for len(puts) > 0 {
		n := min(len(puts), maxTransactItems)
		_, err := s.api.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: puts[:n]})
		if err != nil {
			var tc *types.TransactionCanceledException
			if n == len(puts) && errors.As(err, &tc) && conditionalCancel(tc) {
				return s.writeRefused(ctx, a.ID, from)
			}
			return fmt.Errorf("awsstore: record replay audit %s in %s: %w", a.ID, s.table, err)
		}
		puts = puts[n:]
	}
	return nil
}

// writeRefused says why a write's condition failed: no such audit, ids
// that do not follow those it holds, or another replayer's claim.
func (s *ReplayAudits) writeRefused(ctx context.Context, id string, from int) error {
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: auditKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("awsstore: read replay audit %s from %s: %w", id, s.table, err)
	}
	_, n, ok, err := s.decodeAudit(out.Item)
	switch {
	case err != nil:
		return err
	case !ok:
		return fmt.Errorf("replay %s: %w: see `snavio replay list`", id, replay.ErrNotFound)
	case n < from:
		return fmt.Errorf("replay %s holds %d sent ids: a write from %d would leave a gap; write from %d", id, n, from, n/sentChunk*sentChunk)
	}
	return fmt.Errorf("replay %s: %w", id, replay.ErrRunning)
}

// conditionalCancel reports a transaction cancelled by a failed condition.
func conditionalCancel(tc *types.TransactionCanceledException) bool {
	for _, r := range tc.CancellationReasons {
		if aws.ToString(r.Code) == "ConditionalCheckFailed" {
			return true
		}
	}
	return false
}

// Head is audit id without its sent ids: one GetItem.
func (s *ReplayAudits) Head(ctx context.Context, id string) (wire.ReplayAudit, error) {
	a, _, _, err := s.head(ctx, id)
	return a, err
}

// Claimed is audit id without its sent ids when runner holds a live
// claim of it (one GetItem); replay.ErrNotClaimed otherwise.
func (s *ReplayAudits) Claimed(ctx context.Context, id, runner string) (wire.ReplayAudit, error) {
	a, _, item, err := s.head(ctx, id)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	who, _ := getS(item, attrRunner)
	until, uerr := getN(item, attrRunnerUntil)
	if who != runner || uerr != nil || until <= s.clk.Now().UnixNano() {
		return wire.ReplayAudit{}, fmt.Errorf("replay %s: %w", id, replay.ErrNotClaimed)
	}
	return a, nil
}

func (s *ReplayAudits) head(ctx context.Context, id string) (wire.ReplayAudit, int, map[string]types.AttributeValue, error) {
	if err := checkAuditID(id); err != nil {
		return wire.ReplayAudit{}, 0, nil, err
	}
	out, err := s.api.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(s.table), Key: auditKey(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return wire.ReplayAudit{}, 0, nil, fmt.Errorf("awsstore: read replay audit %s from %s: %w", id, s.table, err)
	}
	a, n, ok, err := s.decodeAudit(out.Item)
	if err != nil {
		return wire.ReplayAudit{}, 0, nil, err
	}
	if !ok {
		return wire.ReplayAudit{}, 0, nil, fmt.Errorf("replay %s: %w: see `snavio replay list`", id, replay.ErrNotFound)
	}
	return a, n, out.Item, nil
}

// Get is audit id with its sent ids: a GetItem, and a Query of the sent
// chunks when the run sent anything.
func (s *ReplayAudits) Get(ctx context.Context, id string) (wire.ReplayAudit, error) {
	a, n, _, err := s.head(ctx, id)
	if err != nil {
		return wire.ReplayAudit{}, err
	}
	if n > 0 {
		if a.Sent, err = s.readSent(ctx, id, n); err != nil {
			return wire.ReplayAudit{}, err
		}
	}
	return a, nil
}

// readSent reads the first n sent ids of audit id.
func (s *ReplayAudits) readSent(ctx context.Context, id string, n int) ([]string, error) {
	ids := make([]string, 0, n)
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(replaySentPrefix + id)},
	})
	for p.HasMorePages() && len(ids) < n {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsstore: read the ids replay %s sent from %s: %w", id, s.table, err)
		}
		for _, it := range page.Items {
			v, err := getS(it, attrIDs)
			if err != nil {
				return nil, corrupt(s.table, replaySentPrefix+id, err)
			}
			chunk, err := DecodeSentChunk(v)
			if err != nil {
				return nil, corrupt(s.table, replaySentPrefix+id, err)
			}
			ids = append(ids, chunk...)
		}
	}
	if len(ids) < n {
		return nil, corrupt(s.table, replaySentPrefix+id, fmt.Errorf("the audit records %d sent ids, its chunks hold %d", n, len(ids)))
	}
	return ids[:n], nil
}

// DecodeSentChunk reads a chunk's ids: non-empty, one per line, each a
// valid command id.
func DecodeSentChunk(v string) ([]string, error) {
	ids := strings.Split(v, "\n")
	if len(ids) > sentChunk {
		return nil, fmt.Errorf("a chunk of %d ids; at most %d", len(ids), sentChunk)
	}
	for _, id := range ids {
		if !envelope.ValidID(id) {
			return nil, fmt.Errorf("invalid command id %.60q in a chunk", id)
		}
	}
	return ids, nil
}

// decodeAudit reads an audit item: the audit without its sent ids, how
// many it sent, and false when there is no live item.
func (s *ReplayAudits) decodeAudit(item map[string]types.AttributeValue) (wire.ReplayAudit, int, bool, error) {
	if item == nil {
		return wire.ReplayAudit{}, 0, false, nil
	}
	id, _ := getS(item, attrSK)
	exp, err := expiresNS(item)
	if err != nil {
		return wire.ReplayAudit{}, 0, false, corrupt(s.table, replayPK+" "+id, err)
	}
	if exp <= s.clk.Now().UnixNano() {
		return wire.ReplayAudit{}, 0, false, nil
	}
	a, n, err := DecodeAuditItem(item)
	if err != nil {
		return wire.ReplayAudit{}, 0, false, corrupt(s.table, replayPK+" "+id, err)
	}
	if until, err := getN(item, attrRunnerUntil); a.Status == wire.ReplayRunning && (err != nil || until <= s.clk.Now().UnixNano()) {
		// Its replayer stopped without recording it (a crash, a kill).
		a.Status = wire.ReplayInterrupted
		if a.Error == "" {
			a.Error = "the replayer stopped during the replay: resume it with --resume " + a.ID
		}
	}
	return a, n, true, nil
}

// DecodeAuditItem reads an audit item's data and sent count; the audit's
// id must be the item's sort key.
func DecodeAuditItem(item map[string]types.AttributeValue) (wire.ReplayAudit, int, error) {
	sk, err := getS(item, attrSK)
	if err != nil {
		return wire.ReplayAudit{}, 0, err
	}
	data, err := getS(item, attrData)
	if err != nil {
		return wire.ReplayAudit{}, 0, err
	}
	n, err := getN(item, attrSentN)
	if err != nil {
		return wire.ReplayAudit{}, 0, err
	}
	if n < 0 || n > 1<<31 {
		return wire.ReplayAudit{}, 0, fmt.Errorf("sent count %d out of range", n)
	}
	var a wire.ReplayAudit
	if err := jsonv2.Unmarshal([]byte(data), &a); err != nil {
		return wire.ReplayAudit{}, 0, fmt.Errorf("audit data: %w", err)
	}
	if a.ID != sk {
		return wire.ReplayAudit{}, 0, fmt.Errorf("audit data names replay %.60q, its key %.60q", a.ID, sk)
	}
	a.Sent = nil
	return a, int(n), nil
}

// List is every live audit: a Query of the audits' partition,
// newest first. The audits come without their sent ids (Get has them).
func (s *ReplayAudits) List(ctx context.Context) ([]wire.ReplayAudit, error) {
	var out []wire.ReplayAudit
	p := dynamodb.NewQueryPaginator(s.api, &dynamodb.QueryInput{
		TableName: aws.String(s.table), ConsistentRead: aws.Bool(true),
		KeyConditionExpression:    aws.String("pk = :pk"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": str(replayPK)},
	})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("awsstore: list replay audits in %s: %w", s.table, err)
		}
		for _, it := range page.Items {
			a, _, ok, err := s.decodeAudit(it)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, a)
			}
		}
	}
	replay.NewestFirst(out)
	return out, nil
}
