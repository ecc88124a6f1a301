package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	"github.com/snavio/snavio/internal/app"
	"github.com/snavio/snavio/internal/controlapi/wire"
	"github.com/snavio/snavio/internal/devserver"
	"github.com/snavio/snavio/internal/ingresscred"
	"github.com/snavio/snavio/internal/smallfs"
	"github.com/snavio/snavio/internal/store/embedded"
)

// TestMain lets testscript run the real snavio entry point in-process: the
// scripts' `exec snavio` re-executes this test binary as snavio.
func TestMain(m *testing.M) {
	testscript.Main(m, map[string]func(){
		"snavio": func() { os.Exit(app.Main()) },
	})
}

// TestScripts runs testdata/script/*.txtar. Set SNAVIO_UPDATE_SCRIPTS=1 to
// rewrite the expected output in the scripts from the actual output.
func TestScripts(t *testing.T) { testscript.Run(t, scriptParams()) }

// scriptParams are the scripts' commands, conditions and set-up, shared
// by TestScripts and TestTwoProfile.
func scriptParams() testscript.Params {
	return testscript.Params{
		Dir:                 filepath.Join("..", "..", "testdata", "script"),
		RequireExplicitExec: true,
		RequireUniqueNames:  true,
		UpdateScripts:       os.Getenv("SNAVIO_UPDATE_SCRIPTS") == "1",
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"serve-ready": serveReady,
			"putevents":   putEvents,
			"wait-count":  waitCount,
			"mount-small": mountSmall,
			"store-send":  storeSend,
			"aws-fake":    awsFake,
			"fnurl":       fnurl,
			"aws-cli":     awsCLI,
			"aws-emu":     awsEmu,
			"replay-aws":  replayAWS,
			"two-profile": twoProfile,
		},
		Condition: condition,
		Setup: func(env *testscript.Env) error {
			// Keep every script's config and data inside its work dir.
			home := filepath.Join(env.WorkDir, "home")
			env.Setenv("HOME", home)
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
			env.Setenv("XDG_DATA_HOME", filepath.Join(home, ".local", "share"))
			env.Values[awsFakeKey{}] = &awsFakeState{}
			env.Values[fnurlKey{}] = &fnurlState{}
			env.Values[awsCLIKey{}] = &awsCLIState{}
			twoProfileSetup(env)
			for _, k := range []string{"NO_COLOR", "SNAVIO_CONFIG", "SNAVIO_PROFILE", "SNAVIO_OUTPUT", "SNAVIO_ENDPOINT_URL",
				"SNAVIO_REGION", "SNAVIO_NO_COLOR", "SNAVIO_FORCE_TTY", "SNAVIO_DATA_DIR", "SNAVIO_TOKEN", "SNAVIO_SECRET",
				"SNAVIO_KEY_VERSION"} {
				env.Setenv(k, "")
			}
			return nil
		},
	}
}

// serveReady implements the script command
//
//	serve-ready FILE
//
// for scripts that start a real server in the background:
//
//	exec snavio dispatch serve --ephemeral --demo --listen 127.0.0.1:0 --data-dir $WORK/data --ready-file $WORK/ready &serve&
//	serve-ready $WORK/ready
//
// It waits up to 60 s for the server to write its URL to FILE (it does so
// once it takes traffic), then sets SNAVIO_ENDPOINT_URL to that URL. The
// script sets SNAVIO_DATA_DIR to the server's --data-dir, so the CLI finds
// the operator token there.
func serveReady(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: serve-ready FILE")
	}
	path := ts.MkAbs(args[0])
	deadline := time.Now().Add(60 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil && strings.HasSuffix(string(b), "\n") {
			ts.Setenv("SNAVIO_ENDPOINT_URL", strings.TrimSpace(string(b)))
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("serve-ready: %s did not appear within 60s; is the server running? (its stderr is in the background command's output)", path)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// putEvents implements the script command
//
//	putevents [-unsigned] [-credentials FILE] [-host HOST] FILE
//
// for what `snavio send` refuses to build (a forged command.source, a
// malformed envelope, another tenant's source): it POSTs FILE, a raw AWS
// JSON 1.1 PutEvents body, to $SNAVIO_ENDPOINT_URL as the EventBridge SDK
// would, signed (SigV4, the SDK's signer) with the ingress credentials
// `snavio send` would find for the first entry's tenant (-credentials
// FILE: those in FILE; -unsigned: none), with Host HOST if given. It
// prints "HTTP <status>" and the response body to stdout. It fails on a
// transport error; with !, it expects a non-2xx status.
func putEvents(ts *testscript.TestScript, neg bool, args []string) {
	var unsigned bool
	var credFile, host string
	for len(args) > 1 {
		switch args[0] {
		case "-unsigned":
			unsigned, args = true, args[1:]
		case "-credentials":
			credFile, args = ts.MkAbs(args[1]), args[2:]
		case "-host":
			host, args = args[1], args[2:]
		default:
			ts.Fatalf("putevents: unknown flag %s", args[0])
		}
	}
	if len(args) != 1 {
		ts.Fatalf("usage: putevents [-unsigned] [-credentials FILE] [-host HOST] FILE")
	}
	endpoint := ts.Getenv("SNAVIO_ENDPOINT_URL")
	if endpoint == "" {
		ts.Fatalf("putevents: SNAVIO_ENDPOINT_URL is empty; run serve-ready first")
	}
	body, err := os.ReadFile(ts.MkAbs(args[0]))
	ts.Check(err)
	req, err := http.NewRequest(http.MethodPost, strings.TrimSuffix(endpoint, "/")+"/", bytes.NewReader(body))
	ts.Check(err)
	req.Header.Set("Content-Type", "application/x-amz-json-1.1")
	req.Header.Set("X-Amz-Target", "AWSEvents.PutEvents")
	if host != "" {
		req.Host = host
	}
	if !unsigned {
		k, _, err := ingresscred.Resolve(ingresscred.Input{Tenant: firstTenant(body), FlagFile: credFile, Getenv: ts.Getenv, DataDir: ts.Getenv("SNAVIO_DATA_DIR")})
		if err != nil {
			ts.Fatalf("putevents: %v", err)
		}
		ts.Check(ingresscred.Sign(req, body, k, "us-east-1", time.Now()))
	}
	client := &http.Client{Timeout: 30 * time.Second}
	res, err := client.Do(req)
	if err != nil {
		ts.Fatalf("putevents: %v", err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	ts.Check(err)
	fmt.Fprintf(ts.Stdout(), "HTTP %d\n%s\n", res.StatusCode, bytes.TrimSpace(b))
	if ok := res.StatusCode/100 == 2; ok == neg {
		ts.Fatalf("putevents: HTTP %d (want %s)", res.StatusCode, map[bool]string{false: "2xx", true: "an error status"}[neg])
	}
}

// firstTenant returns the tenant of a PutEvents body's first entry, or ""
// if the body has none.
func firstTenant(body []byte) string {
	var req struct{ Entries []struct{ Source string } }
	if json.Unmarshal(body, &req) != nil || len(req.Entries) == 0 {
		return ""
	}
	tenant, _, _ := strings.Cut(req.Entries[0].Source, "/")
	return tenant
}

// waitCount implements the script command
//
//	wait-count N REGEXP... -- COMMAND [ARGS...]
//
// for what a running server does after the command that caused it returns
// (the slow stage's deliveries, a replay's): it runs COMMAND, as exec
// would, until at least N lines of its stdout match every REGEXP, up to
// 30 s, and fails with the last output if they never do. Its stdout is
// then the last run's, for stdout assertions:
//
//	wait-count 3 snavio.command.delivered '"replay_reason":"INC-1"' -- snavio tail --follow=false -o ndjson
func waitCount(ts *testscript.TestScript, neg bool, args []string) {
	sep := slices.Index(args, "--")
	if neg || sep < 2 || sep == len(args)-1 {
		ts.Fatalf("usage: wait-count N REGEXP... -- COMMAND [ARGS...]")
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		ts.Fatalf("wait-count: N %q: give a positive count of lines", args[0])
	}
	var res []*regexp.Regexp
	for _, p := range args[1:sep] {
		re, err := regexp.Compile(p)
		if err != nil {
			ts.Fatalf("wait-count: %v", err)
		}
		res = append(res, re)
	}
	count := func(out string) int {
		c := 0
	lines:
		for _, line := range strings.Split(out, "\n") {
			for _, re := range res {
				if !re.MatchString(line) {
					continue lines
				}
			}
			c++
		}
		return c
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		err := ts.Exec(args[sep+1], args[sep+2:]...)
		out := ts.ReadFile("stdout")
		got := count(out)
		if err == nil && got >= n {
			return
		}
		if time.Now().After(deadline) {
			ts.Fatalf("wait-count: %d of %d lines matched within 30s (last error: %v); last stdout:\n%s", got, n, err, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// storeSend implements the script command
//
//	store-send DATA_DIR QUEUE FILE
//
// for what no client can do: it opens the store of a stopped dispatch serve
// in DATA_DIR and sends each message of FILE (the JSON array that `snavio
// queue receive -o json` prints: body, body_encoding and attributes) to QUEUE as
// they are, through the store's API, as anyone allowed to send to a queue
// could. Scripts use it to plant messages in a dead-letter queue.
func storeSend(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 3 {
		ts.Fatalf("usage: store-send DATA_DIR QUEUE FILE")
	}
	var in []wire.QueueMessage
	if err := json.Unmarshal([]byte(ts.ReadFile(args[2])), &in); err != nil || len(in) == 0 {
		ts.Fatalf("store-send: %s is not what `snavio queue receive -o json` prints, with messages: %v", args[2], err)
	}
	st, err := embedded.Open(embedded.Options{Path: filepath.Join(ts.MkAbs(args[0]), devserver.StoreFile)})
	if err != nil {
		ts.Fatalf("store-send: %v (is the server stopped?)", err)
	}
	defer func() { ts.Check(st.Close()) }()
	for _, m := range in {
		body := []byte(m.Body)
		if m.BodyEncoding == "base64" {
			body, err = base64.StdEncoding.DecodeString(m.Body)
			ts.Check(err)
		}
		id, err := st.Send(context.Background(), args[1], body, m.Attributes)
		if err != nil {
			ts.Fatalf("store-send: %v", err)
		}
		fmt.Fprintln(ts.Stdout(), id)
	}
}

// condition answers the scripts' own conditions: [mountable] holds where
// a small file system can be mounted (internal/smallfs); where it cannot,
// the script fails under CI=true (CI runs as root and must run it).
func condition(cond string) (bool, error) {
	switch cond {
	case "dynamodb":
		return dynamoDBCondition()
	case "mountable":
	case "awscli":
		// [awscli]: the AWS CLI is on PATH. In CI (CI=true) its absence
		// fails the script instead of skipping it.
		if _, err := exec.LookPath("aws"); err != nil {
			if os.Getenv("CI") == "true" {
				return false, errors.New("the AWS CLI (aws) is not on PATH; .ci/run installs it (awscli)")
			}
			return false, nil
		}
		return true, nil
	case "dynamodblocal":
		return dynamoDBLocalCondition()
	default:
		return false, fmt.Errorf("unknown condition %q", cond)
	}
	dir, err := os.MkdirTemp("", "snavio-mountable")
	if err != nil {
		return false, err
	}
	defer os.Remove(dir)
	err = smallfs.MountAt(dir, 1<<20)
	if err == nil {
		return true, smallfs.Unmount(dir)
	}
	if msg, skip := smallfs.Unavailable(err, 1<<20); !skip {
		return false, errors.New(msg)
	}
	return false, nil
}

// mountSmall implements the script command
//
//	mount-small DIR BYTES
//
// which mounts a file system of BYTES on DIR (created if missing) for the
// rest of the script: a disk that fills up (internal/smallfs). Guard it
// with [mountable].
func mountSmall(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: mount-small DIR BYTES")
	}
	size, err := strconv.ParseInt(args[1], 10, 64)
	if err != nil || size <= 0 {
		ts.Fatalf("mount-small: BYTES %q: want a positive whole number", args[1])
	}
	dir := ts.MkAbs(args[0])
	ts.Check(os.MkdirAll(dir, 0o700))
	if err := smallfs.MountAt(dir, size); err != nil {
		ts.Fatalf("mount-small: %v (guard the script with [mountable])", err)
	}
	ts.Defer(func() {
		if err := smallfs.Unmount(dir); err != nil {
			ts.Logf("mount-small: unmounting %s: %v", dir, err)
		}
	})
}
