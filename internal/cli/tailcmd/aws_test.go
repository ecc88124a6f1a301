package tailcmd

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sns"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	tea "charm.land/bubbletea/v2"
	"github.com/charmbracelet/x/exp/teatest/v2"

	"github.com/snavio/snavio/internal/cli/cmdutil"
	"github.com/snavio/snavio/internal/config"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/iostreams"
	"github.com/snavio/snavio/internal/output"
	"github.com/snavio/snavio/internal/platform"
	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
	tuitail "github.com/snavio/snavio/internal/tui/tail"
	"github.com/snavio/snavio/internal/tui/tail/tailtest"
)

var emu awstest.Emulators

func TestMain(m *testing.M) {
	code := m.Run()
	emu.Close()
	os.Exit(code)
}

// hookWriter is a buffer that calls on with each write's text.
type hookWriter struct {
	mu  sync.Mutex
	buf bytes.Buffer
	on  func(string)
}

func (w *hookWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	n, err := w.buf.Write(p)
	w.mu.Unlock()
	if w.on != nil {
		w.on(string(p))
	}
	return n, err
}

func (w *hookWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}

// awsTail is a tail of tenant acme on an aws profile pointed at kumo,
// with the topic on-boarded; publish publishes an event as the outbox.
func awsTail(t *testing.T, args ...string) (o *Options, out, errOut *hookWriter, publish func(seq uint64, ev string), sq *sqs.Client) {
	t.Helper()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": "AKIDCALLER", "AWS_SECRET_ACCESS_KEY": "s", "AWS_CONFIG_FILE": "/nonexistent",
		"AWS_SHARED_CREDENTIALS_FILE": "/nonexistent", "AWS_EC2_METADATA_DISABLED": "true", "AWS_ENDPOINT_URL": "", "AWS_PROFILE": ""} {
		t.Setenv(k, v)
	}
	k := emu.Kumo()
	env := emu.UniqueName()
	sn := sns.NewFromConfig(k.Config(), k.SNSOptions()...)
	if _, err := sn.CreateTopic(context.Background(), &sns.CreateTopicInput{Name: awssdk.String("snavio-" + env + "-telemetry-acme")}); err != nil {
		t.Fatal(err)
	}
	pub, err := awsstore.NewSNSPublisher(awsstore.Config{Env: env, AWSConfig: k.Config(), SNSOptions: k.SNSOptions(), AccountID: "000000000000"})
	if err != nil {
		t.Fatal(err)
	}
	publish = func(seq uint64, ev string) {
		var head struct{ Event string }
		_ = json.Unmarshal([]byte(ev), &head)
		if f := pub.Publish(context.Background(), []awsstore.TelemetryMessage{{Tenant: "acme", Seq: seq, Name: head.Event, Event: []byte(ev)}}); len(f) > 0 {
			t.Errorf("publish: %+v", f)
		}
	}
	o, err = parse(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut = &hookWriter{}, &hookWriter{}
	o.IO = &iostreams.IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errOut}
	p, err := platform.New(&config.Settings{Kind: config.KindAWS, Region: "us-east-1", EndpointURL: k.Endpoint,
		EmitRoleARN: "arn:aws:iam::000000000000:role/snavio/" + env + "/emit/snavio-" + env + "-emit-acme"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	o.Platform = func() (platform.Platform, error) { return p, nil }
	o.Printer = func() (*output.Printer, error) { return output.NewPrinter(out, output.NDJSON, output.Styles{}), nil }
	o.AWSTelemetryOptions = func(a *platform.AWSTelemetryOptions) { a.Reorder = 20 * time.Millisecond }
	return o, out, errOut, publish, sqs.NewFromConfig(k.Config(), k.SQSOptions()...)
}

func TestTailOnAWSPrintsNDJSONAndDeletesItsQueue(t *testing.T) {
	o, out, errOut, publish, sq := awsTail(t, "--type", "failed")
	ctx, cancel := context.WithCancel(context.Background())
	o.Context = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	// Once subscribed (tail says so), the outbox publishes a delivered
	// event (filtered out) and a failed one; the first line printed ends
	// the run, as Ctrl-C would.
	errOut.on = func(s string) {
		if strings.Contains(s, "through the temporary queue") {
			publish(1, `{"event":"snavio.command.delivered","command_id":"c-1","source":"acme/billing","target":"mailer","command_name":"send","path":"fast"}`)
			publish(2, `{"event":"snavio.command.failed","command_id":"c-2","source":"acme/billing","target":"mailer","command_name":"send","reason":"acl_deny"}`)
		}
	}
	out.on = func(string) { cancel() }
	done := make(chan error, 1)
	go func() { done <- Run(o) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("tail did not print the published event")
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var rec wire.TelemetryRecord
	if len(lines) != 1 || json.Unmarshal([]byte(lines[0]), &rec) != nil || rec.Seq != 2 || rec.Tenant != "acme" || !strings.Contains(string(rec.Event), `"command_id":"c-2"`) {
		t.Fatalf("stdout:\n%s", out)
	}
	// The queue tail named on stderr is gone.
	m := strings.SplitAfter(errOut.String(), "temporary queue ")
	if len(m) < 2 {
		t.Fatalf("stderr:\n%s", errOut)
	}
	queue, _, _ := strings.Cut(m[1], " ")
	if !regexp.MustCompile(`^snavio-[a-z0-9-]+-tail-acme_q[0-9a-f]{12}$`).MatchString(queue) {
		t.Fatalf("queue %q from stderr:\n%s", queue, errOut)
	}
	if _, err := sq.GetQueueUrl(context.Background(), &sqs.GetQueueUrlInput{QueueName: awssdk.String(queue)}); err == nil {
		t.Errorf("queue %s still exists after tail ended", queue)
	}
}

func TestTailOnAWSRefusesLocalOnlyFlags(t *testing.T) {
	for args, want := range map[string]string{
		"--since 10m":                "drop --since",
		"--follow=false":             "drop --follow=false",
		"--tenant acme --ack":        "drop --ack",
		"--tenant bad.but.valid.xyz": "no telemetry topic",
	} {
		o, _, _, _, _ := awsTail(t, strings.Split(args, " ")...)
		o.Context = func() (context.Context, context.CancelFunc) { return context.WithCancel(context.Background()) }
		err := Run(o)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
			continue
		}
		if want != "no telemetry topic" && cmdutil.ExitCode(err) != cmdutil.ExitUsage {
			t.Errorf("%s: exit %d, want usage", args, cmdutil.ExitCode(err))
		}
	}
}

func TestRetryableAWSSteps(t *testing.T) {
	if ok, _ := retryable(&platform.StepError{Step: "ReceiveMessage", Retryable: true}); !ok {
		t.Error("an unreachable SQS is not retried")
	}
	if ok, _ := retryable(&platform.StepError{Step: "ReceiveMessage"}); ok {
		t.Error("a gone queue is retried")
	}
}

// The terminal UI on aws: the same model, fed by the same Follower; an
// event that never reaches tail's queue is counted missing.
func TestTailOnAWSTerminalUI(t *testing.T) {
	o, _, errOut, publish, _ := awsTail(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o.Context = func() (context.Context, context.CancelFunc) { return ctx, cancel }
	o.IO.SetStdoutTTY(true)
	o.IO.SetStdinTTY(true)
	o.IO.DisableColor()
	o.Printer = func() (*output.Printer, error) {
		return output.NewPrinter(o.IO.Out, output.Table, output.Styles{}), nil
	}
	o.RunUI = func(ctx context.Context, m tea.Model, _ io.Reader, _ io.Writer, _ bool) error {
		m, screens := tailtest.Observe(m)
		tm := teatest.NewTestModel(t, m, teatest.WithInitialTermSize(120, 20))
		publish(1, `{"event":"snavio.command.delivered","command_id":"c-1","source":"acme/billing","target":"mailer","command_name":"send","path":"fast"}`)
		publish(3, `{"event":"snavio.command.failed","command_id":"c-3","source":"acme/billing","target":"mailer","command_name":"send","reason":"acl_deny"}`)
		screens.WaitFor(t, "failed 1")
		tm.Send(tea.KeyPressMsg{Code: 'c', Mod: tea.ModCtrl})
		fm := tailtest.Unwrap(tm.FinalModel(t, teatest.WithFinalTimeout(5*time.Second))).(tuitail.Model)
		if st := fm.Stats(); st.Received != 2 || st.Missing != 1 || st.Duplicates != 0 {
			t.Errorf("UI stats %+v; want 2 received and #2 missing", st)
		}
		return nil
	}
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(errOut.String(), "deleted on exit") {
		t.Errorf("stderr:\n%s", errOut)
	}
}
