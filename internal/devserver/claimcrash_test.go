package devserver

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/atomicfile"
	"github.com/snavio/snavio/internal/store/embedded"
	"github.com/snavio/snavio/pkg/dispatch"
	"github.com/snavio/snavio/pkg/dispatch/envelope"
	"github.com/snavio/snavio/pkg/dispatch/flow"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// Issue 20, finding 6: a strict command whose claim is in progress when
// the server is killed -9 is delivered within 2 s of the restart (not
// after the 30 s in-progress TTL and hand-off visibility), and once.

const (
	claimCrashChildEnv = "SNAVIO_SERVE_CLAIM_CRASH_CHILD"
	claimCrashSyncEnv  = "SNAVIO_SERVE_CLAIM_CRASH_SYNC_EVERY"
	claimCrashID       = "0f8fad5b-d9cb-469f-a165-70867728950e"
)

// TestClaimCrashChild is the server process of TestClaimCrashResolves: it
// leaves a strict command claimed in progress with its hand-off taken by
// a slow worker (which found the claim held and put it back for later),
// says so, and waits to be killed.
func TestClaimCrashChild(t *testing.T) {
	dir := os.Getenv(claimCrashChildEnv)
	if dir == "" {
		t.Skip("the server half of TestClaimCrashResolves")
	}
	fail := func(err error) {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(3)
	}
	var every time.Duration
	if v := os.Getenv(claimCrashSyncEnv); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fail(err)
		}
		every = d
	}
	ctx := context.Background()
	s, err := Start(ctx, Options{DataDir: dir, Listen: "127.0.0.1:0", Demo: true, SyncEvery: every})
	if err != nil {
		fail(err)
	}
	key := demoKeyFrom(t, dir)
	e := envelope.New(claimCrashID, time.Now(), DemoTarget, DemoStrictCommand, []byte(`{"amount":7}`))
	if err := key.SignEnvelope(&e, DemoSource); err != nil {
		fail(err)
	}
	// The slow stage's claim, as a worker takes it before delivering.
	c := flow.Command{ID: claimCrashID, Source: DemoSource, Target: DemoTarget, Name: DemoStrictCommand,
		Timestamp: e.Metadata.Timestamp, PayloadHash: flow.PayloadHash(e.Command.Payload)}
	if d, err := s.flow.Slow(ctx, &c, &flow.Route{Strict: true}); err != nil || d.Action != flow.Proceed {
		fail(fmt.Errorf("claim: %v %v", d.Action, err))
	}
	e.Command.Source = DemoSource // set by the shield on an accepted command
	esc := dispatch.Escalation{Envelope: e, ReceivedAt: time.Now(), Reason: string(flow.EscalateDedupeRequired)}
	wire, err := esc.Marshal()
	if err != nil {
		fail(err)
	}
	if err := (embedded.Handoff{S: s.store, Queue: HandoffQueue}).Put(ctx, wire); err != nil {
		fail(err)
	}
	// A worker takes the hand-off, finds the claim in progress and puts it
	// back: the hand-off is in flight when the process dies.
	for s.node.Stats().SlowRetries == 0 {
		time.Sleep(time.Millisecond)
	}
	if err := atomicfile.Write(filepath.Join(dir, "url"), []byte(s.Info().URL+"\n"), 0o600); err != nil {
		fail(err)
	}
	select {} // killed -9 here
}

func TestClaimCrashResolves(t *testing.T) {
	if testing.Short() {
		t.Skip("crash test runs processes for seconds")
	}
	for _, every := range []string{"", "10ms", "1s"} {
		name := "fsync=always"
		if every != "" {
			name = "fsync=" + every
		}
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			c := startClaimCrashChild(t, dir, every)
			if err := c.cmd.Process.Kill(); err != nil {
				t.Fatal(err)
			}
			_ = c.cmd.Wait()

			// Restart with the default in-progress TTL and hand-off
			// visibility (30 s each).
			ctx := context.Background()
			start := time.Now()
			s := startDemo(t, dir, false)
			defer s.Shutdown(ctx)
			started := time.Since(start)
			var at time.Duration
			count := 0
			deadline := time.Now().Add(10 * time.Second)
			for count == 0 && time.Now().Before(deadline) {
				count = received(t, s.store, claimCrashID)
				at = time.Since(start)
				time.Sleep(5 * time.Millisecond)
			}
			t.Logf("start took %v; the command claimed at the kill was delivered %v after the restart began", started.Round(time.Millisecond), at.Round(time.Millisecond))
			if count != 1 {
				t.Fatalf("the command claimed at the kill is in the queue %d times, want 1", count)
			}
			if at-started > 2*time.Second {
				t.Fatalf("delivered %v after the server was up, want within 2 s", at-started)
			}
			// The producer's retry of the same command (send --wait after
			// its call failed) is a duplicate, not a second delivery.
			putEvent(t, dir, s.Info().URL, DemoSource, signed(t, demoKeyFrom(t, dir), claimCrashID, DemoTarget, DemoStrictCommand, `{"amount":7}`))
			waitFor(t, "the retry to be reported a duplicate", func() bool {
				return slices.Contains(names(t, s, "demo"), telemetry.NameDuplicate) && handoffDrained(t, s.store)
			})
			if n := received(t, s.store, claimCrashID); n != 0 {
				t.Fatalf("the producer's retry was delivered again (%d more)", n)
			}
		})
	}
}

// startClaimCrashChild runs TestClaimCrashChild in a new process and
// waits until it holds the claim.
func startClaimCrashChild(t *testing.T, dir, syncEvery string) *child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestClaimCrashChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), claimCrashChildEnv+"="+dir, claimCrashSyncEnv+"="+syncEvery)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	waitFor(t, "the child to hold the claim", func() bool {
		b, err := os.ReadFile(filepath.Join(dir, "url"))
		return err == nil && strings.HasSuffix(string(b), "\n")
	})
	return &child{cmd: cmd}
}

// received receives (and hides for an hour) every visible message of the
// demo queue and counts those of command id.
func received(t *testing.T, st *embedded.Store, id string) int {
	t.Helper()
	n := 0
	for {
		msgs, err := st.Receive(context.Background(), DemoQueue, 10, time.Hour)
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if len(msgs) == 0 {
			return n
		}
		for _, m := range msgs {
			if m.Attributes[provenance.AttrCommandID] == id {
				n++
			}
		}
	}
}

// handoffDrained says whether the slow stage worked off every hand-off.
func handoffDrained(t *testing.T, st *embedded.Store) bool {
	t.Helper()
	qs, err := st.ListQueues(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range qs {
		if slices.Contains(handoffQueues, q.QueueConfig.Name) && q.Visible+q.InFlight > 0 {
			return false
		}
	}
	return true
}
