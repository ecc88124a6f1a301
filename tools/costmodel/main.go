// Command costmodel prints what one million commands cost on AWS: each
// priced item of the fast path, the slow path and the telemetry of a
// command, from the CPU per command measured by the dispatcher's
// benchmarks, the CPU of one AWS SDK call measured in this run, the
// functions' memory sizes and list prices (docs/cost.md).
//
//	go test -run '^$' -bench '^Benchmark(FastDispatch|StrictSlowPath)$' ./pkg/dispatch/ > cost.bench
//	go run ./tools/costmodel -bench cost.bench -fast-share 0.9
//
// It exits 1 when the total is over -goal (dollars per million), 2 on
// bad input.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("costmodel", flag.ContinueOnError)
	fs.SetOutput(stderr)
	p := Params{}
	bench := fs.String("bench", "", "`file` of go test -bench output holding BenchmarkFastDispatch and BenchmarkStrictSlowPath (make cost writes it)")
	fs.Float64Var(&p.FastShare, "fast-share", 0.9, "share of commands the fast stage delivers, 0 to 1")
	fs.IntVar(&p.IngestMB, "ingest-mb", 1024, "memory of the ingest function, MB")
	fs.IntVar(&p.SlowMB, "slow-mb", 1024, "memory of the slow function, MB")
	fs.IntVar(&p.OutboxMB, "outbox-mb", 256, "memory of the outbox function, MB")
	fs.DurationVar(&p.OutboxCPU, "outbox-cpu", 20*time.Microsecond, "CPU per telemetry event in the outbox function (stream record decode, batching)")
	fs.DurationVar(&p.SDKCallCPU, "sdk-call-cpu", 0, "CPU of one AWS SDK call; 0 measures it in this run")
	fs.DurationVar(&p.SQSWait, "sqs-wait", 6*time.Millisecond, "round trip of an SQS call in the region")
	fs.DurationVar(&p.DynamoWait, "dynamodb-wait", 4*time.Millisecond, "round trip of a DynamoDB call in the region")
	fs.DurationVar(&p.SNSWait, "sns-wait", 8*time.Millisecond, "round trip of an SNS PublishBatch in the region")
	fs.IntVar(&p.SlowBatch, "slow-batch", 10, "escalations per slow invocation (event source mapping batch)")
	fs.IntVar(&p.OutboxBatch, "outbox-batch", 100, "stream records per outbox invocation")
	fs.IntVar(&p.SNSBatch, "sns-batch", 10, "events per SNS PublishBatch")
	fs.IntVar(&p.KeepBatch, "keep-batch", 99, "telemetry events per outbox transaction of the ingest function")
	fs.Float64Var(&p.EventKB, "event-kb", 1, "size of one telemetry event's outbox item, KB")
	goal := fs.Float64("goal", 5, "the goal, dollars per million commands at -fast-share")
	asJSON := fs.Bool("json", false, "print JSON instead of a table")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: costmodel -bench FILE [flags]\n\nPrints the AWS cost of one million commands (docs/cost.md).")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if err := p.check(); err != nil {
		fmt.Fprintln(stderr, "costmodel:", err)
		return 2
	}
	if *bench == "" {
		fmt.Fprintln(stderr, "costmodel: -bench is required: give the output of `go test -run '^$' -bench '^Benchmark(FastDispatch|StrictSlowPath)$' ./pkg/dispatch/` (make cost runs it)")
		return 2
	}
	f, err := os.Open(*bench)
	if err != nil {
		fmt.Fprintln(stderr, "costmodel: -bench:", err)
		return 2
	}
	ns, err := benchNS(f, "FastDispatch", "StrictSlowPath")
	_ = f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "costmodel: -bench %s: %v\n", *bench, err)
		return 2
	}
	p.IngestCPU, p.SlowCPU = time.Duration(ns["FastDispatch"]), time.Duration(ns["StrictSlowPath"])
	if p.SDKCallCPU == 0 {
		if p.SDKCallCPU, err = measureSDKCall(2000); err != nil {
			fmt.Fprintln(stderr, "costmodel: measuring an SDK call:", err)
			return 2
		}
	}
	r := Model(p, ListPrices)
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(struct {
			PricesAsOf string
			Prices     Prices
			Params     Params
			Result     Result
		}{PricesAsOf, ListPrices, p, r})
	} else {
		print(stdout, p, r)
	}
	if r.TotalPerM > *goal {
		fmt.Fprintf(stderr, "costmodel: $%.2f per million commands is over the goal of $%.2f\n", r.TotalPerM, *goal)
		return 1
	}
	return 0
}

// check reports every bad parameter at once.
func (p Params) check() error {
	var errs []error
	if p.FastShare < 0 || p.FastShare > 1 {
		errs = append(errs, fmt.Errorf("-fast-share %v: give a share from 0 to 1", p.FastShare))
	}
	for _, m := range []struct {
		name string
		mb   int
	}{{"-ingest-mb", p.IngestMB}, {"-slow-mb", p.SlowMB}, {"-outbox-mb", p.OutboxMB}} {
		if m.mb < 128 || m.mb > 10240 {
			errs = append(errs, fmt.Errorf("%s %d: Lambda takes 128 to 10240 MB", m.name, m.mb))
		}
	}
	for _, b := range []struct {
		name string
		n    int
	}{{"-slow-batch", p.SlowBatch}, {"-outbox-batch", p.OutboxBatch}, {"-sns-batch", p.SNSBatch}, {"-keep-batch", p.KeepBatch}} {
		if b.n < 1 {
			errs = append(errs, fmt.Errorf("%s %d: give 1 or more", b.name, b.n))
		}
	}
	if p.SNSBatch > 10 {
		errs = append(errs, fmt.Errorf("-sns-batch %d: PublishBatch takes at most 10 messages", p.SNSBatch))
	}
	if p.KeepBatch > 99 {
		errs = append(errs, fmt.Errorf("-keep-batch %d: one transaction holds at most 99 events beside the sequence item", p.KeepBatch))
	}
	if p.EventKB <= 0 || p.EventKB > 400 {
		errs = append(errs, fmt.Errorf("-event-kb %v: give an item size above 0 and at most 400 KB", p.EventKB))
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{{"-outbox-cpu", p.OutboxCPU}, {"-sdk-call-cpu", p.SDKCallCPU}, {"-sqs-wait", p.SQSWait}, {"-dynamodb-wait", p.DynamoWait}, {"-sns-wait", p.SNSWait}} {
		if d.v < 0 {
			errs = append(errs, fmt.Errorf("%s %v: give a duration of 0 or more", d.name, d.v))
		}
	}
	return errors.Join(errs...)
}

// benchNS returns the median ns/op of each named benchmark in go test
// -bench output.
func benchNS(r io.Reader, names ...string) (map[string]float64, error) {
	runs := map[string][]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") {
			continue
		}
		name := strings.TrimPrefix(f[0], "Benchmark")
		if i := strings.LastIndexByte(name, '-'); i > 0 {
			name = name[:i]
		}
		for i := 2; i+1 < len(f); i += 2 {
			if f[i+1] == "ns/op" {
				if v, err := strconv.ParseFloat(f[i], 64); err == nil && v > 0 {
					runs[name] = append(runs[name], v)
				}
			}
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	out := map[string]float64{}
	var missing []string
	for _, n := range names {
		v := runs[n]
		if len(v) == 0 {
			missing = append(missing, "Benchmark"+n)
			continue
		}
		sort.Float64s(v)
		out[n] = v[len(v)/2]
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("no ns/op for %s: run them with -bench", strings.Join(missing, ", "))
	}
	return out, nil
}

// measureSDKCall returns the CPU time (user and system, this process) of
// one SQS SendMessage with a 1 KiB body through the AWS SDK against a
// local server answering at once: signing, HTTP and decoding, plus the
// trivial server's own share (so it errs high).
func measureSDKCall(n int) (time.Duration, error) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/x-amz-json-1.0")
		_, _ = io.WriteString(w, `{"MessageId":"5fea7756-0ea4-451a-a703-a558b933e274","MD5OfMessageBody":"0"}`)
	}))
	defer srv.Close()
	c := sqs.New(sqs.Options{Region: "us-east-1", BaseEndpoint: aws.String(srv.URL),
		Credentials: credentials.NewStaticCredentialsProvider("AKIDEXAMPLE", "secret", ""), DisableMessageChecksumValidation: true})
	body := aws.String(strings.Repeat("x", 1024))
	in := &sqs.SendMessageInput{QueueUrl: aws.String(srv.URL + "/123456789012/q"), MessageBody: body}
	ctx := context.Background()
	for range 50 {
		if _, err := c.SendMessage(ctx, in); err != nil {
			return 0, err
		}
	}
	before, err := cpuTime()
	if err != nil {
		return 0, err
	}
	for range n {
		if _, err := c.SendMessage(ctx, in); err != nil {
			return 0, err
		}
	}
	after, err := cpuTime()
	if err != nil {
		return 0, err
	}
	return (after - before) / time.Duration(n), nil
}

func cpuTime() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

func print(w io.Writer, p Params, r Result) {
	fmt.Fprintf(w, "AWS cost per million commands: us-east-1 list prices as of %s (docs/cost.md)\n", PricesAsOf)
	fmt.Fprintf(w, "measured CPU: ingest %v/command (BenchmarkFastDispatch), slow %v/command (BenchmarkStrictSlowPath), SDK call %v (this run)\n",
		p.IngestCPU.Round(10*time.Nanosecond), p.SlowCPU.Round(10*time.Nanosecond), p.SDKCallCPU.Round(100*time.Nanosecond))
	fmt.Fprintf(w, "billed: ingest %.0f ms at %d MB, slow %.0f ms per batch of %d at %d MB, outbox %.0f ms per %d events at %d MB (arm64)\n\n",
		r.IngestMS, p.IngestMB, r.SlowMS, p.SlowBatch, p.SlowMB, r.OutboxMS, p.OutboxBatch, p.OutboxMB)
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "path\titem\tper command\tunit price $\t$ per 1M\t")
	for _, ls := range [][]Line{r.Telemetry, r.Fast, r.Slow} {
		for _, l := range ls {
			fmt.Fprintf(tw, "%s\t%s\t%.4g\t%.4g\t%.3f\t\n", l.Path, l.Item, l.Units, l.UnitPrice, l.PerM)
		}
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "\nfast path $%.2f, slow path $%.2f per million commands of the path\n", r.FastPerM, r.SlowPerM)
	fmt.Fprintf(w, "total at %.0f%% fast: $%.2f per million commands\n", p.FastShare*100, r.TotalPerM)
}
