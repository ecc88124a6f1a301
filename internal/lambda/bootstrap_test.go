package lambda

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/snavio/snavio/pkg/dispatch/provenance"
)

// fakeRuntime is Lambda's Runtime API as the bootstrap sees it: it hands
// out one event, then holds the next poll until the test ends, and
// records the function's answer. It stands in for Lambda, which cannot
// run here.
type fakeRuntime struct {
	event  []byte
	served atomic.Bool
	answer chan string // "response: ..." or "error: ..."
	done   chan struct{}
}

func (r *fakeRuntime) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	const prefix = "/2018-06-01/runtime/"
	path := strings.TrimPrefix(req.URL.Path, prefix)
	switch {
	case req.Method == http.MethodGet && path == "invocation/next":
		if r.served.Swap(true) {
			<-r.done
			w.WriteHeader(http.StatusGone)
			return
		}
		w.Header().Set("Lambda-Runtime-Aws-Request-Id", "req-1")
		w.Header().Set("Lambda-Runtime-Deadline-Ms", "4102444800000")
		w.Header().Set("Lambda-Runtime-Invoked-Function-Arn", "arn:aws:lambda:us-east-1:000000000000:function:snavio-ingest")
		_, _ = w.Write(r.event)
	case req.Method == http.MethodPost && strings.HasPrefix(path, "invocation/req-1/"):
		b, _ := io.ReadAll(req.Body)
		w.WriteHeader(http.StatusAccepted)
		r.answer <- strings.TrimPrefix(path, "invocation/req-1/") + ": " + string(b)
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
// emulators: one EventBridge event in, one delivery out.
func TestBootstrapBinaryDelivers(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the bootstrap binary")
	}
	f := newFixture(t)
	bin := filepath.Join(t.TempDir(), "bootstrap")
	build := exec.Command("go", "build", "-tags", "lambda.norpc", "-o", bin, "github.com/snavio/snavio/cmd/snavio-lambda")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ev, err := json.Marshal(f.event(t, "0f8fad5b-d9cb-469f-a165-000000000200", "mailer", "send"))
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	got := runBootstrap(t, bin, f.bootstrapEnv(t), ev)
	t.Logf("bootstrap: process start to answer %v: %s", time.Since(began).Round(time.Millisecond), got)
	if got != "response: null" {
		t.Fatalf("answer %q, want the response null", got)
	}
	if n := len(f.receive(t, f.queueURL(t, f.plainARN))); n != 1 {
		t.Fatalf("target queue holds %d messages, want 1", n)
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
// ..." or "error: ..." or "init error: ..."). The process is killed
// after; cpu, if given, receives its CPU time (user and system) up to
// the answer where /proc tells it, else up to the kill.
func runBootstrap(tb testing.TB, bin string, env []string, ev []byte, cpu ...*time.Duration) string {
	tb.Helper()
	rt := &fakeRuntime{event: ev, answer: make(chan string, 2), done: make(chan struct{})}
	srv := httptest.NewServer(rt)
	defer srv.Close()
	defer close(rt.done)
	cmd := exec.Command(bin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	cmd.Env = append(slices.Clip(env), "AWS_LAMBDA_RUNTIME_API="+strings.TrimPrefix(srv.URL, "http://"))
	if err := cmd.Start(); err != nil {
		tb.Fatal(err)
	}
	atAnswer, known := time.Duration(0), false
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if !known {
			atAnswer = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		}
		for _, c := range cpu {
			*c += atAnswer
		}
	}()
	select {
	case got := <-rt.answer:
		atAnswer, known = procCPU(cmd.Process.Pid)
		if !strings.HasPrefix(got, "response: ") || os.Getenv("SNAVIO_DEBUG_BOOTSTRAP") != "" {
			tb.Logf("stderr:\n%s", stderr.String())
		}
		return got
	case <-time.After(60 * time.Second):
		tb.Fatalf("no answer within 60 s; stderr:\n%s", stderr.String())
		return ""
	}
}
