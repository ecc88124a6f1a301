package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/snavio/snavio/internal/syncbuf"
)

// walkthroughSection is the README section TestREADMEWalkthrough runs.
const walkthroughSection = "## Five minutes with snavio"

// readmeSteps returns the shell commands of the README section titled
// section, in order: every indented code line, with "\" continuations
// joined and a heredoc kept with its command.
func readmeSteps(readme, section string) ([]string, error) {
	start := strings.Index(readme, "\n"+section+"\n")
	if start < 0 {
		return nil, fmt.Errorf("README.md has no %q section", section)
	}
	body := readme[start+len(section)+2:]
	if end := strings.Index(body, "\n## "); end >= 0 {
		body = body[:end]
	}
	heredoc := regexp.MustCompile(`<<'?(\w+)'?\s*$`)
	var steps []string
	var cur []string
	terminator := ""
	for _, line := range strings.Split(body, "\n") {
		code, ok := strings.CutPrefix(line, "    ")
		switch {
		case terminator != "":
			cur = append(cur, code)
			if code == terminator {
				steps, cur, terminator = append(steps, strings.Join(cur, "\n")), nil, ""
			}
			continue
		case !ok:
			if len(cur) > 0 {
				return nil, fmt.Errorf("README.md: a command ends with \\ before a line that is not code: %q", cur[len(cur)-1])
			}
			continue
		}
		cur = append(cur, code)
		if m := heredoc.FindStringSubmatch(code); m != nil {
			terminator = m[1]
			continue
		}
		if strings.HasSuffix(code, `\`) {
			continue
		}
		steps, cur = append(steps, strings.Join(cur, "\n")), nil
	}
	if len(cur) > 0 || terminator != "" {
		return nil, errors.New("README.md: the section ends inside a command")
	}
	return steps, nil
}

func TestReadmeSteps(t *testing.T) {
	md := "# x\n\n## Five minutes with snavio\n\nText\n\n    a 1\n    b \\\n        2\n\n    cat > f <<'YAML'\n    k: v\n    YAML\n    c\n\n## Next\n\n    d\n"
	got, err := readmeSteps(md, walkthroughSection)
	want := []string{"a 1", "b \\\n    2", "cat > f <<'YAML'\nk: v\nYAML", "c"}
	if err != nil || strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("steps %q, %v; want %q", got, err, want)
	}
	if _, err := readmeSteps("## Five minutes with snavio\n\n    a \\\n", walkthroughSection); err == nil {
		t.Fatal("a dangling continuation is accepted")
	}
}

// TestREADMEWalkthrough runs the README's "Five minutes with snavio" as a
// newcomer on a stock Debian machine would: every command of the section,
// in order, in one bash, from a fresh HOME (no config, no data), with the
// snavio this test binary is, against a real `dispatch serve --demo`. A
// step fails the test if it fails; the steps that print an exit code must
// print the one the README says.
//
// Where a step cannot run as written here, the test says why:
//   - `snavio dispatch serve --demo` runs in the README's first terminal;
//     the test starts it the same way, but on a free port (8787 may be taken
//     on a shared machine), and points the other commands and the README's
//     literal 127.0.0.1:8787 at that port.
//   - `snavio tail --tenant demo` follows until Ctrl-C: the test sends it
//     SIGINT after 5 s, and it must exit 0.
//   - the `aws` commands need the AWS CLI, which a stock Debian lacks; they
//     are skipped without it (the [awscli] scripts run them in CI).
//   - the set-up section's `make build` is not run: snavio here is this
//     test binary (testscript.Main puts it on PATH).
func TestREADMEWalkthrough(t *testing.T) {
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("needs bash")
	}
	snavio, err := exec.LookPath("snavio") // this test binary, as testscript.Main links it
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := readmeSteps(string(readme), walkthroughSection)
	if err != nil {
		t.Fatal(err)
	}
	_, awsErr := exec.LookPath("aws")

	home, clone := t.TempDir(), t.TempDir()
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8", "TERM=dumb"}
	if tmp := os.Getenv("TMPDIR"); tmp != "" {
		env = append(env, "TMPDIR="+tmp)
	}

	// The first terminal.
	ready := filepath.Join(t.TempDir(), "ready")
	serve := exec.Command(snavio, "dispatch", "serve", "--demo", "--listen", "127.0.0.1:0", "--ready-file", ready)
	serve.Env, serve.Dir = env, clone
	var serveOut, serveErr syncbuf.Buffer
	serve.Stdout, serve.Stderr = &serveOut, &serveErr
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	var serveExit error
	exited := make(chan struct{})
	go func() { serveExit = serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = serve.Process.Kill() // after a clean stop: an error, ignored
		<-exited
	})
	url := waitReady(t, ready, exited, &serveErr)
	addr := strings.TrimPrefix(url, "http://")

	// The second terminal: one interactive-like bash (no set -e, as a
	// person types), each step announced on stdout and followed by its
	// exit status, so its output and status can be told apart.
	var script strings.Builder
	var ran []string
	for _, step := range steps {
		switch {
		case step == "snavio dispatch serve --demo":
			continue // started above
		case strings.Contains(step, " aws ") && awsErr != nil:
			t.Logf("skipped (no AWS CLI on PATH): %s", step)
			continue
		case strings.HasPrefix(step, "snavio tail ") && !strings.Contains(step, "--follow=false"):
			// --foreground: timeout signals tail alone, once; without it the
			// group is signalled too, and a second SIGINT after tail's clean
			// stop ends it with 130 (a second Ctrl-C forces an exit).
			step = "timeout --foreground -s INT --preserve-status 5 " + step
		}
		step = strings.ReplaceAll(step, "127.0.0.1:8787", addr)
		fmt.Fprintf(&script, "echo '=== step %d'\n%s\necho \"=== status $?\"\n", len(ran), step)
		ran = append(ran, step)
	}
	cmd := exec.Command(bash, "-c", script.String())
	cmd.Env, cmd.Dir = append(env, "SNAVIO_ENDPOINT_URL="+url), clone
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("bash: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	t.Logf("%d steps in %s", len(ran), time.Since(start).Round(time.Millisecond))
	outputs := map[int]string{}
	for _, chunk := range strings.Split(stdout.String(), "=== step ")[1:] {
		var i int
		var status string
		head, rest, _ := strings.Cut(chunk, "\n")
		if _, err := fmt.Sscan(head, &i); err != nil {
			t.Fatalf("unreadable step marker %q", head)
		}
		out, st, ok := strings.Cut(rest, "=== status ")
		if ok {
			status = strings.TrimSpace(st)
		}
		outputs[i] = out
		if status != "0" {
			t.Errorf("step %d exited %q:\n%s\noutput:\n%s", i, status, ran[i], out)
		}
	}
	if len(outputs) != len(ran) {
		t.Fatalf("%d of %d steps ran; stderr:\n%s", len(outputs), len(ran), stderr.String())
	}
	if t.Failed() {
		t.Logf("stderr of the walkthrough:\n%s\nserve's stderr:\n%s", stderr.String(), serveErr.String())
	}

	// The exit codes the README promises.
	for _, want := range []struct{ step, code string }{
		{"--detailed-exitcode; echo $?", "0"},                                  // nothing left to apply
		{"--payload '{\"amount\":5}' --secret-file $KEY --wait; echo $?", "6"}, // the strict duplicate
		{"head -c 32 /dev/urandom", "4"},                                       // the wrong secret: invalid
	} {
		found := false
		for i, step := range ran {
			if !strings.Contains(step, want.step) {
				continue
			}
			found = true
			lines := strings.Split(strings.TrimSpace(outputs[i]), "\n")
			if got := lines[len(lines)-1]; got != want.code {
				t.Errorf("step %q printed exit %q, the README says %s:\n%s", step, got, want.code, outputs[i])
			}
		}
		if !found {
			t.Errorf("the walkthrough has no step with %q", want.step)
		}
	}

	// The walkthrough ends on the dashboard's address (JSON: stdout is
	// not a terminal here).
	for i, step := range ran {
		if step == "snavio dashboard" && !strings.Contains(outputs[i], `"url": "`+url+`/"`) {
			t.Errorf("snavio dashboard printed %q; want the address %s/", outputs[i], url)
		}
	}

	// Ctrl-C in the first terminal stops serve cleanly.
	if err := serve.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-exited:
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop in 60 s after Ctrl-C")
	}
	if serveExit != nil {
		t.Fatalf("serve after Ctrl-C: %v\n%s", serveExit, serveErr.String())
	}
}

// waitReady waits up to 60 s for serve to write its URL to path.
func waitReady(t *testing.T, path string, exited <-chan struct{}, stderr *syncbuf.Buffer) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(path); err == nil && len(bytes.TrimSpace(b)) > 0 {
			return strings.TrimSpace(string(b))
		}
		select {
		case <-exited:
			t.Fatalf("serve exited before it was ready:\n%s", stderr.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("serve was not ready in 60 s:\n%s", stderr.String())
	return ""
}
