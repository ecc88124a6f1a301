package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"
	"github.com/rogpeppe/go-internal/txtar"

	"github.com/snavio/snavio/internal/lambda/awsworld"
	"github.com/snavio/snavio/internal/store/awsstore/awstest"
)

// The two-profile suite: testdata/script/two_profile_*.txtar drive the
// product end to end, once against a local `dispatch serve` and once
// against an aws profile whose endpoints are the platform on the
// emulators (internal/lambda/awsworld). docs/testing.md describes it.

// Profiles the suite runs each script on.
const (
	profileLocal = "local"
	profileAWS   = "aws"
)

// twoProfileKey holds a script's two-profile run (testscript.Env.Values).
type twoProfileKey struct{}

// twoProfileRun is one profile's run of the suite: what each script did.
type twoProfileRun struct {
	profile string
	// t is each script's test, by work dir: to skip an aws script where
	// DynamoDB Local cannot start.
	t       map[string]testscript.T
	mu      sync.Mutex
	started map[string]bool
	skipped map[string]string // script -> why two-profile start skipped it
	errs    []string
}

// twoProfileBootstrap is the Lambda bootstrap, built once per binary;
// twoProfileEmu the in-process kumo the aws worlds share.
var (
	twoProfileBootstrap awsworld.Bootstrap
	twoProfileEmu       awstest.Emulators
)

// twoProfileWorlds numbers the aws worlds: kumo's state outlives each.
var twoProfileWorlds atomic.Int64

// TestTwoProfile runs the two-profile scripts once per profile and logs
// each profile's count of scripts and steps and its wall time.
func TestTwoProfile(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "..", "testdata", "script", "two_profile_*.txtar"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no two-profile scripts in testdata/script: %v", err)
	}
	t.Cleanup(twoProfileBootstrap.Close)
	t.Cleanup(twoProfileEmu.Close)
	for _, profile := range []string{profileLocal, profileAWS} {
		t.Run(profile, func(t *testing.T) {
			run := &twoProfileRun{profile: profile, started: map[string]bool{}, skipped: map[string]string{}, t: map[string]testscript.T{}}
			began := time.Now()
			t.Cleanup(func() {
				for _, e := range run.errs {
					t.Error(e)
				}
				ran, steps, skipped := 0, 0, map[string]string{}
				for _, f := range files {
					name := strings.TrimSuffix(filepath.Base(f), ".txtar")
					n, why := scriptSteps(t, f, profile)
					if why == "" {
						why = run.skipped[name]
					}
					switch {
					case why != "":
						skipped[name] = why
					case run.started[name]:
						ran++
						steps += n
					default:
						skipped[name] = "did not start (see its log)"
					}
				}
				t.Logf("two-profile suite on the %s profile: %d scripts run (%d steps), %d skipped, in %v", profile, ran, steps, len(skipped), time.Since(began).Round(100*time.Millisecond))
				for _, name := range sortedKeys(skipped) {
					t.Logf("  %s skipped on %s: %s", name, profile, skipped[name])
				}
			})
			p := scriptParams()
			p.Files, p.Dir = files, ""
			setup := p.Setup
			p.Setup = func(env *testscript.Env) error {
				env.Values[twoProfileKey{}] = run
				run.mu.Lock()
				run.t[env.WorkDir] = env.T()
				run.mu.Unlock()
				return setup(env)
			}
			p.Condition = func(cond string) (bool, error) {
				switch cond {
				case profileLocal, profileAWS:
					return cond == profile, nil
				}
				return condition(cond)
			}
			testscript.Run(t, p)
		})
	}
}

func sortedKeys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// scriptSteps counts the commands of a script that run on profile: its
// lines other than blanks and comments, less those a [local] or [aws]
// condition leaves out. A skip that runs on profile ends the count and
// its message is why.
func scriptSteps(t *testing.T, file, profile string) (steps int, why string) {
	a, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, line := range strings.Split(string(a.Comment), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		runs, guard := true, false
		for strings.HasPrefix(line, "[") {
			end := strings.Index(line, "]")
			if end < 0 {
				break
			}
			cond := line[1:end]
			neg := strings.HasPrefix(cond, "!")
			cond = strings.TrimPrefix(cond, "!")
			if cond == profileLocal || cond == profileAWS {
				runs = runs && (cond == profile) != neg
			} else {
				guard = true // a skip for what the machine lacks, not the profile
			}
			line = strings.TrimSpace(line[end+1:])
		}
		if !runs {
			continue
		}
		if msg, ok := strings.CutPrefix(line, "skip "); ok && !guard {
			return n, strings.Trim(msg, "'")
		}
		n++
	}
	return n, ""
}

// twoProfileSetup skips the two-profile scripts outside TestTwoProfile
// (TestScripts sees them too): they need a profile to run on.
func twoProfileSetup(env *testscript.Env) {
	if _, ok := env.Values[twoProfileKey{}]; !ok && strings.HasPrefix(filepath.Base(env.WorkDir), "script-two_profile_") {
		env.T().Skip("a two-profile script: TestTwoProfile runs it once per profile (local and aws)")
	}
}

// twoProfile implements the script command
//
//	two-profile start
//
// for testdata/script/two_profile_*.txtar, which TestTwoProfile runs once
// per profile, with the conditions [local] and [aws] telling which. It
// makes the world of the run's profile: on local nothing (the script
// starts `dispatch serve` under [local], as the *_serve scripts do;
// SNAVIO_DATA_DIR is $WORK/data); on aws the platform on the emulators
// (internal/lambda/awsworld; skipped where DynamoDB Local cannot start,
// failed with CI=true) and the current profile "world" pointing at it,
// as the operator (role_arn) with the emit role of tenant acme. Either
// way it sets QARN to the prefix of a queue's ARN ($QARN:NAME).
func twoProfile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 || args[0] != "start" {
		ts.Fatalf("usage: two-profile start")
	}
	run, ok := ts.Value(twoProfileKey{}).(*twoProfileRun)
	if !ok {
		ts.Fatalf("two-profile start: only in testdata/script/two_profile_*.txtar, which TestTwoProfile runs")
	}
	name := strings.TrimPrefix(filepath.Base(ts.Getenv("WORK")), "script-")
	run.mu.Lock()
	run.started[name] = true
	run.mu.Unlock()
	if run.profile == profileLocal {
		ts.Setenv("SNAVIO_DATA_DIR", ts.MkAbs("data"))
		ts.Setenv("QARN", "arn:snavio:sqs:local:000000000000")
		return
	}
	twoProfileAWS(ts, run, name)
}

func twoProfileAWS(ts *testscript.TestScript, run *twoProfileRun, name string) {
	skip := func(why string) {
		run.mu.Lock()
		t := run.t[ts.Getenv("WORK")]
		run.started[name] = false
		run.skipped[name] = why
		run.mu.Unlock()
		t.Skip(why)
	}
	if testing.Short() {
		skip("-short: the aws world builds and runs the Lambda bootstrap")
	}
	ddb, err := scriptDynamoDB()
	if err != nil {
		if os.Getenv("CI") == "true" {
			ts.Fatalf("two-profile start: CI=true and DynamoDB Local cannot start: %v", err)
		}
		skip("DynamoDB Local is not available here (CI=true would fail instead): " + err.Error())
	}
	bin, err := twoProfileBootstrap.Path()
	ts.Check(err)
	began := time.Now()
	env := fmt.Sprintf("tp%dx%d", os.Getpid(), twoProfileWorlds.Add(1))
	w, err := awsworld.Start(context.Background(), awsworld.Options{Env: env, DynamoDB: ddb, Kumo: twoProfileEmu.Kumo(), Bootstrap: bin, Tenants: []string{"acme"}})
	if err != nil {
		ts.Fatalf("two-profile start: %v", err)
	}
	ts.Logf("the aws world %s started in %v", env, time.Since(began).Round(time.Millisecond))
	ts.Defer(func() {
		err := w.Close()
		ts.Logf("the aws world's functions:\n%s", w.Logs())
		if err != nil {
			run.mu.Lock()
			run.errs = append(run.errs, fmt.Sprintf("%s: the aws world: %v\n%s", name, err, w.Logs()))
			run.mu.Unlock()
		}
	})
	emit, err := w.EmitRoleARN("acme")
	ts.Check(err)
	for k, v := range map[string]string{"AWS_ENDPOINT_URL": w.Endpoint, "AWS_REGION": awsworld.Region, "AWS_ACCESS_KEY_ID": "AKIDSCRIPT", "AWS_SECRET_ACCESS_KEY": "script",
		"AWS_EC2_METADATA_DISABLED": "true", "AWS_CONFIG_FILE": ts.MkAbs("no-aws-config"), "AWS_SHARED_CREDENTIALS_FILE": ts.MkAbs("no-aws-credentials"),
		"QARN": strings.TrimSuffix(awsworld.QueueARN("x"), ":x"), "AWSENV": env} {
		ts.Setenv(k, v)
	}
	ts.Check(ts.Exec("snavio", "profile", "set", "world", "--kind", "aws", "--region", awsworld.Region,
		"--env", env, "--control-url", w.ControlURL, "--role-arn", w.OperatorRoleARN(), "--emit-role-arn", emit, "--use", "-o", "json"))
}
