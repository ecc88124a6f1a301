package logagg

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/clock"
)

// lines is what a text handler over buf wrote, one string per line.
func lines(buf *bytes.Buffer) []string {
	s := strings.TrimSpace(buf.String())
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

func newTest(o Options) (*slog.Logger, *Handler, *bytes.Buffer, *clock.Fake) {
	clk := clock.NewFake(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	o.Clock = clk
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}), o)
	return slog.New(h), h, &buf, clk
}

func TestFirstPassesRepeatsCountedAtIntervalEnd(t *testing.T) {
	log, h, buf, clk := newTest(Options{Interval: 10 * time.Second})
	for i := range 1000 {
		log.Warn("slow stage failed; will retry", "attempt", i)
		clk.Advance(time.Millisecond)
	}
	got := lines(buf)
	if len(got) != 1 || !strings.Contains(got[0], `msg="slow stage failed; will retry" attempt=0`) {
		t.Fatalf("within the interval: want only the first record with its attributes, got %q", got)
	}
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(buf)); n != 1 {
		t.Fatalf("Flush before the interval ended wrote %d lines, want 1 (nothing new)", n)
	}
	clk.Advance(9 * time.Second)
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	got = lines(buf)
	if len(got) != 2 || !strings.Contains(got[1], "level=WARN") || !strings.Contains(got[1], `msg="slow stage failed; will retry" suppressed=999 interval=10s`) {
		t.Fatalf("after the interval: want one count line of 999 repeats at WARN, got %q", got)
	}
	// A new interval starts with the next record, passed through again.
	log.Warn("slow stage failed; will retry", "attempt", 1000)
	if got := lines(buf); len(got) != 3 || !strings.Contains(got[2], "attempt=1000") {
		t.Fatalf("the first record of the next interval was not passed through: %q", got)
	}
}

func TestIntervalWithoutRepeatsLogsNothingMore(t *testing.T) {
	log, h, buf, clk := newTest(Options{Interval: time.Second})
	log.Error("one-off")
	clk.Advance(time.Second)
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	if got := lines(buf); len(got) != 1 {
		t.Fatalf("want the record alone, got %q", got)
	}
	if n := len(h.c.keys); n != 0 {
		t.Fatalf("an ended window was kept: %d keys", n)
	}
}

func TestRecordAfterIntervalEndsLogsCountThenPasses(t *testing.T) {
	// No Flush between: the next record ends its window itself.
	log, _, buf, clk := newTest(Options{Interval: time.Second})
	log.Info("x", "n", 1)
	log.Info("x", "n", 2)
	log.Info("x", "n", 3)
	clk.Advance(1500 * time.Millisecond)
	log.Info("x", "n", 4)
	got := lines(buf)
	if len(got) != 3 || !strings.Contains(got[1], "suppressed=2 interval=1.5s") || !strings.Contains(got[2], "n=4") {
		t.Fatalf("want first, count of 2, then the new first: %q", got)
	}
}

func TestLevelAndMessageAreTheKey(t *testing.T) {
	log, h, buf, clk := newTest(Options{Interval: time.Second})
	log.Warn("a")
	log.Error("a")
	log.Warn("b")
	log.Warn("a")
	log.Error("a")
	log.Error("a")
	if got := lines(buf); len(got) != 3 {
		t.Fatalf("want one line per (level, message), got %q", got)
	}
	clk.Advance(time.Second)
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if !strings.Contains(out, `level=WARN msg=a suppressed=1`) || !strings.Contains(out, `level=ERROR msg=a suppressed=2`) || strings.Contains(out, "msg=b suppressed") {
		t.Fatalf("counts by (level, message) wrong:\n%s", out)
	}
}

func TestCountLineKeepsTheFirstRecordsHandlerAttributes(t *testing.T) {
	log, h, buf, clk := newTest(Options{Interval: time.Second})
	cl := log.With("component", "node")
	cl.Warn("retry")
	cl.Warn("retry")
	clk.Advance(time.Second)
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	if got := lines(buf); len(got) != 2 || !strings.Contains(got[1], "component=node") || !strings.Contains(got[1], "suppressed=1") {
		t.Fatalf("count line lost the logger's attributes: %q", got)
	}
}

func TestOverflowBoundsKeysAndAggregatesTheRest(t *testing.T) {
	var suppressed = map[slog.Level]int{}
	log, h, buf, clk := newTest(Options{Interval: time.Second, MaxKeys: 2, OnSuppressed: func(l slog.Level) { suppressed[l]++ }})
	for i := range 10000 {
		if i%2 == 0 {
			log.Warn(fmt.Sprintf("distinct %d", i))
		} else {
			log.Error(fmt.Sprintf("distinct %d", i))
		}
	}
	if n := len(h.c.keys); n != 2 {
		t.Fatalf("tracked %d keys, want the cap of 2", n)
	}
	// Two keys, then the first overflow record: three lines.
	if got := lines(buf); len(got) != 3 || !strings.Contains(got[2], "distinct 2") {
		t.Fatalf("want two keyed records and the first overflow record, got %q", got)
	}
	if suppressed[slog.LevelWarn]+suppressed[slog.LevelError] != 9997 || suppressed[slog.LevelError] != 4999 {
		t.Fatalf("suppressed by level: %v, want 9997 in all, 4999 at ERROR", suppressed)
	}
	clk.Advance(time.Second)
	if err := h.Flush(false); err != nil {
		t.Fatal(err)
	}
	got := lines(buf)
	if len(got) != 4 || !strings.Contains(got[3], "level=ERROR") || !strings.Contains(got[3], "suppressed=9997") || !strings.Contains(got[3], OverflowMessage) {
		t.Fatalf("want one overflow count line at the highest level, got %q", got)
	}
}

func TestFlushAllEndsOpenWindows(t *testing.T) {
	log, h, buf, _ := newTest(Options{Interval: time.Hour})
	log.Warn("w")
	log.Warn("w")
	if err := h.Flush(true); err != nil {
		t.Fatal(err)
	}
	if got := lines(buf); len(got) != 2 || !strings.Contains(got[1], "suppressed=1 interval=0s") {
		t.Fatalf("Flush(true) did not log the open count: %q", got)
	}
}

func TestEnabledFollowsTheInnerHandler(t *testing.T) {
	var buf bytes.Buffer
	h := New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelWarn}), Options{Clock: clock.NewFake(time.Unix(0, 0))})
	if h.Enabled(context.Background(), slog.LevelInfo) || !h.Enabled(context.Background(), slog.LevelError) {
		t.Fatal("Enabled does not follow the wrapped handler's level")
	}
}

// TestFloodWritesLittle is the point of the package: a minute of one
// condition at 10,000 records a second writes a dozen lines.
func TestFloodWritesLittle(t *testing.T) {
	log, h, buf, clk := newTest(Options{})
	for range 60 * 10000 {
		log.Error("handing a command to the slow stage failed; refusing it so the producer retries", "command_id", "0193f1d2-0000-7000-8000-000000000000", "err", "queue full")
		clk.Advance(100 * time.Microsecond)
	}
	if err := h.Flush(true); err != nil {
		t.Fatal(err)
	}
	if n := len(lines(buf)); n > 14 {
		t.Fatalf("60 s of one condition wrote %d lines, want at most 14 (a first and a count per 10 s interval)", n)
	}
	if buf.Len() > 4096 {
		t.Fatalf("60 s of one condition wrote %d bytes", buf.Len())
	}
}

func TestConcurrentUse(t *testing.T) {
	var mu sync.Mutex
	total := 0
	log, h, buf, clk := newTest(Options{Interval: time.Second, MaxKeys: 4, OnSuppressed: func(slog.Level) { mu.Lock(); total++; mu.Unlock() }})
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				log.Warn(fmt.Sprintf("m%d", (g+i)%6))
				if i%100 == 0 {
					clk.Advance(100 * time.Millisecond)
					_ = h.Flush(false)
				}
			}
		}()
	}
	wg.Wait()
	if err := h.Flush(true); err != nil {
		t.Fatal(err)
	}
	// Every record is either a line of its own or counted in a count line.
	passed, counted := 0, 0
	for _, l := range lines(buf) {
		var n int
		if i := strings.Index(l, "suppressed="); i >= 0 {
			fmt.Sscanf(l[i:], "suppressed=%d", &n)
			counted += n
		} else {
			passed++
		}
	}
	if passed+counted != 8000 || counted != total {
		t.Fatalf("passed %d + counted %d != 8000 records (OnSuppressed saw %d)", passed, counted, total)
	}
}

// BenchmarkSuppressed is the cost of a repeated record: what a flood
// pays per line instead of formatting and writing it.
func BenchmarkSuppressed(b *testing.B) {
	var n int
	h := New(slog.NewTextHandler(io.Discard, nil), Options{Clock: clock.NewFake(time.Unix(0, 0)), OnSuppressed: func(slog.Level) { n++ }})
	log := slog.New(h)
	b.ReportAllocs()
	for b.Loop() {
		log.Warn("slow stage failed; will retry", "command_id", "0193f1d2-0000-7000-8000-000000000000", "attempt", 2, "err", errBench)
	}
}

// BenchmarkWritten is the same record written by the text handler, for
// comparison.
func BenchmarkWritten(b *testing.B) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	b.ReportAllocs()
	for b.Loop() {
		log.Warn("slow stage failed; will retry", "command_id", "0193f1d2-0000-7000-8000-000000000000", "attempt", 2, "err", errBench)
	}
}

var errBench = errors.New("deliver: queue is full: 10 messages, its max depth")
