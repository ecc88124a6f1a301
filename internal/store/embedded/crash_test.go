package embedded

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// crashChildEnv makes the test binary the crash test's writer.
const crashChildEnv = "SNAVIO_EMBEDDED_CRASH_CHILD"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// crashChild sends messages to queue "q" and appends telemetry to tenant
// "t" from 4 goroutines (so writes are group committed), printing
// "q <body> <id>" or "o <seq>" only after the call returned, until killed.
func crashChild(path string) int {
	ctx := context.Background()
	s, err := Open(Options{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := s.CreateQueue(ctx, QueueConfig{Name: "q", MaxDepth: MaxMaxDepth}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	var mu sync.Mutex
	w := bufio.NewWriter(os.Stdout)
	ack := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, format, args...)
		w.Flush()
	}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf("g%d-%d", g, i)
				if g == 3 {
					seqs, err := s.AppendTelemetry(ctx, []OutboxEntry{{Tenant: "t", Event: telemetry.Dropped{Tenant: body, Reason: telemetry.DroppedQueueUnconsumed}}})
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					ack("o %d\n", seqs[0])
					continue
				}
				id, err := s.Send(ctx, "q", []byte(body), nil)
				if err != nil {
					fmt.Fprintln(os.Stderr, err)
					os.Exit(1)
				}
				ack("q %s %s\n", body, id)
			}
		}()
	}
	wg.Wait()
	return 0
}

// TestCrashKeepsAcknowledgedWrites SIGKILLs a writer mid-stream, reopens
// the file and checks that every acknowledged send and telemetry append is
// there, and that the file still takes writes.
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for run, killAfter := range []int{50, 300} {
		path := filepath.Join(t.TempDir(), "data", "snavio.db")
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sent := map[string]string{} // id -> body
		var maxSeq uint64
		sc := bufio.NewScanner(out)
		for n := 0; sc.Scan(); n++ {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "q":
				sent[f[2]] = f[1]
			case len(f) == 2 && f[0] == "o":
				var seq uint64
				fmt.Sscan(f[1], &seq)
				maxSeq = max(maxSeq, seq)
			default:
				t.Fatalf("child wrote %q", sc.Text())
			}
			if n == killAfter {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				break
			}
		}
		_ = cmd.Wait()

		s := openTest(t, Options{Path: path})
		ctx := context.Background()
		found := map[string]string{}
		for {
			got, err := s.Receive(ctx, "q", MaxReceiveBatch, MaxVisibilityTimeout)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) == 0 {
				break
			}
			for _, m := range got {
				found[m.ID] = string(m.Body)
			}
		}
		for id, body := range sent {
			if found[id] != body {
				t.Fatalf("run %d: acknowledged message %s (%s) lost after SIGKILL", run, id, body)
			}
		}
		recs, err := s.ReadTelemetry(ctx, "t", 0, MaxReadPage)
		if err != nil {
			t.Fatal(err)
		}
		if uint64(len(recs)) < maxSeq {
			t.Fatalf("run %d: %d telemetry records after SIGKILL, but seq %d was acknowledged", run, len(recs), maxSeq)
		}
		for i, r := range recs {
			if r.Seq != uint64(i+1) {
				t.Fatalf("run %d: telemetry seq %d at position %d: a gap", run, r.Seq, i)
			}
		}
		if _, err := s.Send(ctx, "q", []byte("after"), nil); err != nil {
			t.Fatalf("run %d: write after recovery: %v", run, err)
		}
		t.Logf("run %d: %d acknowledged sends and %d telemetry appends survived SIGKILL (%d messages, %d records found)", run, len(sent), maxSeq, len(found), len(recs))
	}
}
