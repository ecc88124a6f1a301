package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	ebtypes "github.com/aws/aws-sdk-go-v2/service/eventbridge/types"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	snstypes "github.com/aws/aws-sdk-go-v2/service/sns/types"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/rogpeppe/go-internal/testscript"
	"github.com/sivchari/kumo"

	"github.com/snavio/snavio/internal/deploy/stack"
	"github.com/snavio/snavio/internal/platform"
)

// awsCLIKey holds a script's aws-cli state (testscript.Env.Values).
type awsCLIKey struct{}

// awsCLIRuns numbers the scripts' environments: kumo keeps its state for
// the life of the process, which -count runs the scripts again in.
var awsCLIRuns atomic.Int64

type awsCLIState struct {
	mu        sync.Mutex
	kumoURL   string
	env       string
	tenant    string
	topicARN  string
	ownQueue  string
	rule      string
	assumed   []url.Values
	seq       uint64
	responded map[string]bool
	outcome   string
	cfg       aws.Config
}

func (st *awsCLIState) sqs() *sqs.Client {
	return sqs.NewFromConfig(st.cfg, func(o *sqs.Options) { o.BaseEndpoint = aws.String(st.kumoURL) })
}

func (st *awsCLIState) sns() *sns.Client {
	return sns.NewFromConfig(st.cfg, func(o *sns.Options) { o.BaseEndpoint = aws.String(st.kumoURL) })
}

// awsCLI implements the script command
//
//	aws-cli start ENV TENANT | assumed | publish SEQ JSON | respond delivered|invalid|none |
//	        await-tail | await-line FILE REGEXP | tail-queues | own-queue |
//	        stale-queue NAME | foreign-queue NAME | queue-exists NAME
//
// for send and tail on an aws profile against kumo (in-process; kumo's
// state is shared by the scripts of the binary, so each script names its
// own ENV, and "start" sets $AWSENV to ENV made unique to this run: the
// env the script's profile names). "start" serves kumo behind a proxy that records STS requests,
// points AWS_ENDPOINT_URL and test credentials at it, and on-boards
// TENANT as `snavio tenant apply` leaves it: the bus snavio-ENV-command-bus
// (with a rule whose target, a log group kumo does not deliver to, makes
// kumo record what is put on it), the telemetry topic and
// the tenant's own queue subscribed to it. "assumed" prints each
// AssumeRole's RoleArn and ExternalId. "publish" publishes a telemetry
// event of the tenant as the outbox does (snavio.seq SEQ). "respond"
// stands in for the dispatcher, which does not run here: each command put
// on the bus from then on gets an OUTCOME (delivered or invalid) event.
// "respond none" stops answering. "await-tail" waits for a tail's temporary queue to be subscribed,
// "await-line" for a line of FILE to match. "tail-queues" prints the
// number and names of the temporary queues subscribed to the tenant's
// topic, "own-queue" the number of messages in the tenant's own queue. "stale-queue" makes a
// queue (snavio-tail-<env>-NAME) tagged as a tail's that stopped refreshing 2 hours ago,
// "foreign-queue" an untagged one with the same prefix; "queue-exists"
// fails unless NAME exists (with !, unless it does not).
func awsCLI(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) == 0 {
		ts.Fatalf("usage: aws-cli start ENV TENANT | assumed | publish SEQ JSON | respond OUTCOME | await-tail | await-line FILE REGEXP | tail-queues | own-queue | stale-queue NAME | foreign-queue NAME | queue-exists NAME")
	}
	st := ts.Value(awsCLIKey{}).(*awsCLIState)
	if args[0] != "start" && args[0] != "await-line" && st.kumoURL == "" {
		ts.Fatalf("aws-cli %s: run aws-cli start first", args[0])
	}
	if neg && args[0] != "queue-exists" {
		ts.Fatalf("aws-cli %s does not take !", args[0])
	}
	ctx := context.Background()
	switch {
	case args[0] == "start" && len(args) == 3:
		env := fmt.Sprintf("%sx%d", args[1], awsCLIRuns.Add(1))
		ts.Setenv("AWSENV", env)
		awsCLIStart(ts, st, env, args[2])
	case args[0] == "assumed" && len(args) == 1:
		st.mu.Lock()
		for _, f := range st.assumed {
			fmt.Fprintf(ts.Stdout(), "RoleArn=%s ExternalId=%s\n", f.Get("RoleArn"), f.Get("ExternalId"))
		}
		st.mu.Unlock()
	case args[0] == "publish" && len(args) == 3:
		seq, err := strconv.ParseUint(args[1], 10, 64)
		ts.Check(err)
		ts.Check(st.publish(seq, args[2]))
	case args[0] == "respond" && len(args) == 2 && (args[1] == "delivered" || args[1] == "invalid" || args[1] == "none"):
		st.mu.Lock()
		started := st.responded != nil
		st.outcome = args[1]
		st.mu.Unlock()
		if !started {
			awsCLIRespond(ts, st)
		}
	case args[0] == "await-tail" && len(args) == 1:
		deadline := time.Now().Add(30 * time.Second)
		for len(st.tailQueues(ts)) == 0 {
			if time.Now().After(deadline) {
				ts.Fatalf("aws-cli await-tail: no temporary queue subscribed to %s within 30s", st.topicARN)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case args[0] == "await-line" && len(args) == 3:
		re, err := regexp.Compile(args[2])
		ts.Check(err)
		deadline := time.Now().Add(30 * time.Second)
		for {
			b, _ := os.ReadFile(ts.MkAbs(args[1]))
			for _, l := range strings.Split(string(b), "\n") {
				if re.MatchString(l) {
					return
				}
			}
			if time.Now().After(deadline) {
				ts.Fatalf("aws-cli await-line: no line of %s matched %q within 30s:\n%s", args[1], args[2], b)
			}
			time.Sleep(20 * time.Millisecond)
		}
	case args[0] == "tail-queues" && len(args) == 1:
		qs := st.tailQueues(ts)
		fmt.Fprintf(ts.Stdout(), "%d temporary queue(s)\n", len(qs))
		for _, q := range qs {
			fmt.Fprintln(ts.Stdout(), q)
		}
	case args[0] == "own-queue" && len(args) == 1:
		a, err := st.sqs().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(st.ownQueue), AttributeNames: []sqstypes.QueueAttributeName{"ApproximateNumberOfMessages"}})
		ts.Check(err)
		fmt.Fprintln(ts.Stdout(), a.Attributes["ApproximateNumberOfMessages"])
	case args[0] == "stale-queue" && len(args) == 2:
		old := time.Now().Add(-2 * time.Hour).UTC().Format(time.RFC3339)
		_, err := st.sqs().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(st.tailPrefix(ts) + args[1]),
			Tags: map[string]string{platform.TagTail: "crashed@host pid 1", platform.TagTailCreated: old, platform.TagTailAlive: old, platform.TagTailTenant: st.tenant}})
		ts.Check(err)
	case args[0] == "foreign-queue" && len(args) == 2:
		_, err := st.sqs().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(st.tailPrefix(ts) + args[1])})
		ts.Check(err)
	case args[0] == "queue-exists" && len(args) == 2:
		_, err := st.sqs().GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: aws.String(st.tailPrefix(ts) + args[1])})
		if (err == nil) == neg {
			ts.Fatalf("aws-cli queue-exists %s: exists %v", args[1], err == nil)
		}
	default:
		ts.Fatalf("aws-cli: bad arguments %q", args)
	}
}

func awsCLIStart(ts *testscript.TestScript, st *awsCLIState, env, tenant string) {
	srv := kumo.NewServer()
	ts.Defer(srv.Close)
	target, _ := url.Parse(srv.URL)
	rp := httputil.NewSingleHostReverseProxy(target)
	rp.ErrorLog = log.New(io.Discard, "", 0) // an interrupted tail's poll is not news
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Amz-Target") == "" && r.Body != nil {
			b, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(b))
			if f, err := url.ParseQuery(string(b)); err == nil && f.Get("Action") == "AssumeRole" {
				st.mu.Lock()
				st.assumed = append(st.assumed, f)
				st.mu.Unlock()
			}
		}
		rp.ServeHTTP(w, r)
	}))
	ts.Defer(proxy.Close)
	st.kumoURL, st.env, st.tenant = srv.URL, env, tenant
	st.cfg = aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider("AKIDSCRIPT", "script", "")}
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": proxy.URL, "AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "AKIDSCRIPT",
		"AWS_SECRET_ACCESS_KEY": "script", "AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": ts.MkAbs("no-aws-config"),
		"AWS_SHARED_CREDENTIALS_FILE": ts.MkAbs("no-aws-credentials")} {
		ts.Setenv(k, v)
	}
	ctx := context.Background()
	eb := eventbridge.NewFromConfig(st.cfg, func(o *eventbridge.Options) { o.BaseEndpoint = aws.String(srv.URL) })
	bus := "snavio-" + env + "-command-bus"
	_, err := eb.CreateEventBus(ctx, &eventbridge.CreateEventBusInput{Name: aws.String(bus)})
	ts.Check(err)
	st.rule = "capture-" + env
	_, err = eb.PutRule(ctx, &eventbridge.PutRuleInput{Name: aws.String(st.rule), EventBusName: aws.String(bus), EventPattern: aws.String(`{"detail-type":["snavio.command-sent"]}`)})
	ts.Check(err)
	_, err = eb.PutTargets(ctx, &eventbridge.PutTargetsInput{Rule: aws.String(st.rule), EventBusName: aws.String(bus),
		Targets: []ebtypes.Target{{Id: aws.String("capture"), Arn: aws.String("arn:aws:logs:us-east-1:000000000000:log-group:/snavio/capture-" + env)}}})
	ts.Check(err)
	name := "snavio-" + env + "-telemetry-" + tenant
	tp, err := st.sns().CreateTopic(ctx, &sns.CreateTopicInput{Name: aws.String(name)})
	ts.Check(err)
	st.topicARN = aws.ToString(tp.TopicArn)
	q, err := st.sqs().CreateQueue(ctx, &sqs.CreateQueueInput{QueueName: aws.String(name)})
	ts.Check(err)
	st.ownQueue = aws.ToString(q.QueueUrl)
	_, err = st.sns().Subscribe(ctx, &sns.SubscribeInput{TopicArn: tp.TopicArn, Protocol: aws.String("sqs"), Endpoint: aws.String("arn:aws:sqs:us-east-1:000000000000:" + name)})
	ts.Check(err)
}

// publish publishes a telemetry event of the tenant as the outbox does
// (awsstore.SNSPublisher's attributes).
func (st *awsCLIState) publish(seq uint64, event string) error {
	var head struct{ Event string }
	if err := json.Unmarshal([]byte(event), &head); err != nil {
		return fmt.Errorf("aws-cli publish: %v", err)
	}
	_, err := st.sns().Publish(context.Background(), &sns.PublishInput{TopicArn: aws.String(st.topicARN), Message: aws.String(event),
		MessageAttributes: map[string]snstypes.MessageAttributeValue{
			"snavio.event":  {DataType: aws.String("String"), StringValue: aws.String(head.Event)},
			"snavio.tenant": {DataType: aws.String("String"), StringValue: aws.String(st.tenant)},
			"snavio.seq":    {DataType: aws.String("Number"), StringValue: aws.String(strconv.FormatUint(seq, 10))},
		}})
	return err
}

// awsCLIRespond polls what kumo's bus delivered to the capture rule and
// publishes outcome for each command not answered yet, until the script
// ends.
func awsCLIRespond(ts *testscript.TestScript, st *awsCLIState) {
	stop := make(chan struct{})
	done := make(chan struct{})
	ts.Defer(func() { close(stop); <-done })
	st.mu.Lock()
	if st.responded == nil {
		st.responded = map[string]bool{}
	}
	st.mu.Unlock()
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			resp, err := http.Get(st.kumoURL + "/kumo/eventbridge/delivered-events")
			if err != nil {
				continue
			}
			var evs []struct{ RuleName, Source, Detail string }
			_ = json.NewDecoder(resp.Body).Decode(&evs)
			resp.Body.Close()
			for _, e := range evs {
				var d struct {
					Metadata struct {
						ID string `json:"id"`
					} `json:"metadata"`
				}
				if e.RuleName != st.rule || json.Unmarshal([]byte(e.Detail), &d) != nil || d.Metadata.ID == "" {
					continue
				}
				st.mu.Lock()
				seen := st.responded[d.Metadata.ID]
				st.responded[d.Metadata.ID] = true
				outcome := st.outcome
				st.seq++
				seq := st.seq
				st.mu.Unlock()
				if seen || outcome == "none" {
					continue
				}
				ev := fmt.Sprintf(`{"event":"snavio.command.delivered","command_id":%q,"source":%q,"target":"mailer","command_name":"send","path":"fast"}`, d.Metadata.ID, e.Source)
				if outcome == "invalid" {
					ev = fmt.Sprintf(`{"event":"snavio.command.invalid","command_id":%q,"source":%q,"reason":"bad_signature"}`, d.Metadata.ID, e.Source)
				}
				_ = st.publish(seq, ev) // a failure shows as send --wait's timeout
			}
		}
	}()
}

// tailPrefix starts the names of the tenant's temporary tail queues.
func (st *awsCLIState) tailPrefix(ts *testscript.TestScript) string {
	p, err := stack.Names{Env: st.env}.TailQueuePrefix(st.tenant)
	ts.Check(err)
	return p
}

// tailQueues are the temporary queues set up for the tenant's topic: named
// and tagged as tail makes them, with a subscription to the topic.
func (st *awsCLIState) tailQueues(ts *testscript.TestScript) []string {
	ctx := context.Background()
	lq, err := st.sqs().ListQueues(ctx, &sqs.ListQueuesInput{QueueNamePrefix: aws.String(st.tailPrefix(ts))})
	ts.Check(err)
	var out []string
	for _, u := range lq.QueueUrls {
		tags, err := st.sqs().ListQueueTags(ctx, &sqs.ListQueueTagsInput{QueueUrl: aws.String(u)})
		if err != nil || !strings.HasPrefix(tags.Tags[platform.TagTailSubscription], st.topicARN+":") {
			continue
		}
		out = append(out, u[strings.LastIndexByte(u, '/')+1:])
	}
	sort.Strings(out)
	return out
}
