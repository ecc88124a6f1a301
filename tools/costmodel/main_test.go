package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func params() Params {
	return Params{FastShare: 0.9, IngestMB: 1024, SlowMB: 1024, OutboxMB: 256,
		IngestCPU: 10 * time.Microsecond, SlowCPU: 40 * time.Microsecond, OutboxCPU: 20 * time.Microsecond, SDKCallCPU: 200 * time.Microsecond,
		SQSWait: 6 * time.Millisecond, DynamoWait: 4 * time.Millisecond, SNSWait: 8 * time.Millisecond,
		SlowBatch: 10, OutboxBatch: 100, SNSBatch: 10, KeepBatch: 50, EventKB: 1}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-6 }

// TestModelArithmetic checks the model against the sums done by hand
// (docs/cost.md shows the same steps).
func TestModelArithmetic(t *testing.T) {
	r := Model(params(), ListPrices)
	// Telemetry per event: 2 WRU plus 2/50 of the sequence item at
	// $0.625/M; the outbox function billed ceil(100*20us + 10*(8ms+0.2ms))
	// = 84 ms at 0.25 GB per 100 events; 1/100 request; 1/10 PublishBatch.
	event := 2.04*0.625 + 0.01*0.2 + 0.084*0.25/100*13.3334 + 0.1*0.5
	if r.OutboxMS != 84 || r.IngestMS != 7 || r.SlowMS != 151 {
		t.Errorf("billed ms: outbox %v ingest %v slow %v, want 84, 7 (10us+200us+6ms), 151 (10*(40us+600us+8ms+6ms)+200us+4ms)", r.OutboxMS, r.IngestMS, r.SlowMS)
	}
	fast := 1 + 0.2 + 0.007*13.3334 + 0.4 + event
	slow := 1 + 0.2 + 0.007*13.3334 + 1.2*0.4 + 0.1*0.2 + 0.0151*13.3334 + 2*0.625 + 0.4 + 2*event
	if !near(r.FastPerM, fast) || !near(r.SlowPerM, slow) {
		t.Errorf("fast $%v slow $%v, want $%v and $%v", r.FastPerM, r.SlowPerM, fast, slow)
	}
	if want := 0.9*fast + 0.1*slow; !near(r.TotalPerM, want) || !near(want, 3.351247245) {
		t.Errorf("total $%v, want $%v (3.351247245)", r.TotalPerM, want)
	}
	p := params()
	p.FastShare = 0
	if r0 := Model(p, ListPrices); !near(r0.TotalPerM, slow) {
		t.Errorf("all slow: $%v, want $%v", r0.TotalPerM, slow)
	}
}

func TestBenchNS(t *testing.T) {
	out := `goos: linux
BenchmarkFastDispatch-2   	 20000	     9000 ns/op	  68.11 MB/s	    1328 B/op	       3 allocs/op
BenchmarkFastDispatch-2   	 20000	     5000 ns/op
BenchmarkFastDispatch-2   	 20000	     7000 ns/op
BenchmarkStrictSlowPath   	 20000	    30000 ns/op
BenchmarkFastDispatchParallel-2  20000  1 ns/op
`
	got, err := benchNS(strings.NewReader(out), "FastDispatch", "StrictSlowPath")
	if err != nil {
		t.Fatal(err)
	}
	if got["FastDispatch"] != 7000 || got["StrictSlowPath"] != 30000 {
		t.Errorf("medians %v, want 7000 and 30000", got)
	}
	if _, err := benchNS(strings.NewReader(out), "FastDispatch", "Missing"); err == nil || !strings.Contains(err.Error(), "BenchmarkMissing") {
		t.Errorf("missing benchmark: %v", err)
	}
}

func TestRun(t *testing.T) {
	bench := filepath.Join(t.TempDir(), "bench")
	if err := os.WriteFile(bench, []byte("BenchmarkFastDispatch-2 1 10000 ns/op\nBenchmarkStrictSlowPath-2 1 40000 ns/op\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		code int
		out  string // in stdout (0, 1) or stderr (2)
	}{
		{"table", []string{"-bench", bench, "-sdk-call-cpu", "200us"}, 0, "total at 90% fast: $3.3"},
		{"json", []string{"-bench", bench, "-sdk-call-cpu", "200us", "-json"}, 0, `"TotalPerM": 3.3`},
		{"measured SDK call", []string{"-bench", bench}, 0, "SDK call"},
		{"over the goal", []string{"-bench", bench, "-sdk-call-cpu", "200us", "-goal", "1"}, 1, "total at 90% fast"},
		{"no bench", nil, 2, "-bench is required"},
		{"missing file", []string{"-bench", bench + ".none"}, 2, "-bench"},
		{"bad share", []string{"-bench", bench, "-fast-share", "1.5"}, 2, "-fast-share 1.5"},
		{"bad memory and batch", []string{"-bench", bench, "-ingest-mb", "64", "-sns-batch", "11"}, 2, "-ingest-mb 64"},
		{"bad flag", []string{"-nope"}, 2, "-nope"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(tc.args, &stdout, &stderr)
		where := stdout.String()
		if tc.code == 2 {
			where = stderr.String()
		}
		if code != tc.code || !strings.Contains(where, tc.out) {
			t.Errorf("%s: exit %d, want %d with %q in:\n%s%s", tc.name, code, tc.code, tc.out, stdout.String(), stderr.String())
		}
	}
}
