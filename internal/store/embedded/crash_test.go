package embedded

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/localqueue"
	"github.com/snavio/snavio/internal/store/wal"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// crashChildEnv makes the test binary the crash test's writer.
const crashChildEnv = "SNAVIO_EMBEDDED_CRASH_CHILD"

// crashSyncEnv gives the child's Options.SyncEvery ("" for 0).
const crashSyncEnv = "SNAVIO_EMBEDDED_CRASH_SYNC_EVERY"

// crashSegmentEnv gives the child's segment size in bytes ("" for the
// default): small segments rotate, are compacted, deleted and reused from
// spares while the writer runs.
const crashSegmentEnv = "SNAVIO_EMBEDDED_CRASH_SEGMENT_BYTES"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		os.Exit(crashChild(path))
	}
	os.Exit(m.Run())
}

// crashChild sends messages to queue "q" from 3 goroutines, appends
// telemetry to tenant "t" from one, receives and deletes messages from
// another and archives events from a sixth (so writes are group
// committed), printing "q <body> <id>", "o <seq>", "d <id>" or
// "a <id> <id>" only after the call returned, until killed.
func crashChild(path string) int {
	ctx := context.Background()
	opts := Options{Path: path}
	if v := os.Getenv(crashSyncEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.SyncEvery = d
	}
	if v := os.Getenv(crashSegmentEnv); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		opts.segmentBytes = n
	}
	s, err := Open(opts)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if _, err := s.CreateQueue(ctx, localqueue.QueueConfig{Name: "q", MaxDepth: localqueue.MaxMaxDepth}); err != nil {
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
	for g := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				body := fmt.Sprintf("g%d-%d", g, i)
				switch g {
				case 4:
					got, err := s.Receive(ctx, "q", localqueue.MaxReceiveBatch, localqueue.MaxVisibilityTimeout)
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					var handles, ids []string
					for _, m := range got {
						// Only even-numbered sends are deleted: the parent
						// knows every odd one must remain, whatever acks
						// it did not read before the kill.
						if evenSend(string(m.Body)) {
							handles, ids = append(handles, m.ReceiptHandle), append(ids, m.ID)
						}
					}
					if len(handles) == 0 {
						continue
					}
					errs, err := s.DeleteMessageBatch(ctx, "q", handles)
					if err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					for j, e := range errs {
						if e == nil {
							ack("d %s\n", ids[j])
						}
					}
					continue
				case 5:
					evs := []ArchivedEvent{{EventID: body + "-a", Source: "t/x", DetailType: "d", Detail: []byte("{}"), ReceivedAt: time.Now()}, {EventID: body + "-b", Source: "t/x", DetailType: "d", Detail: []byte("{}"), ReceivedAt: time.Now()}}
					if err := s.ArchiveAppendBatch(ctx, evs); err != nil {
						fmt.Fprintln(os.Stderr, err)
						os.Exit(1)
					}
					ack("a %s %s\n", evs[0].EventID, evs[1].EventID)
					continue
				}
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

// evenSend reports whether body, "g<goroutine>-<i>", has an even i.
func evenSend(body string) bool {
	var g, i int
	_, err := fmt.Sscanf(body, "g%d-%d", &g, &i)
	return err == nil && i%2 == 0
}

// TestCrashKeepsAcknowledgedWrites SIGKILLs a writer mid-stream, reopens
// the file and checks that every acknowledged send and telemetry append is
// there, and that the file still takes writes: with a sync before each
// acknowledgement, and with a sync interval (an hour: the acknowledged
// writes that were never synced survive too, in the OS's page cache).
func TestCrashKeepsAcknowledgedWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	for _, every := range []string{"", "1h"} {
		for _, segment := range []string{"", "16384"} {
			name := "sync each write"
			if every != "" {
				name = "sync every " + every
			}
			if segment != "" {
				name += ", " + segment + " B segments"
			}
			t.Run(name, func(t *testing.T) { testCrash(t, every, segment) })
		}
	}
}

func testCrash(t *testing.T, syncEvery, segmentBytes string) {
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for run, killAfter := range []int{50, 300, 3000} {
		path := filepath.Join(t.TempDir(), "data", "snavio.db")
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), crashChildEnv+"="+path, crashSyncEnv+"="+syncEvery, crashSegmentEnv+"="+segmentBytes)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sent := map[string]string{} // id -> body
		deleted := map[string]bool{}
		var archived []string
		var maxSeq uint64
		sc := bufio.NewScanner(out)
		killed := false
		for n := 0; sc.Scan(); n++ {
			f := strings.Fields(sc.Text())
			switch {
			case len(f) == 3 && f[0] == "q":
				sent[f[2]] = f[1]
			case len(f) == 2 && f[0] == "d":
				deleted[f[1]] = true
			case len(f) == 3 && f[0] == "a":
				archived = append(archived, f[1], f[2])
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
				killed = true
				break
			}
		}
		_ = cmd.Wait()
		if !killed {
			t.Fatalf("run %d: the writer stopped before %d acknowledgements (its error is above)", run, killAfter)
		}

		s := openTest(t, Options{Path: path})
		ctx := context.Background()
		_, spares, err := wal.ListSegments(path + walSuffix)
		if err != nil {
			t.Fatal(err)
		}
		// The consumer's receives are durable too: give them back.
		if _, err := s.ReleaseInFlight(ctx, "q"); err != nil {
			t.Fatal(err)
		}
		found := map[string]string{}
		for {
			got, err := s.Receive(ctx, "q", localqueue.MaxReceiveBatch, localqueue.MaxVisibilityTimeout)
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
			if deleted[id] {
				if _, ok := found[id]; ok {
					t.Fatalf("run %d: message %s came back after its acknowledged delete", run, id)
				}
				continue
			}
			if _, ok := found[id]; !ok && evenSend(body) {
				continue // maybe deleted, its ack unread
			}
			if found[id] != body {
				t.Fatalf("run %d: acknowledged message %s (%s) lost after SIGKILL", run, id, body)
			}
		}
		for _, id := range archived {
			if _, ok, err := s.ArchiveGet(ctx, id); err != nil || !ok {
				t.Fatalf("run %d: acknowledged archived event %s lost after SIGKILL: %v", run, id, err)
			}
		}
		// Every page: a run can acknowledge more than one page holds.
		var recs []TelemetryRecord
		for after := uint64(0); ; after = recs[len(recs)-1].Seq {
			page, err := s.ReadTelemetry(ctx, "t", after, MaxReadPage)
			if err != nil {
				t.Fatal(err)
			}
			recs = append(recs, page...)
			if len(page) < MaxReadPage {
				break
			}
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
		t.Logf("run %d: %d acknowledged sends (%d deleted, none back), %d telemetry appends and %d archived events survived SIGKILL (%d messages, %d records found; %d segments, %d spare files at the kill)", run, len(sent), len(deleted), maxSeq, len(archived), len(found), len(recs), s.LogStats().Segments, len(spares))
	}
}
