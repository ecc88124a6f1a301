package lambda

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/store/awsstore"
	"github.com/snavio/snavio/internal/syncbuf"
	"github.com/snavio/snavio/pkg/dispatch/provenance"
	"github.com/snavio/snavio/pkg/dispatch/telemetry"
)

// fakeRuntime is Lambda's Runtime API as the bootstrap sees it: it hands
// out its events one poll each (request ids req-1, req-2, ...), then
// holds the next poll until the test ends, and records the function's
// answers. It stands in for Lambda, which cannot run here.
type fakeRuntime struct {
	events [][]byte
	served atomic.Int32
	answer chan string // "response: ..." or "error: ..."
	done   chan struct{}
}

func (r *fakeRuntime) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	const prefix = "/2018-06-01/runtime/"
	path := strings.TrimPrefix(req.URL.Path, prefix)
	switch {
	case req.Method == http.MethodGet && path == "invocation/next":
		n := int(r.served.Add(1))
		if n > len(r.events) {
			<-r.done
			w.WriteHeader(http.StatusGone)
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", fmt.Sprintf("req-%d", n))
		w.Header().Set("Lambda-Runtime-Deadline-Ms", "4102444800000")
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:snavio-ingest")
		_, _ = w.Write(r.events[n-1])
	case req.Method == http.MethodPost && strings.HasPrefix(path, "invocation/req-"):
		b, _ := io.ReadAll(req.Body)
		w.WriteHeader(http.StatusAccepted)
		_, kind, _ := strings.Cut(strings.TrimPrefix(path, "invocation/"), "/")
		r.answer <- kind + ": " + string(b)
	case req.Method == http.MethodPost && path == "init/error":
		b, _ := io.ReadAll(req.Body)
		w.WriteHeader(http.StatusAccepted)
		r.answer <- "init error: " + string(b)
	default:
		http.NotFound(w, req)
	}
}

// TestBootstrapBinaryDelivers builds cmd/snavio-lambda and runs it as
// Lambda would, configured by the environment alone, against the
// emulators: two EventBridge events in, back to back, two deliveries out.
// The first command's delivered event is stored before its answer (a
// quiet environment keeps nothing); the second's, in a busy one, is kept
// in memory until Lambda's SIGTERM at shutdown, when the bootstrap
// stores it.
func TestBootstrapBinaryDelivers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap binary")
	}
	f := newFixture(t)
	bin := buildBinary(t, "github.com/snavio/snavio/cmd/snavio-lambda")
	var evs [][]byte
	for _, id := range []string{"0f8fad5b-d9cb-469f-a165-000000000200", "0f8fad5b-d9cb-469f-a165-000000000201"} {
		ev, err := json.Marshal(f.event(t, id, "mailer", "send"))
		if err != nil {
			t.Fatal(err)
		}
		evs = append(evs, ev)
	}
	deliveredN := func() int {
		recs, err := f.outbox.Read(context.Background(), "acme", 0, awsstore.MaxOutboxRead)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, r := range recs {
			if r.Name == telemetry.NameDelivered {
				n++
			}
		}
		return n
	}
	delivered := func() bool { return deliveredN() == 2 }
	began := time.Now()
	got, _ := runBootstrapEvents(t, bin, f.bootstrapEnv(t), evs, func(cmd *exec.Cmd) {
		t.Logf("bootstrap: process start to the second answer %v", time.Since(began).Round(time.Millisecond))
		if n := deliveredN(); n != 1 {
			t.Errorf("%d delivered events stored before shutdown; want the first command's (a quiet environment stores at once), the second's kept", n)
		}
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		// The bootstrap is another process: poll the outbox for what its
		// SIGTERM handler stores, within Lambda's 500 ms and some slack.
		for deadline := time.Now().Add(10 * time.Second); !delivered(); time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Error("no delivered event in the outbox 10 s after SIGTERM")
				return
			}
		}
	})
	if got != "response: null" {
		t.Fatalf("answer %q, want the response null", got)
	}
	if n := len(f.receive(t, f.queueURL(t, f.plainARN))); n != 2 {
		t.Fatalf("target queue holds %d messages, want 2", n)
	}
}

// procCPU reads a running process's CPU time (user and system) from
// /proc/<pid>/stat, in USER_HZ ticks (100 a second on Linux).
func procCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// Fields after the command name, which ends at the last ')': state is
	// the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(ut+st) * (time.Second / 100), true
}

// bootstrapEnv is the environment of the bootstrap on the fixture's
// tables and queues.
func (f *fixture) bootstrapEnv(tb testing.TB) []string {
	return []string{
		EnvFunction + "=" + FunctionIngest, EnvEnv + "=" + f.env, EnvEscalationQueue + "=" + f.escURL,
		EnvDeliveryKey + "=" + base64.StdEncoding.EncodeToString(bytes.Repeat([]byte{7}, provenance.MinMasterLen)),
		"AWS_REGION=us-east-1", "AWS_ACCESS_KEY_ID=snavioTest", "AWS_SECRET_ACCESS_KEY=snavioTest", "AWS_EC2_METADATA_DISABLED=true",
		"AWS_ENDPOINT_URL_DYNAMODB=" + emu.DynamoDB(tb).Endpoint, "AWS_ENDPOINT_URL_SQS=" + emu.Kumo().Endpoint,
		"HOME=" + tb.TempDir(),
	}
}

// runBootstrap runs bin as Lambda would, with env, against a fake
// Runtime API handing it ev, and returns its first answer ("response:
// ..." or "error: ..." or "init error: ...") and its CPU time (user and
// system) up to the answer where /proc tells it, else up to the kill.
// after, if not nil, runs once the answer is in, before the process is
// killed.
func runBootstrap(tb testing.TB, bin string, env []string, ev []byte, after func(*exec.Cmd)) (answer string, cpu time.Duration) {
	tb.Helper()
	return runBootstrapEvents(tb, bin, env, [][]byte{ev}, after)
}

// runBootstrapEvents is runBootstrap with several events, invoked one
// after another as fast as the bootstrap answers; the answer is the last
// one, or the first that is not a response.
func runBootstrapEvents(tb testing.TB, bin string, env []string, evs [][]byte, after func(*exec.Cmd)) (answer string, cpu time.Duration) {
	tb.Helper()
	rt := &fakeRuntime{events: evs, answer: make(chan string, len(evs)+1), done: make(chan struct{})}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	defer close(rt.done)
	cmd := exec.Command(bin)
	var stderr syncbuf.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(slices.Clip(env), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"))
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	known := false
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !known {
			cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		if !strings.HasPrefix(answer, "response: ") || os.Getenv("SNAVIO_DEBUG_BOOTSTRAP") != "" {
			tb.Logf("stderr:\n%s", stderr.String())
		}
	}()
	timeout := time.After(60 * time.Second)
	for range len(evs) - 1 {
		select {
		case answer = <-rt.answer:
			if !strings.HasPrefix(answer, "response: ") {
				return answer, 0
			}
		case <-timeout:
			tb.Fatalf("no answer within 60 s; stderr:\n%s", stderr.String())
		}
	}
	select {
	case answer = <-rt.answer:
		cpu, known = procCPU(cmd.Process.Pid)
		if after != nil {
			after(cmd)
		}
		return answer, cpu
	case <-timeout:
		tb.Fatalf("no answer within 60 s; stderr:\n%s", stderr.String())
		return "", 0
	}
}
