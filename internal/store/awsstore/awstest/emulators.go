package awstest

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Emulators starts each emulator once, on first use, for the whole test
// binary. Declare one in a test package and Close it in TestMain after
// m.Run:
//
//	var emu awstest.Emulators
//
//	func TestMain(m *testing.M) { defer emu.Close(); m.Run() }
type Emulators struct {
	mu      sync.Mutex
	started bool
	ddb     *DynamoDBLocal
	err     error
	seq     atomic.Int64

	inproc sync.Mutex
	s3     *S3
	kumo   *Kumo
}

// DynamoDB returns the binary's DynamoDB Local, starting it on first use.
// When it cannot start, the test fails if CI=true and is skipped
// otherwise; either way the message says why and how to install it.
func (e *Emulators) DynamoDB(t testing.TB) *DynamoDBLocal {
	t.Helper()
	e.mu.Lock()
	if !e.started {
		e.started = true
		e.ddb, e.err = StartDynamoDBLocal(context.Background())
		if e.err == nil {
			fmt.Fprintf(os.Stderr, "awstest: DynamoDB Local at %s, started in %v\n", e.ddb.Endpoint, e.ddb.StartTime.Round(time.Millisecond))
		}
	}
	ddb, err := e.ddb, e.err
	e.mu.Unlock()
	if err != nil {
		unavailable(t, os.Getenv("CI") == "true", err)
	}
	return ddb
}

// unavailable fails (in CI) or skips t for a missing emulator.
func unavailable(t testing.TB, ci bool, err error) {
	t.Helper()
	if ci {
		t.Fatalf("CI=true and DynamoDB Local cannot start, so the AWS store's contract suites cannot run: %v", err)
		return // Fatalf does not return; a stand-in TB's may
	}
	t.Skipf("DynamoDB Local is not available here (CI=true would fail instead): %v", err)
}

// Close stops every emulator that was started.
func (e *Emulators) Close() {
	e.closeInProcess()
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.ddb != nil {
		if err := e.ddb.Close(); err != nil {
			fmt.Fprintf(os.Stderr, "awstest: stop DynamoDB Local: %v\n", err)
		}
		e.ddb = nil
	}
}

// UniqueName is an environment name that no other test of this binary, nor
// of another process sharing the emulator, uses: "t<pid>x<n>". Table names
// built from it (snavio-<env>-flow) are unique per test.
func (e *Emulators) UniqueName() string {
	return "t" + strconv.Itoa(os.Getpid()) + "x" + strconv.FormatInt(e.seq.Add(1), 10)
}
